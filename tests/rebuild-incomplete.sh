#!/bin/bash
# Shows that a rebuild which cannot restore everything says so: a 4+2
# array on exactly 6 drives loses one (`zarray fail`); every segment
# spans all 6, so the rebuild finds no member outside a segment to take
# its lost column. The run ends "done", but:
#  - `zarray watch` exits 1 with one line on stderr saying how many lost
#    columns were not restored and that the array stays degraded until a
#    drive with room is added; its last line does not claim 100%;
#  - `status --json` gives the job state done with columns_left > 0 and
#    done_bytes < total_bytes, and the array degraded;
# then a drive is added, the rebuild started again, and watch exits 0 at
# 100.0% with columns_left 0 and the array healthy; the data read back
# through the export is what was written.
# Skips (77) only if nbdcopy is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 128M --zone-size 4M d{0..6}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 --size 64M d{0..5}.img >/dev/null 2>err ||
	fail "create: $(cat err)"
head -c $((16 * 1024 * 1024)) /dev/urandom >data.bin
nbdcopy data.bin "$("$ZARRAY" export t)" || fail "nbdcopy"
"$ZARRAY" fail t d3.img 2>err || fail "fail: $(cat err)"
# The rebuild starts by itself; once it has run, start it again so that
# its last run has surely looked at every segment.
for i in $(seq 100); do
	"$ZARRAY" rebuild t start >/dev/null 2>&1 && break
	sleep 0.1
done

rc=0
"$ZARRAY" watch t >watch.txt 2>watch.err || rc=$?
[ "$rc" -eq 1 ] || fail "watch of a rebuild that left columns: exit $rc, want 1: $(cat watch.txt watch.err)"
[ "$(wc -l <watch.err)" -eq 1 ] || fail "want one line on stderr: $(cat watch.err)"
grep -Eq "^zarray watch: t: the rebuild ended with [0-9]+ lost columns? not restored; the array stays degraded until a drive with room is added" watch.err ||
	fail "stderr: $(cat watch.err)"
last=$(tail -n 1 watch.txt)
case "$last" in
"t: rebuild done "*" not restored") ;;
*) fail "last line: '$last'" ;;
esac
case "$last" in *" 100.0% "*) fail "claims 100%: '$last'" ;; esac
pass "watch: exit 1, '$(cat watch.err)'; last line '$last'"

"$ZARRAY" status t --json >st.json || fail "status --json"
python3 - <<'PY' || fail "status --json: $(cat st.json)"
import json
d = json.load(open("st.json"))
assert d["state"] == "degraded", d["state"]
j = [j for j in d["jobs"] if j["kind"] == "rebuild"]
assert len(j) == 1, d["jobs"]
j = j[0]
assert j["state"] == "done", j
assert isinstance(j["columns_left"], int) and j["columns_left"] > 0, j
assert j["error"] is None, j
assert j["done_bytes"] < j["total_bytes"], j
PY
pass "status --json: done with columns_left > 0, degraded"

"$ZARRAY" add t d6.img 2>err || fail "add: $(cat err)"
for i in $(seq 100); do
	"$ZARRAY" rebuild t start >/dev/null 2>&1 && break
	[ "$("$ZARRAY" status t --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = healthy ] && break
	sleep 0.1
done
"$ZARRAY" watch t >watch2.txt 2>watch2.err || fail "watch after add: exit $?: $(cat watch2.txt watch2.err)"
"$ZARRAY" status t --json >st2.json || fail "status --json"
python3 - <<'PY' || fail "status --json after add: $(cat st2.json)"
import json
d = json.load(open("st2.json"))
assert d["state"] == "healthy", d["state"]
for j in d["jobs"]:
    if j["kind"] == "rebuild":
        assert j["state"] == "done" and j["columns_left"] == 0, j
        assert j["done_bytes"] == j["total_bytes"], j
PY
grep -q "^t: rebuild done 100.0% " watch2.txt || fail "watch after add: $(cat watch2.txt)"
nbdcopy "$("$ZARRAY" export t)" back.bin || fail "nbdcopy back"
cmp -n $((16 * 1024 * 1024)) data.bin back.bin || fail "data differs"
pass "a drive added: rebuilt to 100.0%, healthy, data intact"
