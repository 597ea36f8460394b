#!/bin/bash
# Shows the array commands end to end on emulated drives, through a real
# zarrayd: create (recorded in the state directory), status in text, JSON
# (every documented field) and --test codes, list, watch, rebuild/scrub
# status; stop (record removed) and assemble (record back); a daemon
# restart assembling the recorded array again; fail (degraded, exit 1
# from --test; a second failure: unusable, exit 2); destroy (record gone,
# drives no longer assemble); commands arriving while another runs wait
# their turn (ping excepted). Bad input that needs the array layer: a
# drive already in use (create, add, replace and assemble name the
# running array and member that hold it) or in another array, a file
# that is not a drive, a bad chunk size, a duplicate name; refusals of
# add, remove, replace,
# rebuild and scrub (their happy paths are in other scripts); export
# prints the NBD URI that create printed (--json too). Every command
# that changes an array is logged by zarrayd with the uid and the pid of
# the zarray process that sent it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 64M --zone-size 4M d{0..4}.img >/dev/null
echo "not a drive" >plain
start_daemon

# logged WHAT CMD...: run CMD (it must succeed, stderr in ./err); then
# zarrayd's log must have "WHAT (uid UID pid PID)", PID being the zarray
# process that ran. WHAT is an extended regular expression.
logged() {
	local what=$1 pid rc=0
	shift
	"$@" 2>err &
	pid=$!
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || fail "$*: exit $rc: $(cat err)"
	grep -Eq "^zarrayd: $what \(uid $(id -u) pid $pid\)\$" "$DLOG" ||
		fail "not logged with uid $(id -u) and pid $pid: '$what': $(tail -n 5 "$DLOG")"
}

logged "t: create 2\+1 on 3 devices" "$ZARRAY" create t --data 2 --parity 1 d0.img d1.img d2.img >out
grep -q "^zarray create: t created, uuid [0-9a-f-]\{36\}" err || fail "create said: $(cat err)"
[ "$(cat out)" = "nbd+unix:///t?socket=$RUN/t.nbd" ] || fail "create printed: $(cat out)"
rec="$STATE/arrays/t.conf"
[ -f "$rec" ] || fail "no state record"
grep -qx "name t" "$rec" && grep -qx "member $SCRATCH/d2.img" "$rec" &&
	[ "$(grep -c '^member ' "$rec")" -eq 3 ] || fail "record: $(cat "$rec")"
pass "create 2+1: uuid reported, state recorded"

"$ZARRAY" status t >out || fail "status: exit $?"
grep -q "^t: healthy, 2+1, chunk 64 KiB, 3 members" out || fail "status: $(cat out)"
grep -Eq "^ +1 +$SCRATCH/d1.img +online +64 MiB" out || fail "member line: $(cat out)"
"$ZARRAY" status --test t >/dev/null || fail "status --test of a healthy array: exit $?"
"$ZARRAY" list | grep -Eq "^t +healthy +2\+1 " || fail "list: $("$ZARRAY" list)"
pass "status and list in text; --test says healthy (0)"

check_json() {
	python3 -c '
import json, sys
want_state, failed = sys.argv[1], set(int(i) for i in sys.argv[2].split(",") if i)
d = json.load(sys.stdin)
for k in ("name", "uuid", "state", "data", "parity", "chunk_bytes",
          "size_bytes", "used_bytes", "export", "members", "jobs"):
    assert k in d, k
assert d["name"] == "t" and d["state"] == want_state, d
assert d["data"] == 2 and d["parity"] == 1 and d["chunk_bytes"] == 65536
assert "uri" in d["export"]
assert isinstance(d["size_bytes"], int) and isinstance(d["used_bytes"], int)
assert len(d["members"]) == 3
for i, m in enumerate(d["members"]):
    for k in ("path", "uuid", "index", "state", "size_bytes",
              "used_bytes", "errors"):
        assert k in m, k
    assert set(m["errors"]) >= {"read", "write", "checksum"}
    assert m["index"] == i and m["size_bytes"] == 64 << 20
    assert m["path"].endswith("/d%d.img" % i)
    # A failed member that held nothing live is retired: "removed".
    assert m["state"] in (("failed", "removed") if i in failed else ("online",)), m
    assert len(m["uuid"]) == 36
for j in d["jobs"]:
    for k in ("kind", "state", "done_bytes", "total_bytes", "rate_bps", "eta_s"):
        assert k in j, k
' "$@"
}
"$ZARRAY" status t --json | check_json healthy "" || fail "status --json"
"$ZARRAY" --json status | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [a["name"] for a in d["arrays"]] == ["t"], d' || fail "status --json of all"
"$ZARRAY" list --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
a = d["arrays"][0]
assert a["name"] == "t" and a["state"] == "healthy" and a["nr_members"] == 3, a' ||
	fail "list --json"
