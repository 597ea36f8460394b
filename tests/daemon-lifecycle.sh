#!/bin/bash
# Shows zarrayd's life cycle on private run and state directories: it
# starts and answers, creates its directories and socket with the right
# modes, refuses a second instance on the same socket or state directory
# (and keeps serving), exits 0 on SIGTERM, SIGINT and `zarray shutdown`
# and removes its socket, replaces the stale socket a killed daemon left,
# and without -f returns only once it serves. Bad zarrayd command lines
# (--poll-us and --idle-gc-ms out of range too) exit 2, and --poll-us 0 serves; a run directory it cannot create exits 1 with the reason.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"

start_daemon
"$ZARRAY" list 2>"$SCRATCH/err" >"$SCRATCH/out"
[ ! -s "$SCRATCH/out" ] || fail "list of no array printed data: $(cat "$SCRATCH/out")"
grep -q "no array is running" "$SCRATCH/err" || fail "list: $(cat "$SCRATCH/err")"
[ "$("$ZARRAY" --json list)" = '{"arrays":[]}' ] || fail "--json list: $("$ZARRAY" --json list)"
pass "started; list answers (no arrays)"

[ "$(stat -c %a "$SOCK")" = 660 ] || fail "socket mode $(stat -c %a "$SOCK")"
[ -S "$SOCK" ] || fail "$SOCK is not a socket"
[ "$(stat -c %a "$RUN")" = 750 ] || fail "run dir mode $(stat -c %a "$RUN")"
[ "$(stat -c %a "$STATE")" = 750 ] || fail "state dir mode $(stat -c %a "$STATE")"
[ -d "$STATE/arrays" ] || fail "no $STATE/arrays"
[ "$(cat "$SOCK.lock")" = "$DAEMON_PID" ] || fail "lock file holds '$(cat "$SOCK.lock")'"
pass "socket 0660, run and state dirs 0750, lock file names the pid"

first=$DAEMON_PID
expect_fail 1 "second instance on the same socket" \
	"$ZARRAYD" -f -s "$SOCK" --run-dir "$RUN" --state-dir "$SCRATCH/state2"
grep -q "another zarrayd (pid $first) is already using $SOCK" "$SCRATCH/err" ||
	fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "second instance on the same state directory" \
	"$ZARRAYD" -f -s "$SCRATCH/other.sock" --run-dir "$RUN" --state-dir "$STATE"
grep -q "already using $STATE" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
[ ! -e "$SCRATCH/other.sock" ] || fail "the refused instance left a socket"
"$ZARRAY" list 2>/dev/null || fail "first daemon stopped answering"
[ -S "$SOCK" ] || fail "the refused instance removed the socket"
pass "the first daemon still serves"

stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "exit $DAEMON_RC after SIGTERM"
[ ! -e "$SOCK" ] || fail "socket left after SIGTERM"
grep -q "stopping: SIGTERM" "$DLOG" || fail "no SIGTERM line in the log"
pass "SIGTERM: exit 0, socket removed"

start_daemon
stop_daemon INT
[ "$DAEMON_RC" -eq 0 ] || fail "exit $DAEMON_RC after SIGINT"
pass "SIGINT: exit 0"

start_daemon
"$ZARRAY" shutdown 2>"$SCRATCH/err" || fail "shutdown: $(cat "$SCRATCH/err")"
grep -q "zarrayd stopped" "$SCRATCH/err" || fail "shutdown said: $(cat "$SCRATCH/err")"
wait_exit
[ "$DAEMON_RC" -eq 0 ] || fail "exit $DAEMON_RC after zarray shutdown"
[ ! -e "$SOCK" ] || fail "socket left after shutdown"
grep -q "shutdown requested by uid $(id -u)" "$DLOG" || fail "shutdown not logged with the peer"
pass "zarray shutdown: answered, exit 0, socket removed, peer logged"

