# Boot 1: write and flush a verified region, write a magic sector, then keep
# writing elsewhere until the harness resets the machine.  Boot 2 (the magic
# is there): verify the region written before the reset.
magic_sector=$((96 * 2048))
cat > /tmp/p1.fio <<JOB
[phase1]
filename=$DEV
direct=1
ioengine=$ENGINE
iodepth=16
rw=randwrite
bsrange=512-256k
verify=crc32c
verify_fatal=1
size=32M
end_fsync=1
JOB
if dd if="$DEV" bs=512 skip=$magic_sector count=1 2>/dev/null | grep -q IOBATCH-PHASE1; then
    mark phase2-boot
    fio_json phase1-verify --verify_only /tmp/p1.fio
    mark phase1-verified
else
    fio_json phase1 /tmp/p1.fio
    echo IOBATCH-PHASE1 | dd of="$DEV" bs=512 seek=$magic_sector conv=sync,fsync 2>/dev/null
    mark phase1-done
    mark phase2-running
    fio --eta=never --name=phase2 --filename="$DEV" --direct=1 --ioengine="$ENGINE" --iodepth=32 \
        --rw=randwrite --bs=4k --offset=64M --size=16M --time_based --runtime=600 \
        --output=/dev/null
    fail "phase 2 ended without a reset"
fi
