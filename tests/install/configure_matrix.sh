#!/usr/bin/env bash
# configure_matrix.sh SRC PACKAGE: configure gx with one optional package
# hidden, then half-installed, and check that the configure passes and its
# summary says the package is off and why. The package is hidden or broken
# for the configure alone, inside a private mount namespace (an overlay that
# removes a file, /dev/null over a file, tmpfs over a directory): nothing on
# the machine changes.
#
#   PACKAGE  hidden                         half-installed
#   mpi      the wrapper's binary           mpicc without its headers (the bug CI missed)
#   hwloc    hwloc.pc                       hwloc.pc without its library
#   dpdk     libdpdk.pc                     libdpdk.pc without its headers
#   verbs    infiniband/                    verbs.h without a header it includes
#   cuda     the toolkit's directory        a cuda.h that does not compile
#   nccl     nccl.h and libnccl             libnccl gone; an empty nccl.h
#   torch    dist-packages                  torch without libtorch_cpu.so
#   chromium /usr/bin/chromium              the wrapper without the browser
#   perftest ib_write_bw                    ib_write_bw without libibverbs
#
# Exit 77 (skip) when not root, when mount namespaces are refused, or when the
# package is not installed whole to begin with (then there is nothing to hide).
set -u
src=$1 pkg=$2
[ "$(id -u)" = 0 ] || { echo "configure_matrix: needs root for a mount namespace"; exit 77; }
unshare -m true 2>/dev/null || { echo "configure_matrix: unshare -m refused here"; exit 77; }
work=$(mktemp -d /tmp/gx-configure-matrix.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0

# configure NAME MASKS...: each mask is "gone:PATH" (the file is removed: an
# overlay on its directory with a whiteout), "empty:PATH" (/dev/null over the
# file: it is there but broken) or "dir:PATH" (an empty tmpfs over the
# directory). Prints the summary line of $pkg; sets $rc and $line.
configure() {
    local name=$1; shift
    local script="set -e; ovl=\$(mktemp -d); mount -t tmpfs gxovl \$ovl"
    local n=0
    for m in "$@"; do
        local path=${m#*:}
        case $m in
        gone:*)
            n=$((n + 1))
            script+="; mkdir \$ovl/u$n \$ovl/w$n"
            script+="; mount -t overlay gxmask -o lowerdir='${path%/*}',upperdir=\$ovl/u$n,workdir=\$ovl/w$n '${path%/*}'"
            script+="; rm -rf '$path'" ;;
        empty:*) script+="; mount --bind /dev/null '$path'" ;;
        dir:*) script+="; mount -t tmpfs gxmask '$path'" ;;
        esac
    done
    script+="; exec cmake -S '$src' -B '$work/$name' -G Ninja -DGX_BUILD_TESTS=OFF"
    unshare -m --propagation private bash -c "$script" > "$work/$name.log" 2>&1
    rc=$?
    line=$(grep -E "^-- +$pkg"$'\t' "$work/$name.log" | head -n 1)
    echo "[$name] exit $rc: ${line#-- }"
}

# expect NAME STATE REGEX: the last configure exited 0 and its summary line
# for $pkg says STATE (on/off) with a reason matching REGEX.
expect() {
    local name=$1 state=$2 re=$3
    if [ "$rc" != 0 ]; then
        echo "FAIL [$name]: configure exited $rc"; tail -n 25 "$work/$name.log"; fail=1
    elif ! printf '%s\n' "$line" | grep -Eq -- "^-- +$pkg"$'\t'"$state +.*$re"; then
        echo "FAIL [$name]: expected '$pkg $state ... $re'"; fail=1
    fi
}

first_existing() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done; }

configure whole
case $line in
*$'\t'on*) ;;
*) echo "configure_matrix: $pkg is not installed whole here (${line#-- }); nothing to hide"; exit 77 ;;
esac

