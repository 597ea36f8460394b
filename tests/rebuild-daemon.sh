#!/bin/bash
# Shows that a failed member's data is rebuilt, live data only, by zarrayd
# on its own, through the whole stack, and that the data stays exact:
#  - a 4+2 array on 12 emulated drives; 96 MiB of random data written
#    through the NBD export (nbdcopy), the first 16 MiB then trimmed
#    (dead data the rebuild must not restore);
#  - `zarray fail` one member: status says degraded, a rebuild job runs
#    by itself; `zarray watch` follows it to the end (plain lines when
#    piped); then the array is healthy, the member "removed", and the
#    job's restored bytes are at most the live data the member held;
#  - p = 2 more failures, one at a time, each rebuilt: the array is
#    healthy with 3 members gone, and the data reads back exactly;
#  - with the policy manual (zarrayd --rebuild manual), a failure waits
#    for `zarray rebuild start`; `rebuild pause` holds it, `resume` goes
#    on; SIGKILL of zarrayd in the middle and a restart: the rebuild
#    resumes by itself (policy auto) and finishes; the data is exact;
#  - bad requests: pause with nothing running, start twice, a rate with
#    pause: one line each, exit 1.
# Skips (77) only if nbdcopy is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need python3

MiB=$((1024 * 1024))
T=120

cd "$SCRATCH"
"$ZARRAY" emu create --size 256M --zone-size 8M d{00..11}.img >/dev/null
start_daemon

"$ZARRAY" create t --data 4 --parity 2 --size 128M d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
URI=$("$ZARRAY" export t) || fail "export t"

head -c $((96 * MiB)) /dev/urandom >data.bin
timeout "$T" nbdcopy data.bin "$URI" || fail "nbdcopy in"
# Trim the first 16 MiB: dead on the drives, zeros when read.
timeout "$T" qemu-io -f raw -c "discard 0 16M" -c flush "$URI" >/dev/null 2>&1 ||
	{ command -v qemu-io >/dev/null && fail "qemu-io discard"; }
if command -v qemu-io >/dev/null; then
	dd if=/dev/zero of=data.bin bs=1M count=16 conv=notrunc status=none
fi

verify() {
	rm -f back.bin
	timeout "$T" nbdcopy "$URI" back.bin || fail "nbdcopy out ($1)"
	cmp -n $((96 * MiB)) data.bin back.bin || fail "data differs ($1)"
	cmp -n $((32 * MiB)) -i $((96 * MiB)):0 back.bin /dev/zero ||
		fail "the unwritten end is not zero ($1)"
}

# wait_state STATE: until the array's state is STATE and no job runs.
wait_healthy() {
	local i
	for i in $(seq 600); do
		[ "$(json 'd["state"] + " " + str(sum(j["state"] != "done" for j in d["jobs"]))')" = "healthy 0" ] && return 0
		sleep 0.1
	done
	fail "not healthy after 60 s: $(cat st.json)"
}

# ---- one failure, automatic rebuild, watch ----
"$ZARRAY" fail t "$SCRATCH/d03.img" 2>fail.err || fail "fail: $(cat fail.err)"
"$ZARRAY" watch t >watch.out 2>&1 || fail "watch: $(cat watch.out)"
grep -q rebuild watch.out || fail "watch showed no rebuild: $(cat watch.out)"
wait_healthy
[ "$(json '[m["state"] for m in d["members"]][3]')" = removed ] ||
	fail "d03 is not removed after its rebuild: $(cat st.json)"
# Restored bytes: the live part of what d03 held, never more than its
# share of the 80 MiB of live data plus metadata, and not nothing.
json '[j for j in d["jobs"] if j["kind"] == "rebuild"][0]["done_bytes"]' >done.txt
DONE=$(cat done.txt)
[ "$DONE" -gt 0 ] || fail "the rebuild restored nothing"
[ "$DONE" -le $((80 * MiB * 6 / 4 / 12 * 2)) ] ||
	fail "the rebuild restored $DONE bytes: more than d03's live share"
verify "after one rebuild"

# ---- p more failures, one at a time, each rebuilt ----
for d in d07 d10; do
	"$ZARRAY" fail t "$SCRATCH/$d.img" 2>fail.err || fail "fail $d: $(cat fail.err)"
	wait_healthy
done
[ "$(json 'sum(m["state"] == "removed" for m in d["members"])')" = 3 ] ||
	fail "3 members should be removed: $(cat st.json)"
verify "after three rebuilds, one at a time"

# ---- bad requests ----
"$ZARRAY" rebuild t pause 2>err.txt && fail "pause with nothing running succeeded"
[ "$(wc -l <err.txt)" = 1 ] || fail "pause: $(cat err.txt)"
rc=0
"$ZARRAY" rebuild t pause --rate 5 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "pause --rate: exit $rc, not 2 (usage)"

# ---- manual policy, pause/resume, SIGKILL mid-rebuild, auto resume ----
stop_daemon TERM
start_daemon --rebuild manual
"$ZARRAY" fail t "$SCRATCH/d01.img" 2>fail.err || fail "fail d01: $(cat fail.err)"
sleep 0.5
[ "$(json 'd["state"] + " " + str(len([j for j in d["jobs"] if j["state"] == "running"]))')" = "degraded 0" ] ||
	fail "manual policy: a rebuild started by itself: $(cat st.json)"
"$ZARRAY" rebuild t start --rate 2 2>err.txt || fail "rebuild start: $(cat err.txt)"
"$ZARRAY" rebuild t start 2>err.txt && fail "a second start succeeded"
"$ZARRAY" rebuild t pause 2>err.txt || fail "rebuild pause: $(cat err.txt)"
[ "$(json '[j["state"] for j in d["jobs"] if j["kind"] == "rebuild"][0]')" = paused ] ||
	fail "not paused: $(cat st.json)"
"$ZARRAY" rebuild t resume 2>err.txt || fail "rebuild resume: $(cat err.txt)"
"$ZARRAY" rebuild t status >rs.txt 2>&1 || fail "rebuild status: $(cat rs.txt)"
grep -q running rs.txt || fail "rebuild status: $(cat rs.txt)"
sleep 0.5
[ "$(json '[str(j["done_bytes"] < j["total_bytes"]) for j in d["jobs"] if j["kind"] == "rebuild"][0]')" = True ] ||
	fail "the rate-limited rebuild is not half way: $(cat st.json)"
stop_daemon KILL
start_daemon
"$ZARRAY" assemble t d*.img >/dev/null 2>&1 || true # recorded: already up
wait_healthy
[ "$(json '[m["state"] for m in d["members"]][1]')" = removed ] ||
	fail "d01 is not removed after the resumed rebuild: $(cat st.json)"
verify "after a rebuild interrupted by SIGKILL"
exit 0
