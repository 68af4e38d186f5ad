# Peers: programs gx is compared with or tested against, never part of libgx.
# Each is found whole or reported off with the reason in the configure
# summary; a missing or half-installed one never fails the configure (the
# tests that need it exit 77 and say why, the benchmarks are not built).
#   mpi       perf/mpi_allreduce_bench (compare.sh's Open MPI column)
#   torch     tests/torch, the gx_torch backend (Debian's python3-torch)
#   chromium  renders gx-accept's HTML report in its test
#   perftest  ib_write_bw and friends beside gx-bw
set(GX_PEER_LIST MPI TORCH CHROMIUM PERFTEST)

# MPI through its compiler wrapper's own flags (Open MPI's -showme, MPICH's
# -compile_info), checked by building a program: FindMPI fails the configure
# hard when the wrapper names a header directory that is not there.
set(GX_HAVE_MPI 0)
set(GX_MPI_COMPILE_FLAGS "")
set(GX_MPI_LINK_FLAGS "")
set(GX_REASON_MPI "no mpicc on PATH (apt-get install openmpi-bin libopenmpi-dev)")
find_program(GX_MPICC NAMES mpicc NO_CACHE)
if(GX_MPICC)
  execute_process(COMMAND ${GX_MPICC} -showme:compile OUTPUT_VARIABLE _mpi_c ERROR_QUIET
    RESULT_VARIABLE _mpi_rc1 OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${GX_MPICC} -showme:link OUTPUT_VARIABLE _mpi_l ERROR_QUIET
    RESULT_VARIABLE _mpi_rc2 OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _mpi_rc1 EQUAL 0 OR NOT _mpi_rc2 EQUAL 0)
    execute_process(COMMAND ${GX_MPICC} -compile_info OUTPUT_VARIABLE _mpi_c ERROR_QUIET
      RESULT_VARIABLE _mpi_rc1 OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${GX_MPICC} -link_info OUTPUT_VARIABLE _mpi_l ERROR_QUIET
      RESULT_VARIABLE _mpi_rc2 OUTPUT_STRIP_TRAILING_WHITESPACE)
    # MPICH prints the whole command line: drop the compiler itself.
    string(REGEX REPLACE "^[^ ]+ *" "" _mpi_c "${_mpi_c}")
    string(REGEX REPLACE "^[^ ]+ *" "" _mpi_l "${_mpi_l}")
  endif()
  if(NOT _mpi_rc1 EQUAL 0 OR NOT _mpi_rc2 EQUAL 0)
    set(GX_REASON_MPI "${GX_MPICC} does not print its flags (-showme:compile or -compile_info)")
  else()
    separate_arguments(_mpi_c UNIX_COMMAND "${_mpi_c}")
    separate_arguments(_mpi_l UNIX_COMMAND "${_mpi_l}")
    gx_try_build(_mpi_ok "#include <mpi.h>\nint main(int c, char **v) { return MPI_Init(&c, &v); }"
      COMPILE_OPTIONS ${_mpi_c} LINK_OPTIONS ${_mpi_l})
    if(_mpi_ok)
      set(GX_HAVE_MPI 1)
      set(GX_MPI_COMPILE_FLAGS ${_mpi_c})
      set(GX_MPI_LINK_FLAGS ${_mpi_l})
      set(GX_REASON_MPI "${GX_MPICC} builds and links an MPI program")
    else()
      set(GX_REASON_MPI "${GX_MPICC} found but an MPI program does not build: ${GX_TRY_BUILD_ERROR} (apt-get install libopenmpi-dev)")
    endif()
  endif()
endif()

# torch: Debian's python3-torch for /usr/bin/python3 (what tests/torch runs).
set(GX_HAVE_TORCH 0)
set(GX_REASON_TORCH "no /usr/bin/python3")
if(EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c
    "import torch, torch.distributed as d; torch.ones(1).add_(1); print(torch.__version__, d.is_available())"
    OUTPUT_VARIABLE _torch_out ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 60)
  if(_torch_rc EQUAL 0 AND _torch_out MATCHES " True$")
    set(GX_HAVE_TORCH 1)
    string(REGEX REPLACE " True$" "" _torch_ver "${_torch_out}")
    set(GX_REASON_TORCH "torch ${_torch_ver} imports in /usr/bin/python3, with torch.distributed")
  elseif(_torch_rc EQUAL 0)
    set(GX_REASON_TORCH "torch imports but torch.distributed is not available")
  else()
    string(REGEX MATCH "[A-Za-z]*Error[^\n]*" _torch_why "${_torch_err}")
    if(_torch_why MATCHES "No module named 'torch'")
      set(GX_REASON_TORCH "torch is not installed for /usr/bin/python3 (apt-get install python3-torch)")
    elseif(_torch_why)
      string(REPLACE "\"" "'" _torch_why "${_torch_why}")
      set(GX_REASON_TORCH "torch does not import: ${_torch_why} (reinstall python3-torch)")
    else()
      set(GX_REASON_TORCH "torch does not import (exit ${_torch_rc})")
    endif()
  endif()
endif()

# gx_peer_program(<PEER> <program> <version-args> <install hint>)
function(gx_peer_program peer program vargs hint)
  set(GX_HAVE_${peer} 0 PARENT_SCOPE)
  find_program(_prog NAMES ${program} NO_CACHE)
  if(NOT _prog)
    set(GX_REASON_${peer} "${program} not found (${hint})" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND ${_prog} ${vargs} OUTPUT_VARIABLE out ERROR_VARIABLE err
    RESULT_VARIABLE rc TIMEOUT 60 OUTPUT_STRIP_TRAILING_WHITESPACE)
  # perftest's --version prints the version and exits 1: a program that ran
  # and printed is there; one that could not start (a number is not its
  # status, or it printed nothing) is not.
  if(rc MATCHES "^[0-9]+$" AND rc LESS 2 AND out MATCHES "[0-9]")
    string(REGEX MATCH "[^\n]+" first "${out}")
    set(GX_HAVE_${peer} 1 PARENT_SCOPE)
    set(GX_REASON_${peer} "${_prog} runs (${first})" PARENT_SCOPE)
  else()
    string(REGEX MATCH "[^\n]+" first "${err}")
    string(REPLACE "\"" "'" first "${first}")
    set(GX_REASON_${peer} "${_prog} found but does not run: ${rc} ${first} (${hint})" PARENT_SCOPE)
  endif()
endfunction()
gx_peer_program(CHROMIUM chromium --version "apt-get install chromium")
gx_peer_program(PERFTEST ib_write_bw --version "apt-get install perftest")

function(gx_print_peer_summary)
  message(STATUS "gx peers (benchmarks and tests only, never part of libgx):")
  foreach(peer ${GX_PEER_LIST})
    if(GX_HAVE_${peer})
      set(state "on ")
    else()
      set(state "off")
    endif()
    string(TOLOWER ${peer} lower)
    message(STATUS "  ${lower}\t${state}  ${GX_REASON_${peer}}")
  endforeach()
  message(STATUS "")
endfunction()
