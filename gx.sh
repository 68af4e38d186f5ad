#!/usr/bin/env bash
# gx.sh - build, demo and test gx on a Debian 12 machine.
#
#   ./gx.sh demo            install what is missing, build, run the demo job
#   ./gx.sh test [--long] [--chaos] [--scale] [--torchsuite] [--quick]
#                [--sanitizers-only]
#                           install what is missing, build with tests, run ctest;
#                           then rebuild with ASan+UBSan and with TSan and run
#                           the suites marked for them (--quick skips those,
#                           --sanitizers-only runs only those); --long adds
#                           soaks and sweeps, --chaos the chaos trials (random
#                           kills; figures in chaos-report.txt), --scale the
#                           scale runs (64 shm ranks, 256 tcp ranks; part of
#                           --long too; docs/scale.md), --torchsuite
#                           PyTorch's whole distributed suite, gx against gloo
#                           (build/torchsuite/summary.md)
#   ./gx.sh build           configure and build only
#   ./gx.sh deps [test]     install (or, when not root, print) the Debian packages
#
# Environment: BUILD_DIR (default build), GX_JOBS (build parallelism).
set -euo pipefail
cd "$(dirname "$0")"
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${GX_JOBS:-$(nproc)}

# librdmacm-dev: its header builds the GX_IB_CM=rdmacm path (the library loads at run time).
BUILD_PKGS=(cmake ninja-build gcc pkg-config libhwloc-dev hwloc libibverbs-dev librdmacm-dev)
BUILD_PKGS+=(dpdk-dev libdpdk-dev)           # the dpdk provider (fabric/dpdk/); built only when pkg-config finds libdpdk
BUILD_PKGS+=(libssl-dev)  # libcrypto: SHA-256, HMAC, PBKDF2 of the job-key handshake
# One line per need, so each feature's packages are easy to find:
TEST_PKGS=(python3 iproute2 procps ibverbs-utils perftest)
TEST_PKGS+=(bc)                           # boot.log-flood, chaos init_kill.sh: sums in shell
TEST_PKGS+=(clang-14 libclang-rt-14-dev)  # the libFuzzer run
TEST_PKGS+=(python3-torch)                # the PyTorch comm hook and backend tests
TEST_PKGS+=(python3-torchvision)          # perf/torch_bench.sh (resnet18)
TEST_PKGS+=(python3-pip python3-setuptools) # torch.install: pip install ./python, offline
TEST_PKGS+=(openmpi-bin)                  # torch.mpirun-in-slurm: the backend under mpirun
TEST_PKGS+=(libopenmpi-dev)               # perf/mpi_allreduce_bench: compare.sh's Open MPI column
TEST_PKGS+=(chromium)                     # renders gx-accept's HTML report
TEST_PKGS+=(python3-pyverbs)              # rdma-core's own tests over softverbs
TEST_PKGS+=(time)                         # perf/tcp_variants.sh: /usr/bin/time around each rank
TEST_PKGS+=(python3-matplotlib)           # perf/report: plots from perf/results (observe.perf-report)
TEST_PKGS+=(libsimgrid-dev)               # gx-sim (tools/gx-sim): SimGrid 3.32, its C API; without it gx-sim is not built and its tests skip
# Under ASan+UBSan: everything but the long runs and what is marked "nosan"
# (the heavy collectives matrix, whose trimmed twin is labelled "sanitize").
# Under TSan: the suites that exercise threads ("tsan", "sanitize").
ASAN_EXCLUDE='long|nosan|chaos'
# A failed test runs once more before it fails the suite: many tests are
# multi-process jobs with deadlines, and on a 2-core machine one of 500 may
# miss a deadline under load. Its first failure stays in the log (with
# --output-on-failure); one that fails twice in a row fails the suite.
RETRY=(--repeat until-pass:2)
TSAN_LABELS='tsan|sanitize'


say() { printf '\n==> %s\n' "$*"; }

install_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "gx.sh: missing Debian packages; run as root:" >&2
        echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

configure_and_build() {
    say "configuring in $BUILD_DIR ($*)"
    cmake -S . -B "$BUILD_DIR" -G Ninja -DGX_WERROR=ON "$@"
    say "building"
    cmake --build "$BUILD_DIR" -j "$JOBS"
}

cmd=${1:-help}
shift || true
case "$cmd" in
deps)
    install_packages "${BUILD_PKGS[@]}"
    [ "${1:-}" = test ] && install_packages "${TEST_PKGS[@]}"
    ;;
