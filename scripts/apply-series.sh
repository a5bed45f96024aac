#!/bin/bash
# apply-series.sh DIR: make DIR a git tree of the fork's line LINE
# (scripts/line.sh): the line's pinned base as tag "base", then one commit
# per patch of lines/LINE/patches/series.  Each group of patches
# (scripts/groups.sh) ends at a branch of that name; the last group's branch
# is checked out.  DIR must not exist, or be a git tree (it is reset).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/groups.sh"
dir=${1:?usage: apply-series.sh DIR}

die() { echo "apply-series: error: $*" >&2; exit 1; }

"$top/scripts/fetch-base.sh"
check_series || die "fix $LINE_REL/patches/series"
base=$LINE_BUILD/src/base
if [ ! -d "$dir/.git" ]; then
    [ ! -e "$dir" ] || die "$dir exists and is not a git tree"
    git clone -q --no-checkout "$base" "$dir"
fi
git -C "$dir" fetch -q --force "$base" tag base
git -C "$dir" checkout -q -f --detach base
git -C "$dir" clean -q -fdx
git -C "$dir" config rebase.updateRefs true

export GIT_COMMITTER_NAME="qemu-iobatch" GIT_COMMITTER_EMAIL="qemu-iobatch@localhost"
for g in "${PATCH_GROUPS[@]}"; do
    while read -r p; do
        git -C "$dir" am -q --committer-date-is-author-date "$LINE_PATCHES/$p" ||
            { git -C "$dir" am --abort || true
              die "$LINE_REL/patches/$p does not apply on the patches before it"; }
    done < <(series_in "$g")
    git -C "$dir" branch -f "$g" HEAD
done
git -C "$dir" checkout -q "${PATCH_GROUPS[-1]}"
