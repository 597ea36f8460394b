#!/bin/bash
# Verified load under faults: fio --ioengine=nbd with several connections
# (numjobs) at two queue depths writes random 4 KiB and 64 KiB blocks with
# --verify=crc32c through the export of a 4+2 array, while faults are
# injected into its members (zarrayd --fault-injection, `zarray debug
# inject`): bit flips on one member's reads (checksums catch them; the
# chunks are repaired), EIO on a second member's reads and writes (a
# failed write fails that member), then that drive dies outright, then a
# third is failed by `zarray fail` while fio runs. Every fio job must end
# with err=0 and its verify pass without a mismatch, and the array must be
# readable after: at most p = 2 members lost, so nothing may be.
# Skips (77) only if fio is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need fio
need python3

cd "$SCRATCH" # fio writes its verify state files to the working directory
"$ZARRAY" emu create --size 96M --zone-size 4M --cache 8M d{0..9}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"
start_daemon --fault-injection --max-read-errors 0
"$ZARRAY" create t --data 4 --parity 2 --chunk 16K --size 160M d*.img >/dev/null

state() { "$ZARRAY" --json status t | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
lost() {
	"$ZARRAY" --json status t | python3 -c '
import json, sys
print(sum(m["state"] in ("failed", "missing") for m in json.load(sys.stdin)["members"]))'
}

# run_fio NAME BS DEPTH REGION OFF IOPS: 3 jobs (3 connections), each
# writing its own REGION from OFF on at DEPTH, at most IOPS writes a
# second (so that the faults below land while it writes, on any
# machine), then reading it back verified; in the background, its output
# in fio-NAME.out.
run_fio() {
	local name=$1 bs=$2 depth=$3 region=$4 off=$5 iops=$6
	fio --name="$name" --ioengine=nbd --uri="$URI" --rw=randwrite \
		--bs="$bs" --size="$region" --offset="$off" --rate_iops=",$iops" \
		--offset_increment="$region" --numjobs=3 --iodepth="$depth" \
		--verify=crc32c --do_verify=1 --verify_fatal=1 \
		--group_reporting >"fio-$name.out" 2>&1 &
	FIO_PID=$!
}
check_fio() {
	local name=$1 rc=0
	wait "$FIO_PID" || rc=$?
	[ "$rc" -eq 0 ] || fail "fio $name exited $rc: $(tail -n 20 "fio-$name.out")"
	grep -q 'err= 0' "fio-$name.out" || fail "fio $name: $(cat "fio-$name.out")"
	grep -q 'READ:.*io=' "fio-$name.out" || fail "fio $name did not verify"
	! grep -qi 'verify.*fail\|bad magic\|crc32c.*mismatch' "fio-$name.out" ||
		fail "fio $name: $(cat "fio-$name.out")"
}
inject() { "$ZARRAY" debug inject t "$1" "$2" 2>/dev/null || fail "inject $1 $2"; }
# member FIELD NAME: a member's field from status --json (errors.read...).
member() {
	"$ZARRAY" --json status t | python3 -c '
import json, sys
m = [m for m in json.load(sys.stdin)["members"] if m["path"].endswith("/" + sys.argv[2])][0]
for k in sys.argv[1].split("."):
    m = m[k]
print(m)' "$1" "$2"
}

# Bit rot on d1's reads and EIO on d2's I/O while 4 KiB writes run at
# depth 4 and 64 KiB writes at depth 16 over other ranges.
inject d1.img flip-ppm=20000,seed=3
inject d2.img eio-ppm=2000,seed=5
run_fio a 4k 4 8M 0 1000
A=$FIO_PID
sleep 0.5
run_fio b 64k 16 24M 32M 200
B=$FIO_PID
sleep 1
# d2 dies under I/O (if its EIO has not failed it already).
inject d2.img fail
FIO_PID=$A check_fio a
FIO_PID=$B check_fio b
[ "$(member errors.checksum d1.img)" -gt 0 ] ||
	fail "no flipped chunk was caught on d1.img: the faults missed the load"
case "$(member state d2.img)" in
failed | removed) ;;
*) "$ZARRAY" --json status t >&2; fail "d2.img is $(member state d2.img) after it died" ;;
esac
pass "fio 4k x depth 4 and 64k x depth 16, 3 connections each, crc32c verified under bit flips ($(member errors.checksum d1.img) caught on d1.img) and EIO; d2 died"

# A further member failed by the admin while fio runs: two lost, still
# every block verified.
run_fio c 4k 16 8M 112M 1000
sleep 1
"$ZARRAY" fail t d3.img 2>/dev/null || fail "zarray fail d3.img"
check_fio c
case "$(member state d3.img)" in
failed | removed) ;;
*) fail "d3.img is $(member state d3.img) after zarray fail" ;;
esac
pass "fio 4k x depth 16, 3 connections, crc32c verified across 'zarray fail' of a second member"

[ "$(lost)" -le 2 ] || fail "more members lost than were failed: $(lost)"
case "$(state)" in
healthy | degraded) ;;
*) fail "the array is $(state) with at most p members lost" ;;
esac
# The first runs' data, read back once more after everything: fio's
# verify-only mode re-reads what the same job definition wrote.
for spec in "a 4k 8M 0" "b 64k 24M 32M"; do
	set -- $spec
	fio --name="$1" --ioengine=nbd --uri="$URI" --rw=randwrite --bs="$2" \
		--size="$3" --offset="$4" --offset_increment="$3" --numjobs=3 \
		--verify=crc32c --verify_only=1 --verify_fatal=1 \
		--group_reporting >"fio-$1-again.out" 2>&1 ||
		fail "re-verify $1: $(tail -n 20 "fio-$1-again.out")"
done
pass "the first runs' blocks verify again at the end (array $(state), $(lost) members lost)"
