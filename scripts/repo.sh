#!/bin/bash
# repo.sh [--from DIR] [--repo DIR] [--no-setup]: add the fork's packages
# (DIR: default DEB_OUT or build/deb, as 'make deb' left them) to a flat
# local apt repository (default REPO or build/repo) and index it with
# apt-ftparchive (apt-utils, installed when missing): Packages, Sources and
# Release.  Packages of earlier builds stay in it, so apt can go back to one.
# Copies beside them what a host needs to use it: setup-apt, the pin
# qemu-iobatch.pref, the apt hook 80qemu-iobatch and qemu-iobatch-check
# (packaging/).  Then, as root and unless --no-setup, runs setup-apt: this
# host's apt uses the repository.  Another host copies the directory and
# runs its setup-apt (docs/install.md).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "repo: error: $*" >&2; exit 1; }
usage() { echo "usage: repo.sh [--from DIR] [--repo DIR] [--no-setup]" >&2; exit 2; }
WANT=(qemu-system-x86 qemu-system-common qemu-system-gui qemu-block-extra qemu-utils)

from=${DEB_OUT:-$top/build/deb} repo=${REPO:-$top/build/repo} setup=1
while [ $# -gt 0 ]; do
    case $1 in
        --from) [ $# -ge 2 ] || usage; from=$2; shift ;;
        --repo) [ $# -ge 2 ] || usage; repo=$2; shift ;;
        --no-setup) setup=0 ;;
        *) usage ;;
    esac
    shift
done
[ -d "$from" ] || die "no $from: run 'make deb' first"
[ -n "$(cat "$from/build-time.txt" 2>/dev/null)" ] ||
    die "$from has no finished build (build-time.txt): run 'make deb' first"
version=
for p in "${WANT[@]}"; do
    f=$(ls "$from/${p}_"*.deb 2>/dev/null) || die "$from has no $p package: run 'make deb' first"
    [ "$(wc -l <<<"$f")" -eq 1 ] || die "$from has more than one $p package: run 'make deb' again"
    v=$(dpkg-deb -f "$f" Version)
    [ -z "$version" ] || [ "$v" = "$version" ] || die "$from mixes versions $version and $v"
    version=$v
done

if ! command -v apt-ftparchive >/dev/null; then
    [ "$(id -u)" -eq 0 ] || die "apt-ftparchive (package apt-utils) is missing; as root: apt-get install apt-utils"
    echo "repo: installing apt-utils (apt-ftparchive)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends apt-utils >/dev/null ||
        die "apt-get install apt-utils failed (see above)"
fi

mkdir -p "$repo"
repo=$(cd "$repo" && pwd)
chmod 755 "$repo"
# The binaries (and their -dbgsym) and the source package, by hard link
# where they share a file system.  A version already in the repository is
# replaced only by the same file: a rebuild of one version with other
# contents would confuse every host that has it.
for f in "$from"/*.deb "$from"/*.dsc "$from"/*.debian.tar.* "$from"/*.orig.tar.*; do
    [ -e "$f" ] || continue
    dst=$repo/$(basename "$f")
    if [ -e "$dst" ] && ! cmp -s "$f" "$dst"; then
        case $f in
            *.orig.tar.*) ;;   # Debian's, the same for every build on a base
            *) die "$dst exists with other contents: version $version was built twice differently; commit the series change (the package revision then grows) or remove $dst" ;;
        esac
    fi
    [ -e "$dst" ] || ln "$f" "$dst" 2>/dev/null || cp "$f" "$dst"
done
find "$repo" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.dsc' -o -name '*.tar.*' \) \
    -exec chmod 644 {} +
for f in qemu-iobatch.pref 80qemu-iobatch qemu-iobatch-check setup-apt; do
    install -m "$([ -x "$top/packaging/$f" ] && echo 755 || echo 644)" "$top/packaging/$f" "$repo/$f"
done

cd "$repo"
apt-ftparchive packages . >Packages.tmp 2>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive packages failed"; }
apt-ftparchive sources . >Sources.tmp 2>>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive sources failed"; }
mv Packages.tmp Packages
mv Sources.tmp Sources
gzip -9nkf Packages Sources
rm -f Release
apt-ftparchive -o APT::FTPArchive::Release::Origin=qemu-iobatch \
    -o APT::FTPArchive::Release::Label=qemu-iobatch \
    -o APT::FTPArchive::Release::Description="qemu-iobatch: Debian's QEMU with the I/O batching series" \
    release . >Release.tmp 2>>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive release failed"; }
mv Release.tmp Release
chmod 644 Packages* Sources* Release
n=$(grep -c '^Package: ' Packages)
versions=$(awk '/^Package: qemu-system-x86$/ {p = 1} p && /^Version: / {print $2; p = 0}' Packages |
           sort -u | tr '\n' ' ')
echo "repo: $repo: $n packages; qemu-system-x86 versions: $versions"

if [ "$setup" -eq 0 ]; then
    echo "repo: to use it on a host, as root: $repo/setup-apt  (then apt update)"
elif [ "$(id -u)" -ne 0 ]; then
    echo "repo: not root, so this host's apt is unchanged; as root: $repo/setup-apt"
else
    "$repo/setup-apt"
fi
