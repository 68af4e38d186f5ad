#!/usr/bin/env bash
# perf/torch_bench.sh - resnet18 DDP iteration on CPU, torch.distributed
# backend "gx" against "gloo" in the same run (perf/torch_bench.py).
#   perf/torch_bench.sh [-b BUILD_DIR] [-n RANKS] [--record] [-- torch_bench.py flags]
# BUILD_DIR defaults to ./build (libgx and gx-run come from there). Needs
# Debian's python3-torch and python3-torchvision for /usr/bin/python3.
# --record writes perf/results/<date>-torch.md. The commit and the load
# average before and after are printed with the figures (every repetition's
# beside the medians): on a shared machine say "under load".
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/../build N=2 RECORD=0
while [ $# -gt 0 ]; do
    case "$1" in
    -b) BUILD=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --record) RECORD=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "torch_bench.sh: unknown option $1 (see --help)"; exit 2 ;;
    esac
done
[ -x "$BUILD/bin/gx-run" ] || { echo "torch_bench.sh: no $BUILD/bin/gx-run; build first or give -b"; exit 2; }
/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null ||
    { echo "torch_bench.sh: needs python3-torch and python3-torchvision for /usr/bin/python3"; exit 77; }
export GX_LIBRARY=$BUILD/lib/libgx.so PYTHONPATH=$HERE/../python${PYTHONPATH:+:$PYTHONPATH}
. "$HERE/perf_lib.sh"
head=$(perf_begin "$HERE/..")
echo "$head"
out=$("$BUILD/bin/gx-run" -n "$N" --timeout 1200 /usr/bin/python3 "$HERE/torch_bench.py" "$@" 2>&1 |
      grep -v ' WARN ')
echo "$out"
tail=$(perf_end)
echo "$tail"
if [ "$RECORD" = 1 ]; then
    f=$HERE/results/$(date -u +%Y-%m-%d)-torch.md
    { echo "# resnet18 DDP, backend gx vs gloo ($(date -u +%H:%M) UTC)"; echo
      echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"; echo
      echo "$head"; echo; echo '```'; echo "$out"; echo '```'; echo "$tail"; } >"$f"
    echo "recorded in $f"
fi
