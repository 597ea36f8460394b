#!/bin/bash
# bench/assemble.sh - assembly's wall time against the drive count, the
# page cache dropped: what opening the drives and reading their
# superblocks costs when each read goes to the medium. It creates N
# emulated drives of 16 TiB (sparse files, 256 MiB zones: 65,535 zones
# each, as a host-managed SMR drive; on disk under /var/tmp) and an empty
# 10+2 array on them under a private zarrayd, then restarts zarrayd
# --runs times, each after `sync; echo 3 > /proc/sys/vm/drop_caches` (as
# root; otherwise the cache stays warm and the script says so), and
# measures the time until `zarray status` answers with the array
# assembled, and that process's CPU time then (/proc/PID/stat). With -a
# OTHERBUILD the two builds' restarts alternate over the same drives, so
# both see the same machine (a peer measured in the same run). Nothing is
# asserted. With --crash SIZE the array is not empty: SIZE is written
# sequentially through the export (fio), zarrayd is killed (SIGKILL), and
# every restart recovers from that same crash - the drive files are copied
# aside then (cp --sparse) and put back before each run - so that what
# recovery reads after its checkpoint (pass 1's stripe headers) is timed
# too; status --json's volume.recovery says how many. --emu "ARGS" gives
# `zarray emu create` a performance model, e.g. --emu "--lat 2000 --seek
# 8000" for a disk's 2 ms per operation and 8 ms full-stroke seek (the
# emulator serves each drive's requests one at a time, as a disk does;
# without a model a read costs only the page cache's or the file
# system's time, which is what makes reads one by one cheap).
# Usage: bench/assemble.sh [-b BUILDDIR] [-a OTHERBUILD] [--drives N]
#                          [--runs R] [--crash SIZE] [--emu "ARGS"]
#                          [--dir DIR] [--out FILE.json]
#   --drives  default 256 (12 with --quick)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
other=
n=256
runs=3
crash=
emu=
out=
dir=/var/tmp
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	-a) other=$(cd "$2" && pwd); shift 2 ;;
	--drives) n=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--crash) crash=$2; shift 2 ;;
	--emu) emu=$2; shift 2 ;;
	--quick) n=12; runs=2; shift ;;
	--dir) dir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "usage: bench/assemble.sh [-b BUILDDIR] [-a OTHERBUILD] [--drives N] [--runs R] [--dir DIR] [--out FILE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-assemble.json}
case $n in ''|*[!0-9]*) echo "bench/assemble.sh: --drives wants a number" >&2; exit 2 ;; esac
[ "$n" -ge 12 ] || { echo "bench/assemble.sh: --drives wants 12 or more (10+2)" >&2; exit 2; }
builds=("$build")
[ -n "$other" ] && builds+=("$other")
for b in "${builds[@]}"; do
	for p in cli/zarray src/zarrayd; do
		[ -x "$b/$p" ] || { echo "bench/assemble.sh: missing $b/$p: build first" >&2; exit 1; }
	done
done
command -v python3 >/dev/null || { echo "bench/assemble.sh: python3 is not installed" >&2; exit 1; }
if [ -n "$crash" ]; then
	command -v fio >/dev/null || { echo "bench/assemble.sh: fio is not installed" >&2; exit 1; }
	crash_bytes=$(numfmt --from=iec "$crash") || exit 2
fi
cold=1
if [ "$(id -u)" != 0 ] || ! [ -w /proc/sys/vm/drop_caches ]; then
	cold=0
	echo "bench/assemble.sh: not root: the page cache stays warm" >&2
fi

work=$(mktemp -d "$dir/za-asm.XXXXXX")
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

export ZARRAY_SOCKET=$work/run/zarrayd.sock
start() {
	"$1/src/zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" \
		--state-dir "$work/state" >>"$work/daemon.log" 2>&1 &
	daemon=$!
}
devs=()
for i in $(seq -f '%03g' 0 $((n - 1))); do
	devs+=("$work/d$i.img")
done
echo "== assembly: $n emulated drives of 16 TiB (256 MiB zones) in $dir, 10+2" >&2
# shellcheck disable=SC2086 # $emu: options, split on purpose
"$build/cli/zarray" emu create --size 16776960M $emu "${devs[@]}" >/dev/null
start "$build"
for i in $(seq 600); do
	"$build/cli/zarray" list >/dev/null 2>&1 && break
	sleep 0.05
