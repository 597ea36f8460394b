#!/bin/bash
# bench/rebuild.sh - P3 and P7 of the design brief, each next to its
# reference measured or computed in the same run (ratios; nothing is
# asserted), with bench/za-rebuild-bench on memory-backed emulated drives
# whose bandwidth model is on:
#  P3  rebuild after one failure, volume half full: time against the
#      limit the survivors' bandwidth sets for the bytes that must move
#      (k reads + 1 write per byte of lost live column, spread over N-1
#      drives), against a whole-drive rebuild (one drive's capacity at one
#      drive's bandwidth), and bytes read against k x live bytes lost;
#  P7  4 KiB FUA write p99.99 latency during rebuilds (of several members
#      failed one after another) against the same writers on the healthy
#      array for as long.
# Usage: bench/rebuild.sh [-b BUILDDIR] [--quick] [-o DIR]
# Writes DIR/p3.json, DIR/p7.json, DIR/rebuild-progress.dat (seconds,
# done fraction, limit fraction), DIR/latency-healthy.dat and
# DIR/latency-rebuild.dat (percentile, latency in us).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
quick=0
out=
while [ $# -gt 0 ]; do
	case $1 in
	-b) build=$(cd "$2" && pwd); shift 2 ;;
	--quick) quick=1; shift ;;
	-o) out=$2; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/rebuild.sh [-b BUILDDIR] [--quick] [-o DIR]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-rebuild}
bin=$build/bench/za-rebuild-bench
[ -x "$bin" ] || { echo "missing $bin: build first" >&2; exit 1; }
mkdir -p "$out"
dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
# Geometry (bench/results/notes.md, P3, has the arithmetic): 6+2, so that 80% of
# the survivor-bandwidth limit is also 50x a whole-drive rebuild (8+2
# would need 88%); zones of one 100 KiB slot (32 KiB chunks x 3 rows +
# the 4 KiB header: header reads stay under the 5% the read target
# allows), so that a lost column is one unit of work and the failed
# drive holds hundreds of them, as a real drive holds thousands of
# zones: 983 zones per 96 MiB drive, about 410 live lost columns, some
# 11 units of work per survivor. Drives at 0.5 MB/s: 256 of them move
# 128 MB/s through one loop thread; at 1 MB/s that thread on this 2-core
# machine was sometimes the bottleneck (0.77 of the limit one run, 0.92
# the next), which measures the host, not the design. P7 pools the
# rebuilds of several members failed one after another: one rebuild of
# a few seconds gives a few hundred samples, whose p99.99 is their
# maximum.
geo=(--zone-kib 100 --chunk-kib 32 --rows 3 -k 6 -p 2 --bw 0.5)
if [ $quick = 1 ]; then
	args=(--drives 48 --drive-mib 16 --healthy-s 1 --p7-rounds 2)
else
	# 256 drives x 96 MiB (24 GiB, about 10 GiB written) at 0.5 MB/s.
	args=(--drives 256 --drive-mib 96 --healthy-s 5 --p7-rounds 8)
fi
echo "== P3/P7: ${args[*]} ${geo[*]} (MB/s per drive; drives in $dir)" >&2
res=$("$bin" "${args[@]}" "${geo[@]}" --dir "$dir" --out "$out")
echo "$res" >"$out/rebuild-raw.json"
python3 - "$out" "$quick" <<'PY'
import json, sys
out, quick = sys.argv[1], sys.argv[2] == "1"
r = json.load(open(out + "/rebuild-raw.json"))
common = {"drives": r["drives"], "k": r["k"], "p": r["p"], "quick": quick,
          "drive_bytes": r["drive_bytes"], "drive_bw_bytes_per_s": r["drive_bw_bytes_per_s"]}
p3 = dict(common, id="P3", what="rebuild after one failure, half full",
          value=r["rebuild_s"], unit="s", reference=r["limit_s"],
          reference_what="survivor-bandwidth limit for the bytes that must move",
          ratio=round(r["ratio_to_limit"], 3), target=">= 0.80 of the limit",
          whole_drive_s=r["whole_drive_s"],
          speedup_vs_whole_drive=r["speedup_vs_whole_drive"],
          speedup_target=">= 50",
          read_per_k_live=r["read_per_k_live"], read_target="<= 1.05",
          live_lost_bytes=r["live_lost_bytes"], read_bytes=r["read_bytes"],
          written_bytes=r["written_bytes"], error=r["error"])
p3["pass"] = (r["ratio_to_limit"] >= 0.8 and r["speedup_vs_whole_drive"] >= 50
              and r["read_per_k_live"] <= 1.05)
p7 = dict(common, id="P7", what="4 KiB FUA write p99.99 latency during rebuild",
          value=r["latency_rebuild_p9999_us"], unit="us",
          reference=r["latency_healthy_p9999_us"], reference_what="healthy array, same writers",
          ratio=round(r["latency_ratio"], 3), target="<= 2.0",
          samples_healthy=r["samples_healthy"], samples_rebuild=r["samples_rebuild"])
p7["pass"] = r["latency_ratio"] <= 2.0
json.dump(p3, open(out + "/p3.json", "w"), indent=1)
json.dump(p7, open(out + "/p7.json", "w"), indent=1)
# Progress with the limit line: the limit restores at a constant pace.
lines, limit = [], None
for l in open(out + "/rebuild-progress.dat"):
    if l.startswith("# limit"):
        limit = float(l.split()[2])
    elif l.strip() and not l.startswith("#"):
        lines.append([float(x) for x in l.split()])
with open(out + "/rebuild-progress.dat", "w") as f:
    f.write("# seconds done_fraction limit_fraction\n")
    for t, d in lines:
        f.write("%.3f %.4f %.4f\n" % (t, d, min(1.0, t / limit) if limit else 0))
print("P3  rebuild %.2f s, limit %.2f s: %.2f of the limit (target 0.80); "
      "%.1fx faster than a whole-drive rebuild (target 50); read %.3f x k x live lost (target 1.05)"
      % (r["rebuild_s"], r["limit_s"], r["ratio_to_limit"], r["speedup_vs_whole_drive"], r["read_per_k_live"]))
print("P7  4 KiB FUA p99.99 %.0f us during rebuild vs %.0f us healthy: %.2fx (target 2); "
      "%d and %d samples" % (r["latency_rebuild_p9999_us"], r["latency_healthy_p9999_us"],
                             r["latency_ratio"], r["samples_rebuild"], r["samples_healthy"]))
PY