pass "--json: status (one and all) and list parse and have the fields"

"$ZARRAY" watch t >out || fail "watch: exit $?"
grep -q "^t: no background job" out || fail "watch: $(cat out)"
[ "$("$ZARRAY" watch --json t)" = '{"name":"t","state":"healthy","final":true,"jobs":[]}' ] ||
	fail "watch --json: $("$ZARRAY" watch --json t)"
"$ZARRAY" rebuild t status | grep "^t: no rebuild" >/dev/null || fail "rebuild status"
[ "$("$ZARRAY" rebuild t status --json)" = '{"name":"t","jobs":[]}' ] || fail "rebuild status --json"
"$ZARRAY" scrub t status | grep "^t: no scrub" >/dev/null || fail "scrub status"
pass "watch, rebuild status and scrub status with no job"

# Lifecycle and job commands: their refusals (the happy paths are in
# tests/rebuild-daemon.sh and tests/lifecycle-daemon.sh).
expect_fail 1 "add: not a drive" "$ZARRAY" add t plain
grep -q "plain: not a zoned drive" err || fail "add plain: $(cat err)"
expect_fail 1 "remove: too few left" "$ZARRAY" remove t d2.img
grep -q "writable members" err || fail "remove: $(cat err)"
expect_fail 1 "replace: NEW not a drive" "$ZARRAY" replace t d2.img plain
expect_fail 1 "rebuild pause: none running" "$ZARRAY" rebuild t pause
expect_fail 1 "rebuild resume: not paused" "$ZARRAY" rebuild t resume
expect_fail 1 "scrub stop: none running" "$ZARRAY" scrub t stop
logged "t: rebuild start" "$ZARRAY" rebuild t start
logged "t: scrub start" "$ZARRAY" scrub t start
"$ZARRAY" watch t >out 2>&1 || fail "watch after scrub start: $(cat out)"
pass "add, remove, replace, rebuild and scrub refusals; rebuild and scrub start"
[ "$("$ZARRAY" export t)" = "nbd+unix:///t?socket=$RUN/t.nbd" ] || fail "export: $("$ZARRAY" export t)"
for a in "export t --json" "--json export t"; do
	[ "$("$ZARRAY" $a)" = "{\"name\":\"t\",\"export\":{\"uri\":\"nbd+unix:///t?socket=$RUN/t.nbd\"}}" ] ||
		fail "$a: $("$ZARRAY" $a 2>&1)"
done
pass "export prints the URI create printed, also as JSON"

expect_fail 1 "create: name taken" "$ZARRAY" create t --data 2 --parity 1 d3.img d4.img plain
grep -q "an array named 't' is running" err || fail "message: $(cat err)"
expect_fail 1 "create: a drive in use" "$ZARRAY" create u --data 2 --parity 1 d3.img d0.img d4.img
inuse="$SCRATCH/d0.img is in use: member 0 (online) of the running array 't'"
grep -qx "zarray create: $inuse" err || fail "message: $(cat err)"
expect_fail 1 "add: a drive in use" "$ZARRAY" add t d0.img
grep -qx "zarray add: $inuse" err || fail "message: $(cat err)"
expect_fail 1 "replace: NEW in use" "$ZARRAY" replace t d1.img d0.img
grep -qx "zarray replace: $inuse" err || fail "message: $(cat err)"
expect_fail 1 "assemble: a drive in use" "$ZARRAY" assemble u d0.img
grep -qx "zarray assemble: $inuse" err || fail "message: $(cat err)"
expect_fail 1 "create: not a drive" "$ZARRAY" create u --data 2 --parity 1 plain d3.img d4.img
grep -q "plain: not a zoned drive" err || fail "message: $(cat err)"
expect_fail 1 "create: bad chunk" "$ZARRAY" create u --data 1 --parity 1 --chunk 3000 d3.img d4.img
grep -q "chunk" err || fail "message: $(cat err)"
[ ! -e "$STATE/arrays/u.conf" ] || fail "a refused create left a record"

