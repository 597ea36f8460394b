#!/bin/bash
# Shows that real NBD clients work against an array's volume exported by
# zarrayd (src/export.c over src/volume.c, through src/nbd.c), on 12
# emulated drives in an 8+2 array of a few GiB (half of them preallocated,
# `zarray emu create --preallocate`, as bench/p1.sh uses them, so that
# every client below also goes through that kind of drive):
#  - `zarray create --tcp 0` prints the nbd:// URI, `zarray export` the
#    nbd+unix:// one; the socket is RUNDIR/NAME.nbd, mode 0660; status
#    --json gives export.uri and export.tcp_uri;
#  - nbdinfo --json shows the volume's size and a minimum block size of
#    4096;
#  - nbdcopy writes 1 GiB of random data over 4 connections at once and
#    reads it back over one; cmp finds it intact and the rest zero;
#  - qemu-io pattern writes and reads, aio writes + flush, zeroes,
#    discards, FUA writes;
#  - fio --ioengine=nbd random 4 KiB and 64 KiB writes, 2 jobs at iodepth
#    8, verified with crc32c, end with zero errors;
#  - the same export over TCP; asking for TCP again is harmless, another
#    address is refused;
#  - SIGTERM stops the export then the array and removes its socket; a new
#    zarrayd (with --rx-thread: large writes read on a thread, not by the
#    loop) exports it again (same TCP port) with the data intact, and
#    large writes through it read back;
#  - `zarray stop` during a copy still stops cleanly; the socket goes.
# Every client runs under a timeout, so that a stalled reply fails the
# test instead of hanging it. Skips (77) only if a client is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdinfo
need nbdcopy
need qemu-io
need fio
need python3

MiB=$((1024 * 1024))
GiB=$((1024 * MiB))
T=60 # seconds any one client may take before the test calls it a stall

# A client that does not finish in $T seconds failed; say which.
run() {
	local rc=0
	timeout "$T" "$@" || rc=$?
	[ "$rc" -ne 124 ] || fail "$1 got no answer for $T s (a stalled reply?): $*"
	return "$rc"
}

cd "$SCRATCH" # fio writes its verify state files to the working directory
"$ZARRAY" emu create --size 512M --zone-size 16M d{00..05}.img >/dev/null
"$ZARRAY" emu create --preallocate --size 512M --zone-size 16M d{06..11}.img >/dev/null
[ "$(du -k d06.img | cut -f1)" -ge $((512 << 10)) ] || fail "d06.img is not preallocated"
start_daemon

# ---- create with --tcp, export, status ----
TCP_URI=$("$ZARRAY" create t --data 8 --parity 2 --tcp 0 d*.img 2>create.err) ||
	fail "create: $(cat create.err)"
