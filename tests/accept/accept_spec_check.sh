#!/bin/sh
# gx-accept --check-spec on bad spec files: each must be refused (exit 2)
# with an error naming the file, the line and the key; good specs (and the
# example in docs/accept.md) must be accepted.
#   accept_spec_check.sh GX_ACCEPT TESTS_ACCEPT_DIR
gxaccept=$1 here=$2
dir=$(mktemp -d /tmp/gxac-spec.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0

# bad NAME EXPECTED-REGEX, spec text on stdin
bad() {
    cat >"$dir/$1.json"
    out=$("$gxaccept" --check-spec "$dir/$1.json" 2>&1)
    rc=$?
    if [ $rc -ne 2 ] || ! printf '%s\n' "$out" | grep -Eq "$2"; then
        echo "FAIL $1: exit $rc, output: $out (want exit 2 and /$2/)"
        fails=$((fails + 1))
    else
        echo "ok   $1: $out"
    fi
}
good() {
    cat >"$dir/$1.json"
    out=$("$gxaccept" --check-spec "$dir/$1.json" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL $1: a valid spec was refused (exit $rc): $out"
        fails=$((fails + 1))
    else
        echo "ok   $1: $out"
    fi
}

bad missing-nics '/missing-nics.json:1: node.nics: missing required key' <<'EOF'
{"version": 1, "node": {"gpus": 0}}
EOF
bad missing-nics-line '/missing-nics-line.json:3: node.nics: missing required key' <<'EOF'
{
  "version": 1,
  "node": {
    "gpus": 8
  }
}
EOF
bad missing-version '/missing-version.json:1: version: missing required key' <<'EOF'
{
  "node": {"gpus": 0, "nics": 1}
}
EOF
bad missing-node '/missing-node.json:1: node: missing required key' <<'EOF'
{"version": 1}
EOF
bad wrong-type '/wrong-type.json:4: node.nics: expected a number, found a string' <<'EOF'
{
  "version": 1,
  "node": {"gpus": 8,
           "nics": "eight"}
}
EOF
bad wrong-type-section '/wrong-type-section.json:3: p2p: expected an object, found an array' <<'EOF'
{"version": 1,
 "node": {"gpus": 0, "nics": 1},
 "p2p": [1, 2]}
EOF
bad unknown-key '/unknown-key.json:5: p2p.min_gb: unknown key \(known here: bytes, message_bytes' <<'EOF'
{
  "version": 1,
  "node": {"gpus": 0, "nics": 1},
  "p2p": {
    "min_gb": 10
  }
}
EOF
bad unknown-top '/unknown-top.json:2: soka: unknown key' <<'EOF'
{"version": 1, "node": {"gpus": 0, "nics": 1},
 "soka": {"seconds": 5}}
EOF
bad unknown-override-key '/unknown-override-key.json:4: node_overrides.gpu7.nic: unknown key' <<'EOF'
{"version": 1,
 "node": {"gpus": 8, "nics": 8},
 "node_overrides": {"gpu7": {
     "nic": 4}}}
EOF
bad whole-number '/whole-number.json:2: node.gpus: expected a whole number, found 1.5' <<'EOF'
{"version": 1, "node": {"nics": 1,
  "gpus": 1.5}}
EOF
bad range '/range.json:3: outliers.fraction: 1.5 is out of range' <<'EOF'
{"version": 1, "node": {"gpus": 0, "nics": 1},
 "outliers": {
   "fraction": 1.5}}
EOF
bad version '/version.json:1: version: 2 is out of range \(1 to 1\)' <<'EOF'
{"version": 2, "node": {"gpus": 0, "nics": 1}}
EOF
bad path-class "/path-class.json:2: node.max_nic_path: 'PCI' is not one of PIX, PXB, PHB, NODE, SYS" <<'EOF'
{"version": 1, "node": {"gpus": 0, "nics": 1,
  "max_nic_path": "PCI"}}
EOF
bad bool '/bool.json:2: node.dpdk: expected true or false, found a number' <<'EOF'
{"version": 1, "node": {"gpus": 0, "nics": 1,
  "dpdk": 1}}
EOF
bad sweep-order '/sweep-order.json:2: allreduce.min_bytes: 1048576 is larger than max_bytes 1024' <<'EOF'
{"version": 1, "node": {"gpus": 0, "nics": 1},
 "allreduce": {"min_bytes": 1048576, "max_bytes": 1024}}
EOF
bad trailing-comma '/trailing-comma.json:3: trailing comma before .\}. \(not valid JSON\)' <<'EOF'
{"version": 1,
 "node": {"gpus": 0, "nics": 1},
}
EOF
bad duplicate "/duplicate.json:3: key 'nics' appears twice in one object \(first on line 2\)" <<'EOF'
{"version": 1, "node": {"gpus": 0,
  "nics": 1,
  "nics": 2}}
EOF
bad unclosed '/unclosed.json:2: string not closed' <<'EOF'
{"version": 1,
 "name": "rack 12
}
EOF
bad bad-escape "/bad-escape.json:1: unknown escape '.x' in a string" <<'EOF'
{"version": 1, "name": "a\x41", "node": {"gpus": 0, "nics": 1}}
EOF
bad comment "/comment.json:1: unexpected '/'" <<'EOF'
// a comment
{"version": 1, "node": {"gpus": 0, "nics": 1}}
EOF
bad leading-zero '/leading-zero.json:1: bad number: no leading zeros' <<'EOF'
{"version": 01, "node": {"gpus": 0, "nics": 1}}
EOF
bad truncated '/truncated.json:3: unexpected end of the file' <<'EOF'
{"version": 1,
 "node": {"gpus": 0, "nics":
EOF
bad top-array '/top-array.json:1: \(top level\): expected an object, found an array' <<'EOF'
[{"version": 1}]
EOF
bad empty '/empty.json:1: unexpected end of the file' </dev/null

good escapes <<'EOF'
{"version": 1, "name": "rack \"12\" \u00e9\ud83d\ude00 \/\t",
 "node": {"gpus": 8, "nics": 8, "nic_min_gbps": 400, "max_nic_path": "PXB",
          "cpu_governor": "performance", "dpdk": false, "hugepages_min_mb": 0},
 "node_overrides": {"gpu7": {"nics": 4}},
 "nodes": 16, "ranks_per_node": 8,
 "clock": {"max_skew_ms": 1.5e0},
 "p2p": {"bytes": 1048576, "message_bytes": 65536, "repeats": 3, "min_gbs": 40,
         "max_latency_us": 5},
 "allreduce": {"min_bytes": 8, "max_bytes": 1073741824, "factor": 2, "iters": 20,
               "min_busbw_gbs": 150},
 "allgather": {},
 "soak": {"seconds": 600, "max_bytes": 16777216},
 "outliers": {"fraction": 0.8}}
EOF

# The example in docs/accept.md (its first ```json block) must be valid.
docs=$here/../../docs/accept.md
if [ -f "$docs" ]; then
    awk '/^```json$/ {on=1; next} /^```$/ && on {exit} on' "$docs" | good docs-example
else
    echo "FAIL docs/accept.md not found at $docs"
    fails=$((fails + 1))
fi

# Mutated specs never crash the reader (exit 0 or 2, the file named).
python3 "$here/spec_fuzz.py" "$gxaccept" "$dir/escapes.json" "$dir" || fails=$((fails + 1))

# A planted symbolic link is refused, and so is a missing file.
echo '{"version": 1, "node": {"gpus": 0, "nics": 1}}' >"$dir/real.json"
ln -s "$dir/real.json" "$dir/link.json"
out=$("$gxaccept" --check-spec "$dir/link.json" 2>&1)
if [ $? -ne 2 ] || ! printf '%s' "$out" | grep -q 'symbolic link is refused'; then
    echo "FAIL symlink: $out"
    fails=$((fails + 1))
else
    echo "ok   symlink: $out"
fi
out=$("$gxaccept" --check-spec "$dir/none.json" 2>&1)
if [ $? -ne 2 ] || ! printf '%s' "$out" | grep -q 'none.json: cannot open'; then
    echo "FAIL missing file: $out"
    fails=$((fails + 1))
fi
out=$("$gxaccept" --bogus 2>&1)
[ $? -eq 2 ] || { echo "FAIL: an unknown option did not exit 2"; fails=$((fails + 1)); }
"$gxaccept" --help | grep -q -- '--check-spec' || { echo "FAIL: --help"; fails=$((fails + 1)); }

[ $fails -eq 0 ] || { echo "FAIL: $fails spec cases"; exit 1; }
echo "PASS: every bad spec is refused naming file, line and key"
