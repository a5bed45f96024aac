# The libvirt end-to-end test (tests/libvirt.py): the verify workload on the
# disks with serial iobatch-native and iobatch-uring.  Before and after it,
# their block-layer counters (@@STAT0, @@STAT1); after each, wait until the
# host has read virsh domblkstat and writes IOBATCH-GO1 (then -GO2) on the
# disk iobatch-ctl.
dev_of() {  # dev_of SERIAL: the /dev node of the virtio-blk disk with it
    for s in /sys/block/vd*/serial; do
        [ "$(cat "$s")" = "$1" ] && { echo "/dev/$(basename "$(dirname "$s")")"; return; }
    done
    fail "no disk with serial $1"
}
stats() {  # stats N: print @@STATN SERIAL <the 17 fields of /sys/block/vdX/stat>
    for d in "$native" "$uring"; do
        echo "@@STAT$1 $(cat "/sys/block/${d#/dev/}/serial") $(cat "/sys/block/${d#/dev/}/stat")"
    done
    mark "stats$1"
}
wait_go() {  # wait_go N: until the control disk says IOBATCH-GON
    n=0
    until dd if="$ctl" bs=512 count=1 iflag=direct 2>/dev/null | grep -q "IOBATCH-GO$1"; do
        n=$((n + 1)); [ $n -le 1200 ] || fail "the host never wrote IOBATCH-GO$1"
        usleep 250000
    done
}
n=0
while [ ! -b /dev/vdc ]; do n=$((n + 1)); [ $n -le 100 ] || fail "fewer than 3 disks"; usleep 100000; done
native=$(dev_of iobatch-native) uring=$(dev_of iobatch-uring) ctl=$(dev_of iobatch-ctl)
echo "@@DISK iobatch-native $native iobatch-uring $uring iobatch-ctl $ctl"
stats 0
wait_go 1
mark io-start
VSEED=1 verify_job "$native" "$ENGINE" "$MB"
VSEED=2 verify_job "$uring" "$ENGINE" "$MB"
stats 1
wait_go 2
mark go