start_daemon
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
[ -S "$SOCK" ] || fail "a killed daemon's socket should still be there"
expect_fail 1 "no daemon behind a stale socket" "$ZARRAY" list
grep -q "cannot reach zarrayd at $SOCK" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
start_daemon
pass "stale socket of a killed daemon replaced"
stop_daemon TERM

# Without -f: the command returns once the daemon serves.
"$ZARRAYD" -s "$SOCK" --run-dir "$RUN" --state-dir "$STATE" 2>"$SCRATCH/err" ||
	fail "background start: $(cat "$SCRATCH/err")"
DAEMON_PID=$(cat "$SOCK.lock")
"$ZARRAY" list 2>/dev/null || fail "background daemon not serving when zarrayd returned"
[ "$(ps -o ppid= -p "$DAEMON_PID" | tr -d ' ')" != $$ ] || fail "not detached"
"$ZARRAY" shutdown 2>/dev/null || fail "shutdown of the background daemon"
for i in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$DAEMON_PID" 2>/dev/null && fail "background daemon still running"
DAEMON_PID=""
pass "background mode: ready on return, shut down cleanly"

expect_fail 2 "zarrayd unknown option" "$ZARRAYD" --frobnicate
expect_fail 2 "zarrayd extra argument" "$ZARRAYD" -f extra
expect_fail 2 "zarrayd option without its value" "$ZARRAYD" -s
grep -q "^zarrayd: option requires an argument -- 's'" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
for v in -1 100001 5x "" " 5"; do
	expect_fail 2 "zarrayd --poll-us '$v'" "$ZARRAYD" -f --poll-us "$v"
	grep -q "^zarrayd: --poll-us is a number of microseconds from 0 to 100000, not '$v'" "$SCRATCH/err" ||
		fail "--poll-us '$v': $(cat "$SCRATCH/err")"
done
for v in -1 60001 5x "" " 5"; do
	expect_fail 2 "zarrayd --idle-gc-ms '$v'" "$ZARRAYD" -f --idle-gc-ms "$v"
	grep -q "^zarrayd: --idle-gc-ms is a number of milliseconds from 0 to 60000, not '$v'" "$SCRATCH/err" ||
		fail "--idle-gc-ms '$v': $(cat "$SCRATCH/err")"
done
"$ZARRAYD" --help >"$SCRATCH/help" || fail "zarrayd --help: exit $?"
grep -q "^Usage: zarrayd \[-s SOCKET\] \[--run-dir DIR\] \[--state-dir DIR\] \[-f\] \[-v\]" "$SCRATCH/help" &&
	grep -q -- "--socket PATH .*(default /run/zarray/zarrayd.sock)" "$SCRATCH/help" &&
	grep -q -- "--run-dir DIR .*(default /run/zarray)" "$SCRATCH/help" &&
	grep -q -- "--state-dir DIR .*(default /var/lib/zarray)" "$SCRATCH/help" ||
	fail "zarrayd --help: $(cat "$SCRATCH/help")"
grep -q -- "--poll-us N .*poll for N microseconds" "$SCRATCH/help" &&
	grep -q "(default 50; 0: sleep at once)" "$SCRATCH/help" ||
	fail "zarrayd --help: no --poll-us: $(cat "$SCRATCH/help")"
pass "zarrayd --help: the options and their defaults; bad --poll-us values exit 2"
touch "$SCRATCH/file"
expect_fail 1 "run directory under a file" \
	"$ZARRAYD" -f -s "$SCRATCH/file/x.sock" --run-dir "$SCRATCH/file/run" --state-dir "$STATE"
grep -q "cannot create the run directory" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"

start_daemon --poll-us 0
"$ZARRAY" list 2>/dev/null >/dev/null || [ $? = 1 ] || fail "list with --poll-us 0"
stop_daemon TERM
[ "$DAEMON_RC" = 0 ] || fail "--poll-us 0: exit $DAEMON_RC on SIGTERM"
DAEMON_PID=""
pass "--poll-us 0: serves and stops"
