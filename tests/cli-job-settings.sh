#!/bin/bash
# Shows that an admin's job settings are honoured and kept, on a 4+2
# array of 7 emulated drives of 32 MiB (zones of 1 MiB), 12 MiB written:
#  - `scrub t pause` holds a running scrub (some bytes done): listed as
#    paused, its bytes done do not move for 1.5 s; a second pause is refused (exit 1);
#    `scrub t resume --rate 3` goes on with rate_limit_bps 3000000;
#    `scrub t start --rate 4` on the running scrub changes its limit
#    ("rate limit changed"), which the state record keeps with the
#    position; `scrub t stop` ends it;
#  - `gc t pause`, `gc t rate 7` and `rebuild t start --rate 9` are
#    written to the state record ("gc paused 7000000",
#    "rebuild-rate 9000000");
#  - after a restart of zarrayd GC is still paused with its limit, and a
#    rebuild started by `zarray fail` runs with the 9 MB/s limit;
#  - a record with malformed settings lines still assembles the array,
#    the lines logged as ignored and the settings left at their defaults.
# Skips (77) only if qemu-io or python3 is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 32M --zone-size 1M d{0..6}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"
REC="$STATE/arrays/t.conf"

# job KIND FIELD: a field of KIND's job row (`zarray KIND t status
# --json`), "none" if KIND has no row.
job() {
	"$ZARRAY" "$1" t status --json >job.json || fail "$1 status --json"
	python3 -c '
import json, sys
j = [j for j in json.load(open("job.json"))["jobs"] if j["kind"] == sys.argv[1]]
print(j[0][sys.argv[2]] if j else "none")' "$1" "$2"
}

start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>err.txt || fail "create: $(cat err.txt)"
out=$(qemu-io -f raw -c "write -P 0x5a 0 12M" -c flush "$URI" 2>&1) || fail "write: $out"
# A restart seals the open segments: scrub checks sealed ones only.
stop_daemon TERM
start_daemon

# --- scrub: pause, resume, a new limit while it runs ---
"$ZARRAY" scrub t start --rate 1 2>err.txt || fail "scrub start: $(cat err.txt)"
for i in $(seq 300); do
	[ "$(job scrub done_bytes)" -gt 0 ] && break
	sleep 0.1
done
[ "$(job scrub done_bytes)" -gt 0 ] || fail "the scrub did not start reading: $(cat job.json)"
"$ZARRAY" scrub t pause 2>err.txt || fail "scrub pause: $(cat err.txt)"
grep -q "t scrub paused" err.txt || fail "scrub pause said: $(cat err.txt)"
[ "$(job scrub state)" = paused ] || fail "after pause: $(cat job.json)"
d1=$(job scrub done_bytes)
sleep 1.5
d2=$(job scrub done_bytes)
[ "$d1" = "$d2" ] || fail "a paused scrub read on: $d1 -> $d2 bytes done"
expect_fail 1 "scrub pause when paused" "$ZARRAY" scrub t pause
grep -q "paused already" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "scrub start when paused" "$ZARRAY" scrub t start
grep -q "paused: resume it" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
pass "scrub pause: listed as paused, $d1 bytes done stay so; a second pause and a start are refused"

"$ZARRAY" scrub t resume --rate 3 2>err.txt || fail "scrub resume: $(cat err.txt)"
[ "$(job scrub state)" = running ] || fail "after resume: $(cat job.json)"
[ "$(job scrub rate_limit_bps)" = 3000000 ] || fail "resume --rate 3: $(cat job.json)"
expect_fail 1 "scrub resume when running" "$ZARRAY" scrub t resume
"$ZARRAY" scrub t start --rate 4 2>err.txt || fail "scrub start --rate on a running scrub: $(cat err.txt)"
grep -q "t rate limit changed" err.txt || fail "start --rate said: $(cat err.txt)"
[ "$(job scrub rate_limit_bps)" = 4000000 ] || fail "start --rate 4: $(cat job.json)"
grep -q "^scrub running [0-9]* 4000000$" "$REC" || fail "record: $(cat "$REC")"
pass "scrub resume --rate 3, then start --rate 4 on the running scrub: the limits hold, the record keeps 4000000"

expect_fail 2 "scrub pause with --rate" "$ZARRAY" scrub t pause --rate 5
expect_fail 2 "scrub stop with --rate" "$ZARRAY" scrub t stop --rate 5
"$ZARRAY" scrub t stop 2>err.txt || fail "scrub stop: $(cat err.txt)"
expect_fail 1 "scrub resume when stopped" "$ZARRAY" scrub t resume
pass "a rate goes with start and resume only; a stopped scrub does not resume"

# --- settings kept across a restart ---
"$ZARRAY" gc t pause 2>err.txt || fail "gc pause: $(cat err.txt)"
"$ZARRAY" gc t rate 7 2>err.txt || fail "gc rate: $(cat err.txt)"
"$ZARRAY" rebuild t start --rate 9 >/dev/null 2>err.txt || fail "rebuild start --rate: $(cat err.txt)"
grep -q "^gc paused 7000000$" "$REC" || fail "gc settings not recorded: $(cat "$REC")"
grep -q "^rebuild-rate 9000000$" "$REC" || fail "rebuild rate not recorded: $(cat "$REC")"
stop_daemon TERM
start_daemon
[ "$(job gc state)" = paused ] || fail "gc not paused after a restart: $(cat job.json)"
[ "$(job gc rate_limit_bps)" = 7000000 ] || fail "gc limit after a restart: $(cat job.json)"
"$ZARRAY" fail t "$SCRATCH/d3.img" 2>err.txt || fail "fail: $(cat err.txt)"
for i in $(seq 100); do
	[ "$(job rebuild state)" != none ] && break
	sleep 0.1
done
[ "$(job rebuild rate_limit_bps)" = 9000000 ] || fail "the rebuild's limit after a restart: $(cat job.json)"
pass "after a restart: gc paused at 7 MB/s, and a rebuild runs at the 9 MB/s it was given before"

for i in $(seq 600); do
	[ "$(job rebuild state)" = done ] && break
	sleep 0.1
done
[ "$(job rebuild state)" = done ] || fail "the rebuild did not finish: $(cat job.json)"
out=$(qemu-io -f raw -c "read -P 0x5a 0 12M" "$URI" 2>&1) || fail "read back: $out"
! grep -qi "fail\|error\|mismatch" <<<"$out" || fail "read back: $out"

# --- malformed settings in the record ---
stop_daemon TERM
sed -i -e 's/^gc .*/gc sideways 7/' -e 's/^rebuild-rate .*/rebuild-rate 9x/' "$REC"
start_daemon
"$ZARRAY" status t >/dev/null || fail "the array was not assembled with bad settings lines"
grep -q "bad gc settings ignored" "$DLOG" || fail "the bad gc line is not logged"
grep -q "bad rebuild rate ignored" "$DLOG" || fail "the bad rebuild-rate line is not logged"
[ "$(job gc state)" != paused ] && [ "$(job gc rate_limit_bps)" = 0 ] ||
	fail "bad gc line taken: $(cat job.json)"
pass "bad settings lines are logged and ignored; the array assembles; the data read back after the rebuild"
exit 0
