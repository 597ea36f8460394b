#!/bin/bash
# bench/p1.sh - P1 of the design brief: NBD write throughput of zarrayd's
# export against the reference NBD server, measured side by side in one
# run with the same client. zarrayd serves a 10+2 array on 12 memory-backed
# emulated drives (preallocated files, 1 GiB in zones of 64 MiB, on a
# tmpfs of 2 MiB pages that it mounts when run as root, else in
# /dev/shm: in some VMs a process's first touch of each 4 KiB page it
# maps costs far more than the write into it, and a log-structured
# array moves on to pages it has not touched all the time -
# bench/results/notes.md, P1); nbdkit serves `memory` (the target's reference)
# and `file` on a file in the same tmpfs (a second peer, for context),
# both on Unix sockets like the export. The client is fio
# --ioengine=nbd with the same options for every server: sequential
# 1 MiB writes (iodepth 8) and random 4 KiB writes (iodepth 32, the same
# offsets for every server), each ending with a FLUSH (end_fsync=1) so that
# acknowledged-from-memory writes are paid for. Random writes run twice:
# from one connection (one fio job) and from two (two jobs of iodepth 16,
# the same 32 in flight). One fio job costs four system calls per 4 KiB
# write whatever the server, and on a 2-CPU machine it is on its CPU
# nearly all the time with either server: that run measures the client,
# and the JSON says so (client_cpu_share, client_bound); the two-
# connection run is the one that loads the servers (bench/results/notes.md,
# P1).
# Before the first round
# every server has both regions written once (not measured), so that no
# round pays for a server's first touches of its memory. Servers take
# turns within each round; the figure is the median over rounds (5, or 1
# with --quick). The volume is small (about 3 GiB), so zarray's garbage
# collection runs in the later rounds, as it would in a
# full array. It does not tune anything, assert a target or keep the
# drives.
#
# Beside the rates it records what each run cost in CPU: the server's
# (its /proc/PID/stat), the client's (fio's own usr+sys; also as each
# job's share of a CPU) and how busy the machine was, per GiB written.
# bench/za-write-floor measures, in the same
# run, the CPU per GiB that a k+p array on memory-backed drives cannot
# avoid (receive, parity, CRCs, the copy to the drives); with the
# client's cost that gives a ceiling for sequential writes on this machine
# - every core busy, nothing spent beyond the floor - and its ratio to
# nbdkit memory's rate (bench/results/notes.md, P1).
# Usage: bench/p1.sh [-b BUILDDIR] [--quick] [--out FILE.json]
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
	-h|--help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bench/p1.sh [-b BUILDDIR] [--quick] [--out FILE]" >&2; exit 2 ;;
	esac
done
out=${out:-$build/bench-p1.json}
zarray=$build/cli/zarray
zarrayd=$build/src/zarrayd
floor=$build/bench/za-write-floor
for b in "$zarray" "$zarrayd" "$floor"; do
	[ -x "$b" ] || { echo "bench/p1.sh: missing $b: build first" >&2; exit 1; }
done
for c in fio nbdkit nbdinfo python3; do
	command -v "$c" >/dev/null || { echo "bench/p1.sh: $c is not installed" >&2; exit 1; }
done

if [ $quick = 1 ]; then
	seq=256M rand_s=2 rounds=1
else
	seq=1G rand_s=5 rounds=5
fi
drive=1G
rand_region=1G rand_off=2G

dir=/dev/shm
[ -w "$dir" ] || dir=${TMPDIR:-/tmp}
# The drives (12 GiB, all resident) and the peers' 4 GiB must fit in memory.
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kib:-0}" -lt $((18 << 20)) ]; then
	echo "bench/p1.sh: needs 18 GiB of available memory, $((avail_kib >> 20)) GiB here" >&2
	exit 1
fi
work=$(mktemp -d "$dir/za-p1.XXXXXX")
pids=()
cleanup() {
	local p _
	for p in "${pids[@]:-}"; do
		[ -z "$p" ] || kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] || continue
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
	done
	[ "$hugefs" = no ] || umount "$ddir" 2>/dev/null || true
	rm -rf "$work"
}
hugefs=no
ddir=$work
trap cleanup EXIT
trap 'exit 143' TERM INT

