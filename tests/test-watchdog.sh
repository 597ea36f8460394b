#!/bin/bash
# Shows that tests/run-test, the watchdog every test runs under, turns a
# hang into a failure that says where, and leaves nothing running: a
# test's exit status is passed through; a test that outlives
# ZA_TEST_TIMEOUT is killed with all it started (a thread blocked in its
# own process, a child in another session) and fails with 124 and HUNG:
# lines naming its processes and their threads; a SIGTERM to the
# watchdog stops the test with it (143, not a hang); processes a finished
# test left behind, even in a session of their own, are killed.
. "$(dirname "$0")/lib.sh"
need python3
RUN_TEST="$top_srcdir/tests/run-test"

rc=0
"$RUN_TEST" sh -c 'exit 3' || rc=$?
[ "$rc" -eq 3 ] || fail "a test's exit status 3 came back as $rc"
"$RUN_TEST" true || fail "a passing test failed under the watchdog"
pass "exit statuses are passed through"

# A hang: a threaded process that sleeps, and a child in a session of its
# own (as a daemon would be) that would keep running after it.
tag="za-watchdog-$$"
rc=0
ZA_TEST_TIMEOUT=2 "$RUN_TEST" python3 -c '
import subprocess, sys, threading, time
subprocess.Popen(["setsid", "sh", "-c", "sleep 1000; : " + sys.argv[1]])
threading.Thread(target=time.sleep, args=(1000,), name="blocked").start()
time.sleep(1000)' "$tag" >"$SCRATCH/out" 2>&1 || rc=$?
[ "$rc" -eq 124 ] || fail "a hung test exited $rc, want 124: $(cat "$SCRATCH/out")"
grep -q '^HUNG: python3 still running after 2 s' "$SCRATCH/out" ||
	fail "no HUNG: header: $(cat "$SCRATCH/out")"
grep -q "^HUNG: .*sleep 1000; : $tag" "$SCRATCH/out" ||
	fail "the child in its own session is not listed: $(cat "$SCRATCH/out")"
if command -v gdb >/dev/null 2>&1; then
	[ "$(grep -c '^HUNG: .* thread [0-9]* .*sleep' "$SCRATCH/out")" -ge 2 ] ||
		fail "the two threads' call chains are missing: $(cat "$SCRATCH/out")"
fi
sleep 0.2
pgrep -f "$tag\$" >/dev/null && fail "the hung test's child is still running"
pass "a hang fails with 124, names its processes and threads, and is killed"

# Left behind by a test that passed.
"$RUN_TEST" sh -c "setsid sh -c 'sleep 1000; : $tag-left' & exit 0" ||
	fail "the test failed"
sleep 0.2
pgrep -f "$tag-left" >/dev/null && fail "a process left behind is still running"
pass "what a finished test left running is killed"

# Stopped from outside (make interrupted, a tier out of budget): the
# signal goes on to the test, which ends by it, not as a hang.
"$RUN_TEST" sh -c "sleep 1000; : $tag-term" >"$SCRATCH/out" 2>&1 &
wd=$!
sleep 0.5
kill -TERM "$wd"
rc=0
wait "$wd" || rc=$?
[ "$rc" -eq 143 ] || fail "a test stopped by SIGTERM exited $rc, want 143: $(cat "$SCRATCH/out")"
grep -q HUNG "$SCRATCH/out" && fail "a stopped test was reported as hung"
pgrep -f "$tag-term" >/dev/null && fail "the stopped test is still running"
pass "a SIGTERM to the watchdog stops its test (143), not reported as a hang"
