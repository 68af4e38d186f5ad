# Feature detection: each GX_WITH_<F> is AUTO, ON or OFF. AUTO enables the
# feature when its dependency is found; ON fails the configure when it is not.
# Every decision is recorded with its reason for the configure summary and
# for gx-info (through gx_build_config.h).
include(CheckIncludeFile)
find_package(PkgConfig)

set(GX_LINK_LIBS "")
set(GX_FEATURE_LIST VERBS DPDK CUDA NCCL HWLOC)

function(gx_feature_decide feat found reason_found reason_missing)
  set(choice ${GX_WITH_${feat}})
  if(choice STREQUAL "OFF")
    set(GX_HAVE_${feat} 0 PARENT_SCOPE)
    set(GX_REASON_${feat} "disabled with -DGX_WITH_${feat}=OFF" PARENT_SCOPE)
  elseif(found)
    set(GX_HAVE_${feat} 1 PARENT_SCOPE)
    set(GX_REASON_${feat} "${reason_found}" PARENT_SCOPE)
  elseif(choice STREQUAL "ON")
    message(FATAL_ERROR "GX_WITH_${feat}=ON but ${reason_missing}")
  else()
    set(GX_HAVE_${feat} 0 PARENT_SCOPE)
    set(GX_REASON_${feat} "${reason_missing}" PARENT_SCOPE)
  endif()
endfunction()

# verbs: only the headers are needed; libibverbs is loaded with dlopen.
if(NOT GX_WITH_VERBS STREQUAL "OFF")
  check_include_file(infiniband/verbs.h GX_FOUND_VERBS_H)
endif()
gx_feature_decide(VERBS "${GX_FOUND_VERBS_H}"
  "infiniband/verbs.h found; libibverbs is loaded at run time"
  "infiniband/verbs.h not found (apt-get install libibverbs-dev)")

# dpdk
if(NOT GX_WITH_DPDK STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(DPDK QUIET IMPORTED_TARGET libdpdk)
endif()
gx_feature_decide(DPDK "${DPDK_FOUND}"
  "libdpdk ${DPDK_VERSION} found with pkg-config"
  "libdpdk not found with pkg-config (apt-get install dpdk-dev)")
if(GX_HAVE_DPDK)
  list(APPEND GX_LINK_LIBS PkgConfig::DPDK)
endif()

# hwloc
if(NOT GX_WITH_HWLOC STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
gx_feature_decide(HWLOC "${HWLOC_FOUND}"
  "hwloc ${HWLOC_VERSION} found with pkg-config"
  "hwloc not found with pkg-config (apt-get install libhwloc-dev)")
if(GX_HAVE_HWLOC)
  list(APPEND GX_LINK_LIBS PkgConfig::HWLOC)
endif()

# cuda: headers only at build time; libcuda/libcudart are loaded at run time.
if(NOT GX_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
endif()
gx_feature_decide(CUDA "${CUDAToolkit_FOUND}"
  "CUDA toolkit ${CUDAToolkit_VERSION} found; the driver is loaded at run time"
  "CUDA toolkit not found (find_package(CUDAToolkit))")

# nccl: needs the CUDA toolkit and nccl.h
set(GX_FOUND_NCCL 0)
if(GX_HAVE_CUDA AND NOT GX_WITH_NCCL STREQUAL "OFF")
  find_path(GX_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(GX_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(GX_NCCL_INCLUDE AND GX_NCCL_LIBRARY)
    set(GX_FOUND_NCCL 1)
  endif()
endif()
if(GX_HAVE_CUDA)
  set(_nccl_missing "nccl.h or libnccl not found next to the CUDA toolkit")
else()
  set(_nccl_missing "needs CUDA, which is off")
endif()
gx_feature_decide(NCCL "${GX_FOUND_NCCL}"
  "nccl.h found in ${GX_NCCL_INCLUDE}; libnccl is loaded at run time"
  "${_nccl_missing}")

foreach(feat ${GX_FEATURE_LIST})
  set(GX_HAVE_${feat} ${GX_HAVE_${feat}})
  set(GX_REASON_${feat} "${GX_REASON_${feat}}")
endforeach()

function(gx_print_feature_summary)
  message(STATUS "")
  message(STATUS "gx ${PROJECT_VERSION} configuration:")
  foreach(feat ${GX_FEATURE_LIST})
    if(GX_HAVE_${feat})
      set(state "on ")
    else()
      set(state "off")
    endif()
    string(TOLOWER ${feat} lower)
    message(STATUS "  ${lower}\t${state}  ${GX_REASON_${feat}}")
  endforeach()
  message(STATUS "  sanitizers\tasan+ubsan=${GX_SANITIZE_ADDRESS} tsan=${GX_SANITIZE_THREAD}")
  message(STATUS "  tests\t${GX_BUILD_TESTS}")
  message(STATUS "")
endfunction()
