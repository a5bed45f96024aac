#!/bin/bash
# check-patches.sh: the series of the line LINE (scripts/line.sh) applies to
# its pinned base, every patch passes the base's own scripts/checkpatch.pl,
# and every patch is signed off.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/groups.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$top/scripts/apply-series.sh" "$tmp/tree"
echo "check-patches: the $LINE series applies to the pinned base"

bad=0 n=0
for grp in "${PATCH_GROUPS[@]}"; do
    while read -r p; do
        n=$((n + 1))
        f=$LINE_PATCHES/$p
        # The Signed-off-by must be in the commit message, above the "---".
        if ! sed '/^---$/q' "$f" | grep -q '^Signed-off-by: .\+ <.\+@.\+>$'; then
            echo "check-patches: $p: no Signed-off-by" >&2
            bad=$((bad + 1))
        fi
        if ! (cd "$LINE_BUILD/src/base" && perl scripts/checkpatch.pl -q "$f") >"$tmp/out" 2>&1; then
            echo "check-patches: $p: checkpatch.pl reports errors:" >&2
            cat "$tmp/out" >&2
            bad=$((bad + 1))
        elif [ -s "$tmp/out" ]; then
            echo "check-patches: $p: checkpatch.pl warnings:"
            cat "$tmp/out"
        fi
    done < <(series_in "$grp")
done
if [ "$bad" -ne 0 ]; then
    echo "check-patches: $bad problem(s) in $n patches" >&2
    exit 1
fi
echo "check-patches: $n patches pass checkpatch.pl and are signed off"
