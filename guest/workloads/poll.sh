# Polled I/O (io_uring --hipri) on $DEV: the disk's queues take no interrupt
# while it runs; verified.
q=/sys/block/${DEV#/dev/}/queue/io_poll
[ "$(cat "$q")" = 1 ] || fail "$q is not 1"
grep virtio /proc/interrupts
before=$(irq_count virtio)
HIPRI=1 FSYNC=0 verify_job "$DEV" io_uring "${MB:-16}"
after=$(irq_count virtio)
grep virtio /proc/interrupts
echo "@@INFO virtio interrupts before=$before after=$after"
[ "$after" -eq "$before" ] || fail "polled I/O took $((after - before)) interrupts"
mark poll-ok
