#!/bin/bash
# debug-build.sh: build the fork (build/src/fork) with the series' debug
# check of deferred calls (--enable-debug-defer-call: a blocking aio_poll()
# with deferred calls queued aborts) into build/dbg, with only what the
# suite "debug" of tests/run.py runs: qemu-system-x86_64, the unit tests
# and qos-test.  Few optional features, so that it builds in a few minutes.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/build/src/fork
out=$top/build/dbg
jobs=${JOBS:-$(nproc)}

die() { echo "debug-build: error: $*" >&2; exit 1; }

for tool in ninja meson; do
    command -v "$tool" >/dev/null || die "$tool not found; run 'make deps' first"
done
[ -x "$src/configure" ] || die "no fork source in $src; run 'make fork' first"

CONFIGURE_ARGS=(
    --target-list=x86_64-softmmu
    --enable-debug-defer-call
    --without-default-features
    --enable-linux-aio
    --enable-linux-io-uring
    --disable-docs
    --with-git-submodules=ignore
)
if command -v ccache >/dev/null; then
    CONFIGURE_ARGS+=(--cc="ccache cc" --cxx="ccache c++")
fi
want="$src ${CONFIGURE_ARGS[*]}"
if [ ! -f "$out/build.ninja" ] || [ "$(cat "$out/.configure-args" 2>/dev/null)" != "$want" ]; then
    rm -rf "$out"
    mkdir -p "$out"
    echo "debug-build: configuring in $out"
    (cd "$out" && "$src/configure" "${CONFIGURE_ARGS[@]}") >"$out.configure.log" 2>&1 ||
        { tail -n 30 "$out.configure.log" >&2
          die "configure failed; full log in $out.configure.log"; }
    echo "$want" >"$out/.configure-args"
fi
grep -qE '^#define CONFIG_DEBUG_DEFER_CALL( 1)?$' "$out/config-host.h" ||
    die "$out/config-host.h lacks CONFIG_DEBUG_DEFER_CALL: the check would not be built"

# The unit tests, by the paths meson knows them by
mapfile -t unit < <(cd "$out" && meson introspect --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "unit" for s in t["suite"]):
        print(os.path.relpath(t["cmd"][0]))')
[ ${#unit[@]} -gt 0 ] || die "meson lists no unit tests in $out"

echo "debug-build: building with $jobs jobs"
ninja -C "$out" -j "$jobs" qemu-system-x86_64 tests/qtest/qos-test "${unit[@]}"
"$top/scripts/firmware.sh" "$out"
