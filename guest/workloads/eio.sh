# blkdebug fails every write and reads of one sector with EIO; with
# werror/rerror=report the guest sees EIO, other reads still work.
if dd if=/dev/zero of="$DEV" bs=4k count=1 seek=100 oflag=direct 2>/tmp/err; then
    fail "write succeeded"; fi
cat /tmp/err
grep -q "Input/output error" /tmp/err || fail "write did not fail with EIO"
if dd if="$DEV" of=/dev/null bs=4k count=1 skip=$((BAD_SECTOR / 8)) iflag=direct 2>/tmp/err; then
    fail "read of the bad sector succeeded"; fi
cat /tmp/err
grep -q "Input/output error" /tmp/err || fail "read did not fail with EIO"
fio_json read-ok --name=read-ok --filename="$DEV" --direct=1 --ioengine="$ENGINE" \
    --iodepth=32 --rw=randread --bsrange=512-256k --size=16M
mark eio-ok
