#!/bin/sh
# gx-accept on one node, 2 ranks under gx-run (no root needed):
#  - a spec matching this machine passes (exit 0); the JSON parses and holds
#    the sweeps and a clean soak, the JUnit XML parses, the HTML is written;
#  - an unreachable busbw threshold fails (exit 1) naming fabric/all_reduce;
#  - a bad spec stops every rank with exit 2, naming key and line.
#   accept_local.sh GX_RUN GX_ACCEPT
gxrun=$1 gxaccept=$2
dir=$(mktemp -d /tmp/gxac-local.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }

nics=$(GX_DEBUG=none ASAN_OPTIONS=detect_leaks=0 "$(dirname "$gxaccept")/gx-topo" --json | python3 -c 'import json,sys
k=[x["kind"] for x in json.load(sys.stdin)["devices"]]; print(k.count("rdma") or k.count("eth"))') ||
    fail "gx-topo --json"
gpus=$(GX_DEBUG=none ASAN_OPTIONS=detect_leaks=0 "$(dirname "$gxaccept")/gx-topo" --json | python3 -c 'import json,sys
print([x["kind"] for x in json.load(sys.stdin)["devices"]].count("gpu"))')

spec() { # $1 = all-reduce threshold line
    cat >"$dir/spec.json" <<EOF
{
  "version": 1,
  "name": "one node",
  "nodes": 1,
  "ranks_per_node": 2,
  "node": { "gpus": $gpus, "nics": $nics },
  "p2p": { "bytes": 65536, "message_bytes": 65536, "repeats": 1 },
  "allreduce": { "min_bytes": 1024, "max_bytes": 262144, "factor": 16, "iters": 3 $1 },
  "allgather": { "min_bytes": 1024, "max_bytes": 262144, "factor": 16, "iters": 3 },
  "soak": { "seconds": 1, "max_bytes": 65536 }
}
EOF
}

spec ""
GX_DEBUG=warn "$gxrun" -n 2 --timeout 120 "$gxaccept" -q --spec "$dir/spec.json" \
    --json "$dir/a.json" --junit "$dir/a.xml" --html "$dir/a.html" >"$dir/console" 2>"$dir/err"
rc=$?
cat "$dir/console"
[ $rc -eq 0 ] || { cat "$dir/err"; fail "a spec matching this machine exited $rc"; }
python3 - "$dir/a.json" "$dir/a.xml" <<'EOF' || fail "outputs do not hold what the run did"
import json, sys, xml.etree.ElementTree as ET
r = json.load(open(sys.argv[1]))
assert r["passed"] is True and r["ranks"] == 2 and len(r["nodes"]) == 1, r
colls = [s["collective"] for s in r["sweeps"]]
assert colls == ["all_reduce", "all_gather"], colls
assert all(len(s["rows"]) == 3 and s["rows"][-1]["busbw_gbs"] > 0 for s in r["sweeps"])
assert r["soak"]["collectives"] > 0 and r["soak"]["wrong"] == 0, r["soak"]
names = {(c["group"], c["name"]) for c in r["checks"]}
for want in [("node", "gpu_count"), ("node", "nic_count"), ("node", "versions"),
             ("node", "clock_skew"), ("fabric", "soak")]:
    assert want in names, want
root = ET.parse(sys.argv[2]).getroot()
assert int(root.get("tests")) == len(r["checks"]) == len(root.findall("./testsuite/testcase"))
print("json: %d checks, junit: %s testcases" % (len(r["checks"]), root.get("tests")))
EOF
grep -q '<svg id="busbw"' "$dir/a.html" || fail "the HTML report has no busbw plot"

spec ', "min_busbw_gbs": 1000000'
GX_DEBUG=warn "$gxrun" -n 2 --timeout 120 "$gxaccept" -q --spec "$dir/spec.json" >"$dir/console2" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "an unreachable busbw threshold exited $rc, want 1"
grep -q '^FAIL fabric/all_reduce all nodes: busbw .* spec wants at least 1e+06 GB/s' "$dir/console2" ||
    { cat "$dir/console2"; fail "the failing all-reduce threshold is not named"; }

echo '{"version": 1, "node": {"gpus": 0, "nics": "one"}}' >"$dir/bad.json"
GX_DEBUG=warn "$gxrun" -n 2 --timeout 60 "$gxaccept" --spec "$dir/bad.json" >"$dir/console3" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$dir/console3"; fail "a bad spec under gx-run exited $rc, want 2"; }
grep -q 'bad.json:1: node.nics: expected a number, found a string' "$dir/console3" ||
    { cat "$dir/console3"; fail "the bad spec's key is not named"; }
# An output path that is a planted symbolic link is refused (exit 1), the target untouched.
spec ""
echo keep >"$dir/target"
ln -s "$dir/target" "$dir/planted.json"
GX_DEBUG=warn "$gxrun" -n 2 --timeout 120 "$gxaccept" -q --spec "$dir/spec.json" \
    --json "$dir/planted.json" >"$dir/console4" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "writing through a planted symlink exited $rc, want 1"
grep -q 'planted.json.*symbolic link is refused' "$dir/console4" || fail "the symlink is not named"
[ "$(cat "$dir/target")" = keep ] || fail "the symlink's target was overwritten"
echo "PASS: gx-accept on one node"
