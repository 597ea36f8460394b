#!/bin/bash
# bench/s1.sh - S1 of issue 36: what assembling an array costs as the data
# it holds grows, at real geometry. It creates emulated drives of 16 TiB
# (sparse files, 256 MiB zones, as a host-managed SMR drive; on disk under
# /var/tmp, not in memory), a 10+2 array on them under a private zarrayd,
# and for each step writes more data sequentially through the NBD export
# with fio, stops zarrayd (SIGTERM) and starts a new one, which assembles
# the array from its state record. Measured per step, for that new
# process: the time until `zarray status` says other than "assembling"
# (the export is then checked with nbdinfo), its
# CPU time
# (utime + stime from /proc/PID/stat, the figure to trust on a shared
# machine), its resident memory (VmRSS) and peak (VmHWM), and the bytes
# the members read during assembly (status --json: the members' read
# bytes, counted by each process from its start), and what recovery
# read (status --json volume.recovery: zones, stripe headers, whether it
# rested on the anchored checkpoint's engine table). The figures are reported against the first step's (flat in
# data is the target: the last step within 1.2x of the first) and
# extrapolated to a full 256 x 20 TB array with the arithmetic printed.
# Nothing is asserted.
# Usage: bench/s1.sh [-b BUILDDIR] [--quick] [--out FILE.json]
#                    [--dir DIR] [--drives N] [--steps "1G 8G 32G"]
#   --quick   12 drives, steps of 256M and 1G (a smoke run)
#   --dir     where the drive files go (default /var/tmp); a step whose
#             data the file system cannot hold (x1.3 for parity and
#             slack) is skipped and said so
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
dir=/var/tmp
drives=
steps=
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	--out) out=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--drives) drives=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "usage: bench/s1.sh [-b BUILDDIR] [--quick] [--out FILE] [--dir DIR] [--drives N] [--steps LIST]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-s1.json}
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
for b in "$zarray" "$zarrayd"; do
	[ -x "$b" ] || { echo "bench/s1.sh: missing $b: build first" >&2; exit 1; }
done
for c in fio nbdinfo python3; do
	command -v "$c" >/dev/null || { echo "bench/s1.sh: $c is not installed" >&2; exit 1; }
done
if [ $quick = 1 ]; then
	drives=${drives:-12} steps=${steps:-"256M 1G"}
else
	drives=${drives:-64} steps=${steps:-"1G 8G 32G"}
fi
to_bytes() { numfmt --from=iec "$1"; }

work=$(mktemp -d "$dir/za-s1.XXXXXX")
daemon=
stop_daemon() {
	local i
	[ -n "$daemon" ] || return 0
	kill -TERM "$daemon" 2>/dev/null || true
	for i in $(seq 600); do
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$daemon" 2>/dev/null || true
	wait "$daemon" 2>/dev/null || true
	daemon=
}
cleanup() {
	stop_daemon
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

now_ns() { date +%s%N; }
export ZARRAY_SOCKET=$work/run/zarrayd.sock
start_daemon() {
	"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" --state-dir "$work/state" \
		>>"$work/daemon.log" 2>&1 &
	daemon=$!
}
# CPU seconds (utime + stime) of process $1.
cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
kib() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status"; }

echo "== S1: $drives emulated drives of 16 TiB (256 MiB zones) in $dir, 10+2" >&2
devs=()
for i in $(seq -f '%03g' 0 $((drives - 1))); do
	devs+=("$work/d$i.img")
done
"$zarray" emu create --size 16776960M "${devs[@]}" >/dev/null
start_daemon
for i in $(seq 600); do
	"$zarray" list >/dev/null 2>&1 && break
	sleep 0.05
done
"$zarray" create s1 --data 10 --parity 2 "${devs[@]}" >/dev/null
uri=$("$zarray" export s1)

samples=()
done_bytes=0
for st in $steps; do
	want=$(to_bytes "$st")
	avail=$(($(df -P --block-size=1 "$dir" | awk 'NR == 2 { print $4 }')))
	if [ $(((want - done_bytes) * 13 / 10)) -gt "$avail" ]; then
		echo "== S1: step $st skipped: $dir has $((avail >> 30)) GiB free" >&2
		samples+=("$st skipped")
		continue
	fi
	echo "== S1: writing up to $st sequentially" >&2
	timeout 3000 fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1M \
		--offset="$done_bytes" --size=$((want - done_bytes)) --iodepth=8 \
		--end_fsync=1 >"$work/fio.out" 2>&1 || {
		echo "bench/s1.sh: fio failed: $(tail -n 5 "$work/fio.out")" >&2
		exit 1
	}
	done_bytes=$want
	stop_daemon
	echo "== S1: assembly at start with $st stored" >&2
	t0=$(now_ns)
	start_daemon
	# The daemon binds its socket before it assembles the recorded
	# arrays; status answers meanwhile with state "assembling". The
	# first other answer marks the end of assembly, before any client
	# I/O.
	ok=0
	for i in $(seq 60000); do
		if "$zarray" status --json s1 >"$work/st.json" 2>/dev/null &&
			! grep -q '"state":"assembling"' "$work/st.json"; then
			ok=1
			break
		fi
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.01
	done
	t1=$(now_ns)
	[ $ok = 1 ] || { echo "bench/s1.sh: zarrayd did not answer: $(tail -n 3 "$work/daemon.log")" >&2; exit 1; }
	cpu=$(cpu_s "$daemon")
	rss=$(kib "$daemon" VmRSS)
	hwm=$(kib "$daemon" VmHWM)
	nbdinfo --size "$uri" >/dev/null || { echo "bench/s1.sh: the export does not answer" >&2; exit 1; }
	# The members' counters start at 0 in each process: all assembly's.
	rd=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(m.get("read_bytes", 0) for m in d["members"]))' "$work/st.json")
	# What recovery read: zones, stripe headers, and whether it rested
	# on the anchored checkpoint's engine table (design.md 9.6).
	rec=$(python3 -c 'import json,sys; r=(json.load(open(sys.argv[1]))["volume"] or {}).get("recovery", {}); print(r.get("zones", 0), r.get("headers", 0), int(bool(r.get("table"))))' "$work/st.json")
	samples+=("$st $want $(((t1 - t0) / 1000)) $cpu $rss $hwm $rd $rec")
	echo "== S1: $st: ready in $(((t1 - t0) / 1000000)) ms, CPU $cpu s, RSS $rss KiB, read $rd B (zones, headers, table: $rec)" >&2