# The drives and the file peer go on a tmpfs of 2 MiB pages where we may
# mount one. A process's first touch of a 4 KiB page it maps is costly
# in some VMs even when the page is resident (in this workplace's PVM
# guests 0.3-0.7 GB/s against 19 GB/s for the next pass, measured with a
# mapping of a /dev/shm file written by another process), and zarray's
# log moves on to pages the daemon has not touched yet all the time;
# with huge pages the first touch costs nothing measurable. nbdkit
# memory's pages are touched by the warm-up below (bench/results/notes.md,
# P1).
if [ "$(id -u)" = 0 ] && mkdir "$work/huge" &&
	mount -t tmpfs -o huge=always,size=$((17 << 30)),mode=0700 za-p1 "$work/huge" 2>/dev/null; then
	hugefs=yes
	ddir=$work/huge
fi

# wait_for CMD...: until it succeeds (10 s at most).
wait_for() {
	local _
	for _ in $(seq 200); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}

fsdesc=$dir
[ "$hugefs" = no ] || fsdesc="a tmpfs of 2 MiB pages (huge=always)"
echo "== P1: 12 emulated drives of $drive on $fsdesc, 10+2, zarrayd" >&2
"$zarray" emu create --preallocate --size "$drive" --zone-size 64M \
	"$ddir"/d{00..11}.img >/dev/null
export ZARRAY_SOCKET=$work/run/zarrayd.sock
"$zarrayd" -f -s "$ZARRAY_SOCKET" --run-dir "$work/run" --state-dir "$work/state" \
	>"$work/daemon.log" 2>&1 &
pids+=($!)
wait_for "$zarray" list || { echo "zarrayd did not start: $(tail -n 3 "$work/daemon.log")" >&2; exit 1; }
"$zarray" create p1 --data 10 --parity 2 "$ddir"/d*.img >/dev/null
uri_za=$("$zarray" export p1)
size=$(nbdinfo --size "$uri_za")
# The random writes go to [2 GiB, 3 GiB), after the sequential ones.
[ "$size" -ge $((3 << 30)) ] || { echo "bench/p1.sh: the volume ($size bytes) is below 3 GiB" >&2; exit 1; }

echo "== P1: peers: nbdkit memory $size, nbdkit file on $fsdesc" >&2
nbdkit -f -U "$work/mem.sock" memory "$size" >"$work/nbdkit-mem.log" 2>&1 &
pids+=($!)
truncate -s "$size" "$ddir/peer.img"
nbdkit -f -U "$work/file.sock" file "$ddir/peer.img" >"$work/nbdkit-file.log" 2>&1 &
pids+=($!)
declare -A spid=([zarray]=${pids[0]} [mem]=${pids[1]} [file]=${pids[2]})
declare -A uris=([zarray]=$uri_za [mem]="nbd+unix:///?socket=$work/mem.sock"
	[file]="nbd+unix:///?socket=$work/file.sock")
wait_for nbdinfo --size "${uris[mem]}" || { echo "nbdkit memory did not start" >&2; exit 1; }
wait_for nbdinfo --size "${uris[file]}" || { echo "nbdkit file did not start" >&2; exit 1; }

seq_args=(--rw=write --bs=1M --size="$seq" --offset=0 --iodepth=8)
rand_args=(--rw=randwrite --bs=4k --size="$rand_region" --offset="$rand_off"
	--iodepth=32 --runtime="$rand_s" --time_based --randrepeat=1)
# The same writes from two connections: two jobs, 16 in flight each.
rand2_args=("${rand_args[@]}" --iodepth=16 --numjobs=2 --group_reporting)
common=(--ioengine=nbd --end_fsync=1 --output-format=json)

