#!/bin/bash
# Shows that drives are added, removed and replaced online, under write
# load, with every byte verified through the NBD export:
#  - a 4+2 array on 8 emulated drives with 64 MiB of random data
#    (nbdcopy), while a qemu-io loop keeps writing known patterns to a
#    second region the whole time;
#  - `zarray add` two drives: they are online members at once and new
#    data lands on them (their used bytes grow); a drive of another
#    array, a drive twice, a path that is not a drive: refused, exit 1;
#  - `zarray remove` one drive: a drain job runs, the drive ends
#    "removed" with its superblock cleared and zarrayd no longer holds it
#    open (zarray zones still works on it), the array stays healthy
#    throughout;
#  - `zarray replace OLD NEW`: NEW is added, OLD drains onto it and ends
#    removed and released; NEW holds data; OLD then goes into a new array
#    while the first runs; paused (if not done already), status shows
#    which member replaces which (text and replaced_by), and no longer
#    once it is done;
#  - a second replace, paused (if not done already), whose new drive is
#    then failed: the old drive is back online at once, and once the new
#    one's columns are rebuilt it is removed, the array healthy;
#  - removing so many that fewer than k+p drives would be left: refused;
#  - the removed drive added again under its old path: a new online
#    member (the old one stays listed as removed);
#  - at the end the random data and the last pattern of every block of
#    the written region read back exactly; after a restart of zarrayd
#    too (the record names the added drives, the drive added again once,
#    and the drive now in the other array is left to it: both arrays
#    come up).
# Skips (77) only if nbdcopy or qemu-io is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need qemu-io
need python3

MiB=$((1024 * 1024))
T=120
cd "$SCRATCH"
"$ZARRAY" emu create --size 256M --zone-size 8M d{0..7}.img n{0..4}.img >/dev/null
"$ZARRAY" emu create --size 256M --zone-size 8M other{0..2}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 --size 160M d*.img >/dev/null 2>err.txt ||
	fail "create: $(cat err.txt)"
"$ZARRAY" create o --data 1 --parity 2 other*.img >/dev/null 2>err.txt ||
	fail "create o: $(cat err.txt)"
URI=$("$ZARRAY" export t)
head -c $((64 * MiB)) /dev/urandom >data.bin
timeout "$T" nbdcopy data.bin "$URI" || fail "nbdcopy in"

member_state() { json "[m['state'] for m in d['members'] if m['path'].endswith('/$1')][0]"; }

# The writer: pattern p to block-aligned 256 KiB pieces of 64..96 MiB,
# in rounds; the last round it finished is in round.txt.
writer() {
	local r=1 i
	while [ ! -e stop.flag ]; do
		cmds=()
		for i in $(seq 0 127); do
			cmds+=(-c "write -P $((r % 250 + 1)) $((64 * MiB + i * 256 * 1024)) 256k")
		done
		timeout "$T" qemu-io -f raw "${cmds[@]}" -c flush "$URI" >/dev/null || return 1
		echo "$r" >round.txt
		r=$((r + 1))
	done
}
writer &
WPID=$!

wait_job_end() {
	local i
	for i in $(seq 600); do
		[ "$(json 'str(sum(j["state"] != "done" for j in d["jobs"]))')" = 0 ] && return 0
		sleep 0.1
	done
	fail "the job did not end in 60 s: $(cat st.json)"
}

# ---- add ----
"$ZARRAY" add t "$SCRATCH/n0.img" "$SCRATCH/n1.img" 2>err.txt || fail "add: $(cat err.txt)"
[ "$(member_state n0.img) $(member_state n1.img)" = "online online" ] ||
	fail "added drives are not online: $(cat st.json)"
rc=0; "$ZARRAY" add t "$SCRATCH/other0.img" 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "in use" err.txt || fail "adding a running array's drive: exit $rc: $(cat err.txt)"
"$ZARRAY" stop o 2>err.txt || fail "stop o: $(cat err.txt)"
rc=0; "$ZARRAY" add t "$SCRATCH/other0.img" 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "belongs to array 'o'" err.txt || fail "adding another array's drive: exit $rc: $(cat err.txt)"
rc=0; "$ZARRAY" add t "$SCRATCH/n0.img" 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "adding a member again: exit $rc"
rc=0; "$ZARRAY" add t "$SCRATCH/data.bin" 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "adding a plain file: exit $rc"
sleep 2 # the writer's patterns reach the new drives
[ "$(json "[m['used_bytes'] > 0 for m in d['members'] if m['path'].endswith('/n0.img')][0]")" = True ] ||
	fail "nothing was written to the added drive: $(cat st.json)"

# ---- remove ----
"$ZARRAY" remove t "$SCRATCH/d1.img" 2>err.txt || fail "remove: $(cat err.txt)"
[ "$(json 'd["state"]')" = healthy ] || fail "not healthy while draining: $(cat st.json)"
wait_job_end
[ "$(member_state d1.img)" = removed ] || fail "d1 not removed: $(cat st.json)"
"$ZARRAY" zones d1.img >/dev/null 2>&1 || fail "zarray zones on the removed drive"
# Released: zarrayd lets go of the drive (at once, or once the resets of
# the zones it left are done).
# Not grep -q: under pipefail, ls killed by SIGPIPE when grep stops
# early would fail the pipeline (and did, once).
held() { ls -l "/proc/$DAEMON_PID/fd" 2>/dev/null | grep "/$1\$" >/dev/null; }
released() {
	local i
	for i in $(seq 50); do
		held "$1" || return 0
		sleep 0.1
	done
	fail "zarrayd still holds $1 open after its removal"
}
held d0.img || fail "the fd check sees no member's drive (d0.img)"
released d1.img