[[ "$TCP_URI" =~ ^nbd://127\.0\.0\.1:([0-9]+)/t$ ]] || fail "create printed '$TCP_URI'"
PORT=${BASH_REMATCH[1]}
URI=$("$ZARRAY" export t) || fail "export t"
[ "$URI" = "nbd+unix:///t?socket=$RUN/t.nbd" ] || fail "export printed '$URI'"
[ -S "$RUN/t.nbd" ] || fail "no socket at $RUN/t.nbd"
[ "$(stat -c %a "$RUN/t.nbd")" = 660 ] || fail "socket mode $(stat -c %a "$RUN/t.nbd")"
"$ZARRAY" status --json t >status.json || fail "status --json"
SIZE=$(python3 - "$URI" "$TCP_URI" <<'EOF'
import json, sys
d = json.load(open("status.json"))
assert d["export"]["uri"] == sys.argv[1], d["export"]
assert d["export"]["tcp_uri"] == sys.argv[2], d["export"]
assert 2 << 30 <= d["size_bytes"] <= 5 << 30, d["size_bytes"]
print(d["size_bytes"])
EOF
) || fail "status --json: $(cat status.json)"
"$ZARRAY" status t | grep "^  export  $URI\$" >/dev/null || fail "status text: $("$ZARRAY" status t)"
pass "create --tcp printed $TCP_URI; export printed $URI (socket 0660); status --json has both"

# ---- nbdinfo ----
run nbdinfo --json "$URI" >info.json || fail "nbdinfo --json failed"
python3 - "$SIZE" <<'EOF' || fail "nbdinfo: $(cat info.json)"
import json, sys
e = json.load(open("info.json"))["exports"][0]
want = {"export-name": "t", "export-size": int(sys.argv[1]),
        "block_size_minimum": 4096, "can_flush": True, "can_fua": True,
        "can_trim": True, "can_zero": True, "can_multi_conn": True,
        "is_read_only": False}
bad = ["%s=%r (want %r)" % (k, e.get(k), v) for k, v in want.items()
       if e.get(k) != v]
if bad:
    sys.exit(", ".join(bad))
EOF
pass "nbdinfo --json: size $SIZE, minimum block size 4096, flush/FUA/trim/zero/multi-conn"

# ---- nbdcopy: 1 GiB of random data, 4 connections in, 1 out ----
head -c $GiB /dev/urandom >in.bin
t0=$(date +%s%N)
run nbdcopy --connections=4 --flush in.bin "$URI" || fail "nbdcopy to the export failed"
t1=$(date +%s%N)
run nbdcopy --connections=1 "$URI" out.bin || fail "nbdcopy from the export failed"
t2=$(date +%s%N)
[ "$(stat -c %s out.bin)" -eq "$SIZE" ] || fail "read back $(stat -c %s out.bin) bytes"
cmp -n $GiB in.bin out.bin || fail "nbdcopy round trip differs"
cmp -n $((SIZE - GiB)) -i $GiB:0 out.bin /dev/zero || fail "bytes past the copy are not zero"
rm -f out.bin
pass "nbdcopy: 1 GiB round trip identical (write x4 $(((t1 - t0) / 1000000)) ms, read x1 $(((t2 - t1) / 1000000)) ms)"

# ---- qemu-io patterns ----
O=$((1100 * MiB))
run qemu-io -f raw \
	-c "write -P 0xab $O 1M" -c "read -P 0xab $O 1M" \
	-c "aio_write -P 0x5a $((O + MiB)) 64k" -c "aio_write -P 0xa5 $((O + 2 * MiB)) 4k" \
	-c "aio_write -P 0x3c $((O + 3 * MiB)) 256k" -c 'aio_flush' -c 'flush' \
	-c "read -P 0x5a $((O + MiB)) 64k" -c "read -P 0xa5 $((O + 2 * MiB)) 4k" \
	-c "read -P 0x3c $((O + 3 * MiB)) 256k" \
	-c "write -z $((O + 4 * MiB)) 1M" -c "read -P 0 $((O + 4 * MiB)) 1M" \
	-c "discard $((O + 6 * MiB)) 1M" -c "read -P 0 $((O + 6 * MiB)) 1M" \
	-c "write -f -P 0x33 $((O + 8 * MiB)) 8k" -c "read -P 0x33 $((O + 8 * MiB)) 8k" \
	-c "read -P 0xab $O 1M" \
	"$URI" >qemu-io.out 2>&1 || fail "qemu-io: $(cat qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out || fail "qemu-io: $(cat qemu-io.out)"
pass "qemu-io: pattern, aio + flush, zero, discard and FUA writes read back"

# ---- fio with crc32c verification ----
run_fio() {
	local bs=$1 region=$2 off=$3
	run fio --name="w$bs" --ioengine=nbd --uri="$URI" --rw=randwrite --bs="$bs" \
		--size="$region" --offset="$off" --offset_increment="$region" \
		--numjobs=2 --iodepth=8 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --group_reporting >"fio-$bs.out" 2>&1 ||
		fail "fio bs=$bs: $(tail -n 20 "fio-$bs.out")"
	grep -q 'err= 0' "fio-$bs.out" || fail "fio bs=$bs: $(cat "fio-$bs.out")"
	grep -q 'READ:.*io=' "fio-$bs.out" || fail "fio bs=$bs did not verify"
	! grep -qi 'verify.*fail\|bad magic\|crc32c.*mismatch' "fio-$bs.out" ||
		fail "fio bs=$bs: $(cat "fio-$bs.out")"
	echo "# fio bs=$bs: $(grep -o 'WRITE: bw=[^ ]*' "fio-$bs.out")"
}
run_fio 4k 32M 1200M
run_fio 64k 128M 1300M
pass "fio: random 4k and 64k writes, 2 jobs x iodepth 8, crc32c verified, no error"

# ---- TCP ----
[ "$(run nbdinfo --size "$TCP_URI")" = "$SIZE" ] || fail "nbdinfo over TCP"
run qemu-io -f raw -c "read -P 0xab $O 1M" -c "write -P 0x77 $((O + 10 * MiB)) 256k" \
	-c 'flush' "$TCP_URI" >qemu-io.out 2>&1 || fail "qemu-io over TCP: $(cat qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out || fail "qemu-io over TCP: $(cat qemu-io.out)"
[ "$("$ZARRAY" export t --tcp "127.0.0.1:$PORT")" = "$TCP_URI" ] || fail "export --tcp again"
[ "$("$ZARRAY" export t --tcp 0)" = "$TCP_URI" ] || fail "export --tcp 0 again"
expect_fail 1 "export on a second TCP address" "$ZARRAY" export t --tcp 127.0.0.1:1
expect_fail 2 "export --tcp with a bad address" "$ZARRAY" export t --tcp host:port
pass "TCP on 127.0.0.1:$PORT serves the same data; asking again is harmless"

# ---- SIGTERM: export then array stopped, socket gone; restart exports again ----
stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC on SIGTERM"
[ ! -e "$RUN/t.nbd" ] || fail "NBD socket left behind after SIGTERM"
grep -q "export t: stopped" "$DLOG" || fail "the export was not stopped"
grep -A1000 "export t: stopped" "$DLOG" | grep "array t stopped" >/dev/null ||
	fail "the array did not stop after its export"
grep -q "^tcp 127.0.0.1:$PORT\$" "$STATE/arrays/t.conf" || fail "TCP address not recorded"
# This time large writes are read on a thread per connection.
start_daemon --rx-thread -v
for _ in $(seq 100); do
	[ -S "$RUN/t.nbd" ] && break
	sleep 0.05
done
run qemu-io -f raw -c "read -P 0xab $O 1M" -c "read -P 0x77 $((O + 10 * MiB)) 256k" \
	-c "read -P 0x33 $((O + 8 * MiB)) 8k" "$URI" >qemu-io.out 2>&1 ||
	fail "qemu-io after restart: $(cat qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out || fail "after restart: $(cat qemu-io.out)"
[ "$(run nbdinfo --size "$TCP_URI")" = "$SIZE" ] || fail "TCP port $PORT not served after restart"
run nbdcopy --connections=4 "$URI" out.bin || fail "nbdcopy after restart failed"
cmp -n $((1000 * MiB)) in.bin out.bin || fail "nbdcopy data differs after restart"
rm -f out.bin
run qemu-io -f raw -c "aio_write -P 0x42 $((O + 16 * MiB)) 2M" \
	-c "aio_write -P 0x43 $((O + 18 * MiB)) 1M" -c "aio_write -P 0x44 $((O + 19 * MiB)) 3M" \
	-c 'aio_flush' -c "read -P 0x42 $((O + 16 * MiB)) 2M" \
	-c "read -P 0x43 $((O + 18 * MiB)) 1M" -c "read -P 0x44 $((O + 19 * MiB)) 3M" \
	"$URI" >qemu-io.out 2>&1 || fail "qemu-io with --rx-thread: $(cat qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out || fail "--rx-thread: $(cat qemu-io.out)"
grep -q "receive ring, filled by a thread" "$DLOG" || fail "--rx-thread started no thread"
! grep -q "receive ring, filled by the loop" "$DLOG" || fail "a ring filled by the loop before --rx-thread"
pass "SIGTERM: exit 0, socket removed; restarted (--rx-thread), same URIs, data intact, large writes read back"

# ---- stop with writes in flight: each gets its answer; the acked ones stay ----
# A client pipelines 256 WRITEs of 64 KiB (distinct patterns, distinct
# offsets) without reading a reply while `zarray stop` runs; every request
# read before the connection closed is answered (0 or ESHUTDOWN), and after
# assembling the array again every write answered 0 reads back.
python3 - "$RUN/t.nbd" "$ZARRAY" >inflight.out 2>&1 <<'EOF' || fail "writes during stop: $(tail -n 5 inflight.out)"
import socket, struct, subprocess, sys
path, zarray = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(path)
def rd(n):
    b = b""
    while len(b) < n:
        try:
            c = s.recv(n - len(b))
        except ConnectionResetError:
            c = b""  # closed with our unread requests in its buffer
        if not c:
            return None
        b += c
    return b
assert rd(18)[:8] == b"NBDMAGIC"
s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
name = b"t"
body = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, len(body)) + body)  # GO
while True:
    _, _, typ, ln = struct.unpack(">QIII", rd(20))
    rd(ln)
    if typ == 1:  # ACK
        break
    assert typ < 0x80000000, hex(typ)
