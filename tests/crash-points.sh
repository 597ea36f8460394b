#!/bin/bash
# Shows that zarrayd dying at each named crash point (src/crash.h) loses
# nothing: every write acknowledged before a completed flush reads back
# exactly after a restart, even with the drives' volatile caches dropped.
#
# How, for each point (journal-append, stripe-complete, gc-move,
# zone-reset, sb-write, checkpoint, rebuild-step): a 4+2 array on 8 small emulated
# drives (so that overwrites soon make garbage collection move data and
# reset zones), zarrayd started with ZA_CRASH_POINT=NAME:N, then writes
# through the export (libnbd, several in flight, some trims, zeroes and
# FUA writes; small writes with flushes, which go to the journal;
# sequential overwrites of the volume, which make GC run and checkpoints
# be written) recorded in the oracle of tests/zatest.py, and for sb-write
# a `zarray fail` (a superblock update on every member) before anything
# is written (every checkpoint makes a superblock round too, to anchor
# it: the fail's must be the round the point is reached in). It must die there
# (exit status 86 and its "crash point NAME reached" line: a point never
# reached fails the test). Then every drive is power-cut, zarrayd is
# restarted without the point, and the whole volume is checked against
# the oracle; the array must be healthy (for sb-write the member failed
# or, once rebuilt, removed, the array degraded at most until then). Then
# once more after a flush, a SIGKILL and a power cut, so that what
# recovery rebuilt is durable too.
# Skips (77) only if python3, nbdcopy or libnbd is missing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need python3
need nbdcopy
[ -e /usr/lib/x86_64-linux-gnu/libnbd.so.0 ] || ldconfig -p 2>/dev/null | grep libnbd.so.0 >/dev/null ||
	{ echo "SKIP: libnbd.so.0 not installed"; exit 77; }

PYTHONPATH="$top_srcdir/tests" PYTHONDONTWRITEBYTECODE=1 \
	python3 - "$top_builddir" "$SCRATCH" <<'EOF' ||
import os, random, signal, sys, time
import zatest
from zatest import BLK, Failure

build, scratch = sys.argv[1:]
POINTS = [("journal-append", 3), ("stripe-complete", 20), ("gc-move", 1),
          ("zone-reset", 2), ("sb-write", 2), ("checkpoint", 2),
          ("rebuild-step", 3)]
NAME = "c"


def run(point, n, seed):
    work = os.path.join(scratch, point)
    os.makedirs(work)
    d = zatest.Daemon(build, work, ["-v"])
    try:
        run_on(d, work, point, n, seed)
    except Failure:
        print("--- %s: zarrayd log (last 15 lines) ---\n%s" %
              (point, d.tail()), file=sys.stderr)
        raise
    finally:
        if d.alive():
            d.kill()


def run_on(d, work, point, n, seed):
    rnd = random.Random(seed)
    drives = [os.path.join(work, "d%d.img" % i) for i in range(8)]
    zatest.emu_create(d.zarray, drives, ["--size", "48M", "--zone-size",
                                         "2M", "--cache", "8M"])
    d.start()
    d.cli("create", NAME, "--data", "4", "--parity", "2", "--chunk", "16K",
          "--size", "40M", *drives)
    # Members by uuid: a failed member's path after a restart is only
    # its superblock's (shortened) hint.
    uuid = {m["path"]: m["uuid"] for m in d.status(NAME)["members"]}
    if d.kill(signal.SIGTERM) != 0:
        raise Failure("zarrayd did not stop cleanly: %s" % d.tail())
    o = zatest.Oracle((40 << 20) // BLK, seed)
    spec = "%s:%d" % (point, n)
    d.start(crash_point=spec)
    d.wait_export(NAME)
    c = zatest.Client(d.uri(NAME), o, rnd, qd=8)
    failed = None
    # Provoke it: small synced writes (journal), bursts, flushes,
    # sequential overwrites (GC moves data, resets zones), a failure.
    for rnd_i in range(40):
        if not d.alive():
            break
        if (point, rnd_i) in (("sb-write", 0), ("rebuild-step", 1)):
            failed = drives[3]
            d.cli("fail", NAME, failed, check=False)
        for _ in range(8):
            if not c.submit_write(rnd.randrange(o.nblocks), 1) or \
                    not c.flush_sync():
                break
        if not c.burst(rnd.randint(20, 60), 0.1) or not c.drain():
            continue
        c.flush_sync()
        blk = rnd.randrange(o.nblocks)
        for _ in range(o.nblocks // 256):
            cnt = min(256, o.nblocks - blk)
            if not c.submit_write(blk, cnt):
                break
            blk = (blk + cnt) % o.nblocks
        c.drain() and c.flush_sync()
    rc = d.wait_exit(10)
    c.close()
    if rc is None:
        d.kill()
        raise Failure("%s: zarrayd never reached crash point %s (%d "
                      "writes acknowledged, %d flushes)" %
                      (point, spec, o.stats["acked"], o.stats["flushes"]))
    log = open(d.log, errors="replace").read()
    if rc != zatest.CRASH_EXIT or "crash point %s reached" % point not in log:
        raise Failure("%s: zarrayd exited %d, not at the crash point: %s" %
                      (point, rc, d.tail()))
    o.crash("crash at " + spec)
    zatest.emu_powercut(d.zarray, drives)
    o.crash("powercut")
    for round_ in ("after the crash point", "after recovery, a flush, "
                   "SIGKILL and a power cut"):
        d.start()
        rec = d.wait_export(NAME)
        st = d.status(NAME)
        # The failed member: failed, or removed once a rebuild restored
        # what it held; the array degraded only until then.
        bad = ["%s %s" % (m["path"], m["state"]) for m in st["members"]
               if m["state"] not in (("failed", "removed") if failed and
                                     m["uuid"] == uuid[failed] else
                                     ("online",))]
        lost = [m for m in st["members"] if m["state"] == "failed"]
        want = ("healthy", "degraded") if lost else ("healthy",)
        if st["state"] not in want or bad:
            raise Failure("%s, %s: array %s, members in the wrong state: "
                          "%s (want %s)" % (point, round_, st["state"], bad,
                                            want))
        data = zatest.nbdcopy_read(d.uri(NAME), o.nblocks * BLK)
        nexact, nunc = o.check(data, False, "%s, %s" % (point, round_))
        print("# %s: %s: recovery %.2f s, %d exact + %d uncertain blocks "
              "read back" % (spec, round_, rec, nexact, nunc), flush=True)
        c = zatest.Client(d.uri(NAME), o, rnd)
        if not c.flush_sync():
            raise Failure("%s: flush after recovery failed" % point)
        c.close()
        d.kill()
        o.crash("kill")
        zatest.emu_powercut(d.zarray, drives)
        o.crash("powercut")
    print("ok - %s: died at crash point %s after %d acknowledged writes "
          "and %d flushes; nothing flushed was lost" %
          (point, spec, o.stats["acked"], o.stats["flushes"]), flush=True)


seed = int(os.environ.get("ZA_CRASH_SEED", random.randrange(1 << 30)))
print("# seed %d (ZA_CRASH_SEED=%d replays the choices)" % (seed, seed))
try:
    for i, (point, n) in enumerate(POINTS):
        run(point, n, seed + i)
except Failure as e:
    print("FAIL: %s" % e, file=sys.stderr)
    sys.exit(1)
EOF
	fail "a crash point lost data or was not reached"
pass "every crash point was reached, and recovery kept every flushed write"