# cpu_snap PID: the server's CPU ticks (utime + stime, its threads
# included), then the machine's busy and total ticks.
cpu_snap() {
	local st
	st=$(cat "/proc/$1/stat") || return 1
	st=${st##*) }
	echo "$st" | awk '{print $12 + $13}'
	awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat
}

# fio_run NAME URI PID ARGS...: one fio job against the server PID; its
# JSON in $work/NAME.json, the CPU snapshots around it in $work/NAME.cpu.
fio_run() {
	local name=$1 uri=$2 pid=$3
	shift 3
	cpu_snap "$pid" >"$work/$name.cpu"
	if ! timeout 300 fio --name="$name" "${common[@]}" --uri="$uri" "$@" \
		--output="$work/$name.json" >"$work/$name.out" 2>&1; then
		echo "bench/p1.sh: fio $name failed:" >&2
		tail -n 20 "$work/$name.out" "$work/$name.json" >&2 || true
		exit 1
	fi
	cpu_snap "$pid" >>"$work/$name.cpu"
}

# Warm-up, not measured: every server has the sequential and the random
# regions written once, so that no round pays for a server's first
# touches of its memory (nbdkit memory allocates as it is written).
for s in zarray mem file; do
	echo "== P1: warm-up, $s" >&2
	fio_run "warm-seq-$s" "${uris[$s]}" "${spid[$s]}" "${seq_args[@]}"
	fio_run "warm-rand-$s" "${uris[$s]}" "${spid[$s]}" "${seq_args[@]}" \
		--size="$rand_region" --offset="$rand_off"
done

for r in $(seq "$rounds"); do
	for w in seq rand rand2; do
		for s in zarray mem file; do
			uri=${uris[$s]}
			echo "== P1: round $r/$rounds, $w writes, $s" >&2
			case $w in
			seq) fio_run "$w-$s-$r" "$uri" "${spid[$s]}" "${seq_args[@]}" ;;
			rand) fio_run "$w-$s-$r" "$uri" "${spid[$s]}" "${rand_args[@]}" ;;
			rand2) fio_run "$w-$s-$r" "$uri" "${spid[$s]}" "${rand2_args[@]}" ;;
			esac
		done
	done
done
kill -0 "${pids[0]}" 2>/dev/null || { echo "zarrayd died: $(tail -n 5 "$work/daemon.log")" >&2; exit 1; }
echo "== P1: the CPU floor of a 10+2 write (bench/za-write-floor)" >&2
"$floor" -k 10 -p 2 --gib "$([ $quick = 1 ] && echo 1 || echo 4)" --dir "$ddir" --json >"$work/floor.json"

python3 - "$work" "$out" "$rounds" "$size" "$seq" "$rand_s" "$fsdesc" "$hugefs" <<'PY'
import json, os, statistics, sys
work, out, rounds, size, seq, rand_s, tmp, hugefs = sys.argv[1:9]
rounds = int(rounds)
tck = os.sysconf("SC_CLK_TCK")
ncpu = os.cpu_count()
GIB = float(1 << 30)

def job(name):
    t = open("%s/%s.json" % (work, name)).read()
    j = json.loads(t[t.index("{"):])["jobs"][0]  # fio may print a line first
    if j["error"]:
        sys.exit("fio %s: error %d" % (name, j["error"]))
    w = j["write"]
    # Server ticks, machine busy and total ticks, before and after.
    c = [float(x) for x in open("%s/%s.cpu" % (work, name)).read().split()]
    gib = w["io_bytes"] / GIB
    # With group_reporting, job_runtime is the jobs' runtimes summed and
    # usr_cpu/sys_cpu their mean share of a CPU, so both read alike.
    share = (j["usr_cpu"] + j["sys_cpu"]) / 100.0
    client_s = share * j["job_runtime"] / 1e3
    return {"bytes_per_s": w["bw_bytes"], "iops": w["iops"],
            "p99_us": w["clat_ns"]["percentile"].get("99.000000", 0) / 1e3,
            "server_cpu_s_per_gib": (c[3] - c[0]) / tck / gib,
            "client_cpu_s_per_gib": client_s / gib,
            "client_cpu_share": share,
            "machine_busy": (c[4] - c[1]) / max(1.0, c[5] - c[2])}

servers = {"zarray": "zarrayd export, 10+2 on 12 preallocated emulated "
                     "drives of 1 GiB in " + tmp,
           "nbdkit_memory": "nbdkit memory " + size,
           "nbdkit_file": "nbdkit file on " + tmp}
short = {"zarray": "zarray", "nbdkit_memory": "mem", "nbdkit_file": "file"}
res = {"drives": 12, "k": 10, "p": 2, "volume_bytes": int(size),
       "drives_fs": tmp, "huge_pages": hugefs == "yes",
       "warm_up": "each server has both regions written once before round 1",
       "rounds": rounds, "servers": servers, "cpus": ncpu,
       "client": "fio --ioengine=nbd --end_fsync=1, one job and one connection "
                 "(rand2: two of each)",
       "workloads": {}}
