# nccl branch: device collectives on the node's NCCL communicator, through
# the fake libcuda + the fake libnccl (tests/fakenccl), label "gpu". Included
# from tests/gpu/CMakeLists.txt. The other gpu tests run with GX_NCCL=off
# (the staging path; the machine's real libnccl.so.2 cannot drive the fake
# libcuda).
set(_fakenccl "GX_CUDA_LIB=$<TARGET_FILE:fakecuda>;GX_NCCL_LIB=$<TARGET_FILE:fakenccl>;GX_NCCL=on")
add_executable(nccl_check nccl_check.c)
target_link_libraries(nccl_check PRIVATE gx ${CMAKE_DL_LIBS})
add_dependencies(nccl_check fakecuda fakenccl)
set(_ncheck $<TARGET_FILE:nccl_check>)
function(gx_nccl_test name n env)
  add_test(NAME gpu.nccl.${name} COMMAND ${_run} -n ${n} --timeout 120 ${ARGN})
  set_tests_properties(gpu.nccl.${name} PROPERTIES LABELS gpu TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "${env}")
endfunction()
# Every collective (coll_check's matrix: every kind x datatype x op, in and
# out of place, 0 1 7 1023 elements + 1 MiB+3 float32) on device buffers on
# 2 and 4 ranks of one node; the INFO line proves the NCCL path ran (GX_NCCL=on
# makes an unusable NCCL an error).
foreach(n 2 4)
  add_test(NAME gpu.nccl.matrix.${n} COMMAND sh -c "GX_DEBUG=info ${_run} -n ${n} --timeout 120 \
    ${_chk} matrix --device both --large-dtypes float32 > out.matrix.${n} 2>&1; rc=$?; \
    grep -v ' INFO ' out.matrix.${n}; [ $rc = 0 ] && \
    [ $(grep -c 'device collectives of this node run on NCCL' out.matrix.${n}) = ${n} ]")
  set_tests_properties(gpu.nccl.matrix.${n} PROPERTIES LABELS gpu TIMEOUT 180
    ENVIRONMENT "${_fakenccl}" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  gx_nccl_test(used.${n} ${n} "${_fakenccl}" ${_ncheck} used)
endforeach()
gx_nccl_test(off.2 2 "${_fakenccl};GX_NCCL=off" ${_ncheck} staged)
gx_nccl_test(fail.2 2 "${_fakenccl};FAKENCCL_FAIL=ncclAllReduce" ${_ncheck} fail)
gx_nccl_test(async.2 2 "${_fakenccl};FAKENCCL_ASYNC=ncclAllReduce" ${_ncheck} async)
# A hung collective / init: every rank fails within 2 x GX_TIMEOUT naming the
# NCCL communicator, at least one with GX_ETIMEOUT naming the call.
foreach(h "hang;ncclAllReduce" "inithang;ncclCommInitRank")
  list(GET h 0 name)
  list(GET h 1 call)
  add_test(NAME gpu.nccl.${name}.2 COMMAND sh -c "${_run} --keep-going -n 2 --timeout 60 \
    ${_ncheck} hang > out.${name} 2>&1; cat out.${name}; \
    [ $(grep -c 'NCCLCHECK ok' out.${name}) = 2 ] && grep -q 'TIMEOUT named' out.${name}")
  set_tests_properties(gpu.nccl.${name}.2 PROPERTIES LABELS gpu TIMEOUT 90
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
    ENVIRONMENT "${_fakenccl};FAKENCCL_HANG=${call};GX_TIMEOUT=3;NCCL_CHECK_CALL=${call}")
endforeach()
# gx-info says whether NCCL runs the intra-node device collectives, or why not.
add_test(NAME gpu.nccl.gx-info COMMAND sh -c "\
  GX_NCCL=auto $<TARGET_FILE:gx-info> | grep '^NCCL' | tee /dev/stderr | \
    grep -q '^NCCL 2\\.[0-9]*\\.[0-9]* (.*fakenccl.*): used for intra-node device collectives' && \
  GX_NCCL=off $<TARGET_FILE:gx-info> | grep -q '^NCCL: version .*: not used (GX_NCCL=off)' && \
  GX_CUDA_LIB=/nonexistent/libcuda.so.1 $<TARGET_FILE:gx-info> | grep -q '^NCCL: .*not used (no libcuda'")
set_tests_properties(gpu.nccl.gx-info PROPERTIES LABELS gpu TIMEOUT 60 ENVIRONMENT "${_fakenccl}")
# One rank: NCCL only with GX_NCCL=on (what tests/gpu/run.sh uses on one GPU).
gx_nccl_test(used.1 1 "${_fakenccl}" ${_ncheck} used)
# Two GX_NODE_ID nodes of 2 ranks, GX_ALGO=hier: the all-reduce runs NCCL
# reduce-scatter / all-gather inside each node and gx's host path along the
# rails; every other collective is staged; all must equal coll_check's
# expected values (the host path's). 2+1 (uneven nodes) stages everything.
foreach(layout "2x2;4;2" "2+1;3;2")
  list(GET layout 0 name)
  list(GET layout 1 n)
  list(GET layout 2 per)
  add_test(NAME gpu.nccl.hier.${name} COMMAND sh -c "GX_DEBUG=info GX_ALGO=hier ${_run} -n ${n} \\
    --timeout 150 sh -c 'GX_NODE_ID=node$((GX_RANK / ${per})) exec ${_chk} matrix --device both \\
    --large-dtypes float32' > out.hier.${name} 2>&1; rc=$?; grep -v ' INFO ' out.hier.${name}; \\
    [ $rc = 0 ] && [ $(grep -c 'device collectives of this node run on NCCL' out.hier.${name}) \\
    = $([ ${name} = 2x2 ] && echo 4 || echo 0) ]")
  set_tests_properties(gpu.nccl.hier.${name} PROPERTIES LABELS gpu TIMEOUT 200
    ENVIRONMENT "${_fakenccl}" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
endforeach()
# A rank killed while its node's NCCL all-reduces run: the 3 others fail with
# GX_EPEER naming a gone rank (or NCCL's async error once a peer aborted) and
# the NCCL communicator long before GX_TIMEOUT, and every one names the killed
# rank 2 (its process is gone; the first to see it tells the others, so a
# survivor that failed first is not blamed).
add_test(NAME gpu.nccl.dead-peer.4 COMMAND sh -c "${_run} --keep-going -n 4 --timeout 120 \
  ${_ncheck} dead > out.dead 2>&1; cat out.dead; [ $(grep -c 'NCCLCHECK ok' out.dead) = 3 ] && \
  [ $(grep -c 'NAMED rank 2 on rank' out.dead) = 3 ]")
set_tests_properties(gpu.nccl.dead-peer.4 PROPERTIES LABELS gpu TIMEOUT 150
  ENVIRONMENT "${_fakenccl};GX_TIMEOUT=30" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