N, LEN, BASE = 256, 64 << 10, 1400 << 20
stop = None
for i in range(N):
    data = bytes([i % 255 + 1]) * LEN
    try:
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, i, BASE + i * LEN,
                              LEN) + data)
    except OSError:
        break  # the export closed: the rest was never read
    if i == N // 4:
        stop = subprocess.Popen([zarray, "stop", "t"])
answers = {}
while True:
    r = rd(16)
    if r is None:
        break
    magic, err, h = struct.unpack(">IIQ", r)
    assert magic == 0x67446698 and h not in answers, (magic, h)
    assert err in (0, 108), "write %d: error %d" % (h, err)  # 108: ESHUTDOWN
    answers[h] = err
assert stop.wait(60) == 0, "zarray stop failed"
ok = sorted(h for h, e in answers.items() if e == 0)
print("answered %d of %d writes: %d ok, %d ESHUTDOWN" %
      (len(answers), N, len(ok), len(answers) - len(ok)))
assert ok, "no write acknowledged before the stop"
# The answers cover a prefix of what was sent: nothing read went unanswered.
assert sorted(answers) == list(range(len(answers))), sorted(answers)[:20]
with open("acked.txt", "w") as f:
    for h in ok:
        f.write("%d %d\n" % (h, BASE + h * LEN))
