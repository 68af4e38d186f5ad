#!/bin/sh
# ibv_devinfo -v (rdma-core's, unmodified) over softverbs, in IB and RoCE
# mode: it must exit 0 and print the port's GID (it calls rdma-core's private
# ibv_query_gid_type, which softverbs must provide); two processes must see
# the same device: same LID and GID (one device per node, docs/testing.md).
#   check_devinfo.sh <libsoftverbs.so.0>
lib=$1
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not installed (ibverbs-utils)"; exit 77; }
pre="${SV_SANITIZER_PRELOAD:+$SV_SANITIZER_PRELOAD }$lib"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL ($link): $*"; sed 's/^/  | /' "$tmp/a"; exit 1; }
for link in ib roce; do
	for p in a b; do
		SOFTVERBS_LINK=$link LD_PRELOAD="$pre" ibv_devinfo -v >"$tmp/$p" 2>&1
		rc=$?
		[ $rc -eq 0 ] || { [ $p = a ] || cp "$tmp/$p" "$tmp/a"; fail "ibv_devinfo -v exited $rc"; }
	done
	grep -q "hca_id:.*softverbs0" "$tmp/a" || fail "no softverbs0"
	grep -q "phys_port_cnt:[[:space:]]*1" "$tmp/a" || fail "phys_port_cnt is not 1"
	grep -q "atomic_cap:[[:space:]]*ATOMIC_GLOB" "$tmp/a" || fail "atomic_cap is not ATOMIC_GLOB"
	gid=$(grep "GID\[ *0\]" "$tmp/a")
	[ -n "$gid" ] || fail "no GID[0] line"
	if [ $link = roce ]; then
		echo "$gid" | grep -q "RoCE v2" || fail "GID[0] is not RoCE v2: $gid"
		grep -q "link_layer:[[:space:]]*Ethernet" "$tmp/a" || fail "link layer is not Ethernet"
	else
		grep -q "link_layer:[[:space:]]*InfiniBand" "$tmp/a" || fail "link layer is not InfiniBand"
	fi
	for key in port_lid "GID\[ *0\]"; do
		x=$(grep "$key" "$tmp/a"); y=$(grep "$key" "$tmp/b")
		[ "$x" = "$y" ] || fail "two processes see different devices: '$x' / '$y'"
	done
	echo "ok ($link): $(echo "$gid" | tr -s ' \t' ' '), $(grep port_lid "$tmp/a" | tr -s ' \t' ' ')"
done
echo PASS
