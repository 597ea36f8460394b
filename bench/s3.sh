#!/bin/bash
# bench/s3.sh - S3 of issue 36: the block map under random 4 KiB writes,
# with the map cache (zarrayd --map-cache, design.md 9.8). On 12 emulated
# drives of 16 TiB (sparse, 256 MiB zones, on disk under --dir) in a 10+2
# array under a private zarrayd:
#  1. zarrayd --map-cache CACHE (default 64M); the daemon's anonymous
#     memory (RssAnon) once the array is created: the baseline;
#  2. fio writes WRITE (default 8G) of random 4 KiB blocks, each once
#     (fio's random map), over the first REGION (default 64G) of the
#     volume, with crc32c verify headers; RssAnon sampled every 0.2 s:
#     the peak during the writes and the figure after them, against the
#     baseline plus the cache's limit;
#  3. every block read back and verified (fio --verify_only, the same
#     seed), with the same daemon: the map pages it had to read back;
#  4. map bytes on the drives: the live checkpoint's pages x 4 KiB (and x
#     (p + 1) x 2 with the checkpoint stream's copies and stripe headers)
#     per TiB written at random;
#  5. read latency: zarrayd restarted with --map-cache 0 (the map whole in
#     memory: warm) and again with a tenth of the whole map's bytes, each
#     reading back RUNTIME seconds of the written blocks (fio
#     --verify_only, 1 in flight); p50/p99 of each, and p99 cold / p99
#     warm (the target: at most 3).
# CPU seconds of the daemon (utime + stime) per phase, to trust over wall
# time on a shared machine. Nothing is asserted.
# Usage: bench/s3.sh [-b BUILDDIR] [--quick] [--out FILE.json] [--dir DIR]
#                    [--write SIZE] [--region SIZE] [--cache SIZE]
#   --quick   512M written over 8G, a cache of 4M, 10 s reads (smoke run)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
dir=/var/tmp
write=
region=
cache=
runtime=30
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	--out) out=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--write) write=$2; shift 2 ;;
	--region) region=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "usage: bench/s3.sh [-b BUILDDIR] [--quick] [--out FILE] [--dir DIR] [--write SIZE] [--region SIZE] [--cache SIZE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-s3.json}
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
for b in "$zarray" "$zarrayd"; do
	[ -x "$b" ] || { echo "bench/s3.sh: missing $b: build first" >&2; exit 1; }
done
for c in fio python3; do
	command -v "$c" >/dev/null || { echo "bench/s3.sh: $c is not installed" >&2; exit 1; }
done
if [ $quick = 1 ]; then
	write=${write:-512M} region=${region:-8G} cache=${cache:-4M} runtime=10
else
	write=${write:-8G} region=${region:-64G} cache=${cache:-64M}
fi
to_bytes() { numfmt --from=iec "$1"; }

