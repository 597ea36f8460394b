#!/bin/bash
# bench/volume.sh - the volume's figures from the design brief, each next
# to its limit (ratios; nothing is asserted): P5, map memory per TiB after
# a sequential fill (limit 1 MiB: the extents the fill left per TiB times
# the bytes an extent costs, measured on a map of a million; the map's
# fixed first allocations, ~10 KiB, are reported aside as the raw figure,
# since this bench fills only a GiB or so); P6, device bytes written per user byte
# for streaming 1 MiB writes (limit (k+p)/k x 1.03), a 4 KiB write + FLUSH
# loop (limit 2(p+1)) and random 4 KiB overwrites of a volume kept 80% full
# with garbage collection (limit 3.0). 12 memory-backed emulated drives,
# 10+2, through the volume API (no NBD).
# Usage: bench/volume.sh [-b BUILDDIR] [--quick] [--out FILE.json]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/volume.sh [-b BUILDDIR] [--quick] [--out FILE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-volume.json}
bin=$build/bench/za-volume-bench
[ -x "$bin" ] || { echo "missing $bin: build first" >&2; exit 1; }
dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
if [ $quick = 1 ]; then
	args=(--drive-mib 256 --zone-mib 16 --sync-ops 200 --overwrite 0.5)
else
	args=(--drive-mib 512 --zone-mib 32 --sync-ops 1000 --overwrite 3)
fi
echo "== volume: fill, 4 KiB write+FLUSH loop, overwrite with GC (${args[*]})" >&2
"$bin" --dir "$dir" "${args[@]}" >"$out"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = [
    ("P5 map memory per TiB (bytes)", r["p5_map_bytes_per_tib"], r["p5_limit"]),
    ("P6 streaming, device/user", r["p6_stream"], r["p6_stream_limit"]),
    ("P6 4 KiB write+FLUSH, device/user", r["p6_sync"], r["p6_sync_limit"]),
    ("P6 GC at 80% full, device/user", r["p6_gc"], r["p6_gc_limit"]),
]
print("%-36s %14s %12s %8s" % ("figure", "measured", "limit", "ratio"))
for name, v, lim in rows:
    print("%-36s %14.4f %12.4f %8.3f" % (name, v, lim, v / lim))
print("P5 detail: %d extents after the fill, %.2f bytes each; raw map bytes / fill: %.0f per TiB" %
      (r["p5_map_extents"], r["p5_bytes_per_extent"], r["p5_raw_bytes_per_tib"]))
print("gc: %d runs, %d blocks moved, %d groups freed; results: %s" %
      (r["gc_runs"], r["gc_moved_blocks"], r["gc_freed_groups"], sys.argv[1]))
PY
