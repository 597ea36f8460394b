#!/bin/bash
# bench/s5.sh - S5 of issue 36: recovery after kill -9 against a clean
# restart. za-volume-bench --kill grows a volume's map to EXTENTS extents
# (single 4 KiB writes at even LBAs, one extent each; 10+2 on 12 emulated
# drives of 3 GiB, on disk under /var/tmp), takes a checkpoint (a clean
# stop) and recovers from it (a clean restart: nothing to replay); then
# writes as much as the volume writes between two checkpoints by default
# (an eighth of the volume within 16 MiB..1 GiB, at least 64 (p+1) times
# the live checkpoint's blocks) as random 4 KiB overwrites of those
# blocks, flushes, and recovers without a checkpoint: the worst kill -9,
# just before the next checkpoint was due. Each recovery is the median of
# three (in process: the volume and engine dropped and made again over
# the same drives), wall time and CPU time. Printed with the ratios of
# kill -9 to clean; S5's target is at most 2x. Nothing is asserted.
# Usage: bench/s5.sh [-b BUILDDIR] [--quick] [--out FILE.json] [--dir DIR]
#   --quick   256 k extents (default 2 M)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
dir=/var/tmp
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	--out) out=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
	*) echo "usage: bench/s5.sh [-b BUILDDIR] [--quick] [--out FILE] [--dir DIR]" >&2; exit 2 ;;
	esac
done
bin=$build/bench/za-volume-bench
[ -x "$bin" ] || { echo "s5: no $bin (build first)" >&2; exit 1; }
ext=2000000
[ $quick = 1 ] && ext=256000
work=$(mktemp -d "$dir/za-s5.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin" --drives 12 --drive-mib 3072 --dir "$work" --kill $ext >"$work/row.json"
python3 - "$work/row.json" "$quick" "${out:-}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
quick = sys.argv[2] == "1"
out = sys.argv[3]
r["quick"] = quick
r["kill_vs_clean_wall"] = round(r["kill_ms"] / r["clean_ms"], 2)
r["kill_vs_clean_cpu"] = round(r["kill_cpu_ms"] / r["clean_cpu_ms"], 2)
print("%d extents: clean restart %.1f ms (CPU %.1f ms); after kill -9 with "
      "%d blocks written since the checkpoint (%d stripes replayed) %.1f ms "
      "(CPU %.1f ms): x%.2f wall, x%.2f CPU (target <= 2)" %
      (r["extents"], r["clean_ms"], r["clean_cpu_ms"], r["interval_blocks"],
       r["kill_replayed"], r["kill_ms"], r["kill_cpu_ms"],
       r["kill_vs_clean_wall"], r["kill_vs_clean_cpu"]))
if out:
    json.dump(r, open(out, "w"), indent=1)
    open(out, "a").write("\n")
PY
