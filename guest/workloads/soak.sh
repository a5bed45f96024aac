# The soak (tests/guest/soak.py, docs/guest-tests.md#soak).  Four virtio-blk
# disks, found by their serials: soak-threads, soak-native, soak-uring (the
# host unplugs it and plugs it back after every round) and soak-err (the
# host switches it to blkdebug errors and back; werror/rerror=stop keep
# them from the guest).  Each disk has two regions of 2*MB MiB and, past
# them, a header sector: the last round that completed on the disk and the
# region it wrote.  A round writes the whole of its region with data of
# its own (seed_of: fio randseed per round and disk).  Every boot first
# verifies (fio --verify_only), on every disk, what its header names;
# then, until the host's clock passes SOAK_END, it runs rounds: the verify
# workload on all disks at once, each in the region its header does not
# name, then the new headers, then the unplug of soak-uring and a
# verification of its data once it is back.
# After the last round, every disk's last round is verified once more.
# A reset at any point loses nothing: the next boot verifies the data of
# the last round that completed.  While fio runs, a ticker prints every
# second how many requests each disk has completed and has in flight: the
# host's measure of progress (and of a hang).
TAGS="threads native uring err"
HDR=$((4 * MB * 2048))     # the header sector, past both regions

# find_disk TAG: dev= the node of the disk with serial soak-TAG, or empty.
find_disk() {
    dev=
    for s in /sys/block/vd*/serial; do
        if [ -r "$s" ] && [ "$(cat "$s")" = "soak-$1" ]; then
            dev=${s%/serial}
            dev=/dev/${dev#/sys/block/}
        fi
    done
}

# wait_disk TAG [SECONDS]: wait until soak-TAG's disk is there (dev=).
wait_disk() {
    n=0
    find_disk "$1"
    while [ -z "$dev" ]; do
        n=$((n + 1)); [ $n -le $((${2:-10} * 10)) ] || fail "no disk soak-$1"
        usleep 100000
        find_disk "$1"
    done
    wait_dev "$dev"
}

engine_of() {
    case $1 in threads|uring) echo io_uring ;; *) echo libaio ;; esac
}

# state TAG: set ROUND and REGION from the disk's state file.
state() {
    read -r ROUND REGION < "/tmp/state-$1"
}

# read_header TAG: the state file from the disk's header; "0 1" (nothing
# to verify, the next round writes region 0) if it has none.
read_header() {
    wait_disk "$1"
    h=$(dd if="$dev" bs=512 skip=$HDR count=1 2>/dev/null | tr -d '\000')
    case $h in
        "IOBATCH-SOAK "*) echo "${h#IOBATCH-SOAK }" > "/tmp/state-$1" ;;
        *) echo "0 1" > "/tmp/state-$1" ;;
    esac
}

# write_header TAG ROUND REGION: the header and the state file; the
# fsync flushes the round's data too.
write_header() {
    wait_disk "$1"
    printf 'IOBATCH-SOAK %s %s\n' "$2" "$3" |
        dd of="$dev" bs=512 seek=$HDR conv=sync,fsync 2>/dev/null || fail "header of soak-$1"
    echo "$2 $3" > "/tmp/state-$1"
}

# seed_of TAG ROUND: the fio randseed of ROUND's data on the disk: unique
# to the round and the disk, and the same after a reset (the header names
# the round), so that a lost write leaves data that does not verify.
seed_of() {
    case $1 in threads) i=0 ;; native) i=1 ;; uring) i=2 ;; *) i=3 ;; esac
    echo $(($2 * 64 + i + 1))
}

# job TAG KIND ROUND REGION: start fio on the disk's REGION in the
# background; KIND verify writes the whole of it with ROUND's data and
# verifies it, verifyonly-* verifies that it holds what round ROUND wrote.
job() {
    wait_disk "$1"
    name=$2-r$3-$1
    case $2 in verifyonly-*) opt=--verify_only mode=verify ;; *) opt='' mode=write ;; esac
    verify_fio "/tmp/$name.fio" "$dev" "$(engine_of "$1")" "$MB" $(($4 * 2 * MB)) \
        "$(seed_of "$1" "$3")" $mode
    (
        rc=0
        fio --eta=never --output-format=json --output="/tmp/$name.json" \
            $opt "/tmp/$name.fio" || rc=$?
        echo $rc > "/tmp/$name.rc"
    ) &
    pids="$pids $!"
    busy="$busy $1=${dev#/dev/}"
    echo "$name" >> /tmp/jobs
}

# collect: wait for the jobs (ticking meanwhile), print their results
# (fail on the first that failed), and forget them.
collect() {
    if [ -n "$pids" ]; then
        ticker $busy &
        tick=$!
        wait $pids
        kill $tick
        wait $tick || true
        pids= busy=
    fi
    for name in $(cat /tmp/jobs); do
        fio_show "$name" "$(cat "/tmp/$name.rc")"
        rm -f "/tmp/$name.json" "/tmp/$name.rc" "/tmp/$name.fio"
    done
    : > /tmp/jobs
}

: > /tmp/jobs
pids= busy=
for t in $TAGS; do
    read_header $t
done
mark "soak-boot clock=$(date +%s) end=$SOAK_END uptime=$(cut -d' ' -f1 /proc/uptime)" \
    "$(for t in $TAGS; do state $t; printf ' %s=r%s/%s' $t $ROUND $REGION; done)"

round=0
for t in $TAGS; do
    state $t
    [ "$ROUND" = 0 ] || job $t verifyonly-boot $ROUND $REGION
    [ "$ROUND" -le $round ] || round=$ROUND
done
collect
mark boot-verified

while [ "$(date +%s)" -lt "$SOAK_END" ]; do
    round=$((round + 1))
    mark "round-start $round"
    for t in $TAGS; do
        state $t
        job $t verify $round $((1 - REGION))
    done
    collect
    for t in $TAGS; do
        state $t
        write_header $t $round $((1 - REGION))
    done
    mark "round-done $round"

    mark "unplug-me $round"
    n=0
    find_disk uring
    while [ -n "$dev" ]; do
        n=$((n + 1)); [ $n -le 600 ] || fail "soak-uring not unplugged"
        usleep 100000
        find_disk uring
    done
    mark "unplugged $round"
    wait_disk uring 120
    mark "replugged $round"
    state uring
    job uring verifyonly-plug $ROUND $REGION
    collect
done

for t in $TAGS; do
    state $t
    [ "$ROUND" = 0 ] || job $t verifyonly-final $ROUND $REGION
done
collect
mark "soak-done round=$round"