for w, desc in (("seq", "sequential 1 MiB writes, %s per run, iodepth 8" % seq),
                ("rand", "random 4 KiB writes, %s s per run over 1 GiB, iodepth 32, "
                         "one connection" % rand_s),
                ("rand2", "random 4 KiB writes, %s s per run over 1 GiB, two "
                          "connections of iodepth 16" % rand_s)):
    d = {"what": desc}
    for s in servers:
        samples = [job("%s-%s-%d" % (w, short[s], r)) for r in range(1, rounds + 1)]
        bw = [x["bytes_per_s"] for x in samples]
        d[s] = {"bytes_per_s": statistics.median(bw), "samples_bytes_per_s": bw,
                "p99_us": statistics.median(x["p99_us"] for x in samples)}
        for k in ("server_cpu_s_per_gib", "client_cpu_s_per_gib",
                  "client_cpu_share", "machine_busy"):
            d[s][k] = statistics.median(x[k] for x in samples)
    d["ratio_to_memory"] = d["zarray"]["bytes_per_s"] / d["nbdkit_memory"]["bytes_per_s"]
    d["ratio_to_file"] = d["zarray"]["bytes_per_s"] / d["nbdkit_file"]["bytes_per_s"]
    # A client job on its CPU 85% of the run or more, against both zarray
    # and nbdkit memory, was what limited both: the ratio is the client's.
    d["client_bound"] = all(d[s]["client_cpu_share"] >= 0.85
                            for s in ("zarray", "nbdkit_memory"))
    res["workloads"][w] = d

# The ceiling for sequential writes on this machine: every CPU busy, the
# server spending only the floor, the client what it spent at its
# cheapest in any server's run.
fl = json.load(open("%s/floor.json" % work))
sq = res["workloads"]["seq"]
client = min(sq[s]["client_cpu_s_per_gib"] for s in servers)
ceil_bps = ncpu * GIB / (fl["floor_s_per_gib"] + client)
res["seq_ceiling"] = {
    "floor": fl, "client_cpu_s_per_gib": client,
    "bytes_per_s": ceil_bps,
    "ratio_to_memory": ceil_bps / sq["nbdkit_memory"]["bytes_per_s"],
    "what": "%d CPUs / (floor + client CPU per GiB): the most any 10+2 server "
            "on these drives could write here" % ncpu}
with open(out, "w") as f:
    json.dump(res, f, indent=1)
for w, d in res["workloads"].items():
    print("P1 %-5s zarray %8.1f MB/s  nbdkit memory %8.1f MB/s  nbdkit file %8.1f MB/s"
          "  ratio %.3f%s" % (w, d["zarray"]["bytes_per_s"] / 1e6,
                              d["nbdkit_memory"]["bytes_per_s"] / 1e6,
                              d["nbdkit_file"]["bytes_per_s"] / 1e6, d["ratio_to_memory"],
                              "  (client-bound)" if d["client_bound"] else ""))
    print("   %-5s CPU s/GiB (server, client, machine busy): zarray %.2f %.2f %.2f  "
          "memory %.2f %.2f %.2f  file %.2f %.2f %.2f" % ((w,) + tuple(
              d[s][k] for s in servers for k in ("server_cpu_s_per_gib",
                                                  "client_cpu_s_per_gib", "machine_busy"))))
    print("   %-5s client's share of a CPU per job: zarray %.2f  memory %.2f  file %.2f" % (
        (w,) + tuple(d[s]["client_cpu_share"] for s in servers)))
c = res["seq_ceiling"]
print("P1 seq  floor %.3f CPU s/GiB (recv %.3f crc %.3f encode %.3f copy %.3f), client %.3f:"
      " ceiling %.1f MB/s = %.3f x nbdkit memory" % (
          fl["floor_s_per_gib"], fl["recv_s_per_gib"], fl["crc_s_per_gib"],
          fl["encode_s_per_gib"], fl["copy_s_per_gib"], client, ceil_bps / 1e6,
          c["ratio_to_memory"]))
PY