work=$(mktemp -d "$dir/za-s3.XXXXXX")
daemon=
sampler=
stop_daemon() {
	local i
	[ -n "$daemon" ] || return 0
	kill -TERM "$daemon" 2>/dev/null || true
	for i in $(seq 1200); do
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$daemon" 2>/dev/null || true
	wait "$daemon" 2>/dev/null || true
	daemon=
}
cleanup() {
	[ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
	stop_daemon
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

export ZARRAY_SOCKET=$work/run/zarrayd.sock
start_daemon() {
	local i
	"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" --state-dir "$work/state" \
		--map-cache "$1" >>"$work/daemon.log" 2>&1 &
	daemon=$!
	# Up once it answers; assembled once status says other than
	# "assembling" (no array yet the first time).
	for i in $(seq 6000); do
		if "$zarray" list >"$work/list.out" 2>/dev/null; then
			grep -q s3 "$work/list.out" || return 0
			"$zarray" status --json s3 >"$work/st.json" 2>/dev/null &&
				! grep -q '"state":"assembling"' "$work/st.json" &&
				return 0
		fi
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.05
	done
	echo "bench/s3.sh: zarrayd did not start: $(tail -n 3 "$work/daemon.log")" >&2
	exit 1
}
cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
anon_kib() { awk '$1 == "RssAnon:" { print $2 }' "/proc/$1/status"; }
status() { "$zarray" status --json s3 >"$work/st.json" && cat "$work/st.json"; }

# The same random sequence for the writes and every read-back.
fio_common=(--ioengine=nbd --bs=4k --offset=0 --size="$region"
	--io_size="$write" --randrepeat=1 --randseed=3300 --rw=randwrite
	--verify=crc32c --verify_state_save=0 --output-format=json)

echo "== S3: 12 emulated drives of 16 TiB in $dir, 10+2, --map-cache $cache" >&2
devs=()
for i in $(seq -f '%02g' 0 11); do
	devs+=("$work/d$i.img")
done
"$zarray" emu create --size 16776960M "${devs[@]}" >/dev/null
start_daemon "$cache"
"$zarray" create s3 --data 10 --parity 2 "${devs[@]}" >/dev/null
uri=$("$zarray" export s3)
sleep 1
base_kib=$(anon_kib "$daemon")

echo "== S3: writing $write of random 4 KiB blocks over $region" >&2
(
	peak=0
	while kill -0 "$daemon" 2>/dev/null; do
		a=$(anon_kib "$daemon" 2>/dev/null || echo 0)
		[ "${a:-0}" -gt $peak ] && peak=$a && echo $peak >"$work/peak"
		sleep 0.2
	done
) &
sampler=$!
c0=$(cpu_s "$daemon")
timeout 3000 fio --name=fill "${fio_common[@]}" --uri="$uri" --iodepth=32 \
	--do_verify=0 --end_fsync=1 --output="$work/fill.json" >"$work/fill.out" 2>&1 || {
	echo "bench/s3.sh: fio fill failed: $(tail -n 5 "$work/fill.out")" >&2
	echo "bench/s3.sh: zarrayd's log ends:" >&2
	tail -n 20 "$work/daemon.log" >&2
	exit 1
}
c1=$(cpu_s "$daemon")
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=
peak_kib=$(cat "$work/peak" 2>/dev/null || echo 0)
after_kib=$(anon_kib "$daemon")
status >"$work/after-fill.json"

echo "== S3: reading back and verifying every block" >&2
timeout 3000 fio --name=verify "${fio_common[@]}" --uri="$uri" --iodepth=16 \
	--verify_only --output="$work/verify.json" >"$work/verify.out" 2>&1 || {
	echo "bench/s3.sh: fio verify failed: $(tail -n 5 "$work/verify.out")" >&2
	exit 1
}
c2=$(cpu_s "$daemon")
verify_kib=$(anon_kib "$daemon")
status >"$work/after-verify.json"
stop_daemon

# A read phase: the written blocks read back for $runtime s, 1 in flight.
read_phase() {
	local name=$1
	timeout 600 fio --name="$name" "${fio_common[@]}" --uri="$uri" --iodepth=1 \
		--verify_only --runtime="$runtime" --time_based=0 \
		--output="$work/$name.json" >"$work/$name.out" 2>&1 || {
		echo "bench/s3.sh: fio $name failed: $(tail -n 5 "$work/$name.out")" >&2
		exit 1
	}
	status >"$work/$name-st.json"
}
echo "== S3: restart with the map whole in memory (--map-cache 0): warm reads" >&2
start_daemon 0
whole=$(python3 -c "import json; print(json.load(open('$work/st.json'))['volume']['map']['bytes'])")
read_phase warm
stop_daemon
tenth=$((whole / 10))
echo "== S3: restart with --map-cache $tenth (a tenth of $whole): cold reads" >&2
start_daemon "$tenth"
read_phase cold
cold_kib=$(anon_kib "$daemon")
stop_daemon

python3 - "$work" "$out" "$quick" "$cache" "$write" "$region" "$base_kib" \
	"$peak_kib" "$after_kib" "$verify_kib" "$cold_kib" "$c0" "$c1" "$c2" \
	"$whole" "$tenth" <<'PY'
import json, os, subprocess, sys
(work, out, quick, cache, write, region, base, peak, after, verify, cold,
 c0, c1, c2, whole, tenth) = sys.argv[1:17]
iec = lambda s: int(subprocess.check_output(["numfmt", "--from=iec", s]))
cache_b, write_b = iec(cache), iec(write)
base, peak, after, verify, cold = (int(x) * 1024 for x in
                                   (base, peak, after, verify, cold))
fill = json.load(open(os.path.join(work, "fill.json")))["jobs"][0]
ver = json.load(open(os.path.join(work, "verify.json")))["jobs"][0]
st_fill = json.load(open(os.path.join(work, "after-fill.json")))
st_ver = json.load(open(os.path.join(work, "after-verify.json")))
vol = st_ver["volume"]


def lat(name):
    j = json.load(open(os.path.join(work, name + ".json")))["jobs"][0]["read"]
    p = j["clat_ns"]["percentile"]
    s = json.load(open(os.path.join(work, name + "-st.json")))["volume"]
    return {"ios": j["total_ios"], "p50_us": p["50.000000"] / 1e3,
            "p99_us": p["99.000000"] / 1e3,
            "pages_read": s["map"]["pages_read"],
            "map_bytes": s["map"]["bytes"]}


warm, coldr = lat("warm"), lat("cold")
pages = vol["checkpoint"]["pages"]
tib = write_b / 2**40
res = {
    "what": "S3: random 4 KiB writes under zarrayd --map-cache, 12 x 16 TiB "
            "emulated drives, 10+2",
    "quick": quick == "1", "cache_bytes": cache_b, "written_bytes": write_b,
    "region": region, "extents": st_fill["volume"]["map"]["extents"],
    "whole_map_bytes": int(whole),
    "anon": {"baseline": base, "peak_during_writes": peak,
             "after_writes": after, "after_verify": verify,
             "over_baseline_peak": peak - base,
             "over_baseline_after": after - base,
             "map_bytes_after_writes": st_fill["volume"]["map"]["bytes"],
             "map_bytes_after_verify": vol["map"]["bytes"]},
    "fill": {"write_MBps": fill["write"]["bw_bytes"] / 1e6,
             "daemon_cpu_s": float(c1) - float(c0)},
    "verify": {"blocks": ver["read"]["total_ios"],
               "errors": ver.get("total_err", ver.get("error", 0)),
               "daemon_cpu_s": float(c2) - float(c1),
               "map_pages_read": vol["map"]["pages_read"],
               "map_page_errors": vol["map"]["page_errors"]},
    "checkpoint_pages": pages,
    "map_page_bytes_per_TiB": pages * 4096 / tib,
    "map_device_bytes_per_TiB": pages * 4096 * 3 * 2 / tib,
    "reads_warm": warm, "reads_cold_tenth": coldr,
    "p99_cold_over_warm": coldr["p99_us"] / warm["p99_us"],
}
json.dump(res, open(out, "w"), indent=1)
M = 2**20
print("S3: %d extents from %.1f GiB of random 4 KiB writes; whole map %.1f MiB"
      % (res["extents"], write_b / 2**30, int(whole) / M))
print("  anonymous memory over the baseline (%.1f MiB): peak %.1f MiB during "
      "the writes, %.1f after, %.1f after verifying; limit %.1f MiB"
      % (base / M, (peak - base) / M, (after - base) / M,
         (verify - base) / M, cache_b / M))
print("  every block verified: %d blocks, %d map pages read back, %d bad"
      % (res["verify"]["blocks"], res["verify"]["map_pages_read"],
         res["verify"]["map_page_errors"]))
print("  map on the drives: %d pages = %.2f GiB per TiB written at random "
      "(%.2f GiB of device bytes with 3 copies and headers)"
      % (pages, res["map_page_bytes_per_TiB"] / 2**30,
         res["map_device_bytes_per_TiB"] / 2**30))
print("  reads, 1 in flight: warm p50 %.0f us p99 %.0f us; cache a tenth "
      "(%.1f MiB): p50 %.0f us p99 %.0f us, %d pages read; p99 ratio %.2f "
      "(target <= 3)"
      % (warm["p50_us"], warm["p99_us"], int(tenth) / M, coldr["p50_us"],
         coldr["p99_us"], coldr["pages_read"], res["p99_cold_over_warm"]))
print("  daemon CPU: writes %.1f s, verify %.1f s" %
      (res["fill"]["daemon_cpu_s"], res["verify"]["daemon_cpu_s"]))
PY
