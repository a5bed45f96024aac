#!/bin/bash
# fork-src.sh: bring build/src/fork up to date with lines/bookworm/patches/:
# the pinned base with the series applied.  Re-applies only when the pin or
# the series changed, so that unchanged files keep their timestamps and ninja
# rebuilds little.  The bookworm line only, so far: the trixie line has no
# fork build yet (issue 33, item 2).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
line_only bookworm "the fork build (build/fork and the builds made from build/src/fork)"
src=$LINE_BUILD/src/fork
sum=$(cd "$LINE_DIR" && cat base.pin patches/series $(sed -n 's|^\([^#[:space:]][^[:space:]]*\)$|patches/\1|p' patches/series) | sha256sum)
if [ "$(cat "$src.stamp" 2>/dev/null)" = "$sum" ] && [ -d "$src/.git" ]; then
    exit 0
fi
"$top/scripts/apply-series.sh" "$src"
echo "$sum" >"$src.stamp"
echo "fork-src: $(git -C "$src" rev-list --count base..HEAD) patches applied in $src"