pcdir=$(pkg-config --variable=pcfiledir hwloc 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/pkgconfig)
case $pkg in
mpi)
    incdir=$(mpicc -showme:incdirs | awk '{print $1}')
    configure hidden "gone:$(command -v mpicc)"
    expect hidden off "no mpicc on PATH"
    configure half "dir:$incdir"
    expect half off "mpi\.h: No such file.*libopenmpi-dev"
    ;;
hwloc)
    configure hidden "gone:$pcdir/hwloc.pc"
    expect hidden off "not found with pkg-config"
    lib=$(readlink -f "$(pkg-config --variable=libdir hwloc)/libhwloc.so")
    configure half "empty:$lib"
    expect half off "hwloc\.pc found but a program using it does not build"
    ;;
dpdk)
    pc=$(pkg-config --variable=pcfiledir libdpdk)/libdpdk.pc
    configure hidden "gone:$pc"
    expect hidden off "not found with pkg-config"
    configure half "dir:$(pkg-config --variable=includedir libdpdk)"
    expect half off "libdpdk\.pc found but a program using it does not build: .*No such file"
    ;;
verbs)
    configure hidden dir:/usr/include/infiniband
    expect hidden off "infiniband/verbs\.h not found"
    configure half gone:/usr/include/infiniband/verbs_api.h
    expect half off "infiniband/verbs\.h does not compile"
    ;;
cuda|nccl)
    root=$(readlink -f "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/..")
    [ -f "$root/include/cuda.h" ] || { echo "configure_matrix: no CUDA toolkit at $root"; exit 77; }
    if [ "$pkg" = cuda ]; then
        # /usr/local/cuda is where CMake looks without nvcc on PATH
        configure hidden "dir:$root" "dir:$(readlink -f /usr/local/cuda)"
        expect hidden off "CUDA toolkit not found"
        configure half "empty:$root/include/cuda.h"
        expect half off "cuda\.h does not compile"
    else
        nccl=$(first_existing "$root/include/nccl.h" /usr/include/nccl.h)
        lib=$(first_existing "$root/lib64/libnccl.so" "$root/lib/libnccl.so")
        [ -n "$nccl" ] && [ -n "$lib" ] || { echo "configure_matrix: no nccl.h and libnccl.so in $root"; exit 77; }
        configure hidden "gone:$nccl" "gone:$(readlink -f "$lib")" "gone:$lib"
        expect hidden off "nccl\.h or libnccl not found"
        configure half "gone:$(readlink -f "$lib")" "gone:$lib"
        expect half off "nccl\.h found in .* but no libnccl"
        configure empty "empty:$nccl"
        expect empty off "nccl\.h found in .* but does not compile"
    fi
    ;;
torch)
    configure hidden dir:/usr/lib/python3/dist-packages
    expect hidden off "torch is not installed for /usr/bin/python3"
    tdir=$(/usr/bin/python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
    configure half "empty:$tdir/lib/libtorch_cpu.so"
    expect half off "torch does not import: .*(python3-torch)"
    ;;
chromium)
    configure hidden "gone:$(command -v chromium)"
    expect hidden off "chromium not found"
    browser=$(first_existing /usr/lib/chromium/chromium)
    [ -n "$browser" ] || { echo "configure_matrix: no /usr/lib/chromium/chromium to break"; exit 77; }
    configure half "gone:$browser"
    expect half off "found but does not run"
    ;;
perftest)
    configure hidden "gone:$(command -v ib_write_bw)"
    expect hidden off "ib_write_bw not found"
    lib=$(ldd "$(command -v ib_write_bw)" | awk '/libibverbs/ {print $3}')
    configure half "gone:$(readlink -f "$lib")"
    expect half off "found but does not run"
    ;;
*) echo "configure_matrix: unknown package $pkg"; exit 2 ;;
esac
[ $fail = 0 ] && echo "configure_matrix: $pkg whole, hidden and half-installed all configure and say why"
exit $fail
