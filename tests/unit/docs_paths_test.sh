#!/bin/sh
# Every path docs/architecture.md names (in backquotes, with a slash) exists
# in the source tree, so the page cannot drift from the code unnoticed.
set -u
src=$1
page=$src/docs/architecture.md
[ -f "$page" ] || { echo "FAIL: $page is missing"; exit 1; }
paths=$(sed '/^```/,/^```/d' "$page" | grep -o '`[A-Za-z0-9_./-]*/[A-Za-z0-9_./-]*`' | tr -d '`' | sort -u)
[ -n "$paths" ] || { echo "FAIL: no paths found in $page"; exit 1; }
missing=0
for p in $paths; do
    [ -e "$src/$p" ] || { echo "FAIL: docs/architecture.md names $p, which does not exist"; missing=1; }
done
[ $missing -eq 0 ] && echo "all $(echo "$paths" | wc -l) paths named by docs/architecture.md exist"
exit $missing
