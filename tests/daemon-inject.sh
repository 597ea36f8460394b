#!/bin/bash
# Shows runtime fault injection (zarrayd --fault-injection, `zarray debug
# inject`): refused with a clear error without the option; with it, EIO
# injected into one member's reads is repaired (the data reads back
# exactly through the export, the member's read errors and repaired bytes
# in `zarray status --json` go up, the array stays healthy), "none" stops
# it, a drive death ("fail") under writes fails that member (the array
# degraded until a rebuild has restored what it held; the data still
# reads back), bad specs and non-members are refused, and each request is
# logged with the peer's uid and pid. The read errors above are tolerated
# with --max-read-errors 0; with --max-read-errors 5, a member whose every
# read fails goes "failed" at its sixth read error (logged), and the data
# still reads back.
# Skips (77) only if qemu-io is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 96M --zone-size 4M --cache 8M d{0..6}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"

# member FIELD PATH: a member's field from status --json (errors.read...).
member() {
	"$ZARRAY" --json status t | python3 -c '
import json, sys
a = json.load(sys.stdin)
m = [m for m in a["members"] if m["path"].endswith("/" + sys.argv[2])][0]
v = m
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$1" "$2"
}
state() { "$ZARRAY" --json status t | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

# qemu_io DESC CMDS...: every command must succeed (qemu-io's exit status
# does not say when a read -P finds other bytes; its output does).
qemu_io() {
	local desc=$1 out
	shift
	out=$(qemu-io -f raw "$@" "$URI" 2>&1) || fail "$desc: $out"
	! grep -qi "fail\|error\|mismatch" <<<"$out" || fail "$desc: $out"
}

start_daemon
"$ZARRAY" create t --data 4 --parity 2 --chunk 16K --size 64M d*.img >/dev/null
expect_fail 1 "inject without --fault-injection" \
	"$ZARRAY" debug inject t d2.img eio-ppm=1000
grep -q -- "--fault-injection" "$SCRATCH/err" || fail "the error does not name --fault-injection: $(cat "$SCRATCH/err")"
stop_daemon TERM

start_daemon --fault-injection --max-read-errors 0
grep -q "fault injection is on" "$DLOG" || fail "the daemon does not say fault injection is on"
qemu_io "write" -c "write -P 0x5a 0 16M" -c "write -P 0xa5 16M 8M" -c flush
# Restart, so that every read comes from the drives, not from buffers.
# No read-error limit here: the errors below are repaired, never fatal.
stop_daemon TERM
start_daemon --fault-injection --max-read-errors 0

"$ZARRAY" debug inject t d2.img eio-ppm=300000,seed=7 2>"$SCRATCH/err" ||
	fail "inject: $(cat "$SCRATCH/err")"
grep -q "faults set" "$SCRATCH/err" || fail "inject said: $(cat "$SCRATCH/err")"
qemu_io "read with EIO injected" -c "read -P 0x5a 0 16M" -c "read -P 0xa5 16M 8M"
rd=$(member errors.read d2.img)
rep=$(member repaired_bytes d2.img)
[ "$rd" -gt 0 ] || fail "no read error counted on d2.img"
[ "$rep" -gt 0 ] || fail "no repaired bytes counted on d2.img"
[ "$(state)" = healthy ] || fail "read errors left the array $(state)"
for d in d0 d1 d3 d4 d5 d6; do
	[ "$(member errors.read $d.img)" -eq 0 ] || fail "$d.img has read errors"
done
pass "EIO on d2.img's reads: data read back exactly, $rd read errors, $rep bytes repaired, still healthy"

"$ZARRAY" debug inject t d2.img none 2>/dev/null || fail "inject none"
qemu_io "read after none" -c "read -P 0x5a 0 16M" -c "read -P 0xa5 16M 8M"
[ "$(member errors.read d2.img)" -eq "$rd" ] || fail "read errors still counted after 'none'"
pass "'none' stops the injection"

expect_fail 1 "bad spec" "$ZARRAY" debug inject t d2.img eio-ppm=2000000
grep -q "invalid fault spec" "$SCRATCH/err" || fail "bad spec said: $(cat "$SCRATCH/err")"
expect_fail 1 "not a member" "$ZARRAY" debug inject t "$SCRATCH/nosuch.img" fail
expect_fail 1 "no such array" "$ZARRAY" debug inject nosuch d2.img fail
expect_fail 2 "missing SPEC" "$ZARRAY" debug inject t d2.img
expect_fail 2 "unknown subcommand" "$ZARRAY" debug frobnicate t
expect_fail 1 "spaces in the spec" "$ZARRAY" debug inject t d2.img "eio-ppm=1, fail"

"$ZARRAY" debug inject t d4.img fail 2>/dev/null || fail "inject fail"
qemu_io "write after the drive died" -c "write -P 0x3c 24M 16M" -c flush
# Failed, and removed once a rebuild has restored what it held: the
# array is degraded until then, healthy after.
ms=$(member state d4.img)
as=$(state)
case "$ms/$as" in
failed/degraded | failed/healthy | removed/healthy) ;;
*) fail "after d4.img died under writes: it is $ms, the array $as" ;;
esac
grep -q "member 4 (.*d4.img) failed: No such device" "$DLOG" ||
	fail "the drive's death is not logged"
qemu_io "read after the drive died" -c "read -P 0x5a 0 16M" -c "read -P 0xa5 16M 8M" \
	-c "read -P 0x3c 24M 16M"
pass "a drive death under writes fails that member ($ms, array $as); the data still reads back"

grep -q "t: debug inject $(realpath "$SCRATCH")/d2.img eio-ppm=300000,seed=7 (uid $(id -u) pid [0-9]*)" "$DLOG" ||
	fail "the request is not logged with the peer"

# ---- read errors past --max-read-errors fail the member ----
stop_daemon TERM
expect_fail 2 "--max-read-errors garbage" "$ZARRAYD" --max-read-errors 5x
start_daemon --fault-injection --max-read-errors 5
"$ZARRAY" debug inject t d3.img eio-ppm=1000000,seed=3 2>/dev/null || fail "inject eio on d3"
qemu_io "read while every read of d3 fails" -c "read -P 0x5a 0 16M" -c "read -P 0xa5 16M 8M" \
	-c "read -P 0x3c 24M 16M"
[ "$(member state d3.img)" = failed ] || [ "$(member state d3.img)" = removed ] ||
	fail "d3.img is $(member state d3.img) after its read errors"
[ "$(member errors.read d3.img)" -ge 6 ] || fail "d3.img: $(member errors.read d3.img) read errors"
grep -q "d3.img: member 3: 6 read errors, more than 5: failing it" "$DLOG" ||
	fail "failing d3.img for its read errors is not logged"
qemu_io "read after d3 failed" -c "read -P 0x5a 0 16M" -c "read -P 0xa5 16M 8M" \
	-c "read -P 0x3c 24M 16M"
pass "--max-read-errors 5: d3.img failed at its 6th read error; the data still reads back"
stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC"
pass "requests logged with uid and pid; clean stop"
