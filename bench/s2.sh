#!/bin/bash
# bench/s2.sh - S2 of issue 36: the daemon's memory per zone of an empty
# array, at real geometry. For each of two drive counts it creates
# emulated drives of 16 TiB (sparse files, 256 MiB zones: 65,535 zones
# each, as a host-managed SMR drive; on disk under /var/tmp), a 10+2
# array on them under a private zarrayd, stops it and starts a new one,
# which assembles the array from its state record, and reads that
# process's memory once it answers `zarray status`: anonymous (RssAnon:
# what the process allocates) and file-backed (RssFile: here the
# emulated drives' zone tables, mapped from their files) from
# /proc/PID/status. The difference between the two arrays divided by the
# difference in zones is the cost per zone, free of the fixed part (the
# program, the NBD receive ring); the fixed part is what remains. Both are
# extrapolated to 256 drives of 20 TB (74,500 zones each) with the
# arithmetic printed. Part of the anonymous figure is the emulator's own
# per-zone state (16 B, struct emu_zone in src/dev-emu.c), which a real
# drive keeps in its firmware; the zbd backend keeps 16 B per zone
# instead (its software copy of write pointer, capacity, condition).
# Nothing is asserted.
# Usage: bench/s2.sh [-b BUILDDIR] [--quick] [--out FILE.json]
#                    [--dir DIR] [--drives "N1 N2"]
#   --quick   12 and 24 drives (default 16 and 64)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
dir=/var/tmp
counts=
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	--out) out=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--drives) counts=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "usage: bench/s2.sh [-b BUILDDIR] [--quick] [--out FILE] [--dir DIR] [--drives \"N1 N2\"]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-s2.json}
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
for b in "$zarray" "$zarrayd"; do
	[ -x "$b" ] || { echo "bench/s2.sh: missing $b: build first" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "bench/s2.sh: python3 is not installed" >&2; exit 1; }
if [ -z "$counts" ]; then
	if [ $quick = 1 ]; then counts="12 24"; else counts="16 64"; fi
fi
set -- $counts
[ $# = 2 ] && [ "$1" -ge 12 ] && [ "$2" -gt "$1" ] || {
	echo "bench/s2.sh: --drives wants two counts, 12 or more, the second larger" >&2
	exit 2
}

work=$(mktemp -d "$dir/za-s2.XXXXXX")
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

kib() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status"; }
wait_answer() {
	local i
	for i in $(seq 60000); do
		# Answered while it assembles too ("assembling"): until not.
		if ans=$("$zarray" status "$1" 2>/dev/null); then
			case $ans in "$1: assembling"*) ;; *) return 0 ;; esac
		fi
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.01
	done
	echo "bench/s2.sh: zarrayd did not answer: $(tail -n 3 "$work/daemon.log")" >&2
	exit 1
}

samples=()
for n in "$@"; do
	run=$work/n$n
	mkdir -p "$run"
	export ZARRAY_SOCKET=$run/run/zarrayd.sock
	devs=()
	for i in $(seq -f '%03g' 0 $((n - 1))); do
		devs+=("$run/d$i.img")
	done
	echo "== S2: $n emulated drives of 16 TiB (256 MiB zones) in $dir, 10+2" >&2
	"$zarray" emu create --size 16776960M "${devs[@]}" >/dev/null
	"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$run/run" --state-dir "$run/state" \
		>>"$work/daemon.log" 2>&1 &
	daemon=$!
	for i in $(seq 600); do
		"$zarray" list >/dev/null 2>&1 && break
		sleep 0.05
	done
	"$zarray" create s2 --data 10 --parity 2 "${devs[@]}" >/dev/null
	stop_daemon
	"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$run/run" --state-dir "$run/state" \
		>>"$work/daemon.log" 2>&1 &
	daemon=$!
	wait_answer s2
	zones=$((n * 65535)) # 16776960 MiB / 256 MiB per drive
	samples+=("$n $zones $(kib "$daemon" RssAnon) $(kib "$daemon" RssFile) $(kib "$daemon" RssShmem) $(kib "$daemon" VmHWM)")
	echo "== S2: $n drives, $zones zones: RssAnon $(kib "$daemon" RssAnon) KiB, RssFile $(kib "$daemon" RssFile) KiB" >&2
	stop_daemon
	rm -rf "$run"
done

commit=$(git -C "$build" rev-parse --short=10 HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$commit" "${samples[@]}" <<'PY'
import json, os, sys, time
out, commit = sys.argv[1], sys.argv[2]
pts = []
for s in sys.argv[3:]:
    n, zones, anon, fil, shm, hwm = (int(x) for x in s.split())
    pts.append({"drives": n, "zones": zones, "anon_bytes": anon * 1024,
                "file_bytes": fil * 1024, "shmem_bytes": shm * 1024,
                "peak_rss_bytes": hwm * 1024})
a, b = pts
dz = b["zones"] - a["zones"]
anon_z = (b["anon_bytes"] - a["anon_bytes"]) / dz
file_z = (b["file_bytes"] - a["file_bytes"]) / dz
fixed = a["anon_bytes"] - anon_z * a["zones"]
full_zones = 256 * 74500
emu_z = 16
res = {"what": "zarrayd memory after assembling an empty 10+2 array, per zone",
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
       "zone_bytes": 256 << 20, "points": pts,
       "anon_per_zone_bytes": anon_z, "file_per_zone_bytes": file_z,
       "anon_fixed_bytes": fixed, "emulator_anon_per_zone_bytes": emu_z,
       "full_array": {"zones": full_zones,
                      "anon_bytes": fixed + anon_z * full_zones,
                      "anon_bytes_zbd": fixed + (anon_z - emu_z + 16) * full_zones}}
lines = ["%-7s %10s %12s %12s %12s" % ("drives", "zones", "anon MiB", "file MiB", "shmem MiB")]
for p in pts:
    lines.append("%-7d %10d %12.1f %12.1f %12.1f" % (p["drives"], p["zones"], p["anon_bytes"] / 2**20,
                 p["file_bytes"] / 2**20, p["shmem_bytes"] / 2**20))
lines.append("per zone: %.1f B anonymous (of it %d B the emulator's zone state), %.1f B file-backed "
             "(the emulated drives' zone tables); fixed: %.1f MiB anonymous (target: 24 B per zone)" %
             (anon_z, emu_z, file_z, fixed / 2**20))
lines.append("256 x 20 TB = %d zones: %.1f MiB + %.1f B x %d = %.0f MiB anonymous on emulated drives; "
             "with the zbd backend's 16 B for the emulator's %d B: %.0f MiB (target: 512 MiB)" %
             (full_zones, fixed / 2**20, anon_z, full_zones, res["full_array"]["anon_bytes"] / 2**20,
              emu_z, res["full_array"]["anon_bytes_zbd"] / 2**20))
res["summary"] = lines
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print("S2 memory per zone of an empty array (%s, commit %s)" % (res["date"], commit))
print("\n".join(lines))
PY
