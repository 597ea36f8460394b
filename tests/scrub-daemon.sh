#!/bin/bash
# Shows that a scrub survives restarts of zarrayd, as zpool's does a
# reboot:
#  - a 4+2 array on 6 emulated drives of 1 MiB zones (segments of three
#    stripes, so that a few MiB make several segments), 12 MiB written;
#  - `zarray scrub t start --rate 2` (2 MB/s: seconds per segment);
#    once its position is past the first segments, zarrayd is stopped
#    (SIGTERM): the state record says "scrub running POSITION";
#  - at the next start the scrub runs again by itself, from that position
#    (status --json: start_position >= the old position > 0; the text
#    says "resumed after segment N"), with its rate limit;
#  - then a SIGKILL mid-way: it resumes from the position the record held
#    (written at most a second late);
#  - it finishes (state done, position back to 0, nothing left in the
#    record), and every byte reads back.
# Skips (77) only if qemu-io is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 32M --zone-size 1M d{0..5}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"
REC="$STATE/arrays/t.conf"

# job FIELD: the scrub job's field from `zarray scrub t status --json`.
job() {
	"$ZARRAY" scrub t status --json >job.json || fail "scrub status --json"
	python3 -c '
import json, sys
j = [j for j in json.load(open("job.json"))["jobs"] if j["kind"] == "scrub"]
print(j[0][sys.argv[1]] if j else "none")' "$1"
}
# wait_pos_above N: until the scrub's position is above N (60 s at most).
wait_pos_above() {
	local i
	for i in $(seq 600); do
		[ "$(job state)" = running ] || fail "scrub not running: $(cat job.json)"
		[ "$(job position)" -gt "$1" ] && return 0
		sleep 0.1
	done
	fail "the scrub did not get past segment $1: $(cat job.json)"
}
qemu_io() {
	local desc=$1 out
	shift
	out=$(qemu-io -f raw "$@" "$URI" 2>&1) || fail "$desc: $out"
	! grep -qi "fail\|error\|mismatch" <<<"$out" || fail "$desc: $out"
}

start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>err.txt || fail "create: $(cat err.txt)"
qemu_io "write" -c "write -P 0x6b 0 12M" -c flush
# A restart seals the open segments: scrub checks sealed ones only.
stop_daemon TERM
start_daemon

"$ZARRAY" scrub t start --rate 2 2>err.txt || fail "scrub start: $(cat err.txt)"
grep -q "^scrub running 0 2000000$" "$REC" || fail "record at start: $(cat "$REC")"
wait_pos_above 0
stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC"
line=$(grep "^scrub " "$REC") || fail "no scrub in the record: $(cat "$REC")"
read -r _ st P1 rate <<<"$line"
[ "$st" = running ] && [ "$P1" -gt 0 ] && [ "$rate" = 2000000 ] || fail "record after SIGTERM: $line"
pass "scrub at 2 MB/s stopped with zarrayd at segment $P1: recorded as running"

start_daemon
[ "$(job state)" = running ] || fail "the scrub did not resume: $(cat job.json)"
S=$(job start_position)
[ "$S" -ge "$P1" ] || fail "resumed after segment $S, before $P1"
"$ZARRAY" scrub t status | grep "scrub running .*(resumed after segment $S)" >/dev/null ||
	fail "status text: $("$ZARRAY" scrub t status)"
"$ZARRAY" status --json t >st.json
grep -q "scrub resumed after segment $P1" "$DLOG" || fail "the resume is not logged"
pass "after a restart it runs again, resumed after segment $S"

wait_pos_above "$S"
sleep 1.2 # the record is at most a second behind
stop_daemon KILL
line=$(grep "^scrub " "$REC") || fail "no scrub in the record"
read -r _ st P2 _ <<<"$line"
[ "$st" = running ] && [ "$P2" -gt "$S" ] || fail "record after SIGKILL: $line (resumed after $S)"
start_daemon
[ "$(job state)" = running ] || fail "the scrub did not resume after SIGKILL: $(cat job.json)"
[ "$(job start_position)" = "$P2" ] || fail "resumed after $(job start_position), the record said $P2"
pass "after a SIGKILL it resumes from the recorded segment $P2"

for i in $(seq 600); do
	[ "$(job state)" = done ] && break
	sleep 0.1
done
[ "$(job state)" = done ] || fail "the scrub did not finish: $(cat job.json)"
[ "$(job position)" = 0 ] || fail "position after a complete pass: $(cat job.json)"
grep -q "scrub: done:" "$DLOG" || fail "no 'scrub: done' in the log"
! grep -q "^scrub " "$REC" || fail "the record still has a scrub: $(cat "$REC")"
qemu_io "read back" -c "read -P 0x6b 0 12M"
stop_daemon TERM
start_daemon
[ "$(job state)" = none ] || fail "a finished scrub ran again after a restart: $(cat job.json)"
pass "it finishes; nothing is resumed after the next restart; the data reads back"
exit 0