# ---- replace ----
"$ZARRAY" replace t "$SCRATCH/d2.img" "$SCRATCH/n2.img" 2>err.txt || fail "replace: $(cat err.txt)"
# Paused (unless already done), status says which member replaces which.
if "$ZARRAY" rebuild t pause 2>/dev/null; then
	old=$(json "[m['index'] for m in d['members'] if m['path'].endswith('/d2.img')][0]")
	new=$(json "[m['index'] for m in d['members'] if m['path'].endswith('/n2.img')][0]")
	[ "$(json "[m['replaced_by'] for m in d['members'] if m['replaced_by'] is not None]")" = "[$new]" ] ||
		fail "replaced_by while the replace is paused: $(cat st.json)"
	"$ZARRAY" status t >st.txt || fail "status t"
	grep "^  replace $old (.*/d2.img) by $new (.*/n2.img)\$" st.txt >/dev/null ||
		fail "status does not show the replace: $(cat st.txt)"
	"$ZARRAY" rebuild t resume 2>err.txt || fail "rebuild resume: $(cat err.txt)"
	pass "status shows the replace while it is paused"
else
	pass "the replace was done before it could be paused"
fi
wait_job_end
[ "$(json "[m['replaced_by'] for m in d['members'] if m['replaced_by'] is not None]")" = "[]" ] ||
	fail "replaced_by after the replace: $(cat st.json)"
[ "$(member_state d2.img) $(member_state n2.img)" = "removed online" ] ||
	fail "after replace: $(cat st.json)"
[ "$(json "[m['used_bytes'] > 0 for m in d['members'] if m['path'].endswith('/n2.img')][0]")" = True ] ||
	fail "the new drive holds nothing: $(cat st.json)"
[ "$(json 'd["state"]')" = healthy ] || fail "not healthy after replace: $(cat st.json)"
released d2.img
# Not locked any more: another array may have it while this one runs.
"$ZARRAY" create o2 --data 1 --parity 1 d2.img n3.img >/dev/null 2>err.txt ||
	fail "create o2 with the replaced drive: $(cat err.txt)"

# ---- a replace whose new drive fails: the old drive stays ----
"$ZARRAY" replace t "$SCRATCH/d7.img" "$SCRATCH/n4.img" 2>err.txt || fail "replace d7: $(cat err.txt)"
if "$ZARRAY" rebuild t pause 2>/dev/null; then
	"$ZARRAY" fail t "$SCRATCH/n4.img" 2>err.txt || fail "fail n4: $(cat err.txt)"
	[ "$(member_state d7.img) $(member_state n4.img)" = "online failed" ] ||
		fail "d7 not back in service when n4 failed: $(cat st.json)"
	"$ZARRAY" rebuild t resume 2>err.txt || fail "resume after n4 failed: $(cat err.txt)"
	wait_job_end
	[ "$(member_state d7.img) $(member_state n4.img)" = "online removed" ] ||
		fail "after n4 failed and was rebuilt: $(cat st.json)"
	[ "$(json "[m['replaced_by'] for m in d['members'] if m['replaced_by'] is not None]")" = "[]" ] ||
		fail "replaced_by after n4 failed: $(cat st.json)"
	[ "$(json 'd["state"]')" = healthy ] || fail "not healthy after n4 failed: $(cat st.json)"
	pass "a replace whose new drive fails leaves the old drive in service"
else
	pass "the second replace was done before it could be paused"
fi

# ---- too few left ----
rc=0
"$ZARRAY" remove t "$SCRATCH"/d{0,3,4,5,6}.img 2>err.txt || rc=$?
[ "$rc" = 1 ] && grep -q 'writable members' err.txt || fail "removing too many: exit $rc: $(cat err.txt)"

# ---- the removed drive can join again ----
"$ZARRAY" add t "$SCRATCH/d1.img" 2>err.txt || fail "adding d1 again: $(cat err.txt)"
d1_states() { json "' '.join(sorted(m['state'] for m in d['members'] if m['path'].endswith('/d1.img')))"; }
[ "$(d1_states)" = "online removed" ] || fail "d1 added again: $(cat st.json)"

# ---- verify ----
touch stop.flag
wait "$WPID" || fail "the writer failed"
R=$(cat round.txt)
verify() {
	rm -f back.bin
	timeout "$T" nbdcopy "$URI" back.bin || fail "nbdcopy out ($1)"
	cmp -n $((64 * MiB)) data.bin back.bin || fail "random data differs ($1)"
	python3 - "$R" <<'PY' || fail "patterns differ ($1)"
import sys
r = int(sys.argv[1])
with open("back.bin", "rb") as f:
    f.seek(64 << 20)
    for i in range(128):
        b = f.read(256 << 10)
        want = (r % 250 + 1, (r + 1) % 250 + 1)  # the last round, or one started after
        assert b[0] in want and b == bytes([b[0]]) * len(b), (i, b[0], want)
PY
}
verify "online"
stop_daemon TERM
start_daemon
verify "after a restart"
[ "$(d1_states)" = "online removed" ] || fail "d1 after a restart: $(cat st.json)"
"$ZARRAY" status o2 >/dev/null 2>err.txt || fail "o2 after a restart: $(cat err.txt)"
exit 0