done
"$build/cli/zarray" create asm --data 10 --parity 2 "${devs[@]}" >/dev/null
if [ -n "$crash" ]; then
	echo "== writing $crash, then SIGKILL" >&2
	uri=$("$build/cli/zarray" export asm)
	timeout 3000 fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1M \
		--size="$crash_bytes" --iodepth=8 --end_fsync=1 >"$work/fio.out" 2>&1 || {
		echo "bench/assemble.sh: fio failed: $(tail -n 5 "$work/fio.out")" >&2
		exit 1
	}
	kill -KILL "$daemon"
	wait "$daemon" 2>/dev/null || true
	daemon=
	mkdir "$work/snap"
	cp --sparse=always "${devs[@]}" "$work/snap/"
	cp -a "$work/state" "$work/snap/state"
else
	stop_daemon
fi

samples=()
for r in $(seq "$runs"); do
	for b in "${builds[@]}"; do
		if [ -n "$crash" ]; then
			for d in "${devs[@]}"; do
				cp --sparse=always -f "$work/snap/${d##*/}" "$d"
			done
			rm -rf "$work/state"
			cp -a "$work/snap/state" "$work/state"
		fi
		if [ $cold = 1 ]; then
			sync
			echo 3 >/proc/sys/vm/drop_caches
		fi
		t0=$(date +%s%N)
		start "$b"
		ok=0
		for i in $(seq 60000); do
			if ans=$("$b/cli/zarray" status asm 2>/dev/null); then
				case $ans in "asm: assembling"*) ;; *) ok=1; break ;; esac
			fi
			kill -0 "$daemon" 2>/dev/null || break
			sleep 0.01
		done
		t1=$(date +%s%N)
		[ $ok = 1 ] || { echo "bench/assemble.sh: zarrayd did not answer: $(tail -n 3 "$work/daemon.log")" >&2; exit 1; }
		read -r ut st < <(awk '{ print $14, $15 }' "/proc/$daemon/stat")
		hdrs=$("$b/cli/zarray" status --json asm | python3 -c '
import json, sys
r = (json.load(sys.stdin).get("volume") or {}).get("recovery", {})
print(r.get("headers", -1), r.get("zones", -1))' 2>/dev/null || echo "-1 -1")
		samples+=("$b $r $(( (t1 - t0) / 1000 )) $((ut + st)) $hdrs")
		echo "== $b run $r: ready $(( (t1 - t0) / 1000000 )) ms, CPU $((ut + st)) ticks" >&2
		stop_daemon
	done
done

commit=$(git -C "$build" rev-parse --short=10 HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$commit" "$n" "$cold" "$(getconf CLK_TCK)" "${crash:-}" "$emu" "${samples[@]}" <<'PY'
import json, statistics, sys, time
out, commit, n, cold, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
crash, emu = sys.argv[6], sys.argv[7]
by = {}
for s in sys.argv[8:]:
    b, r, us, ticks, hdrs, zones = s.split()
    by.setdefault(b, []).append({"run": int(r), "ready_s": int(us) / 1e6, "cpu_s": int(ticks) / hz,
                                 "recovery_headers_read": int(hdrs), "recovery_zones_scanned": int(zones)})
what = ("zarrayd restart to an assembled 10+2 array, recovering from a SIGKILL after %s written" % crash
        if crash else "zarrayd restart to an assembled empty 10+2 array")
if emu:
    what += ", drives modelled with %s" % emu
res = {"what": what + ", page cache %s" % ("dropped" if cold else "warm"),
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
       "drives": n, "zones_per_drive": 65535, "cold_cache": cold, "crash_written": crash or None,
       "emu_model": emu or None,
       "builds": []}
lines = []
for b, runs in by.items():
    ready = [x["ready_s"] for x in runs]
    cpu = [x["cpu_s"] for x in runs]
    res["builds"].append({"build": b, "runs": runs, "ready_median_s": statistics.median(ready),
                          "cpu_median_s": statistics.median(cpu)})
    lines.append("%s: ready %s s (median %.2f), CPU median %.2f s; recovery read %s headers in %s zones" %
                 (b, " ".join("%.2f" % x for x in ready), statistics.median(ready), statistics.median(cpu),
                  runs[0]["recovery_headers_read"], runs[0]["recovery_zones_scanned"]))
if len(res["builds"]) == 2:
    a, o = res["builds"]
    res["ready_ratio_other_over_this"] = o["ready_median_s"] / a["ready_median_s"]
    lines.append("ready, median, %s / %s: %.2fx" % (o["build"], a["build"], res["ready_ratio_other_over_this"]))
res["summary"] = lines
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print("%s: %d drives of 16 TiB (%s, commit %s)" % (res["what"], n, res["date"], commit))
print("\n".join(lines))
PY
