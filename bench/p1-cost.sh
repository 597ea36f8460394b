#!/bin/bash
# bench/p1-cost.sh - what one random 4 KiB write costs each of zarrayd's
# threads, in CPU nanoseconds, at a fixed request rate: the diagnostic
# behind bench/results/notes.md, P1 ("What random writes wait for"), not a
# figure
# of the brief. P1's random rate moves by 10-20% from run to run on a
# shared 2-vCPU machine, more than most single changes to the write path
# are worth; the CPU a thread spends per request at a rate below
# saturation moves by about 3%, so a change to the loop's work is seen
# here first. zarrayd runs with --poll-us 0 (polling would count as
# work) on a 10+2 array of 12 preallocated emulated drives in /dev/shm,
# as in bench/p1.sh; fio --ioengine=nbd writes 4 KiB at random over
# [2 GiB, 3 GiB) with iodepth 32, first unpaced until the map holds the
# region's extents, then ROUNDS times for 4 s at --iops N. Each thread's
# run time comes from /proc/PID/task/TID/schedstat; the loop is the main
# thread. It judges nothing: it prints, per round, nanoseconds per request
# for each thread that ran, and their means.
# Usage: bench/p1-cost.sh [-b BUILDDIR] [--iops N] [--rounds N] [--out FILE]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
iops=100000
rounds=4
out=
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--iops) iops=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/p1-cost.sh [-b BUILDDIR] [--iops N] [--rounds N] [--out FILE]" >&2; exit 2 ;;
	esac
done
case $iops$rounds in
*[!0-9]*) echo "bench/p1-cost.sh: --iops and --rounds take whole numbers" >&2; exit 2 ;;
esac
[ "$iops" -gt 0 ] && [ "$rounds" -gt 0 ] ||
	{ echo "bench/p1-cost.sh: --iops and --rounds must be above 0" >&2; exit 2; }
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
for b in "$zarray" "$zarrayd"; do
	[ -x "$b" ] || { echo "bench/p1-cost.sh: missing $b: build first" >&2; exit 1; }
done
for c in fio nbdinfo python3; do
	command -v "$c" >/dev/null || { echo "bench/p1-cost.sh: $c is not installed" >&2; exit 1; }
done
dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kib:-0}" -lt $((14 << 20)) ]; then
	echo "bench/p1-cost.sh: needs 14 GiB of available memory, $((avail_kib >> 20)) GiB here" >&2
	exit 1
fi
work=$(mktemp -d "$dir/za-p1cost.XXXXXX")
dpid=
cleanup() {
	if [ -n "$dpid" ]; then
		kill -TERM "$dpid" 2>/dev/null || true
		wait "$dpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

"$zarray" emu create --preallocate --size 1G --zone-size 64M \
	"$work"/d{00..11}.img >/dev/null
export ZARRAY_SOCKET=$work/run/zarrayd.sock
"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" \
	--state-dir "$work/state" --poll-us 0 >"$work/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 200); do
	"$zarray" list >/dev/null 2>&1 && break
	sleep 0.05
done
"$zarray" create p1 --data 10 --parity 2 "$work"/d*.img >/dev/null 2>&1 ||
	{ echo "bench/p1-cost.sh: create failed: $(tail -n 3 "$work/daemon.log")" >&2; exit 1; }
uri=$("$zarray" export p1)
fio_args=(--ioengine=nbd --output-format=json "--uri=$uri" --name=cost
	--rw=randwrite --bs=4k --size=1G --offset=2G --iodepth=32
	--randrepeat=0 --time_based)
# Unpaced until the region is covered: the map at its full size.
fio "${fio_args[@]}" --runtime=10 >/dev/null

snap() {
	local t
	for t in /proc/"$dpid"/task/*; do
		echo "${t##*/} $(awk '{print $1}' "$t/schedstat")"
	done | sort
}
for r in $(seq "$rounds"); do
	snap >"$work/a.$r"
	fio "${fio_args[@]}" --runtime=4 --rate_iops="$iops" >"$work/fio.$r.json"
	snap >"$work/b.$r"
done

python3 - "$work" "$rounds" "$dpid" "$iops" "$out" <<'EOF'
import json, sys
work, rounds, pid, iops, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
def load(p):
    return {int(t): int(ns) for t, ns in (l.split() for l in open(p))}
per = {}
reqs = []
for r in range(1, rounds + 1):
    t = open("%s/fio.%d.json" % (work, r)).read()
    n = json.loads(t[t.index("{"):])["jobs"][0]["write"]["total_ios"]
    reqs.append(n)
    a, b = load("%s/a.%d" % (work, r)), load("%s/b.%d" % (work, r))
    for tid in b:
        d = b[tid] - a.get(tid, 0)
        if d < 1e6:  # idle thread (under 1 ms in the round)
            continue
        name = "loop" if tid == int(pid) else "thread %d" % tid
        per.setdefault(name, []).append(round(d / n))
res = {"iops_asked": iops, "rounds": rounds,
       "requests": reqs, "ns_per_request": per,
       "mean_ns_per_request": {k: round(sum(v) / len(v)) for k, v in per.items()}}
for k, v in sorted(per.items()):
    print("%-14s ns/request %s  mean %d" % (k, " ".join(str(x) for x in v), res["mean_ns_per_request"][k]))
if out:
    json.dump(res, open(out, "w"), indent=1)
EOF
