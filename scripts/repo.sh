#!/bin/bash
# repo.sh [--from DIR] [--repo DIR] [--key-dir DIR] [--uri URI] [--no-setup]:
# add the packages of the fork's line LINE (scripts/line.sh; --from: default
# DEB_OUT or the line's build/deb, as 'make deb' left them) to the flat apt
# repository --repo (default REPO_DIR or /srv/qemu-iobatch/repo; trixie:
# /srv/qemu-iobatch/repo-trixie), one repository per line, its Release's
# Codename the line's; index it with apt-ftparchive (Packages, Sources,
# Release) and sign it (InRelease, Release.gpg) with the project's key in
# --key-dir (default REPO_KEY_DIR or 'signing' beside the repository: made
# once by scripts/repo-key.sh, kept, root's alone).  Packages of earlier
# builds stay in it, so apt can go back to one.
#
# It builds, and adds to the repository, qemu-iobatch-apt
# (scripts/apt-pkg.sh): the repository's deb822 source for apt at --uri
# (default REPO_URI or file:REPO) with Signed-By its public key, the pin
# and the held-back check.  Then, as root and unless --no-setup, installs
# it on this host (dpkg -i) when this host runs the line's release: this
# host's apt uses the repository.  Another host installs the same package
# (docs/install.md).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
line_packaged "make repo"
die() { echo "repo: error: $*" >&2; exit 1; }
usage() { echo "usage: repo.sh [--from DIR] [--repo DIR] [--key-dir DIR] [--uri URI] [--no-setup]" >&2; exit 2; }
WANT=("${LINE_DEB_PACKAGES[@]}")
default_repo=/srv/qemu-iobatch/repo
[ "$LINE" = "$DEFAULT_LINE" ] || default_repo+=-$LINE

from=${DEB_OUT:-$LINE_BUILD/deb} repo=${REPO_DIR:-$default_repo} setup=1
keydir=${REPO_KEY_DIR:-} uri=${REPO_URI:-}
while [ $# -gt 0 ]; do
    case $1 in
        --from) [ $# -ge 2 ] || usage; from=$2; shift ;;
        --repo) [ $# -ge 2 ] || usage; repo=$2; shift ;;
        --key-dir) [ $# -ge 2 ] || usage; keydir=$2; shift ;;
        --uri) [ $# -ge 2 ] || usage; uri=$2; shift ;;
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

for tool in apt-ftparchive:apt-utils gpg:gnupg gpgv:gpgv dpkg-deb:dpkg; do
    command -v "${tool%%:*}" >/dev/null ||
        die "${tool%%:*} (package ${tool#*:}) is missing; run 'make deps' as root"
done

mkdir -p "$repo" 2>/dev/null ||
    die "cannot make the repository directory $repo: run as root, or choose another with REPO_DIR=DIR (--repo DIR)"
repo=$(cd "$repo" && pwd)
chmod 755 "$repo"
# One line per repository: its hosts run that Debian release.  The Release
# names it (Codename); a repository of before there were two lines, with
# packages and no Codename, is bookworm's.
if [ -f "$repo/Release" ]; then
    has=$(sed -n 's/^Codename: //p' "$repo/Release")
    [ -n "$has" ] || has=$DEFAULT_LINE
    [ "$has" = "$LINE" ] ||
        die "$repo is the $has line's repository, not LINE=$LINE's: one repository per line (REPO_DIR; docs/install.md)"
fi
keydir=$(realpath -m "${keydir:-$(dirname "$repo")/signing}")
case $keydir in "$repo"|"$repo"/*) die "the key directory $keydir is inside the repository: hosts would get the secret key" ;; esac
uri=${uri:-file:$repo}
fpr=$("$top/scripts/repo-key.sh" "$keydir") || die "no signing key (above)"
keydir=$(cd "$keydir" && pwd)
# Built afresh in a directory of its own: a rebuild must not change, through
# a hard link, the copy in the repository.
gh=$keydir/gnupg
aptdir=$(mktemp -d)
trap 'rm -rf "$aptdir"; gpgconf --homedir "$gh" --kill gpg-agent 2>/dev/null || true' EXIT
aptdeb=$("$top/scripts/apt-pkg.sh" "$uri" "$keydir/qemu-iobatch-archive-keyring.gpg" "$aptdir") ||
    die "could not build qemu-iobatch-apt (above)"

# The binaries (and their -dbgsym) and the source package, by hard link
# where they share a file system.  A version already in the repository is
# replaced only by the same file: a rebuild of one version with other
# contents would confuse every host that has it.
for f in "$from"/*.deb "$from"/*.dsc "$from"/*.debian.tar.* "$from"/*.orig.tar.* "$aptdeb"; do
    [ -e "$f" ] || continue
    dst=$repo/$(basename "$f")
    if [ -e "$dst" ] && ! cmp -s "$f" "$dst"; then
        case $f in
            *.orig.tar.*) ;;   # Debian's, the same for every build on a base
            */qemu-iobatch-apt_*) die "$dst exists with other contents: qemu-iobatch-apt was built differently at the same version (another --uri or key, or uncommitted changes to its files); commit them (its version then grows) or set IOBATCH_APT_REV above it" ;;
            *) die "$dst exists with other contents: version $version was built twice differently; commit the series change (the package revision then grows) or remove $dst" ;;
        esac
    fi
    [ -e "$dst" ] || ln "$f" "$dst" 2>/dev/null || cp "$f" "$dst"
