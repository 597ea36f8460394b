#!/bin/bash
# Shows `zarray gc`, garbage collection as a job an admin controls, on a
# 4+2 array of 6 emulated drives of 96 MiB (zones of 4 MiB):
#  - `gc t status` prints GC's job whatever its state ("done" with nothing
#    to do), `--json` the same row with kind gc and rate_limit_bps;
#  - `gc t pause`: status says paused (the job is listed in `status`
#    too); pausing again is refused (exit 1, one clear line);
#  - `gc t rate 5` sets a limit of 5 MB/s: rate_limit_bps 5000000 in
#    `status --json`, "(limit ...)" in the text, in force at once;
#  - with GC paused, the volume is written whole and overwritten twice
#    with qemu-io (far more than the drives hold): every write completes,
#    because GC still runs when writes wait for space (runs > 0), and
#    the job still says paused; the data reads back;
#  - `gc t resume`: no longer paused; resuming again is refused;
#  - bad input (no action, an unknown one, a rate that is not a number,
#    an argument too many) exits 2 with a usage line, and an unknown array
#    exits 1.
# Skips (77) only if qemu-io or python3 is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 96M --zone-size 4M d{0..5}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>err.txt || fail "create: $(cat err.txt)"
URI="nbd+unix:///t?socket=$RUN/t.nbd"

# gcjob FIELD: the gc row's field from `zarray gc t status --json`.
gcjob() {
	"$ZARRAY" gc t status --json >gc.json || fail "gc status --json"
	python3 -c '
import json, sys
j = json.load(open("gc.json"))["jobs"]
assert len(j) == 1 and j[0]["kind"] == "gc", j
print(j[0][sys.argv[1]])' "$1"
}

"$ZARRAY" gc t status >st.txt || fail "gc status"
grep -q "^t: gc done " st.txt || fail "gc status on a new array: $(cat st.txt)"
[ "$(gcjob state)" = done ] && [ "$(gcjob rate_limit_bps)" = 0 ] || fail "gc status --json: $(cat gc.json)"
pass "gc status: $(cat st.txt)"

"$ZARRAY" gc t pause 2>err.txt || fail "gc pause: $(cat err.txt)"
[ "$(gcjob state)" = paused ] || fail "after pause: $(cat gc.json)"
[ "$(json '[j["state"] for j in d["jobs"] if j["kind"] == "gc"]')" = "['paused']" ] ||
	fail "status does not list the paused gc: $(cat st.json)"
expect_fail 1 "gc pause when paused" "$ZARRAY" gc t pause
grep -q "paused already" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
pass "gc pause: the job says paused, also in status; a second pause is refused"

"$ZARRAY" gc t rate 5 2>err.txt || fail "gc rate: $(cat err.txt)"
[ "$(gcjob rate_limit_bps)" = 5000000 ] || fail "rate limit: $(cat gc.json)"
"$ZARRAY" gc t status | grep -q "(limit 4.8 MiB/s)" || fail "gc status text: $("$ZARRAY" gc t status)"
pass "gc rate 5: rate_limit_bps 5000000, shown as a limit"

# Paused and limited, GC still runs when writes wait for space: the
# volume written three times over completes.
SIZE=$(json "d['size_bytes']")
MIB=$((SIZE / 1048576))
for pat in 0x11 0x22 0x33; do
	out=$(timeout 300 qemu-io -f raw -c "write -P $pat 0 ${MIB}M" -c flush "$URI" 2>&1) ||
		fail "qemu-io write $pat: $out"
	! grep -qi "fail\|error" <<<"$out" || fail "qemu-io write $pat: $out"
done
runs=$(json "d['volume']['gc']['runs']")
[ "$runs" -gt 0 ] || fail "GC did not run while writes waited: $(cat st.json)"
[ "$(gcjob state)" = paused ] || fail "the job is not paused any more: $(cat gc.json)"
out=$(qemu-io -f raw -c "read -P 0x33 0 ${MIB}M" "$URI" 2>&1) || fail "read back: $out"
! grep -qi "fail\|error\|mismatch" <<<"$out" || fail "read back: $out"
pass "$MIB MiB written three times with GC paused: $runs GC runs when writes waited; still paused; data reads back"

"$ZARRAY" gc t resume 2>err.txt || fail "gc resume: $(cat err.txt)"
[ "$(gcjob state)" != paused ] || fail "after resume: $(cat gc.json)"
expect_fail 1 "gc resume when not paused" "$ZARRAY" gc t resume
pass "gc resume: no longer paused; a second resume is refused"

expect_fail 2 "gc without an action" "$ZARRAY" gc t
expect_fail 2 "gc with an unknown action" "$ZARRAY" gc t frob
expect_fail 2 "gc rate that is not a number" "$ZARRAY" gc t rate fast
expect_fail 2 "gc rate without a number" "$ZARRAY" gc t rate
expect_fail 2 "gc pause with an argument" "$ZARRAY" gc t pause now
expect_fail 1 "gc of an unknown array" "$ZARRAY" gc nope status
exit 0
