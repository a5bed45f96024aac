# I/O on $DEV, then wait for the harness to unplug it and plug it back;
# data written before the unplug verifies after it, and new I/O (data of
# its own, VSEED 2: a lost write would leave the first pass's) verifies.
wait_dev "$DEV"
VSEED=1 verify_job "$DEV" "$ENGINE" "${MB:-8}"
mark unplug-me
n=0
while [ -b "$DEV" ]; do n=$((n + 1)); [ $n -le 600 ] || fail "$DEV not unplugged"; usleep 100000; done
mark unplugged
wait_dev "$DEV" 60
mark replugged
VSEED=1 verify_job "$DEV" "$ENGINE" "${MB:-8}" --verify_only
VSEED=2 verify_job "$DEV" "$ENGINE" "${MB:-8}"
mark hotplug-ok
