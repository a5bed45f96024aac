#!/bin/bash
# tree.sh [DIR]: make a git work tree of the fork's line LINE
# (scripts/line.sh; default DIR: tree/ for bookworm, tree-LINE/ for another
# line) to edit the series in: tag "base" is the pinned base, then one
# commit per patch.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
dir=${1:-$LINE_TREE}

if [ -e "$dir" ]; then
    echo "tree: error: $dir exists. Export what you want to keep ('make export$LINE_MAKE')," >&2
    echo "tree: then remove it ('rm -rf $dir') and run 'make tree$LINE_MAKE' again." >&2
    exit 1
fi
"$top/scripts/apply-series.sh" "$dir"
echo "tree: $dir ($LINE line) is ready on branch $(git -C "$dir" branch --show-current):"
git -C "$dir" log --oneline base..HEAD
echo "tree: edit and commit there, then run 'make export$LINE_MAKE'."