done

# The commit of the tree that was built (a build dir inside its sources).
commit=$(git -C "$build" rev-parse --short=10 HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$drives" "$commit" "${samples[@]}" <<'PY'
import json, os, sys, time
out, drives, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
steps, skipped = [], []
for s in sys.argv[4:]:
    f = s.split()
    if f[1] == "skipped":
        skipped.append(f[0])
        continue
    steps.append({"stored": f[0], "stored_bytes": int(f[1]),
                  "ready_s": int(f[2]) / 1e6, "cpu_s": float(f[3]),
                  "rss_bytes": int(f[4]) * 1024, "peak_rss_bytes": int(f[5]) * 1024,
                  "read_bytes": int(f[6]), "zones_read": int(f[7]),
                  "headers_read": int(f[8]), "from_table": f[9] == "1"})
res = {"what": "zarrayd start with one recorded array until it answers status",
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
       "cores": os.cpu_count(),
       "drives": drives, "drive_bytes": 16776960 << 20, "zone_bytes": 256 << 20,
       "k": 10, "p": 2, "steps": steps, "skipped": skipped}
lines = []
if steps:
    a, b = steps[0], steps[-1]
    # Full array: 256 drives x 20 TB, 10/12 of it user data.
    full = 256 * 20e12 * 10 / 12
    lines.append("%-8s %10s %10s %12s %14s %8s %9s %6s" % ("stored", "ready s", "CPU s", "RSS MiB",
                 "read MiB", "zones", "headers", "table"))
    for s in steps:
        lines.append("%-8s %10.3f %10.2f %12.1f %14.1f %8d %9d %6s" % (s["stored"], s["ready_s"], s["cpu_s"],
                     s["rss_bytes"] / 2**20, s["read_bytes"] / 2**20, s["zones_read"],
                     s["headers_read"], "yes" if s["from_table"] else "no"))
    if b is not a:
        d = (b["stored_bytes"] - a["stored_bytes"]) / 2**30
        # A fall is noise, not a saving that would go on: taken as 0.
        cpu_per = max(0.0, (b["cpu_s"] - a["cpu_s"]) / d)
        rss_per = max(0.0, (b["rss_bytes"] - a["rss_bytes"]) / d)
        rd_per = max(0.0, (b["read_bytes"] - a["read_bytes"]) / d)
        res["last_over_first"] = {"cpu": b["cpu_s"] / a["cpu_s"] if a["cpu_s"] else None,
                                  "rss": b["rss_bytes"] / a["rss_bytes"],
                                  "ready": b["ready_s"] / a["ready_s"]}
        gib = full / 2**30
        res["per_gib_stored"] = {"cpu_s": cpu_per, "rss_bytes": rss_per, "read_bytes": rd_per}
        res["full_array"] = {"user_bytes": full, "cpu_s": a["cpu_s"] + cpu_per * gib,
                             "rss_bytes": a["rss_bytes"] + rss_per * gib,
                             "read_bytes": a["read_bytes"] + rd_per * gib}
        lines.append("last/first: CPU %.2fx, RSS %.2fx, ready %.2fx (target: flat, <= 1.2x)" %
                     (res["last_over_first"]["cpu"] or 0, res["last_over_first"]["rss"],
                      res["last_over_first"]["ready"]))
        lines.append("per GiB stored: %.4f CPU s, %.0f B of RSS, %.0f B read" % (cpu_per, rss_per, rd_per))
        lines.append("256 x 20 TB, 10/12 user data = %.0f GiB: CPU %.2f + %.4f x %.0f = %.0f s; "
                     "RSS %.0f MiB + %.0f B x %.0f = %.1f GiB; reads %.1f TiB (targets: 5 s, 2 GiB)" %
                     (gib, a["cpu_s"], cpu_per, gib, res["full_array"]["cpu_s"],
                      a["rss_bytes"] / 2**20, rss_per, gib, res["full_array"]["rss_bytes"] / 2**30,
                      res["full_array"]["read_bytes"] / 2**40))
for s in skipped:
    lines.append("step %s skipped: not enough disk space" % s)
res["summary"] = lines
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print("S1 assembly of %d drives of 16 TiB vs data stored (%s, commit %s)" %
      (drives, res["date"], commit))
print("\n".join(lines))
PY
