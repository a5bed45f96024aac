#!/bin/bash
# repo-key.sh KEYDIR: the key that signs the qemu-iobatch apt repository.
# Made once, the first time, and kept: KEYDIR (mode 700, its owner's alone;
# default /srv/qemu-iobatch/signing beside the repository) holds gpg's home
# gnupg/ with the secret key (no passphrase: make repo signs unattended;
# the directory's mode protects it), its fingerprint in fingerprint, and the
# public key, for apt's Signed-By, in qemu-iobatch-archive-keyring.gpg.
# Never put KEYDIR in the repository or in git.  Prints the fingerprint.
set -euo pipefail

die() { echo "repo-key: error: $*" >&2; exit 1; }
[ $# -eq 1 ] || { echo "usage: repo-key.sh KEYDIR" >&2; exit 2; }
command -v gpg >/dev/null || die "gpg is missing (package gnupg); run 'make deps' as root"
keydir=$1
gh=$keydir/gnupg
keyring=$keydir/qemu-iobatch-archive-keyring.gpg

mkdir -p "$keydir"
chmod 700 "$keydir"
[ "$(stat -c %u "$keydir")" = "$(id -u)" ] ||
    die "$keydir belongs to another user: it must be the signer's alone"
mkdir -p "$gh"
chmod 700 "$gh"
gpg_() { gpg --homedir "$gh" --batch --quiet "$@"; }

if [ ! -s "$keydir/fingerprint" ]; then
    [ -z "$(gpg_ --list-secret-keys --with-colons 2>/dev/null)" ] ||
        die "$gh has secret keys but $keydir/fingerprint is missing: write the signing key's fingerprint there"
    echo "repo-key: generating the repository's signing key in $keydir (once)" >&2
    gpg_ --passphrase '' --pinentry-mode loopback --quick-generate-key \
        "qemu-iobatch apt repository on $(hostname -f 2>/dev/null || hostname)" ed25519 sign never ||
        die "gpg could not generate a key in $gh (above)"
    gpg_ --list-secret-keys --with-colons | awk -F: '/^fpr:/ {print $10; exit}' \
        >"$keydir/fingerprint.tmp"
    mv "$keydir/fingerprint.tmp" "$keydir/fingerprint"
fi
fpr=$(cat "$keydir/fingerprint")
[[ $fpr =~ ^[0-9A-F]{40}$ ]] || die "$keydir/fingerprint: '$fpr' is not a key fingerprint"
gpg_ --list-secret-keys "$fpr" >/dev/null 2>&1 ||
    die "$gh has no secret key $fpr (of $keydir/fingerprint): restore $keydir from its backup"
gpg_ --export "$fpr" >"$keyring.tmp"
[ -s "$keyring.tmp" ] || die "gpg exported no public key for $fpr"
chmod 644 "$keyring.tmp"
mv "$keyring.tmp" "$keyring"
echo "$fpr"
