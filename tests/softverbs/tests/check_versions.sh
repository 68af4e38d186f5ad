#!/bin/sh
# Every symbol libsoftverbs exports must carry the same default version as
# in the system's libibverbs, or binaries would not bind to it.
#   check_versions.sh <libsoftverbs.so.0>
lib=$1
real=$(ls /usr/lib/*/libibverbs.so.1 /usr/lib64/libibverbs.so.1 2>/dev/null | head -1)
[ -n "$real" ] || { echo "SKIP: no system libibverbs.so.1 to compare with"; exit 77; }
command -v objdump >/dev/null || { echo "SKIP: objdump not installed"; exit 77; }
ours=$(objdump -T "$lib" | awk '$4 == ".text" && $6 !~ /^\(/ {print $7, $6}' | sort)
[ -n "$ours" ] || { echo "FAIL: no exported functions found in $lib"; exit 1; }
bad=0
echo "$ours" | while read -r sym ver; do
	want=$(objdump -T "$real" | awk -v s="$sym" '$NF == s && $(NF-1) !~ /^\(/ {print $(NF-1)}')
	if [ "$want" != "$ver" ]; then
		echo "FAIL: $sym@$ver, libibverbs has ${want:-nothing}"
		exit 1
	fi
done || bad=1
[ $bad -eq 0 ] || exit 1
echo "PASS: $(echo "$ours" | wc -l) exported functions carry libibverbs' versions"
