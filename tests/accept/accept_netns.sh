#!/bin/bash
# gx-accept on 4 network-namespace "nodes" (1 rank each) joined by veth pairs
# through a bridge (itself in a namespace, so nothing is added to the host's).
#   accept_netns.sh CASE GX_RUN GX_ACCEPT SOURCE_DIR
# CASE:
#   tbf   rate-limit nodeC's link with tc tbf: gx-accept must exit non-zero,
#         name nodeC as the outlier node and only links from nodeC as outlier
#         links, fail the p2p threshold only there; with the limit removed it
#         passes. The JUnit XML is checked with python3's xml.etree.
#   nics  the spec wants 2 NICs; nodeB gets a 1-NIC topology: it fails
#         naming nodeB and no other node.
#   html  the tbf run's HTML report rendered by headless chromium: screenshot,
#         heatmap cell count in the rendered DOM, outlier and normal colours
#         in the pixels (tests/accept/check_report.py).
#   soak  (long) the tbf-free run with a 60 s soak and full sweeps.
# RANKS_PER_NODE=N runs N ranks per node (default 1), KEEP_DIR=1 keeps the outputs, SWEEP_MAX=BYTES makes the tbf sweeps longer,
# SHOT_OUT=FILE keeps the html case's screenshot (docs/accept-report.png).
# Needs root, iproute2 and tc; exits 77 (skip) when they are missing.
set -u
case_=$1 gxrun=$2 gxaccept=$3 src=$4
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: iproute2 (ip) not installed"; exit 77; }
command -v tc >/dev/null 2>&1 || { echo "SKIP: tc not installed"; exit 77; }
if [ "$case_" = html ]; then
    chromium=$(command -v chromium || command -v chromium-browser || true)
    [ -n "$chromium" ] || { echo "SKIP: chromium not installed (apt-get install chromium)"; exit 77; }
fi

