#!/bin/bash
# bench/engine.sh - the segment engine's two measurements, each next to its
# reference taken in the same run (ratios, never absolute targets):
#  1. write throughput on memory-backed emulated drives (tmpfs), 10+2,
#     against the raw ISA-L encode rate of 10+2 on one core;
#  2. write scaling with bandwidth-limited emulated drives, 12 -> 256, 10+2,
#     against N x drive bandwidth x k/(k+p) (P2 in the design brief).
# Usage: bench/engine.sh [-b BUILDDIR] [--quick] [--out FILE.json]
# It prints a table and writes every figure to the JSON file
# (default BUILDDIR/bench-engine.json).
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
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/engine.sh [-b BUILDDIR] [--quick] [--out FILE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-engine.json}
ecrate=$build/bench/za-ec-rate
engine=$build/bench/za-engine-bench
for b in "$ecrate" "$engine"; do
	[ -x "$b" ] || { echo "missing $b: build first (tools/test --tier unit)" >&2; exit 1; }
done
dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}

if [ $quick = 1 ]; then
	secs=1; sizes="12 24"; bw=1
else
	secs=5; sizes="12 24 48 96 192 256"; bw=1
fi

echo "== engine throughput vs ISA-L encode (10+2, memory-backed drives in $dir)" >&2
enc=$("$ecrate" -k 10 -p 2 --seconds "$secs" --json)
eng=$("$engine" --drives 12 -k 10 -p 2 --seconds "$secs" --drive-mib 2048 \
	--zone-mib 64 --dir "$dir" --json)

scaling=()
for n in $sizes; do
	echo "== scaling: $n drives at $bw MB/s each" >&2
	scaling+=("$("$engine" --drives "$n" -k 10 -p 2 --bw "$bw" \
		--seconds "$secs" --drive-mib 256 --zone-mib 64 --dir "$dir" --json)")
done

python3 - "$out" "$enc" "$eng" "${scaling[@]}" <<'PY'
import json, sys
out, enc, eng = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
sc = [json.loads(s) for s in sys.argv[4:]]
res = {
    "engine_vs_encode": {
        "figure_bytes_per_s": eng["user_bytes_per_s"],
        "reference_bytes_per_s": enc["encode_bytes_per_s"],
        "ratio": eng["user_bytes_per_s"] / enc["encode_bytes_per_s"],
        "device_per_user": eng["device_per_user"],
        "engine": eng, "encode": enc,
    },
    "p2_scaling": [
        {"drives": s["drives"], "figure_bytes_per_s": s["user_bytes_per_s"],
         "limit_bytes_per_s": s["limit_bytes_per_s"],
         "ratio": s["ratio_to_limit"], "target": 0.90} for s in sc],
}
with open(out, "w") as f:
    json.dump(res, f, indent=1)
e = res["engine_vs_encode"]
print("engine write, 10+2, 12 memory-backed drives: %.0f MB/s user data"
      % (e["figure_bytes_per_s"] / 1e6))
print("  raw ISA-L 10+2 encode, one core:           %.0f MB/s  -> ratio %.3f"
      % (e["reference_bytes_per_s"] / 1e6, e["ratio"]))
print("  device bytes per user byte: %.3f (ideal 1.200, P6 limit %.3f)"
      % (e["device_per_user"], 1.2 * 1.03))
print("P2 write scaling, 10+2, drives at %.0f MB/s each:" %
      (sc[0]["drive_bw_bytes_per_s"] / 1e6 if sc else 0))
print("  drives  user MB/s  limit MB/s  ratio (target >= 0.90)")
for s in res["p2_scaling"]:
    print("  %6d  %9.1f  %10.1f  %.3f" % (s["drives"], s["figure_bytes_per_s"] / 1e6,
          s["limit_bytes_per_s"] / 1e6, s["ratio"]))
print("results: " + out)
PY
