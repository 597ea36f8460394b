#!/bin/bash
# Shows `zarray watch` following a rate-limited scrub to its end in its
# three forms at once, and the job fields of `status --json` while it runs:
#  - piped: plain lines only (no escape, carriage return or bar), one per
#    change of percentage or state: "t: scrub running P% DONE/TOTAL",
#    with "RATE/s" once the rate is known and "ETA h:mm:ss" from the
#    third rate sample on (job.c: early ETAs were wild), then the
#    rate limit as "(limit RATE/s)" while running, ending with
#    "t: scrub done 100.0% TOTAL/TOTAL"; exit 0;
#  - on a terminal (script(1) gives it one): a bar redrawn in place with
#    carriage return and erase-line, percent, done/total, rate and ETA,
#    ending with the full bar at 100.0%; exit 0;
#  - --json: one object per update that parses, with the job's kind,
#    state, done_bytes <= total_bytes, rate_bps, eta_s, the last one final
#    with done_bytes == total_bytes;
#  - status --json during the run: jobs[] has kind scrub, state running,
#    and integer done_bytes, total_bytes, rate_bps, eta_s.
# Then, on the same array: destroy without --force refuses it because it
# holds data (exit 1, one line saying how much in IEC units, the array
# still there); with --force it goes, and its drives take a new array.
# Skips (77) only if nbdcopy or script is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need script
need python3

cd "$SCRATCH"
"$ZARRAY" emu create --size 128M --zone-size 4M d{0..5}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 --size 96M d*.img >/dev/null 2>err ||
	fail "create: $(cat err)"
head -c $((32 * 1024 * 1024)) /dev/urandom >data.bin
nbdcopy data.bin "$("$ZARRAY" export t)" || fail "nbdcopy"

# About 46 MiB of stripes at 5 MB/s: a run of some 9 s. At 10 MB/s a CI
# run of 016fd36 scrubbed 22.9 MiB (the group still taking stripes is not
# scrubbed, and where it ends depends on timing) in 2.4 s, too short for
# the third rate sample that an ETA waits for.
"$ZARRAY" scrub t start --rate 5 2>err || fail "scrub start: $(cat err)"
"$ZARRAY" watch t >piped.txt 2>piped.err &
p1=$!
"$ZARRAY" watch t --json >watch.json 2>json.err &
p2=$!
script -eqc "'$ZARRAY' watch t" /dev/null </dev/null >tty.txt 2>tty.err &
p3=$!
sleep 2
"$ZARRAY" status t --json >st.json || fail "status --json"
python3 - <<'EOF' || fail "status --json during the scrub: $(cat st.json)"
import json
d = json.load(open("st.json"))
j = d["jobs"]
assert len(j) == 1, j
j = j[0]
assert j["kind"] == "scrub" and j["state"] == "running", j
for k in ("done_bytes", "total_bytes", "rate_bps", "eta_s"):
    assert isinstance(j[k], int) and j[k] >= 0, (k, j)
assert 0 < j["done_bytes"] < j["total_bytes"], j
EOF
pass "status --json while a scrub runs: kind, state, done/total bytes, rate_bps, eta_s"
wait "$p1" || fail "watch (piped): exit $?: $(cat piped.err)"
wait "$p2" || fail "watch --json: exit $?: $(cat json.err)"
wait "$p3" || fail "watch (terminal): exit $?: $(cat tty.err)"

python3 - <<'EOF' || fail "piped watch: $(cat -A piped.txt)"
import re
raw = open("piped.txt", "rb").read()
assert b"\x1b" not in raw and b"\r" not in raw and b"[" not in raw, raw
lines = raw.decode().splitlines()
assert len(lines) >= 3, lines
size = r"\d+(\.\d)? (B|KiB|MiB)"
pat = re.compile(r"^t: scrub (running|done) (\d+\.\d)%% (%s)/(%s)"
                 r"( %s/s( ETA \d+:\d\d:\d\d)?)?( \(limit %s/s\))?$"
                 % (size, size, size, size))
pcts, timed = [], 0
for l in lines:
    m = pat.match(l)
    assert m, l
    pcts.append(float(m.group(2)))
    timed += m.group(12) is not None
assert pcts == sorted(pcts), pcts
assert len(set(lines)) == len(lines), "a line repeated: %s" % lines
assert timed >= 1, "no line with a rate and an ETA: %s" % lines
last = pat.match(lines[-1])
assert last.group(1) == "done" and last.group(2) == "100.0", lines[-1]
assert last.group(3) == last.group(6), lines[-1]
EOF
pass "piped: $(wc -l <piped.txt) plain lines, rate and ETA once known, ending '$(tail -n 1 piped.txt)'"

python3 - <<'EOF' || fail "watch on a terminal: $(cat -A tty.txt)"
import re
raw = open("tty.txt", "rb").read().decode()
frames = raw.split("\r\x1b[K")[1:]
assert len(frames) >= 3, raw
bar = re.compile(r"^t: scrub (running|done) \[([=> ]{30})\] (\d+\.\d)% "
                 r"\S+ \S+/\S+ \S+( \S+ \S+/s( ETA \d+:\d\d:\d\d)?)?"
                 r"( \(limit \S+ \S+/s\))?\s*$")
timed = 0
for f in frames:
    m = bar.match(f)
    assert m, repr(f)
    timed += m.group(5) is not None
assert timed >= 1, "no frame with a rate and an ETA"
m = bar.match(frames[-1])
assert m.group(1) == "done" and m.group(2) == "=" * 30 and m.group(3) == "100.0", frames[-1]
assert "\n" not in "".join(frames[:-1]), "a frame ended its line before the end"
EOF
pass "on a terminal: the bar redrawn in place, $(grep -o $'\r\033\\[K' tty.txt | wc -l) frames, with rate and ETA"

python3 - <<'EOF' || fail "watch --json: $(cat watch.json)"
import json
docs = [json.loads(l) for l in open("watch.json")]
assert len(docs) >= 3, docs
timed = 0
for d in docs:
    assert d["name"] == "t" and d["state"] == "healthy", d
    assert len(d["jobs"]) == 1, d
    j = d["jobs"][0]
    assert j["kind"] == "scrub" and j["state"] in ("running", "done"), j
    assert 0 <= j["done_bytes"] <= j["total_bytes"], j
    timed += j["state"] == "running" and j["rate_bps"] > 0 and j["eta_s"] > 0
assert timed >= 1, "no update with a rate and an ETA"
assert [d["final"] for d in docs] == [False] * (len(docs) - 1) + [True], docs
j = docs[-1]["jobs"][0]
assert j["state"] == "done" and j["done_bytes"] == j["total_bytes"] > 0, j
EOF
pass "--json: $(wc -l <watch.json) objects, the last final and done"

expect_fail 1 "destroy of an array that holds data" "$ZARRAY" destroy t
grep -Eq "^zarray destroy: t holds [0-9]+(\.[0-9])? (KiB|MiB|GiB) of data; use --force to destroy it$" "$SCRATCH/err" ||
	fail "message: $(cat "$SCRATCH/err")"
[ "$(wc -l <"$SCRATCH/err")" -eq 1 ] || fail "more than one line: $(cat "$SCRATCH/err")"
"$ZARRAY" status --test t >/dev/null || fail "the refused destroy touched the array"
"$ZARRAY" destroy --force t 2>err || fail "destroy --force: $(cat err)"
expect_fail 1 "status after destroy --force" "$ZARRAY" status t
"$ZARRAY" create u --data 4 --parity 2 d*.img >/dev/null 2>err || fail "create over destroyed drives: $(cat err)"
pass "destroy refuses an array with data; --force destroys it"
