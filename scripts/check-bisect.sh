#!/bin/bash
# check-bisect.sh: every prefix of the series builds and passes the unit
# tests.  Builds each commit of a fork tree in turn, incrementally, in
# build/bisect, and runs 'meson test --suite unit' there.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/build/src/bisect
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$top/scripts/apply-series.sh" "$src"
mapfile -t commits < <(git -C "$src" rev-list --reverse base..HEAD)
echo "check-bisect: ${#commits[@]} patches"
n=0
for c in "${commits[@]}"; do
    n=$((n + 1))
    subject=$(git -C "$src" log -1 --format=%s "$c")
    echo "check-bisect: [$n/${#commits[@]}] $subject"
    git -C "$src" checkout -q "$c"
    if ! "$top/scripts/build.sh" bisect "$src" >"$tmp/build.log" 2>&1 ||
       ! ninja -C "$top/build/bisect" -j "${JOBS:-$(nproc)}" >>"$tmp/build.log" 2>&1; then
        tail -n 30 "$tmp/build.log" >&2
        echo "check-bisect: error: patch $n ($subject) does not build" >&2
        exit 1
    fi
    if ! meson test -C "$top/build/bisect" --suite unit --no-rebuild \
            --num-processes "${JOBS:-$(nproc)}" --print-errorlogs >"$tmp/test.log" 2>&1; then
        grep -E "FAIL|ERROR|TIMEOUT" "$tmp/test.log" | tail -n 30 >&2
        echo "check-bisect: error: patch $n ($subject) fails unit tests" >&2
        exit 1
    fi
    echo "check-bisect:   builds, $(grep -c ' OK ' "$tmp/test.log") unit tests pass"
done
git -C "$src" checkout -q "${commits[-1]}"
echo "check-bisect: every prefix of the series builds and passes the unit tests"
