#!/bin/bash
# Shows that garbage collection keeps every block of a volume that is
# overwritten far past its drives' raw capacity. Through the NBD export of
# a 4+2 array on 8 small emulated drives (the volume at its default size:
# usable capacity less the GC reserve), fio (--ioengine=nbd) fills 80% of
# the volume with 1 MiB writes, then overwrites that 80% three times with
# random 4 KiB writes (every block once a pass, 16 in flight), each pass
# then read back whole and checked with crc32c (--verify=crc32c), and
# ends with a flush. Three passes at 80% write more than the members hold,
# so it holds only if GC relocated live data and reset zones under load:
# status --json must show victims collected, bytes moved and groups
# freed, and its live bytes must equal the 80% exactly once GC is quiet.
# The 20% never written must read back as zeroes. Then zarrayd is killed
# with SIGKILL and started again: the volume, recovered from the drives,
# must read back byte for byte as before. Prints the device bytes per
# user byte of the overwrite passes (P6's GC figure is measured by
# bench/volume.sh; nothing here is timed).
# Skips (77) only if fio, nbdinfo, nbdcopy or python3 is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need fio
need nbdinfo
need nbdcopy
need python3
T=600 # seconds any one client may take before the test calls it a stall

cd "$SCRATCH" # fio writes its verify state files to the working directory
"$ZARRAY" emu create --size 96M --zone-size 4M d{0..7}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
NBD="$RUN/t.nbd"
URI="nbd+unix:///t?socket=$NBD"
timeout 60 nbdinfo --json "$URI" >info.json 2>&1 || fail "nbdinfo: $(cat info.json)"
SIZE=$(python3 -c "import json; print(json.load(open('info.json'))['exports'][0]['export-size'])")
RAW=$((8 * 96 * 1024 * 1024))
# 80% of the volume, in whole MiB.
FILL=$((SIZE * 8 / 10 / 1048576 * 1048576))
# The fill and three passes, with their parity (6/4), must not fit the
# raw capacity, or GC would not be needed.
[ $((4 * FILL * 6 / 4)) -gt "$RAW" ] ||
	fail "four writes of $FILL bytes on 4+2 would fit the $RAW raw bytes: GC would not be needed"
echo "# volume $SIZE bytes on $RAW raw; filling $FILL bytes (80%)"

# dev_written: what the members have written so far, in bytes.
dev_written() {
	json "sum(m['written_bytes'] for m in d['members'])"
}

run() {
	timeout "$T" "$@" || fail "$1 exited $? (after $T s at most): $(tail -n 20 fio.out 2>/dev/null)"
}
run fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M \
	--size="$FILL" --iodepth=8 \
	--output=fio.out
grep -q "err= 0" fio.out || fail "fio fill: $(grep -m1 'err=' fio.out)"
pass "fio: $FILL bytes written with 1 MiB writes"

d0=$(dev_written)
u0=$(json "d['volume']['written_bytes']")
r0=$(json "d['volume']['read_bytes']")
run fio --name=overwrite --ioengine=nbd --uri="$URI" --rw=randwrite \
	--bs=4k --size="$FILL" --loops=3 --iodepth=16 --verify=crc32c \
	--verify_fatal=1 --end_fsync=1 --output=fio.out
grep -q "err= 0" fio.out || fail "fio overwrite: $(grep -m1 'err=' fio.out)"
! grep -qi "verify.*fail\|bad magic\|crc32c.*mismatch" fio.out ||
	fail "fio verify: $(grep -i -m3 'verify\|crc32c' fio.out)"
d1=$(dev_written)
u1=$(json "d['volume']['written_bytes']")
r1=$(json "d['volume']['read_bytes']")
# Each pass's verify read it all back: the volume says so, not just fio.
[ $((r1 - r0)) -ge $((3 * FILL)) ] ||
	fail "fio's verify read $((r1 - r0)) bytes, not the $((3 * FILL)) of three passes"
[ $((u1 - u0)) -ge $((3 * FILL)) ] ||
	fail "the overwrites wrote $((u1 - u0)) bytes, not $((3 * FILL))"
pass "fio: $FILL bytes overwritten three times by random 4 KiB writes, each pass verified (crc32c)"

# GC ran, and its live counters are exact once it is quiet: not active,
# and the same in two polls.
QUIET="(d['volume']['gc']['active'], d['volume']['gc']['runs'], d['volume']['live_bytes'])"
for i in $(seq 100); do
	a=$(json "$QUIET")
	sleep 0.2
	[ "$a" = "$(json "$QUIET")" ] && [ "$(json "d['volume']['gc']['active']")" = False ] && break
done
gc=$(json "d['volume']['gc']")
[ "$(json "all(d['volume']['gc'][f] > 0 for f in ('runs', 'moved_bytes', 'freed_groups'))")" = True ] ||
	fail "GC did not run: $gc"
live=$(json "d['volume']['live_bytes']")
[ "$live" -eq "$FILL" ] || fail "live bytes $live after GC, not the $FILL written (gc $gc)"
pass "GC: $gc; live bytes $live, exactly what was written"
python3 -c "print('# device bytes per user byte over the overwrites: %.3f' % (($d1 - $d0) / ($u1 - $u0)))"

# What was never written reads as zeroes.
timeout "$T" nbdcopy "$URI" vol.bin || fail "nbdcopy out"
python3 - vol.bin "$FILL" <<'EOF' || fail "the unwritten 20% does not read as zeroes"
import sys
with open(sys.argv[1], "rb") as f:
    f.seek(int(sys.argv[2]))
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        assert b.count(0) == len(b)
EOF
pass "the $((SIZE - FILL)) bytes never written read as zeroes"

# A crash after the final flush: everything reads back as before.
sum0=$(sha256sum <vol.bin)
stop_daemon KILL
start_daemon
for _ in $(seq 200); do
	[ -S "$NBD" ] && break
	sleep 0.05
done
[ -S "$NBD" ] || fail "no export after the restart"
rm -f vol.bin
timeout "$T" nbdcopy "$URI" vol.bin || fail "nbdcopy out after the restart"
sum1=$(sha256sum <vol.bin)
[ "$sum0" = "$sum1" ] || fail "the volume differs after SIGKILL and a restart"
pass "SIGKILL and a restart: the volume reads back identical ($(json "d['volume']['recovered_stripes']") stripes replayed)"
