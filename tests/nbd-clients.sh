#!/bin/bash
# Shows that real NBD clients from Debian work against the NBD server
# (src/nbd.c), served over RAM by tests/za-nbd-mem (which completes every
# request asynchronously and replies out of order):
#  - nbdinfo --json reports the size, the block sizes (minimum 4096) and
#    the flags (flush, FUA, trim, zero, multi-conn);
#  - nbdcopy round-trips 64 MiB of random data, one connection one way and
#    four connections at once the other way, compared with cmp;
#  - qemu-io pattern writes, zero writes, discards and flushes read back;
#  - fio --ioengine=nbd random 4 KiB and 64 KiB writes, 2 jobs at iodepth
#    8 on disjoint ranges, verified with crc32c, end with no error;
#  - fio verifies through a server with random completion latency;
#  - the same export over TCP on loopback;
#  - the server exits 0 on SIGTERM and removes its socket.
# Skips (77) only if one of the client tools is not installed.
. "$(dirname "$0")/lib.sh"
need nbdinfo
need nbdcopy
need qemu-io
need fio
need python3

ZA_NBD_MEM="$top_builddir/tests/za-nbd-mem"
SOCK="$SCRATCH/mem.sock"
MiB=$((1024 * 1024))
SIZE=$((128 * MiB))
SRV=
LAT=

stop_servers() {
	local p
	for p in $SRV $LAT; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	SRV=
	LAT=
}
trap 'stop_servers; rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH" # fio writes its verify state files to the working directory

"$ZA_NBD_MEM" --size "$SIZE" --unix "$SOCK" --tcp 0 \
	>"$SCRATCH/server.out" 2>"$SCRATCH/server.err" &
SRV=$!
for _ in $(seq 100); do
	grep -q '^ready$' "$SCRATCH/server.out" 2>/dev/null && break
	kill -0 "$SRV" 2>/dev/null || fail "za-nbd-mem died: $(cat "$SCRATCH/server.err")"
	sleep 0.1
done
grep -q '^ready$' "$SCRATCH/server.out" || fail "za-nbd-mem not ready after 10 s"
PORT=$(awk '/^tcp-port / { print $2 }' "$SCRATCH/server.out")
[ -n "$PORT" ] || fail "no TCP port printed"
URI="nbd+unix:///mem?socket=$SOCK"
TCP_URI="nbd://127.0.0.1:$PORT/mem"

# ---- nbdinfo: size, block sizes, flags ----
check_info() {
	python3 - "$1" "$SIZE" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
e = info["exports"][0]
want = {
    "export-name": "mem",
    "export-size": int(sys.argv[2]),
    "block_size_minimum": 4096,
    "block_size_maximum": 32 * 1024 * 1024,
    "can_flush": True, "can_fua": True, "can_trim": True,
    "can_zero": True, "can_multi_conn": True, "is_read_only": False,
}
bad = ["%s=%r (want %r)" % (k, e.get(k), v) for k, v in want.items()
       if e.get(k) != v]
if e.get("block_size_preferred", 0) < 4096:
    bad.append("block_size_preferred=%r" % e.get("block_size_preferred"))
if info.get("structured"):
    bad.append("structured replies negotiated")
if bad:
    sys.exit("nbdinfo: " + ", ".join(bad))
EOF
}
nbdinfo --json "$URI" >"$SCRATCH/info.json" || fail "nbdinfo --json failed"
check_info "$SCRATCH/info.json" || fail "nbdinfo: $(cat "$SCRATCH/info.json")"
pass "nbdinfo --json: size $SIZE, block sizes 4096/4096+/32M, all flags"
# the default export "" is the same export
nbdinfo --size "nbd+unix:///?socket=$SOCK" >"$SCRATCH/size" ||
	fail "nbdinfo on the default export failed"
[ "$(cat "$SCRATCH/size")" = "$SIZE" ] || fail "default export size $(cat "$SCRATCH/size")"
if nbdinfo --size "nbd+unix:///nope?socket=$SOCK" >/dev/null 2>"$SCRATCH/err"; then
	fail "nbdinfo accepted an unknown export"
fi
pass "default export '' maps to it; an unknown name is refused"

# ---- nbdcopy round trip, 1 and 4 connections ----
head -c $((64 * MiB)) /dev/urandom >"$SCRATCH/in.bin"
nbdcopy --connections=1 "$SCRATCH/in.bin" "$URI" || fail "nbdcopy to the export failed"
nbdcopy --connections=4 --requests=16 "$URI" "$SCRATCH/out.bin" ||
	fail "nbdcopy from the export failed"
[ "$(stat -c %s "$SCRATCH/out.bin")" -eq "$SIZE" ] || fail "nbdcopy read back $(stat -c %s "$SCRATCH/out.bin") bytes"
cmp -n $((64 * MiB)) "$SCRATCH/in.bin" "$SCRATCH/out.bin" || fail "nbdcopy round trip differs"
cmp -n $((64 * MiB)) -i 0:$((64 * MiB)) /dev/zero "$SCRATCH/out.bin" ||
	fail "bytes past the copy are not zero"
