#!/bin/bash
# Shows that an array on exactly k+p drives keeps taking writes with up
# to p of them failed (degraded segments: docs/design.md 6.5), through
# the whole stack, and comes back to full redundancy:
#  - a 4+2 array on 6 emulated drives; 48 MiB of random data written
#    through the NBD export (nbdcopy) while healthy;
#  - `zarray fail` two members: the array is degraded, not failed; 32 MiB
#    more (half over the old data, half past it) written with qemu-io at
#    offsets, read back exactly (nbdcopy + cmp) with FLUSH succeeding;
#  - zarrayd stopped and started again: assembly recovers the degraded
#    segments from the drives and the data is still exact;
#  - `zarray replace` one failed member with a new drive, `zarray add`
#    another, which starts the rebuild again: it restores the lost and
#    the absent columns, the array is healthy with both failed members
#    removed, and the data is exact, also after another restart.
# Skips (77) if nbdcopy or qemu-io is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need qemu-io
need python3

MiB=$((1024 * 1024))
T=120

cd "$SCRATCH"
"$ZARRAY" emu create --size 256M --zone-size 8M d{00..05}.img >/dev/null
start_daemon

"$ZARRAY" create t --data 4 --parity 2 --size 96M d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
URI=$("$ZARRAY" export t) || fail "export t"

# verify WHEN: the export holds data.bin, zeros after it.
verify() {
	rm -f back.bin
	timeout "$T" nbdcopy "$URI" back.bin || fail "nbdcopy out ($1)"
	cmp -n $((64 * MiB)) data.bin back.bin || fail "data differs ($1)"
	cmp -n $((32 * MiB)) -i $((64 * MiB)):0 back.bin /dev/zero ||
		fail "the unwritten end is not zero ($1)"
}

# put OFF_MIB LEN_MIB: write data.bin's bytes there, 8 MiB at a time,
# and FLUSH (which must succeed: nothing is lost).
put() {
	local off
	for ((off = $1; off < $1 + $2; off += 8)); do
		dd if=data.bin of=piece.bin bs=1M skip="$off" count=8 status=none
		timeout "$T" qemu-io -f raw -c "write -q -s piece.bin ${off}M 8M" \
			"$URI" >qio.out 2>&1 || fail "qemu-io write at ${off}M: $(cat qio.out)"
		grep -qi error qio.out && fail "qemu-io write at ${off}M: $(cat qio.out)"
	done
	timeout "$T" qemu-io -f raw -c flush "$URI" >qio.out 2>&1 ||
		fail "flush: $(cat qio.out)"
	if grep -qi error qio.out; then fail "flush: $(cat qio.out)"; fi
}

wait_healthy() {
	local i
	for i in $(seq 600); do
		[ "$(json 'd["state"] + " " + str(sum(j["state"] != "done" for j in d["jobs"]))')" = "healthy 0" ] && return 0
		sleep 0.1
	done
	fail "not healthy after 60 s: $(cat st.json)"
}

# ---- healthy: 48 MiB ----
head -c $((64 * MiB)) /dev/zero >data.bin
head -c $((48 * MiB)) /dev/urandom | dd of=data.bin conv=notrunc status=none
head -c $((48 * MiB)) data.bin >first.bin
timeout "$T" nbdcopy first.bin "$URI" || fail "nbdcopy in"
verify "healthy"

# ---- two of six failed: still writable ----
"$ZARRAY" fail t "$SCRATCH/d01.img" 2>fail.err || fail "fail d01: $(cat fail.err)"
"$ZARRAY" fail t "$SCRATCH/d04.img" 2>fail.err || fail "fail d04: $(cat fail.err)"
[ "$(json 'd["state"]')" = degraded ] || fail "not degraded: $(cat st.json)"
head -c $((32 * MiB)) /dev/urandom | dd of=data.bin bs=1M seek=32 conv=notrunc status=none
put 32 32
verify "two members failed"
[ "$(json 'd["state"]')" = degraded ] || fail "not degraded after writes: $(cat st.json)"
grep -q "opened degraded" "$DLOG" || fail "no degraded segment was opened"
grep -q "no segment can be opened" "$DLOG" && fail "writes were refused: $(grep 'no segment' "$DLOG" | tail -1)"

# ---- restart: assembly recovers the degraded segments ----
stop_daemon TERM
[ "$DAEMON_RC" = 0 ] || fail "zarrayd exited $DAEMON_RC on TERM"
start_daemon
"$ZARRAY" assemble t d*.img >/dev/null 2>&1 || true # recorded: already up
URI=$("$ZARRAY" export t 2>/dev/null) || URI=$("$ZARRAY" export t) || fail "export t"
verify "after a restart, degraded"
[ "$(json 'd["state"]')" = degraded ] || fail "not degraded after restart: $(cat st.json)"
# More writes after the restart, then a FLUSH: still fine.
head -c $((8 * MiB)) /dev/urandom | dd of=data.bin bs=1M seek=8 conv=notrunc status=none
put 8 8
verify "written after the restart"

# ---- new drives: replace one, add one, rebuild ----
"$ZARRAY" emu create --size 256M --zone-size 8M e00.img e01.img >/dev/null
"$ZARRAY" replace t "$SCRATCH/d01.img" "$SCRATCH/e00.img" 2>rep.err ||
	fail "replace: $(cat rep.err)"
"$ZARRAY" add t "$SCRATCH/e01.img" 2>add.err || fail "add: $(cat add.err)"
# The replace's rebuild may have ended short of a member: the add starts
# it again by itself (policy auto), for the columns that waited.
wait_healthy
[ "$(json 'sum(m["state"] == "removed" for m in d["members"])')" = 2 ] ||
	fail "d01 and d04 should be removed: $(cat st.json)"
verify "rebuilt onto new drives"
# Full width again: new data, healthy.
head -c $((8 * MiB)) /dev/urandom | dd of=data.bin bs=1M seek=56 conv=notrunc status=none
put 56 8
[ "$(json 'd["state"]')" = healthy ] || fail "not healthy after writes: $(cat st.json)"
verify "healthy again"

stop_daemon TERM
start_daemon
"$ZARRAY" assemble t d*.img e*.img >/dev/null 2>&1 || true
URI=$("$ZARRAY" export t 2>/dev/null) || fail "export t"
wait_healthy
verify "after the last restart"
exit 0