logged "t: stop" "$ZARRAY" stop t
[ ! -e "$rec" ] || fail "record kept after stop"
expect_fail 1 "status after stop" "$ZARRAY" status t
expect_fail 1 "create over a stopped array's drives" "$ZARRAY" create u --data 2 --parity 1 d0.img d1.img d2.img
grep -q "belongs to array 't'" err || fail "message: $(cat err)"
logged "t: assemble from 3 devices" "$ZARRAY" assemble t d2.img d0.img d1.img >/dev/null
grep -q "t started, healthy, 2+1, 3 members" err || fail "assemble said: $(cat err)"
[ -f "$rec" ] || fail "assemble did not record the array"
pass "stop forgets the array, assemble (any order) brings it back"

stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "daemon exit $DAEMON_RC"
grep -q "t: stopping" "$DLOG" || fail "SIGTERM did not stop the array"
start_daemon
"$ZARRAY" status --test t >/dev/null || fail "not assembled at start: $(tail -n 3 "$DLOG")"
grep -q "t: assembled from 3 recorded devices" "$DLOG" || fail "start-up assembly not logged"
pass "restart: the recorded array is assembled again"

logged "t: fail $SCRATCH/d1.img" "$ZARRAY" fail t d1.img
rc=0; "$ZARRAY" status --test t >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "status --test degraded: exit $rc"
"$ZARRAY" status t --json | check_json degraded 1 || fail "degraded --json"
expect_fail 1 "fail: already failed" "$ZARRAY" fail t d1.img
expect_fail 1 "fail: not a member" "$ZARRAY" fail t d4.img
grep -q "not a member" err || fail "message: $(cat err)"
"$ZARRAY" fail t d0.img 2>err || fail "second fail: $(cat err)"
rc=0; "$ZARRAY" status --test >/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "status --test unusable: exit $rc"
"$ZARRAY" status t --json | check_json failed 0,1 || fail "failed --json"
pass "fail: degraded (--test 1), then unusable (--test 2)"

# While a slow create runs (its drives model 100 ms per operation, and
# the array layer runs the loop inside the call), a ping is answered at
# once and other commands wait their turn: the list sees the new array.
"$ZARRAY" emu create --size 64M --zone-size 4M --lat 100000 s{0..2}.img >/dev/null
"$ZARRAY" create slow --data 2 --parity 1 s0.img s1.img s2.img 2>slow.err &
cpid=$!
for i in $(seq 100); do
	grep -q "slow: create 2+1" "$DLOG" && break
	sleep 0.02
done
python3 - "$SOCK" <<'PY' || fail "ping during a create"
import socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
t0 = time.monotonic()
s.connect(sys.argv[1])
body = b"\x08\x01\x10\x09\x82\x01\x00"
s.sendall(struct.pack(">I", len(body)) + body)
n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
r = s.recv(n, socket.MSG_WAITALL)
assert b"\x82\x01" in r, r          # a Pong
assert time.monotonic() - t0 < 0.5, time.monotonic() - t0
PY
"$ZARRAY" list >list.out || fail "list during create"
wait "$cpid" || fail "slow create: $(cat slow.err)"
grep -q "^slow " list.out || fail "list ran before the create ended: $(cat list.out)"
"$ZARRAY" stop slow 2>/dev/null || fail "stop slow"
pass "during a slow create: ping answered at once, list waited and saw it"

logged "t: destroy" "$ZARRAY" destroy t
[ ! -e "$rec" ] || fail "record kept after destroy"
expect_fail 1 "status after destroy" "$ZARRAY" status t
expect_fail 1 "assemble after destroy" "$ZARRAY" assemble t d0.img d1.img d2.img
"$ZARRAY" create u --data 2 --parity 1 d0.img d1.img d2.img 2>err ||
	fail "create over destroyed drives: $(cat err)"
"$ZARRAY" destroy u 2>/dev/null || fail "destroy u"
pass "destroy: drives free again, nothing recorded"
pass "create, rebuild start, scrub start, stop, assemble, fail, destroy: each logged with the uid and pid of its zarray process"