# and the other way round: 4 connections writing, 1 reading
nbdcopy --connections=4 --requests=16 "$SCRATCH/in.bin" "$URI" || fail "nbdcopy x4 to the export failed"
nbdcopy --connections=1 "$URI" "$SCRATCH/out.bin" || fail "nbdcopy x1 from the export failed"
cmp -n $((64 * MiB)) "$SCRATCH/in.bin" "$SCRATCH/out.bin" || fail "nbdcopy x4 round trip differs"
rm -f "$SCRATCH/in.bin" "$SCRATCH/out.bin"
pass "nbdcopy: 64 MiB of random data round-trips over 1 and 4 connections"

# ---- qemu-io patterns ----
qemu-io -f raw \
	-c 'write -P 0xab 0 1M' -c 'read -P 0xab 0 1M' \
	-c 'aio_write -P 0x5a 1M 64k' -c 'aio_write -P 0xa5 2M 4k' -c 'aio_flush' \
	-c 'read -P 0x5a 1M 64k' -c 'read -P 0xa5 2M 4k' \
	-c 'write -z 4M 1M' -c 'read -P 0 4M 1M' \
	-c 'discard 8M 1M' -c 'flush' \
	-c 'write -f -P 0x33 12M 8k' -c 'read -P 0x33 12M 8k' \
	"$URI" >"$SCRATCH/qemu-io.out" 2>&1 || fail "qemu-io: $(cat "$SCRATCH/qemu-io.out")"
! grep -qi 'fail\|error' "$SCRATCH/qemu-io.out" || fail "qemu-io: $(cat "$SCRATCH/qemu-io.out")"
pass "qemu-io: pattern, zero, FUA writes and discards read back"

# ---- fio with crc32c verification ----
run_fio() {
	local bs=$1 region=$2
	fio --name="w$bs" --ioengine=nbd --uri="$URI" --rw=randwrite --bs="$bs" \
		--size="$region" --offset=64M --offset_increment="$region" \
		--numjobs=2 --iodepth=8 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --group_reporting >"$SCRATCH/fio-$bs.out" 2>&1 ||
		fail "fio bs=$bs: $(tail -n 20 "$SCRATCH/fio-$bs.out")"
	grep -q 'err= 0' "$SCRATCH/fio-$bs.out" || fail "fio bs=$bs: $(cat "$SCRATCH/fio-$bs.out")"
	# the verification pass read everything back
	grep -q 'READ:.*io=' "$SCRATCH/fio-$bs.out" || fail "fio bs=$bs did not verify"
	! grep -qi 'verify.*fail\|bad magic\|crc32c.*mismatch' "$SCRATCH/fio-$bs.out" ||
		fail "fio bs=$bs: $(cat "$SCRATCH/fio-$bs.out")"
}
run_fio 4k 8M
run_fio 64k 24M
pass "fio: random 4k and 64k writes, 2 jobs x iodepth 8, crc32c verified"

# ---- TCP on loopback ----
[ "$(nbdinfo --size "$TCP_URI")" = "$SIZE" ] || fail "nbdinfo over TCP"
qemu-io -f raw -c 'read -P 0xab 0 1M' -c 'write -P 0x77 16M 256k' \
	-c 'read -P 0x77 16M 256k' "$TCP_URI" >"$SCRATCH/qemu-io.out" 2>&1 ||
	fail "qemu-io over TCP: $(cat "$SCRATCH/qemu-io.out")"
pass "TCP on 127.0.0.1:$PORT serves the same export"

# ---- random completion latency: replies leave in a shuffled order ----
SOCK2="$SCRATCH/lat.sock"
"$ZA_NBD_MEM" --size $((32 * MiB)) --unix "$SOCK2" --latency-us 300 \
	>"$SCRATCH/lat.out" 2>"$SCRATCH/lat.err" &
LAT=$!
for _ in $(seq 100); do
	grep -q '^ready$' "$SCRATCH/lat.out" 2>/dev/null && break
	sleep 0.1
done
fio --name=lat --ioengine=nbd --uri="nbd+unix:///mem?socket=$SOCK2" \
	--rw=randwrite --bs=4k --size=4M --offset_increment=4M --numjobs=2 \
	--iodepth=16 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--group_reporting >"$SCRATCH/fio-lat.out" 2>&1 ||
	fail "fio with latency: $(tail -n 20 "$SCRATCH/fio-lat.out")"
grep -q 'err= 0' "$SCRATCH/fio-lat.out" || fail "fio with latency: $(cat "$SCRATCH/fio-lat.out")"
kill -TERM "$LAT"
rc=0
wait "$LAT" || rc=$?
LAT=
[ "$rc" -eq 0 ] || fail "za-nbd-mem --latency-us exited $rc: $(cat "$SCRATCH/lat.err")"
pass "fio verifies through 300 us +-50% completion latency"

# ---- clean exit ----
kill -TERM "$SRV"
rc=0
wait "$SRV" || rc=$?
SRV=
[ "$rc" -eq 0 ] || fail "za-nbd-mem exited $rc on SIGTERM: $(cat "$SCRATCH/server.err")"
[ ! -e "$SOCK" ] || fail "socket left behind"
pass "SIGTERM: exit 0, socket removed"
