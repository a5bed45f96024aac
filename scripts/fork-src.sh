#!/bin/bash
# fork-src.sh: bring the line's fork source (LINE_BUILD/src/fork:
# build/src/fork for bookworm, build/trixie/src/fork for trixie) up to date
# with lines/LINE/patches/: the pinned base with the series applied.
# Re-applies only when the pin or the series changed, so that unchanged
# files keep their timestamps and ninja rebuilds little.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
src=$LINE_BUILD/src/fork
sum=$(cd "$LINE_DIR" && cat base.pin patches/series $(sed -n 's|^\([^#[:space:]][^[:space:]]*\)$|patches/\1|p' patches/series) | sha256sum)
if [ "$(cat "$src.stamp" 2>/dev/null)" = "$sum" ] && [ -d "$src/.git" ]; then
    exit 0
fi
"$top/scripts/apply-series.sh" "$src"
echo "$sum" >"$src.stamp"
echo "fork-src: $(git -C "$src" rev-list --count base..HEAD) patches applied in $src"
