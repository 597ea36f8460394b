#!/bin/bash
# Shows `zarray grow` after `zarray add`, through the daemon and real NBD
# clients:
#  - a 4+2 array on 6 emulated drives with a 64 MiB volume; status --json
#    says how far it could grow (max_size_bytes); growing past that is
#    refused with the maximum in the message;
#  - two drives added: max_size_bytes rises, and a size the six drives
#    could not hold (given with a suffix) is taken; nbdinfo --json on a
#    new connection sees it; `grow --json` prints old and new sizes;
#  - data written past the old end and across it reads back, with the
#    data written before the grow, after a clean restart of zarrayd and
#    after a SIGKILL (the size is in the superblocks before grow answers);
#  - bad sizes: smaller (shrinking is not supported), not a multiple of
#    4 KiB, beyond the maximum: exit 1 with one line; the size it has:
#    exit 0; a size that does not parse or no --size: exit 2;
#  - (regression) after a restart, a failed member and a removed one are
#    shown with the full paths zarrayd recorded, not the 23-byte hint
#    their superblocks keep.
# Skips (77) only if nbdinfo or qemu-io is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdinfo
need qemu-io
need python3

MiB=$((1024 * 1024))
cd "$SCRATCH"
# Superblocks keep only the last 23 bytes of a member's path: longer ones.
D="$(realpath "$SCRATCH")/drives"
mkdir "$D"
"$ZARRAY" emu create --size 96M --zone-size 4M "$D"/d{0..7}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"

# js EXPR: a Python expression over d, the array's status --json.
js() {
	"$ZARRAY" status --json t >st.json || fail "status --json"
	python3 -c "import json; d = json.load(open('st.json')); print($1)"
}
nbd_size() {
	nbdinfo --json "$URI" >info.json || fail "nbdinfo --json"
	python3 -c 'import json; print(json.load(open("info.json"))["exports"][0]["export-size"])'
}
# qemu_io DESC CMDS...: every command must succeed and every read match.
qemu_io() {
	local desc=$1 out
	shift
	out=$(qemu-io -f raw "$@" "$URI" 2>&1) || fail "$desc: $out"
	! grep -qi "fail\|error\|mismatch" <<<"$out" || fail "$desc: $out"
}
# grow_fails CODE DESC ARGS...: exit CODE and exactly one line on stderr.
grow_fails() {
	local want=$1 desc=$2
	shift 2
	expect_fail "$want" "$desc" "$ZARRAY" grow t "$@"
	[ "$(wc -l <"$SCRATCH/err")" -eq 1 ] || [ "$want" -eq 2 ] ||
		fail "$desc: more than one line: $(cat "$SCRATCH/err")"
}

start_daemon
"$ZARRAY" create t --data 4 --parity 2 --size 64M "$D"/d{0..5}.img >/dev/null 2>err.txt ||
	fail "create: $(cat err.txt)"
OLD=$((64 * MiB))
[ "$(nbd_size)" = "$OLD" ] || fail "nbdinfo size $(nbd_size), want $OLD"
MAX6=$(js 'd["max_size_bytes"]')
[ "$MAX6" -gt "$OLD" ] || fail "max_size_bytes $MAX6 not above the size $OLD"
qemu_io "write before growing" -c "write -P 0x11 0 $OLD" -c flush

# ---- refusals ----
grow_fails 1 "beyond the maximum" --size $((MAX6 + 4096))
grep -q "at most $MAX6 bytes" "$SCRATCH/err" || fail "the maximum is not said: $(cat "$SCRATCH/err")"
grow_fails 1 "smaller" --size 32M
grep -q "shrinking is not supported" "$SCRATCH/err" || fail "shrink said: $(cat "$SCRATCH/err")"
grow_fails 1 "not a multiple of 4 KiB" --size $((OLD + 512))
grep -q "multiple of 4 KiB" "$SCRATCH/err" || fail "alignment said: $(cat "$SCRATCH/err")"
grow_fails 2 "a size that does not parse" --size 12Q
grow_fails 2 "no --size"
"$ZARRAY" grow t --size 64M 2>err.txt || fail "grow to the same size: $(cat err.txt)"
grep -q "already" err.txt || fail "same size said: $(cat err.txt)"
[ "$(js 'd["size_bytes"]')" = "$OLD" ] || fail "a refused grow changed the size"
pass "refused: beyond $MAX6, smaller, unaligned (exit 1, one line); bad syntax (exit 2); same size: no-op"

