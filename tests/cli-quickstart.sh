#!/bin/bash
# Shows tools/quickstart doing what the README promises, on the programs
# of this build (--no-build) in a scratch directory:
#  - the first run creates 24 emulated drives, starts zarrayd, creates an
#    8+2 array, writes and reads back data through the NBD export, fails
#    a drive and shows its rebuild finishing, reads the data back again,
#    leaves zarrayd running (the array healthy, the drive gone from it)
#    and prints how to mount the volume (nbd-client, nbdfuse + loop) and
#    how to stop the service;
#  - a second run is harmless: it keeps the drives, the daemon (same pid)
#    and the array, and its data checks pass again;
#  - the printed stop command stops zarrayd; a third run starts it again
#    and the array is assembled from the state directory.
# Skips (77) only if qemu-io, nbdinfo or dpkg-query is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need nbdinfo
need dpkg-query
need python3

QS="$SCRATCH/qs"
qs() {
	local out=$1 rc=0
	nice "$top_srcdir/tools/quickstart" --dir "$QS" --no-build \
		--builddir "$top_builddir" >"$out" 2>&1 || rc=$?
	# Whatever happened, the daemon it started is ours to stop.
	[ -f "$QS/run/zarrayd.sock.lock" ] && DAEMON_PID=$(cat "$QS/run/zarrayd.sock.lock")
	[ "$rc" -eq 0 ] || fail "quickstart: exit $rc: $(tail -n 20 "$out")"
}
has() { grep -Eq -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"; }
export ZARRAY_SOCKET="$QS/run/zarrayd.sock"
st() {
	"$ZARRAY" status --json quick >st.json || fail "status --json"
	python3 -c "import json; d = json.load(open('st.json')); print($1)"
}

cd "$SCRATCH"
qs run1.txt
[ "$(grep -c "^    $QS/drive[0-9][0-9].img: emulated hm-smr drive, 4 GiB" run1.txt)" = 24 ] ||
	fail "not 24 drives created: $(cat run1.txt)"
has run1.txt "^    started \\(log: $QS/zarrayd.log\\)"
has run1.txt "read back identical: [0-9]+ bytes exported"
has run1.txt "^==> failing $QS/drive00.img, then watching the rebuild"
has run1.txt "^    quick: rebuild done 100.0% "
has run1.txt "^    rebuilt; the data reads back identical"
has run1.txt "nbd-client -unix $QS/run/quick.nbd /dev/nbd0 -name quick"
has run1.txt "nbdfuse [^ ]+ --unix $QS/run/quick.nbd &"
has run1.txt "^Stop it: +ZARRAY_SOCKET=$QS/run/zarrayd.sock [^ ]*zarray shutdown"
pid1=$DAEMON_PID
kill -0 "$pid1" || fail "zarrayd is not left running"
[ "$(st 'd["state"], d["data"], d["parity"], len(d["members"])')" = "healthy 8 2 24" ] ||
	fail "array after the first run: $(cat st.json)"
[ "$(st '[m["state"] for m in d["members"]][0]')" != online ] ||
	fail "drive00 still online: $(cat st.json)"
[ "$(st 'sum(j["state"] != "done" for j in d["jobs"])')" = 0 ] || fail "a job still runs: $(cat st.json)"
pass "first run: 24 drives, 8+2 array, data checked, drive00 failed and rebuilt, daemon left running, how to mount and stop printed"

qs run2.txt
[ "$(grep -c "^    $QS/drive[0-9][0-9].img exists, kept" run2.txt)" = 24 ] || fail "drives not kept: $(cat run2.txt)"
has run2.txt "^    already running"
has run2.txt "^    exists, kept"
has run2.txt "read back identical"
[ "$DAEMON_PID" = "$pid1" ] || fail "a second zarrayd: $DAEMON_PID, was $pid1"
[ "$(st 'd["state"], len(d["members"])')" = "healthy 24" ] || fail "after the second run: $(cat st.json)"
pass "second run: drives, daemon and array kept, data checked again"

stop=$(sed -n 's/^Stop it: *//p' run1.txt)
eval "$stop" 2>stop.err || fail "the printed stop command: $stop: $(cat stop.err)"
for i in $(seq 100); do kill -0 "$pid1" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid1" 2>/dev/null && fail "zarrayd still runs after '$stop'"
DAEMON_PID=""
qs run3.txt
has run3.txt "^    started"
has run3.txt "^    exists, kept"
has run3.txt "read back identical"
[ "$(st 'd["state"], len(d["members"])')" = "healthy 24" ] || fail "after the third run: $(cat st.json)"
pass "the printed stop command stops zarrayd; the next run assembles 'quick' again"
