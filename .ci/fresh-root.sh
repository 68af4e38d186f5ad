#!/usr/bin/env bash
# fresh-root.sh - run the README's two commands, exactly as written, on a
# clean clone of this checkout's HEAD inside a fresh Debian 12 root: a root
# holding only what a new machine of this kind has before gx installs
# anything (compilers, cmake, ninja, git, python3, pkg-config, libssl-dev).
# A machine where packages were once installed by hand can hide a missing
# install step (it did: CI green while ./gx.sh test failed on a new machine);
# this cannot.
#
#   .ci/fresh-root.sh [--keep] [--env NAME=VALUE]... [COMMAND ...]
#
#   COMMAND  run in the clone, in order, each must pass (default: the
#            README's two, "./gx.sh demo" "./gx.sh test"; .ci/run names them)
#   --keep   leave the root behind (its path is printed)
#   --env    one more variable for the commands (the environment is reset)
#
# Needs root (debootstrap, chroot, mounts) and the Debian mirror this machine's
# apt uses. The base root is built once with debootstrap (about 5 minutes) and
# cached as a tarball in $GX_CI_CACHE (default /var/tmp/gx-ci), outside the
# repository, keyed by its package list; each run unpacks a new copy, so
# nothing a run installs carries over to the next.
# Exit status: that of the commands (0 when both pass); 2 when the root could
# not be made.
set -euo pipefail

keep=0 cmds=() envs=()
while [ $# -gt 0 ]; do
    case "$1" in
    --keep) keep=1 ;;
    --env) envs+=("$2"); shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-root.sh: unknown option $1" >&2; exit 2 ;;
    *) cmds+=("$1") ;;
    esac
    shift
done
[ ${#cmds[@]} -gt 0 ] || cmds=("./gx.sh demo" "./gx.sh test")
[ "$(id -u)" = 0 ] || { echo "fresh-root.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${GX_CI_CACHE:-/var/tmp/gx-ci}
# What a new machine of this kind has before gx installs anything.
BASE_PKGS="build-essential cmake ninja-build git python3 pkg-config libssl-dev ca-certificates"
key=$(echo "bookworm $BASE_PKGS" | md5sum | cut -c1-10)
base=$cache/base-$key.tar.gz

say() { printf '\n==> fresh-root: %s (%s)\n' "$*" "$(date +%T)"; }
mirror() {
    awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
        awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null
}

build_base() {
    command -v debootstrap >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    mkdir -p "$cache"
    local tmp url
    tmp=$(mktemp -d "$cache/build.XXXXXX")
    url=$(mirror)
    url=${url:-http://deb.debian.org/debian}
    say "building the base root once: debootstrap bookworm from $url, then $BASE_PKGS"
    if ! debootstrap --variant=minbase bookworm "$tmp" "$url" >"$cache/debootstrap.log" 2>&1; then
        tail -n 20 "$cache/debootstrap.log" >&2
        echo "fresh-root.sh: debootstrap failed (log: $cache/debootstrap.log)" >&2
        rm -rf "$tmp"; exit 2
    fi
    # the same suites as this machine (updates, security) where it uses deb822
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        cp /etc/apt/sources.list.d/debian.sources "$tmp/etc/apt/sources.list.d/"
        rm -f "$tmp/etc/apt/sources.list"
    fi
    if ! unshare -m bash -c "mount -t proc proc '$tmp/proc' && mount --rbind /dev '$tmp/dev' &&
        chroot '$tmp' bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $BASE_PKGS >/dev/null && apt-get clean'"; then
        echo "fresh-root.sh: the base packages did not install" >&2
        rm -rf "$tmp"; exit 2
    fi
    tar -C "$tmp" -czf "$base.part" . && mv "$base.part" "$base"
    rm -rf "$tmp"
}

[ -f "$base" ] || build_base
root=$(mktemp -d /var/tmp/gx-ci-root.XXXXXX)
cleanup() {
    if [ "$keep" = 1 ]; then echo "fresh-root.sh: root kept at $root"; else rm -rf "$root"; fi
}
trap cleanup EXIT
say "unpacking a fresh root from $base"
tar -C "$root" -xzf "$base"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tfresh\n' >"$root/etc/hosts"
echo fresh >"$root/etc/hostname"
head=$(git -C "$repo" rev-parse HEAD)
git clone -q --no-hardlinks "$repo" "$root/root/gx"
git -C "$root/root/gx" checkout -q "$head"
say "clean clone of $(git -C "$root/root/gx" log -1 --format='%h %s' | cut -c1-72)"

{
    echo 'set -e; cd /root/gx'
    echo 'step() { echo; echo "==> fresh-root: $1 ($(date +%T))"; s=$SECONDS; bash -c "$1"; echo "==> fresh-root: $1 passed in $((SECONDS - s)) s"; }'
    for c in "${cmds[@]}"; do printf 'step %q\n' "$c"; done
} >"$root/root/fresh-run.sh"

say "running in the fresh root: ${cmds[*]}"
set +e
unshare -m bash -c "
    mount --bind '$root' '$root' &&
    mount -t proc proc '$root/proc' && mount -t sysfs sys '$root/sys' &&
    mount --rbind /dev '$root/dev' && mount -t tmpfs -o mode=1777 tmp '$root/dev/shm' &&
    mount -t tmpfs tmp '$root/run' && mkdir -p '$root/run/netns' &&
    exec chroot '$root' env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI=true ${envs[*]} \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash /root/fresh-run.sh"
rc=$?
set -e
say "exit $rc"
exit $rc