# ---- add, grow ----
"$ZARRAY" add t "$D/d6.img" "$D/d7.img" 2>err.txt || fail "add: $(cat err.txt)"
MAX8=$(js 'd["max_size_bytes"]')
[ "$MAX8" -gt "$MAX6" ] || fail "max_size_bytes $MAX8 did not grow with two drives (was $MAX6)"
NEW=$(((MAX6 / MiB + 1) * MiB))
[ "$NEW" -le "$MAX8" ] || fail "test setup: $NEW MiB does not fit $MAX8"
"$ZARRAY" grow t --size "$((NEW / MiB))M" --json >grow.json 2>err.txt || fail "grow: $(cat err.txt)"
python3 - "$OLD" "$NEW" <<'EOF' || fail "grow --json: $(cat grow.json)"
import json, sys
d = json.load(open("grow.json"))
assert d == {"name": "t", "old_size_bytes": int(sys.argv[1]),
             "size_bytes": int(sys.argv[2])}, d
EOF
[ "$(js 'd["size_bytes"]')" = "$NEW" ] || fail "status size after grow: $(cat st.json)"
[ "$(nbd_size)" = "$NEW" ] || fail "nbdinfo size $(nbd_size) after grow, want $NEW"
pass "add raised max_size_bytes $MAX6 -> $MAX8; grew $OLD -> $NEW; a new NBD connection sees it"

# Past the old end, across it, and the very end of the new volume.
LAST=$((NEW - MiB))
qemu_io "write past the old end" -c "write -P 0x22 $OLD 8M" \
	-c "write -P 0x33 $((OLD - MiB)) 2M" -c "write -P 0x44 $LAST 1M" -c flush
check_all() {
	qemu_io "read back ($1)" -c "read -P 0x11 0 $((OLD - MiB))" \
		-c "read -P 0x33 $((OLD - MiB)) 2M" -c "read -P 0x22 $((OLD + MiB)) 7M" \
		-c "read -P 0x0 $((OLD + 8 * MiB)) $((LAST - OLD - 8 * MiB))" \
		-c "read -P 0x44 $LAST 1M"
	[ "$(nbd_size)" = "$NEW" ] || fail "size $(nbd_size) ($1), want $NEW"
}
check_all "online"
stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC"
start_daemon
check_all "after a restart"
pass "data past the old end reads back, also after a restart"

# The size is durable when grow answers: grow again, kill at once.
NEW2=$((NEW + 4 * MiB))
"$ZARRAY" grow t --size "$NEW2" 2>err.txt || fail "grow again: $(cat err.txt)"
stop_daemon KILL
start_daemon
[ "$(js 'd["size_bytes"]')" = "$NEW2" ] || fail "size after SIGKILL: $(cat st.json)"
NEW=$NEW2 # the end of the volume moved; the block at LAST is still there
[ "$(nbd_size)" = "$NEW" ] || fail "nbdinfo after SIGKILL: $(nbd_size)"
qemu_io "read back after SIGKILL" -c "read -P 0x11 0 $((OLD - MiB))" \
	-c "read -P 0x22 $((OLD + MiB)) 7M" -c "read -P 0x44 $LAST 1M"
pass "a grow answered just before a SIGKILL is kept: $NEW2 bytes"

# ---- full member paths after a restart (regression) ----
# The removal first: with d1 failed, six drives could not hold the
# grown volume, and zarray remove refuses a drain that does not fit.
jobs_end() {
	for i in $(seq 600); do
		[ "$(js 'sum(j["state"] != "done" for j in d["jobs"])')" = 0 ] && return
		sleep 0.1
	done
	fail "jobs did not end ($1): $(cat st.json)"
}
"$ZARRAY" remove t "$D/d2.img" 2>err.txt || fail "remove: $(cat err.txt)"
jobs_end remove
"$ZARRAY" fail t "$D/d1.img" 2>err.txt || fail "fail: $(cat err.txt)"
jobs_end fail
stop_daemon TERM
start_daemon
paths_ok() {
	python3 - "$D" <<'EOF'
import json, sys
d = json.load(open("st.json"))
want = ["%s/d%d.img" % (sys.argv[1], i) for i in range(8)]
got = [m["path"] for m in d["members"]]
assert got == want, got
st = {m["path"].rsplit("/", 1)[1]: m["state"] for m in d["members"]}
assert st["d1.img"] in ("failed", "removed") and st["d2.img"] == "removed", st
EOF
}
js 1 >/dev/null
paths_ok || fail "member paths after a restart: $(cat st.json)"
"$ZARRAY" status t | grep " $D/d2.img  *removed" >/dev/null || fail "status text: $("$ZARRAY" status t)"
qemu_io "read back after fail and remove" -c "read -P 0x11 0 $((OLD - MiB))" \
	-c "read -P 0x22 $((OLD + MiB)) 7M" -c "read -P 0x44 $LAST 1M"
pass "after a restart a failed and a removed member show their full paths"
exit 0
