#!/bin/bash
# check-bisect.sh: every prefix of the series builds and passes the unit
# tests.  Checks out each commit of build/src/fork in turn, builds it
# incrementally in build/bisect and runs 'meson test --suite unit' there.
#
# build/bisect sits beside build/fork, so both see the source as
# ../src/fork and ccache serves the bisect build from the fork build's
# objects wherever a file is unchanged.  build/src/fork is put back at the
# top of the series at the end; if the run is interrupted, the next
# 'make fork' applies the series again; BISECT_FROM=N resumes at patch N.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/build/src/fork
out=$top/build/bisect
jobs=${JOBS:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$top/scripts/fork-src.sh"
branch=$(git -C "$src" branch --show-current)
stamp=$(cat "$src.stamp")
rm -f "$src.stamp"
mapfile -t commits < <(git -C "$src" rev-list --reverse base..HEAD)
echo "check-bisect: ${#commits[@]} patches"
from=${BISECT_FROM:-1}   # resume an interrupted run at patch N
n=0
for c in "${commits[@]}"; do
    n=$((n + 1))
    subject=$(git -C "$src" log -1 --format=%s "$c")
    if [ "$n" -lt "$from" ]; then
        echo "check-bisect: [$n/${#commits[@]}] $subject: skipped (BISECT_FROM=$from)"
        continue
    fi
    echo "check-bisect: [$n/${#commits[@]}] $subject"
    git -C "$src" checkout -q "$c"
    if ! "$top/scripts/build.sh" bisect "$src" >"$tmp/build.log" 2>&1 ||
       ! ninja -C "$out" -j "$jobs" >>"$tmp/build.log" 2>&1; then
        tail -n 30 "$tmp/build.log" >&2
        echo "check-bisect: error: patch $n ($subject) does not build" >&2
        exit 1
    fi
    if ! meson test -C "$out" --suite unit --no-rebuild \
            --num-processes "$jobs" --print-errorlogs >"$tmp/test.log" 2>&1; then
        grep -E "FAIL|ERROR|TIMEOUT" "$tmp/test.log" | tail -n 30 >&2
        echo "check-bisect: error: patch $n ($subject) fails unit tests" >&2
        exit 1
    fi
    echo "check-bisect:   builds; unit tests: $(grep -E '^Ok: ' "$tmp/test.log" | tr -s ' ')"
done
git -C "$src" checkout -q "$branch"
echo "$stamp" >"$src.stamp"
if [ "$from" -gt 1 ]; then
    echo "check-bisect: patches $from to ${#commits[@]} build and pass the unit tests (1 to $((from - 1)) skipped)"
else
    echo "check-bisect: every prefix of the series builds and passes the unit tests"
fi
