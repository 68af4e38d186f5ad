# Feature detection: each GX_WITH_<F> is AUTO, ON or OFF. AUTO enables the
# feature when its dependency is found; ON fails the configure when it is not.
# Every decision is recorded with its reason for the configure summary and
# for gx-info (through gx_build_config.h).
include(${CMAKE_CURRENT_LIST_DIR}/GxProbe.cmake)
find_package(PkgConfig QUIET)

set(GX_LINK_LIBS "")
set(GX_FEATURE_LIST VERBS DPDK CUDA NCCL HWLOC SIMGRID)

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
set(GX_FOUND_VERBS_H 0)
set(_verbs_missing "infiniband/verbs.h not found (apt-get install libibverbs-dev)")
if(NOT GX_WITH_VERBS STREQUAL "OFF")
  gx_try_build(GX_FOUND_VERBS_H
    "#include <infiniband/verbs.h>\nint main(void) { struct ibv_qp_init_attr a = {0}; return (int)a.qp_type + IBV_WC_SUCCESS; }")
  if(NOT GX_FOUND_VERBS_H AND NOT GX_TRY_BUILD_ERROR MATCHES "infiniband/verbs.h: No such file")
    set(_verbs_missing "infiniband/verbs.h does not compile: ${GX_TRY_BUILD_ERROR} (reinstall libibverbs-dev)")
  endif()
endif()
gx_feature_decide(VERBS "${GX_FOUND_VERBS_H}"
  "infiniband/verbs.h found; libibverbs is loaded at run time"
  "${_verbs_missing}")

# dpdk: pkg-config's flags must build and link a program that calls the EAL.
if(NOT GX_WITH_DPDK STREQUAL "OFF")
  gx_pkg_usable(GX_DPDK libdpdk
    "#include <rte_eal.h>\n#include <rte_ethdev.h>\nint main(int c, char **v) { return rte_eal_init(c, v) + (int)rte_eth_dev_count_avail(); }")
endif()
set(_dpdk_missing "libdpdk not found with pkg-config (apt-get install dpdk-dev libdpdk-dev)")
if(GX_DPDK_BROKEN)
  set(_dpdk_missing "libdpdk.pc found but a program using it does not build: ${GX_DPDK_BROKEN} (reinstall dpdk-dev libdpdk-dev)")
endif()
if(GX_DPDK_USABLE)
  pkg_check_modules(DPDK QUIET IMPORTED_TARGET libdpdk)
endif()
gx_feature_decide(DPDK "${GX_DPDK_USABLE}"
  "libdpdk ${GX_DPDK_VERSION} found with pkg-config"
  "${_dpdk_missing}")
if(GX_HAVE_DPDK)
  list(APPEND GX_LINK_LIBS PkgConfig::DPDK)
endif()

# hwloc
if(NOT GX_WITH_HWLOC STREQUAL "OFF")
  gx_pkg_usable(GX_HWLOC hwloc
    "#include <hwloc.h>\nint main(void) { hwloc_topology_t t; return hwloc_topology_init(&t); }")
endif()
set(_hwloc_missing "hwloc not found with pkg-config (apt-get install libhwloc-dev)")
if(GX_HWLOC_BROKEN)
  set(_hwloc_missing "hwloc.pc found but a program using it does not build: ${GX_HWLOC_BROKEN} (reinstall libhwloc-dev)")
endif()
if(GX_HWLOC_USABLE)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
gx_feature_decide(HWLOC "${GX_HWLOC_USABLE}"
  "hwloc ${GX_HWLOC_VERSION} found with pkg-config"
  "${_hwloc_missing}")
if(GX_HAVE_HWLOC)
  list(APPEND GX_LINK_LIBS PkgConfig::HWLOC)
endif()

# cuda: headers only at build time; libcuda/libcudart are loaded at run time.
set(GX_FOUND_CUDA 0)
set(_cuda_missing "CUDA toolkit not found (find_package(CUDAToolkit); set CUDAToolkit_ROOT)")
if(NOT GX_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    gx_try_build(GX_FOUND_CUDA
      "#include <cuda.h>\nint main(void) { CUdeviceptr p = 0; return (int)CUDA_SUCCESS + (int)p; }"
      INCLUDES ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT GX_FOUND_CUDA)
      set(_cuda_missing "CUDA toolkit ${CUDAToolkit_VERSION} found but cuda.h does not compile: ${GX_TRY_BUILD_ERROR}")
    endif()
  endif()
endif()
gx_feature_decide(CUDA "${GX_FOUND_CUDA}"
  "CUDA toolkit ${CUDAToolkit_VERSION} found; the driver is loaded at run time"
  "${_cuda_missing}")

# nccl: needs the CUDA toolkit, a nccl.h that compiles, and libnccl beside it.
set(GX_FOUND_NCCL 0)
if(GX_HAVE_CUDA)
  set(_nccl_missing "nccl.h or libnccl not found next to the CUDA toolkit")
else()
  set(_nccl_missing "needs CUDA, which is off")
endif()
if(GX_HAVE_CUDA AND NOT GX_WITH_NCCL STREQUAL "OFF")
  find_path(GX_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_CACHE)
  find_library(GX_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} NO_CACHE)
  if(GX_NCCL_INCLUDE AND GX_NCCL_LIBRARY)
    gx_try_build(GX_FOUND_NCCL
      "#include <nccl.h>\nint main(void) { ncclUniqueId id; return (int)sizeof id + (int)ncclSuccess; }"
      INCLUDES ${GX_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT GX_FOUND_NCCL)
      set(_nccl_missing "nccl.h found in ${GX_NCCL_INCLUDE} but does not compile: ${GX_TRY_BUILD_ERROR}")
    endif()
  elseif(GX_NCCL_INCLUDE)
    set(_nccl_missing "nccl.h found in ${GX_NCCL_INCLUDE} but no libnccl beside the CUDA toolkit")
  endif()
endif()
gx_feature_decide(NCCL "${GX_FOUND_NCCL}"
  "nccl.h found in ${GX_NCCL_INCLUDE}; libnccl is loaded at run time"
  "${_nccl_missing}")

# simgrid: gx-sim (tools/gx-sim) only, never libgx. Its C API as gx-sim
# uses it: engine, actors, asynchronous mailbox comms, executions, hosts.
if(NOT GX_WITH_SIMGRID STREQUAL "OFF")
  gx_pkg_usable(GX_SIMGRID simgrid [=[
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
int main(int argc, char **argv)
{
    simgrid_init(&argc, argv);
    sg_comm_t c = sg_mailbox_put_async(sg_mailbox_by_name("probe"), NULL, 1);
    return c != NULL && sg_host_count() > 0 && simgrid_get_clock() < 0 && sg_actor_exec_init(1) != NULL;
}]=])
endif()
set(_simgrid_missing "simgrid not found with pkg-config (apt-get install libsimgrid-dev): gx-sim is not built")
if(GX_SIMGRID_BROKEN)
  set(_simgrid_missing "simgrid.pc found but a program using its C API does not build: ${GX_SIMGRID_BROKEN} (reinstall libsimgrid-dev): gx-sim is not built")
endif()
gx_feature_decide(SIMGRID "${GX_SIMGRID_USABLE}"
  "simgrid ${GX_SIMGRID_VERSION} found with pkg-config: gx-sim is built"
  "${_simgrid_missing}")
if(GX_HAVE_SIMGRID)
  pkg_check_modules(SIMGRID QUIET IMPORTED_TARGET simgrid)
endif()

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