build)
    install_packages "${BUILD_PKGS[@]}"
    configure_and_build "$@"
    ;;
demo)
    install_packages "${BUILD_PKGS[@]}"
    configure_and_build -DGX_BUILD_TESTS=OFF
    say "running the demo: 4 local ranks under gx-run (gx-demo: barrier, p2p ring, all-reduce)"
    "$BUILD_DIR/bin/gx-run" -n 4 --tag-output --timeout 300 "$BUILD_DIR/bin/gx-demo"
    if [ -x "$BUILD_DIR/bin/ddp_mlp" ]; then
        say "training an MLP with gx DDP on 4 ranks, checked against one-process training"
        "$BUILD_DIR/bin/gx-run" -n 4 --tag-output --timeout 300 "$BUILD_DIR/bin/ddp_mlp"
    fi
    ;;
test)
    long=0
    quick=0
    chaos=0
    scale=0
    sanonly=0
    torchsuite=0
    for a in "$@"; do
        case "$a" in
        --long) long=1 ;;
        --quick) quick=1 ;;
        --chaos) chaos=1 ;;
        --scale) scale=1 ;;
        --sanitizers-only) sanonly=1 ;;
        --torchsuite) torchsuite=1 ;;
        *) echo "gx.sh test: unknown option $a" >&2; exit 2 ;;
        esac
    done
    install_packages "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
    if [ $sanonly -eq 0 ]; then
        configure_and_build -DGX_BUILD_TESTS=ON
        say "running the test suite"
        args=(--test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600 "${RETRY[@]}")
        if [ $long -eq 1 ]; then
            ctest "${args[@]}" -LE 'chaos|torchsuite'
        else
            ctest "${args[@]}" -LE 'long|chaos|torchsuite'
        fi
        if [ $torchsuite -eq 1 ]; then
            say "PyTorch's distributed suite, gx against gloo (about 25 minutes on 2 cores)"
            ctest --test-dir "$BUILD_DIR" --output-on-failure -L torchsuite
        fi
        if [ $scale -eq 1 ] && [ $long -eq 0 ]; then
            say "scale runs (64 shm ranks, 256 tcp ranks; tens of minutes on 2 cores)"
            ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 3000 -L scale
        fi
        if [ $chaos -eq 1 ]; then
            say "chaos trials (random kills and stops; about 15 minutes)"
            rm -f "$BUILD_DIR/chaos-report.txt"
            ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 3000 -L chaos
            cat "$BUILD_DIR/chaos-report.txt"
        fi
    fi
    [ $quick -eq 1 ] && exit 0
    say "ASan + UBSan build and run"
    BUILD_DIR=$BUILD_DIR-asan configure_and_build -DGX_BUILD_TESTS=ON -DGX_SANITIZE_ADDRESS=ON
    # HWLOC_COMPONENTS=-pci: hwloc's PCI plugin (libpciaccess) leaks at every
    # topology load and is unloaded before LeakSanitizer can name it; gx's own
    # topology tests read XML fixtures and are unaffected.
    # HWLOC_PLUGINS_PATH=<empty dir>: no hwloc plugin is loaded at all. With
    # libhwloc-plugins installed (libopenmpi3 depends on it) hwloc dlopens and
    # dlcloses its gl/opencl/libxml plugins, and LeakSanitizer's tracer then
    # crashes at exit on the stale dynamic TLS they leave ("Tracer caught
    # signal 11", a different handful of multi-rank tests each run).
    no_plugins=$(cd "$BUILD_DIR-asan" && pwd)/no-hwloc-plugins
    mkdir -p "$no_plugins"
    HWLOC_COMPONENTS=-pci HWLOC_PLUGINS_PATH=$no_plugins \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        ctest --test-dir "$BUILD_DIR-asan" --output-on-failure -j "$JOBS" --timeout 900 "${RETRY[@]}" -LE "$ASAN_EXCLUDE"
    say "TSan build and run"
    BUILD_DIR=$BUILD_DIR-tsan configure_and_build -DGX_BUILD_TESTS=ON -DGX_SANITIZE_THREAD=ON
    TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 suppressions=$PWD/tests/tsan.supp} \
        ctest --test-dir "$BUILD_DIR-tsan" --output-on-failure -j "$JOBS" --timeout 900 "${RETRY[@]}" -L "$TSAN_LABELS"
    ;;
help|-h|--help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    ;;
*)
    echo "gx.sh: unknown command '$cmd' (demo, test, build, deps)" >&2
    exit 2
    ;;
esac