EOF
echo "# $(tail -n 1 inflight.out)"
[ ! -e "$RUN/t.nbd" ] || fail "NBD socket left behind after stop"
"$ZARRAY" assemble t d*.img >/dev/null 2>assemble.err || fail "assemble: $(cat assemble.err)"
cmds=()
while read -r h off; do
	cmds+=(-c "read -P $((h % 255 + 1)) $off 64k")
done <acked.txt
run qemu-io -f raw "${cmds[@]}" "$URI" >qemu-io.out 2>&1 || fail "qemu-io: $(tail -n 5 qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out ||
	fail "acked writes lost by the stop: $(grep -i 'fail\|mismatch' qemu-io.out | head -n 3)"
pass "stop with writes in flight: all answered (0 or ESHUTDOWN), the $(wc -l <acked.txt) acked ones read back after assemble"

# ---- stop during a copy: no hang, socket removed ----
nbdcopy --connections=4 in.bin "$URI" >copy.out 2>&1 &
cpid=$!
sleep 0.3
timeout "$T" "$ZARRAY" stop t 2>stop.err || fail "stop during a copy: $(cat stop.err)"
rc=0
wait "$cpid" || rc=$?
echo "# nbdcopy interrupted by stop: exit $rc"
[ ! -e "$RUN/t.nbd" ] || fail "NBD socket left behind after stop"
expect_fail 1 "export of a stopped array" "$ZARRAY" export t
"$ZARRAY" list >/dev/null 2>&1 || fail "zarrayd not serving after the stop"
pass "stop during a copy: export closed, array stopped, socket removed"
