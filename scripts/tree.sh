#!/bin/bash
# tree.sh [DIR]: make a git work tree of the fork (default: tree/) to edit the
# series in: tag "base" is the pinned base, then one commit per patch.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/tree}

if [ -e "$dir" ]; then
    echo "tree: error: $dir exists. Export what you want to keep ('make export')," >&2
    echo "tree: then remove it ('rm -rf $dir') and run 'make tree' again." >&2
    exit 1
fi
"$top/scripts/apply-series.sh" "$dir"
echo "tree: $dir is ready on branch $(git -C "$dir" branch --show-current):"
git -C "$dir" log --oneline base..HEAD
echo "tree: edit and commit there, then run 'make export'."
