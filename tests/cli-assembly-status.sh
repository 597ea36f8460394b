#!/bin/bash
# Shows that `zarray status` answers while an array assembles, with where
# the assembly is, instead of waiting silently behind it. A 10+2 array of
# 12 emulated drives of 1 GiB (16 MiB zones) whose every operation takes
# 10 ms holds 128 MiB (3 ms and 64 MiB were enough while assembly read
# one drive after another; read side by side it ended between two polls
# of the first answer, CI of cd36cb0); zarrayd is killed (SIGKILL, before any checkpoint:
# so the new one reads every zone, as an array without an anchored
# checkpoint does - one that rests on its engine table is done too soon
# to watch), a new one started, and status asked every 50 ms from then
# on:
#  - answers come while it assembles: state "assembling", a phase, done
#    within total ("scanning zones, 40% (6 of 15)"), in human and --json
#    form, and `status --test` exits 4 (nothing known yet);
#  - `status` of another name is "not found" meanwhile; `list` waits for
#    the assembly (scripts take its answer as "the arrays are up");
#  - then the array is healthy, its data reads back, and `status --json`
#    has "assembly": null.
# Skips (77) only if qemu-io or python3 is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 1G --zone-size 16M --lat 10000 d{00..11}.img >/dev/null
URI="nbd+unix:///t?socket=$RUN/t.nbd"

start_daemon
"$ZARRAY" create t --data 10 --parity 2 d*.img >/dev/null 2>err.txt || fail "create: $(cat err.txt)"
out=$(qemu-io -f raw -c "write -P 0x5a 0 128M" -c flush "$URI" 2>&1) || fail "write: $out"
stop_daemon KILL

"$ZARRAYD" -f -s "$SOCK" --run-dir "$RUN" --state-dir "$STATE" >>"$DLOG" 2>&1 &
DAEMON_PID=$!
seen=0 phases= lister=
for i in $(seq 600); do
	kill -0 "$DAEMON_PID" 2>/dev/null || fail "zarrayd exited: $(tail -n 3 "$DLOG")"
	if "$ZARRAY" status t >st.txt 2>/dev/null; then
		grep -q "^t: assembling: " st.txt || break
		seen=$((seen + 1))
		phases="$phases|$(sed 's/^t: assembling: //; s/,.*//' st.txt)"
		# The first answer seen while assembling: the other forms too.
		if [ $seen = 1 ]; then
			"$ZARRAY" status --json t >st.json 2>/dev/null || fail "status --json while assembling"
			python3 - st.json <<'PY' || fail "status --json while assembling: $(cat st.json)"
import json, sys
a = json.load(open(sys.argv[1]))
if a["state"] == "assembling":
    p = a["assembly"]
    assert a["name"] == "t", a
    assert isinstance(p["phase"], str) and p["phase"], p
    assert p["total"] == 0 or 0 <= p["done"] <= p["total"] + 1, p
else:
    assert a["state"] == "healthy" and a["assembly"] is None, a
PY
			rc=0
			"$ZARRAY" status --test t >/dev/null 2>&1 || rc=$?
			[ $rc = 4 ] || [ $rc = 0 ] || fail "status --test while assembling exited $rc"
			expect_fail 1 "status of an unknown array while assembling" "$ZARRAY" status nosuch
			grep -q "nosuch" "$SCRATCH/err" || fail "unknown array: $(cat "$SCRATCH/err")"
			# list is answered after the assembly, not during it.
			("$ZARRAY" list >list.txt 2>&1; "$ZARRAY" status t >after-list.txt 2>&1) &
			lister=$!
		fi
		# A percentage only with a total, and never above 100.
		if grep -q "%" st.txt; then
			grep -Eq "^t: assembling: [a-z ]+, ([0-9]|[1-9][0-9]|100)% \([0-9]+ of [0-9]+\)$" st.txt ||
				fail "progress line: $(cat st.txt)"
		fi
	fi
	sleep 0.05
done
# Twice at least: answered again after the first, not once by luck. More
# is not asked for: under the sanitizers each CLI call costs a few tenths
# of a second, and the first answer runs five more (CI of 016fd36 saw 2).
[ $seen -ge 2 ] || fail "status answered $seen times while assembling (phases:$phases)"
echo "# $seen answers while assembling; phases:$phases"
case $phases in *"scanning zones"*) ;; *) fail "no 'scanning zones' phase seen:$phases" ;; esac
grep -q "^t: healthy" st.txt || fail "after the assembly: $(cat st.txt)"
wait $lister || true
grep -Eq "^t[[:space:]]" list.txt || fail "list: $(cat list.txt)"
grep -q "^t: healthy" after-list.txt || fail "list answered before the assembly ended: then $(cat after-list.txt)"
"$ZARRAY" status --json t >st.json || fail "status --json"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["state"] == "healthy" and a["assembly"] is None, a' st.json ||
	fail "after the assembly: $(cat st.json)"
out=$(qemu-io -f raw -c "read -P 0x5a 0 128M" "$URI" 2>&1) || fail "read back: $out"
echo "ok"
