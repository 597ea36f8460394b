#!/bin/bash
# bench/p4.sh - P4 of the design brief: how long a 256-drive array takes
# to assemble (mount), against the 2 s limit. It creates 256 small
# memory-backed emulated drives (256 MiB, 16 MiB zones, sparse files in
# /dev/shm), a 10+2 array on them under a private zarrayd, writes data
# through the NBD export with fio (a sequential fill, then random 4 KiB
# writes so that the map has many extents), stops the array, and times
# `zarray assemble` until it returns and until the export answers nbdinfo.
# The figure is the slowest of 3 assemblies (1 with --quick, which also
# uses 48 drives and less data; the JSON says how many). It measures the
# assembly command on a running zarrayd, not a daemon start.
# Usage: bench/p4.sh [-b BUILDDIR] [--quick] [--out FILE.json]
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
	-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/p4.sh [-b BUILDDIR] [--quick] [--out FILE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-p4.json}
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
for b in "$zarray" "$zarrayd"; do
	[ -x "$b" ] || { echo "bench/p4.sh: missing $b: build first" >&2; exit 1; }
done
for c in fio nbdinfo python3; do
	command -v "$c" >/dev/null || { echo "bench/p4.sh: $c is not installed" >&2; exit 1; }
done

if [ $quick = 1 ]; then
	drives=48 fill=512M rand_s=1 reps=1
else
	drives=256 fill=4G rand_s=5 reps=3
fi

dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
work=$(mktemp -d "$dir/za-p4.XXXXXX")
daemon=
cleanup() {
	local i
	if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
		kill -TERM "$daemon" 2>/dev/null || true
		for i in $(seq 100); do
			kill -0 "$daemon" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$daemon" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

now_ns() { date +%s%N; }

echo "== P4: $drives emulated drives of 256 MiB in $dir, 10+2" >&2
devs=()
for i in $(seq -f '%03g' 0 $((drives - 1))); do
	devs+=("$work/d$i.img")
done
"$zarray" emu create --size 256M --zone-size 16M "${devs[@]}" >/dev/null
export ZARRAY_SOCKET=$work/run/zarrayd.sock
"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" --state-dir "$work/state" \
	>"$work/daemon.log" 2>&1 &
daemon=$!
for i in $(seq 200); do
	"$zarray" list >/dev/null 2>&1 && break
	kill -0 "$daemon" 2>/dev/null || { echo "zarrayd exited: $(tail -n 3 "$work/daemon.log")" >&2; exit 1; }
	sleep 0.05
done
"$zarray" create p4 --data 10 --parity 2 "${devs[@]}" >/dev/null
uri=$("$zarray" export p4)
size=$(nbdinfo --size "$uri")

echo "== P4: writing $fill sequentially, then random 4 KiB writes for $rand_s s" >&2
fio_run() {
	local name=$1
	shift
	timeout 600 fio --name="$name" --ioengine=nbd --uri="$uri" --end_fsync=1 \
		--output-format=json --output="$work/$name.json" "$@" >"$work/$name.out" 2>&1 || {
		echo "bench/p4.sh: fio $name failed: $(tail -n 5 "$work/$name.out")" >&2
		exit 1
	}
}
fio_run fill --rw=write --bs=1M --size="$fill" --iodepth=8
fio_run rand --rw=randwrite --bs=4k --size="$fill" --iodepth=32 \
	--runtime="$rand_s" --time_based

samples=()
for r in $(seq "$reps"); do
	t0=$(now_ns)
	"$zarray" stop p4 >/dev/null
	t1=$(now_ns)
	echo "== P4: assembly $r/$reps ($drives drives)" >&2
	lines=$(wc -l <"$work/daemon.log")
	t2=$(now_ns)
	u=$("$zarray" assemble p4 "${devs[@]}")
	t3=$(now_ns)
	ok=0
	for i in $(seq 2000); do
		if nbdinfo --size "$u" >/dev/null 2>&1; then
			ok=1
			break
		fi
		sleep 0.005
	done
	t4=$(now_ns)
	[ $ok = 1 ] || { echo "bench/p4.sh: the export did not answer after assembly" >&2; exit 1; }
	# The daemon says how long volume recovery took and how big the map is.
	rec=$(tail -n +"$((lines + 1))" "$work/daemon.log" |
		sed -n 's/.*volume: recovered \([0-9]*\) stripes.* in \([0-9]*\) ms; \([0-9]*\) extents.*/\1 \2 \3/p' |
		tail -n 1)
	samples+=("$(((t1 - t0) / 1000)) $(((t3 - t2) / 1000)) $(((t4 - t2) / 1000)) ${rec:-- - -}")
done

python3 - "$out" "$drives" "$size" "$fill" "$rand_s" "$work" "${samples[@]}" <<'PY'
import json, sys
out, drives, size, fill, rand_s, work = sys.argv[1:7]
def written(name):
    t = open("%s/%s.json" % (work, name)).read()
    return json.loads(t[t.index("{"):])["jobs"][0]["write"]["io_bytes"]
reps = []
for s in sys.argv[7:]:
    stop_us, asm_us, ready_us, stripes, rec_ms, extents = s.split()
    num = lambda x: None if x == "-" else int(x)
    reps.append({"stop_s": int(stop_us) / 1e6, "assemble_s": int(asm_us) / 1e6,
                 "ready_s": int(ready_us) / 1e6, "stripes_recovered": num(stripes),
                 "volume_recovery_ms": num(rec_ms), "extents_mapped": num(extents)})
res = {"drives": int(drives), "k": 10, "p": 2, "drive_bytes": 256 << 20,
       "zone_bytes": 16 << 20, "volume_bytes": int(size),
       "written_bytes": written("fill") + written("rand"),
       "random_4k_seconds": int(rand_s),
       "what": "zarray assemble until the export answers nbdinfo",
       "assembly_s": max(r["ready_s"] for r in reps), "runs": reps}
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print("P4 assembly of %d drives (%.0f MiB written): slowest of %d: %.3f s "
      "(command %.3f s)" % (res["drives"], res["written_bytes"] / 2**20, len(reps),
                            res["assembly_s"], max(r["assemble_s"] for r in reps)))
PY
