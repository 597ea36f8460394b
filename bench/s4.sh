#!/bin/bash
# bench/s4.sh - S4 of issue 36: a checkpoint's cost against the map's
# size. za-volume-bench --checkpoints grows a volume's map to 1 k, 16 k,
# 256 k and MAX extents (single 4 KiB writes at even LBAs, one extent
# each; 10+2 on 12 emulated drives, on disk under /var/tmp), takes a
# checkpoint at each size, then writes DIRTY of those blocks again at
# random and takes one more, alone on the drives. For that one it reports
# how long writes were held (from the checkpoint's start, its quiet
# point's flush included, to the end of its snapshot), the snapshot's
# part, the map pages it wrote, its device bytes, and what a checkpoint
# of the whole map (40 B per extent, p+1 copies: the format before
# version 3) would have written, computed for reference. Printed per
# size, with the ratios that matter: device bytes per block written (the
# cost follows the pages written, not the map) and the hold at MAX
# against the hold at the size before it (flat or not). Nothing is
# asserted.
# Usage: bench/s4.sh [-b BUILDDIR] [--quick] [--out FILE.json] [--dir DIR]
#   --quick   up to 256 k extents (default 2 M)
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
	*) echo "usage: bench/s4.sh [-b BUILDDIR] [--quick] [--out FILE] [--dir DIR]" >&2; exit 2 ;;
	esac
done
bin=$build/bench/za-volume-bench
[ -x "$bin" ] || { echo "s4: no $bin (build first)" >&2; exit 1; }
max=2000000
[ $quick = 1 ] && max=256000
work=$(mktemp -d "$dir/za-s4.XXXXXX")
trap 'rm -rf "$work"' EXIT
# 12 drives of 3 GiB: a 25 GiB volume, room for 2 M extents at even LBAs.
"$bin" --drives 12 --drive-mib 3072 --dir "$work" --checkpoints $max \
	--dirty 1000 >"$work/rows.json"
python3 - "$work/rows.json" "$quick" "${out:-}" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
quick = sys.argv[2] == "1"
out = sys.argv[3]
for r in rows:
    blocks = r["pages_written"] + r["parts"]
    r["device_bytes_per_block"] = round(r["device_bytes"] / blocks, 1)
    r["vs_whole_map"] = round(r["device_bytes"] / r["whole_map_bytes"], 3)
    print("%9d extents: held %7.3f ms (snapshot %7.3f), %5d pages of %6d "
          "written, %6.1f MiB on the drives (%.3f of a whole-map "
          "checkpoint), %.0f B per block" %
          (r["extents"], r["hold_ms"], r["snapshot_ms"], r["pages_written"],
           r["pages"], r["device_bytes"] / 2**20, r["vs_whole_map"],
           r["device_bytes_per_block"]))
# The reference: the size before the largest. At the smallest sizes the
# dirty blocks touch every leaf of the map, so the whole map is written.
ref = rows[-2] if len(rows) > 1 else rows[-1]
last = rows[-1]
summary = {
    "quick": quick,
    "dirty_blocks": last["dirty_blocks"],
    "rows": rows,
    "ref_extents": ref["extents"],
    "hold_ratio_max_vs_ref": round(last["hold_ms"] / ref["hold_ms"], 2),
    "device_bytes_ratio_max_vs_ref": round(last["device_bytes"] /
                                           ref["device_bytes"], 2),
    "pages_written_ratio_max_vs_ref": round(last["pages_written"] /
                                            ref["pages_written"], 2),
}
print("from %d to %d extents, %d blocks dirty: hold x%.2f, device bytes "
      "x%.2f, pages written x%.2f" %
      (ref["extents"], last["extents"], last["dirty_blocks"],
       summary["hold_ratio_max_vs_ref"],
       summary["device_bytes_ratio_max_vs_ref"],
       summary["pages_written_ratio_max_vs_ref"]))
if out:
    json.dump(summary, open(out, "w"), indent=1)
    open(out, "a").write("\n")
PY
