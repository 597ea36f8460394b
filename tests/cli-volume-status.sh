#!/bin/bash
# Shows that `zarray status` reports what the volume holds and did, and
# that the figures are the volume's own, not estimates: on a 4+2 array of
# six emulated drives, with qemu-io through the NBD export,
#  - 8 MiB written and flushed, 4 MiB read: status --json gives exactly
#    those as volume.written_bytes, read_bytes and live_bytes, at least
#    one flush, and members' written_bytes adding up to at least
#    (k+p)/k of the user's bytes (the parity is really written);
#  - 4 MiB discarded: live_bytes falls by 4 MiB; the other 4 MiB written
#    again: live_bytes stays (the old copies are dead), written_bytes
#    grows by 4 MiB; the text output says the same;
#  - after a clean stop (SIGTERM) and a restart the counters since start
#    are 0, live_bytes is the same (rebuilt from the checkpoint the stop
#    wrote: checkpoint.seq > 0), and that checkpoint is the one the
#    superblocks name (checkpoint.anchored, no anchor_mismatches), whose
#    map is in pages on the drives (checkpoint.pages > 0), and which kept
#    every group's count: recovery.counts > 0, count_mismatches 0;
#  - after 1 MiB more, a flush and SIGKILL, a restart replays stripes
#    (recovered_stripes > 0) and live_bytes counts the new MiB too; the
#    checkpoint's counts carried through that replay are the map's.
# live_bytes is what garbage collection keeps, so a counter rebuilt wrong
# at assembly would show here before GC lost or leaked data over it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

MiB=$((1024 * 1024))

cd "$SCRATCH"
"$ZARRAY" emu create --size 512M --zone-size 16M d{0..5}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
URI=$("$ZARRAY" export t) || fail "export t"

qio() {
	timeout 60 qemu-io -f raw "$@" "$URI" >qio.out 2>&1 || fail "qemu-io: $(cat qio.out)"
	! grep -qi 'fail\|error\|mismatch' qio.out || fail "qemu-io: $(cat qio.out)"
}

# expect EXPR VALUE WHAT: the Python expression on status --json t is VALUE.
expect() {
	local got
	got=$(json "$1") || fail "status --json: $(cat st.json)"
	[ "$got" = "$2" ] || fail "$3: $1 is $got, not $2"
}

[ "$(json 'd["volume"] is not None')" = True ] || fail "no volume in $(cat st.json)"
expect 'd["volume"]["written_bytes"]' 0 "a new array"
expect 'd["volume"]["live_bytes"]' 0 "a new array"
pass "a new array: volume counters present and 0"

qio -c "write -P 0xab 0 8M" -c flush -c "read -P 0xab 0 4M"
expect 'd["volume"]["written_bytes"]' $((8 * MiB)) "after 8 MiB written"
expect 'd["volume"]["live_bytes"]' $((8 * MiB)) "after 8 MiB written and flushed"
expect 'd["volume"]["read_bytes"] >= 4 << 20' True "after 4 MiB read"
expect 'd["volume"]["flushes"] >= 1' True "after a flush"
expect 'sum(m["written_bytes"] for m in d["members"]) >= (8 << 20) * 6 // 4' True \
	"device bytes of 8 MiB on 4+2"
expect 'all(m["written_bytes"] > 0 for m in d["members"])' True "every member written"
pass "8 MiB written, 4 MiB read: the volume's counters say so, the members' bytes hold the parity"

qio -c "discard 0 4M" -c flush
expect 'd["volume"]["live_bytes"]' $((4 * MiB)) "after 4 MiB discarded"
qio -c "write -P 0xcd 4M 4M" -c flush
expect 'd["volume"]["live_bytes"]' $((4 * MiB)) "after 4 MiB written over"
expect 'd["volume"]["written_bytes"]' $((12 * MiB)) "after 12 MiB written"
"$ZARRAY" status t >status.txt || fail "status t"
grep -q '^  volume  live 4 MiB' status.txt || fail "status text: $(cat status.txt)"
grep -q 'written 12 MiB' status.txt || fail "status text: $(cat status.txt)"
pass "discard and overwrite: live_bytes follows, text output too"

stop_daemon TERM
start_daemon
expect 'd["volume"]["written_bytes"]' 0 "after a restart"
expect 'd["volume"]["live_bytes"]' $((4 * MiB)) "after a clean stop and restart"
expect 'd["volume"]["checkpoint"]["seq"] > 0' True "after a clean stop"
expect 'd["volume"]["checkpoint"]["anchored"]' True "after a clean stop"
expect 'd["volume"]["checkpoint"]["anchor_mismatches"]' 0 "after a clean stop"
expect 'd["volume"]["checkpoint"]["pages"] > 0' True "after a clean stop"
expect 'd["volume"]["recovery"]["counts"] > 0' True "after a clean stop"
expect 'd["volume"]["recovery"]["count_mismatches"]' 0 "after a clean stop"
qio -c "read -P 0 0 4M" -c "read -P 0xcd 4M 4M"
pass "clean restart: live_bytes rebuilt from the checkpoint, data intact"

qio -c "write -P 0xef 16M 1M" -c flush
stop_daemon KILL
start_daemon
expect 'd["volume"]["recovered_stripes"] > 0' True "after SIGKILL"
expect 'd["volume"]["checkpoint"]["anchor_mismatches"]' 0 "after SIGKILL"
expect 'd["volume"]["live_bytes"]' $((5 * MiB)) "after SIGKILL and replay"
expect 'd["volume"]["recovery"]["counts"] > 0' True "after SIGKILL"
expect 'd["volume"]["recovery"]["count_mismatches"]' 0 "after SIGKILL"
qio -c "read -P 0xcd 4M 4M" -c "read -P 0xef 16M 1M"
pass "SIGKILL: replayed stripes counted, live_bytes includes the replayed MiB"
