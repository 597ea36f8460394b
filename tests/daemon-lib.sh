# Shared by the daemon and CLI integration tests (sourced after lib.sh,
# not run): a zarrayd on private run and state directories under
# $SCRATCH, started in the foreground in the background, always killed on
# exit (TERM, then KILL if it hangs), its log kept in $SCRATCH/daemon.log
# and shown when a test fails.
ZARRAYD="$top_builddir/src/zarrayd"
RUN="$SCRATCH/run"
STATE="$SCRATCH/state"
SOCK="$RUN/zarrayd.sock"
DLOG="$SCRATCH/daemon.log"
export ZARRAY_SOCKET="$SOCK"
DAEMON_PID=""

daemon_cleanup() {
	local rc=$? i
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID" 2>/dev/null || true
		for i in $(seq 50); do
			kill -0 "$DAEMON_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$DAEMON_PID" 2>/dev/null || true
	fi
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "$DLOG" ]; then
		echo "--- zarrayd log (last 30 lines) ---" >&2
		tail -n 30 "$DLOG" >&2
	fi
	rm -rf "$SCRATCH"
}
trap daemon_cleanup EXIT

# wait_daemon: until `zarray list` answers (5 s at most).
wait_daemon() {
	local i
	for i in $(seq 100); do
		"$ZARRAY" list >/dev/null 2>&1 && return 0
		[ -z "$DAEMON_PID" ] || kill -0 "$DAEMON_PID" 2>/dev/null ||
			fail "zarrayd exited: $(tail -n 3 "$DLOG")"
		sleep 0.05
	done
	fail "zarrayd did not answer within 5 s"
}

# start_daemon [ARGS...]: a foreground zarrayd on $SOCK, $RUN, $STATE.
start_daemon() {
	"$ZARRAYD" -f -s "$SOCK" --run-dir "$RUN" --state-dir "$STATE" "$@" \
		>>"$DLOG" 2>&1 &
	DAEMON_PID=$!
	wait_daemon
}

# stop_daemon SIGNAL: send it, wait (10 s at most), return its exit code
# in $DAEMON_RC.
stop_daemon() {
	local i
	kill "-$1" "$DAEMON_PID"
	for i in $(seq 100); do
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$DAEMON_PID" 2>/dev/null && fail "zarrayd still running 10 s after SIG$1"
	DAEMON_RC=0
	wait "$DAEMON_PID" || DAEMON_RC=$?
	DAEMON_PID=""
}

# wait_exit: the daemon exits by itself (after `zarray shutdown`).
wait_exit() {
	local i
	for i in $(seq 100); do
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$DAEMON_PID" 2>/dev/null && fail "zarrayd still running 10 s after shutdown"
	DAEMON_RC=0
	wait "$DAEMON_PID" || DAEMON_RC=$?
	DAEMON_PID=""
}

# json EXPR: evaluate a Python expression on `zarray status --json t`,
# the parsed object being d (the copy stays in ./st.json for messages).
json() {
	"$ZARRAY" status --json t >st.json || fail "status --json"
	python3 -c "import json,sys; d=json.load(open('st.json')); print($1)"
}
