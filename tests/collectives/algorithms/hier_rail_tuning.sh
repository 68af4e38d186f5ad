#!/bin/sh
# hier_rail_tuning.sh GX_INFO - the cost model's choice of the hierarchical
# all-reduce's rail algorithm among ring, rhd, tree and dbtree, as
# gx-info --tuning prints it ("hier rails" table: each candidate's predicted
# time for the 1/L shard over N nodes, * = the pick):
#  - on every row of several layouts and links the pick is the fastest of the
#    four printed, the `rail` column names it and matches the all-reduce
#    table's `rail` column;
#  - tiny shards on many nodes take a latency algorithm (not the ring, whose
#    2(N-1) message times the model must see), large shards on 2-3 nodes
#    ring or rhd, and on a fast link (--link 5:12) mid-size shards on 64
#    nodes dbtree (the reduction hides behind the pipelined trees);
#  - GX_HIER_RAIL forces the rail everywhere; one rank per node prints no
#    rails table.
set -u
info=$1
fail() { echo "FAIL: $*"; exit 1; }

# rails OUT: the "hier rails" table's rows: bytes shard ring rhd tree dbtree rail
rails() { echo "$1" | sed -n '/^hier rails:/,/^$/p' | awk 'NF >= 7 && $1 != "bytes" && $1 != "hier"'; }

# check_argmin OUT: every row's starred time is the smallest; rail names it.
check_argmin() {
    rails "$1" | awk -v what="$2" '
    function sec(v) { sub(/\*$/, "", v)
        if (v ~ /us$/) { sub(/us$/, "", v); return v * 1e-6 }
        if (v ~ /ms$/) { sub(/ms$/, "", v); return v * 1e-3 }
        sub(/s$/, "", v); return v + 0 }
    BEGIN { split("ring rhd tree dbtree", name, " "); bad = 0; rows = 0 }
    { rows++; star = 0; min = -1
      for (i = 3; i <= 6; i++) { t = sec($i); if (min < 0 || t < min) min = t
          if ($i ~ /\*$/) { star++; pick = i } }
      if (star != 1) { print what ": row " $1 ": " star " picks"; bad = 1; next }
      if (sec($pick) > min) { print what ": row " $1 ": picked " name[pick - 2] " is not the fastest: " $0; bad = 1 }
      if ($7 != name[pick - 2]) { print what ": row " $1 ": rail column " $7 " vs starred " name[pick - 2]; bad = 1 } }
    END { if (rows < 10) { print what ": only " rows " rows"; bad = 1 } exit bad }' ||
        fail "$2"
    # The all-reduce table's rail column says the same per size.
    t=$(echo "$1" | sed -n '/^all_reduce/,/^$/p' | awk '$1 ~ /^[0-9]+[KMG]?$/ {print $1, $9}')
    r=$(rails "$1" | awk '{print $1, $7}')
    [ "$t" = "$r" ] || fail "$2: rail columns differ: all_reduce table: $t; rails table: $r"
}

rail_at() { rails "$1" | awk -v b="$2" '$1 == b {print $7}'; }

for shape in "32 16" "4 2" "6 3" "6 4" "16 2" "128 64"; do
    set -- $shape
    out=$(GX_HIER_RAIL=auto "$info" --tuning -n "$1" --nodes "$2") || fail "gx-info -n $1 --nodes $2"
    check_argmin "$out" "-n $1 --nodes $2"
    out=$(GX_HIER_RAIL=auto "$info" --tuning -n "$1" --nodes "$2" --link 5:12) || fail "--link 5:12"
    check_argmin "$out" "-n $1 --nodes $2 --link 5:12"
done

out=$(GX_HIER_RAIL=auto "$info" --tuning -n 32 --nodes 16)
r=$(rail_at "$out" 4)
case $r in rhd|tree|dbtree) ;; *) fail "4 bytes on 16 nodes: rail '$r', want a latency algorithm";; esac
out=$(GX_HIER_RAIL=auto "$info" --tuning -n 4 --nodes 2)
r=$(rail_at "$out" 1G)
case $r in ring|rhd) ;; *) fail "1 GiB on 2 nodes: rail '$r', want ring or rhd";; esac
out=$(GX_HIER_RAIL=auto "$info" --tuning -n 6 --nodes 3)
[ "$(rail_at "$out" 256M)" = ring ] || fail "256 MiB on 3 nodes: rail '$(rail_at "$out" 256M)', want ring"
out=$(GX_HIER_RAIL=auto "$info" --tuning -n 128 --nodes 64 --link 5:12)
[ "$(rail_at "$out" 64M)" = dbtree ] || fail "64 MiB on 64 nodes over 5 us/12 GB/s: rail '$(rail_at "$out" 64M)', want dbtree"
r=$(rail_at "$out" 4)
case $r in rhd|tree|dbtree) ;; *) fail "4 bytes on 64 nodes: rail '$r', want a latency algorithm";; esac

for forced in tree dbtree ring rhd; do
    out=$(GX_HIER_RAIL=$forced "$info" --tuning -n 6 --nodes 3) || fail "GX_HIER_RAIL=$forced"
    n=$(rails "$out" | grep -c " $forced (GX_HIER_RAIL)$")
    [ "$n" -ge 10 ] && [ "$n" = "$(rails "$out" | wc -l)" ] || fail "GX_HIER_RAIL=$forced not on every row: $out"
    echo "$out" | sed -n '/^all_reduce/,/^$/p' | awk '$1 ~ /^[0-9]+[KMG]?$/ {print $9}' | sort -u |
        grep -qx "$forced" || fail "GX_HIER_RAIL=$forced: all-reduce rail column: $out"
done
out=$("$info" --tuning -n 4 --nodes 4)
echo "$out" | grep -q '^hier rails' && fail "rails table with one rank per node"
"$info" --tuning -n 4 --nodes 2 --link 5 >/dev/null 2>&1 && fail "--link 5 accepted"
echo "PASS: the rail algorithm is the model's fastest of ring/rhd/tree/dbtree (or GX_HIER_RAIL's)"
