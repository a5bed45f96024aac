# The libvirt end-to-end test (tests/libvirt.py): the verify workload on the
# disks with serial iobatch-native and iobatch-uring, then their block-layer
# counters, then wait until the host (which pauses the domain and reads
# virsh domblkstat meanwhile) writes IOBATCH-GO on the disk iobatch-ctl.
dev_of() {  # dev_of SERIAL: the /dev node of the virtio-blk disk with it
    for s in /sys/block/vd*/serial; do
        [ "$(cat "$s")" = "$1" ] && { echo "/dev/$(basename "$(dirname "$s")")"; return; }
    done
    fail "no disk with serial $1"
}
n=0
while [ ! -b /dev/vdc ]; do n=$((n + 1)); [ $n -le 100 ] || fail "fewer than 3 disks"; usleep 100000; done
native=$(dev_of iobatch-native) uring=$(dev_of iobatch-uring) ctl=$(dev_of iobatch-ctl)
mark io-start
verify_job "$native" "$ENGINE" "$MB"
verify_job "$uring" "$ENGINE" "$MB"
for d in "$native" "$uring"; do
    echo "@@STAT $(cat "/sys/block/${d#/dev/}/serial") $(cat "/sys/block/${d#/dev/}/stat")"
done
mark stats
n=0
until dd if="$ctl" bs=512 count=1 iflag=direct 2>/dev/null | grep -q IOBATCH-GO; do
    n=$((n + 1)); [ $n -le 1200 ] || fail "the host never wrote IOBATCH-GO"
    usleep 250000
done
mark go