tag=gxac$$
net=10.$(( $$ % 200 + 30 )).$(( ($$ / 200) % 250 + 1 ))
names=(nodeA nodeB nodeC nodeD)
dir=$(mktemp -d /tmp/gxac-accept.XXXXXX)
cleanup() {
    for k in 0 1 2 3; do ip netns del "${tag}n$k" 2>/dev/null; done
    ip netns del "${tag}br" 2>/dev/null
    [ -n "${KEEP_DIR:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../lib/netns_bridge.sh"
if ! netns_bridge_create "${tag}br" br0 "$dir/err"; then
    echo "SKIP: cannot create a namespace with a bridge: $(cat "$dir/err")"
    exit 77
fi
for k in 0 1 2 3; do
    netns_bridge_join "${tag}n$k" "${tag}br" br0 "${tag}h$k" "${tag}p$k" gxac0 "$net.$((k + 1))/24" ||
        { echo "FAIL: namespace setup for node $k"; exit 1; }
done

# run_accept OUTDIR SPEC [ENV=VAL per node k as TOPO_k]: every node's gx-run in
# its namespace; node A's console summary in OUTDIR/console, exit status in OUTDIR/rc.
run_accept() {
    local out=$1 spec=$2 port=$((20000 + RANDOM % 40000)) key="gxac-$$-$RANDOM" pids=()
    mkdir -p "$out"
    for k in 3 2 1 0; do
        local envs=(env GX_SOCKET_IFNAME=gxac0 GX_DEBUG=warn)
        local topo_var="TOPO_$k"
        [ -n "${!topo_var:-}" ] && envs+=("GX_TOPO_FILE=${!topo_var}")
        local cmd=(ip netns exec "${tag}n$k" "${envs[@]}" "$gxrun" -n "${RANKS_PER_NODE:-1}" --nnodes 4
                   --node-rank "$k" --master "$net.1:$port" --job-key "$key"
                   --node-id "${names[$k]}" --timeout 150 "$gxaccept" --spec "$spec"
                   --out "$out")
        if [ "$k" = 0 ]; then
            "${cmd[@]}" >"$out/console" 2>"$out/stderr0"
            echo $? >"$out/rc"
        else
            "${cmd[@]}" >/dev/null 2>"$out/stderr$k" &
            pids+=($!)
        fi
    done
    for p in "${pids[@]}"; do wait "$p"; done
    echo "---- $out: exit $(cat "$out/rc")"
    cat "$out/console"
}

fail() { echo "FAIL: $*"; cat "$dir"/*/stderr* 2>/dev/null | tail -20; exit 1; }

spec_tbf() { # $1 = soak seconds, $2 = sweep max bytes
    cat >"$dir/spec.json" <<EOF
{
  "version": 1,
  "name": "netns rack of 4",
  "nodes": 4,
  "ranks_per_node": ${RANKS_PER_NODE:-1},
  "node": { "gpus": 0, "nics": ${NICS:-0} },
  "clock": { "max_skew_ms": 50 },
  "p2p": { "bytes": 4194304, "message_bytes": 262144, "repeats": 5, "min_gbs": 0.03,
           "max_latency_us": 100000 },
  "allreduce": { "min_bytes": 4096, "max_bytes": $2, "factor": 16, "iters": 3 },
  "allgather": { "min_bytes": 4096, "max_bytes": $2, "factor": 16, "iters": 3 },
  "soak": { "seconds": $1, "max_bytes": 65536 },
  "outliers": { "fraction": 0.2 }
}
EOF
}

check_junit() {
    python3 - "$1" <<'EOF' || fail "JUnit XML $1 does not parse or disagrees with itself"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
cases = root.findall("./testsuite/testcase")
fails = [c for c in cases if c.find("failure") is not None]
assert int(root.get("tests")) == len(cases) > 0, (root.get("tests"), len(cases))
assert int(root.get("failures")) == len(fails), (root.get("failures"), len(fails))
for s in root.findall("testsuite"):
    assert int(s.get("tests")) == len(s.findall("testcase"))
print("junit: %d testcases, %d failures" % (len(cases), len(fails)))
EOF
}

limit() { ip netns exec "${tag}n2" tc qdisc add dev gxac0 root tbf rate 100mbit burst 64kb latency 400ms; }
unlimit() { ip netns exec "${tag}n2" tc qdisc del dev gxac0 root; }

# The NICs a node sees in its namespace, as the topology layer counts them
# (RDMA NICs, or Ethernet NICs when none): the spec expects exactly that.
NICS=$(ip netns exec "${tag}n0" env GX_DEBUG=none ASAN_OPTIONS=detect_leaks=0 "$(dirname "$gxaccept")/gx-topo" --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]
k=[x["kind"] for x in d]; print(k.count("rdma") or k.count("eth"))') ||
    fail "gx-topo --json in a namespace"

case $case_ in
tbf|html)
    spec_tbf 1 "${SWEEP_MAX:-65536}"
    limit || { echo "SKIP: tc tbf is not available in this kernel"; exit 77; }
    run_accept "$dir/limited" "$dir/spec.json"
    c=$dir/limited/console
    [ "$(cat "$dir/limited/rc")" = 1 ] || fail "the rate-limited run exited $(cat "$dir/limited/rc"), want 1"
    if [ "$case_" = html ]; then
        python3 "$src/tests/accept/check_report.py" "$chromium" "$dir/limited/accept.html" \
            "$dir/shot.png" 4 || fail "the report did not render as expected"
        [ -z "${SHOT_OUT:-}" ] || cp "$dir/shot.png" "$SHOT_OUT"
        echo "PASS: the HTML report renders its heatmap in chromium"
        exit 0
    fi
    grep -q '^FAIL outlier/node nodeC: ' "$c" || fail "nodeC is not named as the outlier node"
    grep '^FAIL outlier/node ' "$c" | grep -qv ' nodeC: ' && fail "a node other than nodeC is named"
    grep -q '^FAIL outlier/link nodeC->' "$c" || fail "no link from nodeC is named"
    grep '^FAIL outlier/link ' "$c" | grep -qv ' nodeC->' && fail "a link not from nodeC is named"
    grep -q '^FAIL fabric/p2p_bandwidth nodeC->' "$c" || fail "the p2p threshold did not fail for nodeC"
    grep '^FAIL fabric/p2p_bandwidth ' "$c" | grep -qv ' nodeC->' &&
        fail "the p2p threshold failed for a link not from nodeC"
    check_junit "$dir/limited/accept.junit.xml"
    unlimit || fail "cannot remove the tbf qdisc"
    run_accept "$dir/free" "$dir/spec.json"
    [ "$(cat "$dir/free/rc")" = 0 ] || fail "without the limit gx-accept exited $(cat "$dir/free/rc"), want 0"
    grep -q '^result: PASS' "$dir/free/console" || fail "no 'result: PASS' without the limit"
    check_junit "$dir/free/accept.junit.xml"
    echo "PASS: the rate-limited node and its links are named, and the clean run passes"
    ;;
nics)
    cat >"$dir/spec.json" <<EOF
{ "version": 1, "node": { "gpus": 0, "nics": 2 } }
EOF
    fixtures=$src/tests/fixtures/topo
    "$gxaccept" --help >/dev/null || fail "gx-accept --help"
    GX_TOPO_FILE=$fixtures/cpu2s.xml GX_DEBUG=none ASAN_OPTIONS=detect_leaks=0 "$(dirname "$gxaccept")/gx-topo" >/dev/null 2>&1 ||
        { echo "SKIP: this gx cannot read hwloc XML topologies (built without hwloc)"; exit 77; }
    TOPO_0=$fixtures/cpu2s.xml TOPO_1=$fixtures/self.xml TOPO_2=$fixtures/cpu2s.xml \
        TOPO_3=$fixtures/cpu2s.xml run_accept "$dir/nics" "$dir/spec.json"
    c=$dir/nics/console
    [ "$(cat "$dir/nics/rc")" = 1 ] || fail "exit $(cat "$dir/nics/rc"), want 1"
    grep -q '^FAIL node/nic_count nodeB: found 1 Ethernet NIC (eth0.*spec wants 2' "$c" ||
        fail "nodeB's NIC count failure is not named"
    [ "$(grep -c '^FAIL ' "$c")" = 1 ] || fail "other checks failed too"
    echo "PASS: the node with 1 NIC where the spec says 2 is named"
    ;;
soak)
    spec_tbf 60 16777216
    run_accept "$dir/soak" "$dir/spec.json"
    [ "$(cat "$dir/soak/rc")" = 0 ] || fail "the soak run exited $(cat "$dir/soak/rc")"
    grep -q '^result: PASS' "$dir/soak/console" || fail "no 'result: PASS'"
    echo "PASS: 60 s soak over 4 netns nodes"
    ;;
*)
    echo "accept_netns.sh: unknown case '$case_'" >&2
    exit 2
    ;;
esac
