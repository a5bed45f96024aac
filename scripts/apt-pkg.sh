#!/bin/bash
# apt-pkg.sh URI KEYRING OUTDIR: build qemu-iobatch-apt_VERSION_all.deb in
# OUTDIR with dpkg-deb, from packaging/: what a host needs to use the
# repository at URI (file:/DIR or http(s)://...) signed by the key of
# KEYRING (scripts/repo-key.sh).  VERSION is 'scripts/version.sh apt'.
#   /etc/apt/sources.list.d/qemu-iobatch.sources  deb822, Signed-By the key
#   /usr/share/keyrings/qemu-iobatch-archive-keyring.gpg
#   /etc/apt/preferences.d/qemu-iobatch.pref      the pin
#   /etc/apt/apt.conf.d/80qemu-iobatch            the check after apt update
#   /usr/sbin/qemu-iobatch-check                  the check
#   /etc/update-motd.d/90-qemu-iobatch            the check's finding at login
# The files in /etc are conffiles; purging removes the check's state
# (/var/lib/qemu-iobatch); a first install removes what the setup-apt of
# earlier repositories wrote (preinst).  The same inputs give the same bytes
# (SOURCE_DATE_EPOCH from git), so scripts/repo.sh takes it again as is.
# Prints the path of the package.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "apt-pkg: error: $*" >&2; exit 1; }
[ $# -eq 3 ] || { echo "usage: apt-pkg.sh URI KEYRING OUTDIR" >&2; exit 2; }
uri=$1 keyring=$2 out=$3
[[ $uri =~ ^(file:/|https?://)[^[:space:]]+$ ]] ||
    die "URI '$uri': want file:/DIR or http(s)://HOST/PATH, without white space"
[ -s "$keyring" ] || die "no keyring $keyring (scripts/repo-key.sh makes it)"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing; run 'make deps' as root"

version=$("$top/scripts/version.sh" apt) || die "no version for qemu-iobatch-apt (above)"
maint=$(head -n 1 "$top/packaging/maintainer")
SOURCE_DATE_EPOCH=$(git -C "$top" log -1 --format=%ct -- packaging scripts/apt-pkg.sh 2>/dev/null) ||
    SOURCE_DATE_EPOCH=
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(stat -c %Y "$top/packaging/qemu-iobatch-apt.control")}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
r=$stage/root
p=$top/packaging
install -d -m 755 "$r/DEBIAN" "$r/etc/apt/sources.list.d" "$r/etc/apt/preferences.d" \
    "$r/etc/apt/apt.conf.d" "$r/etc/update-motd.d" "$r/usr/sbin" "$r/usr/share/keyrings"
sed -e "s|@VERSION@|$version|" -e "s|@MAINTAINER@|$maint|" -e "s|@URI@|$uri|" \
    "$p/qemu-iobatch-apt.control" >"$r/DEBIAN/control"
install -m 755 "$p/qemu-iobatch-apt.postrm" "$r/DEBIAN/postrm"
install -m 755 "$p/qemu-iobatch-apt.preinst" "$r/DEBIAN/preinst"
cat >"$r/etc/apt/sources.list.d/qemu-iobatch.sources" <<EOF
# qemu-iobatch: the fork's QEMU packages (package qemu-iobatch-apt;
# docs/install.md).  Signed by the repository's own key.
Types: deb
URIs: $uri
Suites: ./
Signed-By: /usr/share/keyrings/qemu-iobatch-archive-keyring.gpg
EOF
install -m 644 "$keyring" "$r/usr/share/keyrings/qemu-iobatch-archive-keyring.gpg"
install -m 644 "$p/qemu-iobatch.pref" "$r/etc/apt/preferences.d/qemu-iobatch.pref"
install -m 644 "$p/80qemu-iobatch" "$r/etc/apt/apt.conf.d/80qemu-iobatch"
install -m 755 "$p/90-qemu-iobatch" "$r/etc/update-motd.d/90-qemu-iobatch"
install -m 755 "$p/qemu-iobatch-check" "$r/usr/sbin/qemu-iobatch-check"
chmod 644 "$r/etc/apt/sources.list.d/qemu-iobatch.sources"
(cd "$r" && find etc -type f | sort | sed 's|^|/|') >"$r/DEBIAN/conffiles"
chmod 644 "$r/DEBIAN/control" "$r/DEBIAN/conffiles"

mkdir -p "$out"
deb=$out/qemu-iobatch-apt_${version}_all.deb
dpkg-deb --root-owner-group -Zxz --build "$r" "$deb" >/dev/null ||
    die "dpkg-deb --build failed (above)"
echo "$deb"