done
find "$repo" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.dsc' -o -name '*.tar.*' \) \
    -exec chmod 644 {} +
# The public key, for a host to compare with the fingerprint before it
# installs qemu-iobatch-apt (docs/install.md).
install -m 644 "$keydir/qemu-iobatch-archive-keyring.gpg" "$repo/qemu-iobatch-archive-keyring.gpg"

cd "$repo"
apt-ftparchive packages . >Packages.tmp 2>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive packages failed"; }
apt-ftparchive sources . >Sources.tmp 2>>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive sources failed"; }
mv Packages.tmp Packages
mv Sources.tmp Sources
gzip -9nkf Packages Sources
rm -f Release
apt-ftparchive -o APT::FTPArchive::Release::Origin=qemu-iobatch \
    -o APT::FTPArchive::Release::Label=qemu-iobatch \
    -o APT::FTPArchive::Release::Codename="$LINE" \
    -o APT::FTPArchive::Release::Description="qemu-iobatch: Debian $LINE's QEMU with the I/O batching series" \
    release . >Release.tmp 2>>ftparchive.log || { cat ftparchive.log >&2; die "apt-ftparchive release failed"; }
# Signed by the project's key: InRelease (what apt reads first) and the
# detached Release.gpg, written beside and moved into place together.
for sig in "--clearsign -o InRelease.tmp" "--detach-sign --armor -o Release.gpg.tmp"; do
    # shellcheck disable=SC2086
    gpg --homedir "$gh" --batch --quiet --yes --pinentry-mode loopback --passphrase '' \
        --local-user "$fpr" --digest-algo SHA512 $sig Release.tmp ||
        die "gpg could not sign the Release file with $fpr (above)"
done
gpgv --keyring "$keydir/qemu-iobatch-archive-keyring.gpg" InRelease.tmp 2>/dev/null ||
    die "the signed InRelease does not verify with $keydir/qemu-iobatch-archive-keyring.gpg"
mv Release.tmp Release
mv Release.gpg.tmp Release.gpg
mv InRelease.tmp InRelease
chmod 644 Packages* Sources* Release Release.gpg InRelease
n=$(grep -c '^Package: ' Packages)
apt_version=$(dpkg-deb -f "$aptdeb" Version)
versions=$(awk '/^Package: qemu-system-x86$/ {p = 1} p && /^Version: / {print $2; p = 0}' Packages |
           sort -u | tr '\n' ' ')
echo "repo: $repo: $n packages; qemu-system-x86 versions: $versions"
echo "repo: signed by $fpr (key in $keydir; keep it, never copy it to a host)"

how="dpkg -i $repo/$(basename "$aptdeb")  (then apt update)"
host=$(host_release)
if [ "$setup" -eq 0 ]; then
    echo "repo: to use it on a $LINE host, as root: $how"
elif [ "$host" != "$LINE" ]; then
    echo "repo: this host runs ${host:-an unknown release}, not $LINE, so its apt is unchanged; on a $LINE host, as root: $how"
elif [ "$(id -u)" -ne 0 ]; then
    echo "repo: not root, so this host's apt is unchanged; as root: $how"
else
    dpkg -i "$repo/$(basename "$aptdeb")" >/dev/null || die "dpkg -i $(basename "$aptdeb") failed (above)"
    echo "repo: installed qemu-iobatch-apt $apt_version: this host's apt uses $uri; next: apt update"
fi
