#!/bin/bash
# fuzz-planted.sh: the fuzz run must not hide a crash.  Builds the fork's
# source with tests/fuzz/planted-crash.patch (a virtio-blk read of sector 0
# aborts, and so does a notify of a virtqueue that is not set up; the patch
# is never part of lines/bookworm/patches/series) into build/planted/fuzz/qemu, runs each
# fuzz target on it with scripts/fuzz.sh for FUZZ_SECONDS (default 30) from
# an empty corpus and the seeds, and checks that every target failed and
# that its log shows the planted crash.  One line per target; exit status
# 0 when every target failed as it must.  docs/fuzzing.md.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# At the same depth below build/ as build/src/fork and build/fuzz/qemu, so
# that the compiler sees the same relative paths and ccache hits for every
# file the patch does not touch.
src=$top/build/planted/src/fork
out=$top/build/planted/fuzz/qemu
run=$top/build/planted/run
patch=$top/tests/fuzz/planted-crash.patch

[ -x "$top/build/src/fork/configure" ] ||
    { echo "fuzz-planted: error: no fork source in build/src/fork; run 'make fork' first" >&2
      exit 1; }
rm -rf "$src" "$run"
mkdir -p "$(dirname "$src")"
cp -a "$top/build/src/fork" "$src"
patch -s -p1 -d "$src" <"$patch" ||
    { echo "fuzz-planted: error: $patch does not apply to the fork's source; refresh it" >&2
      exit 1; }
FUZZ_SRC=$src FUZZ_OUT=$out "$top/scripts/fuzz-build.sh"

export FUZZ_BIN=$out/qemu-fuzz-i386 FUZZ_DIR=$run FUZZ_SECONDS=${FUZZ_SECONDS:-30}
out_txt=$("$top/scripts/fuzz.sh" 2>&1) && rc=0 || rc=$?
printf '%s\n' "$out_txt" | grep '^fuzz: ' | sed 's/^/    /'
targets=$(printf '%s\n' "$out_txt" | sed -n 's/^fuzz: \(ok\|FAIL\) \([^:]*\):.*/\2/p')
[ -n "$targets" ] || { echo "fuzz-planted: FAIL: fuzz.sh ran no target (exit status $rc)"; exit 1; }
failed=0
for t in $targets; do
    if ! grep -q "^fuzz: FAIL $t:" <<<"$out_txt"; then
        echo "fuzz-planted: FAIL $t: fuzz.sh reported ok on a build that crashes"
        failed=1
    elif ! grep -q 'PLANTED CRASH' "$run/logs/$t.log"; then
        echo "fuzz-planted: FAIL $t: it failed, but not on the planted crash (log $run/logs/$t.log)"
        failed=1
    else
        echo "fuzz-planted: ok $t: failed on the planted crash: $(grep -m 1 'PLANTED CRASH' "$run/logs/$t.log")"
    fi
done
exit "$failed"
