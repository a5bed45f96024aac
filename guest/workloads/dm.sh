# dm-$DM (linear or stripe) over /dev/vda and /dev/vdb, polled (io_uring
# --hipri) and verified; both disks must see I/O, neither an interrupt.
wait_dev /dev/vdb
s=$(blockdev --getsz /dev/vda)
case $DM in
    linear) table="0 $s linear /dev/vda 0
$s $s linear /dev/vdb 0" ;;
    stripe) table="0 $((2 * s)) striped 2 256 /dev/vda 0 /dev/vdb 0" ;;
    *) fail "DM=$DM" ;;
esac
echo "$table" | dmsetup create --noudevsync t || fail "dmsetup create"
dmsetup table t
wait_dev /dev/dm-0
for q in /sys/block/vda/queue/io_poll /sys/block/vdb/queue/io_poll /sys/block/dm-0/queue/io_poll; do
    [ "$(cat $q)" = 1 ] || fail "$q is not 1"
done
ios() { awk '{print $1 + $5}' /sys/block/$1/stat; }
a0=$(ios vda) b0=$(ios vdb) before=$(irq_count virtio)
HIPRI=1 FSYNC=0 verify_job /dev/dm-0 io_uring "${MB:-48}"
a1=$(ios vda) b1=$(ios vdb) after=$(irq_count virtio)
echo "@@INFO vda ios $((a1 - a0)) vdb ios $((b1 - b0)) virtio interrupts $((after - before))"
[ $((a1 - a0)) -gt 0 ] && [ $((b1 - b0)) -gt 0 ] || fail "I/O did not reach both disks"
[ "$after" -eq "$before" ] || fail "polled I/O took $((after - before)) interrupts"
dmsetup remove --noudevsync t || fail "dmsetup remove"
mark dm-ok
