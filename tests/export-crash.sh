#!/bin/bash
# Shows that every write acknowledged before a completed FLUSH survives
# SIGKILL of zarrayd at random moments, and emulated power cuts that drop
# the drives' volatile caches, when read back through the NBD export.
#
# How: a 4+2 array on 8 emulated drives (32 MiB volatile cache each; half
# of them preallocated, so that their columns are staged ahead of their
# writes, docs/design.md 4.3) with a 128 MiB volume. Each of ~20 iterations starts zarrayd (which assembles
# the recorded array and recovers its volume from the drives), times it
# until the export answers (the recovery time, printed), then checks the
# whole volume against an oracle: with qemu-io `read -P` for every block
# whose last write was followed by a completed flush (it must read back
# exactly), and from an nbdcopy dump for the others (each may hold any
# version written since its last flush, or the one before: never anything
# else). Then qemu-io writes distinct byte patterns (4 KiB to 1 MiB, at
# random offsets, half of them in a hot 8 MiB region so that they
# overlap), some batches ending with a flush; a flush counts as completed
# only when qemu-io reports a later command done or exits cleanly. Then
# zarrayd is SIGKILLed: when idle, in the middle of a qemu-io run of many
# writes and no flush, in the middle of one with flushes among its writes,
# or while it is starting up (recovering). On every other iteration, every
# drive is also power-cut (`zarray emu powercut`) while no one uses it.
# The drive files are left exactly as the killed daemon left them.
# ZA_CRASH_SEED replays a run's choices (not its timing), ZA_CRASH_KEEP=DIR
# keeps the drives and the log of a failed run there.
# Skips (77) only if qemu-io or nbdcopy is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need nbdcopy
need nbdinfo
need python3

ITERATIONS=${ZA_CRASH_ITERATIONS:-20}
SEED=${ZA_CRASH_SEED:-$RANDOM}
PIDFILE="$SCRATCH/daemon.pid"

# The loop's daemons are started by the Python driver: kill whichever runs.
crash_cleanup() {
	local rc=$? pid
	pid=$(cat "$PIDFILE" 2>/dev/null || true)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	# For a post-mortem: the drives and the log as the failure left them.
	if [ "$rc" -ne 0 ] && [ -n "${ZA_CRASH_KEEP:-}" ]; then
		cp -a --sparse=always "$SCRATCH" "$ZA_CRASH_KEEP" &&
			echo "# kept the drives and log in $ZA_CRASH_KEEP" >&2
	fi
	(exit "$rc")
	daemon_cleanup
}
trap crash_cleanup EXIT

cd "$SCRATCH"
"$ZARRAY" emu create --size 512M --zone-size 16M --cache 32M d{0..3}.img >/dev/null
"$ZARRAY" emu create --preallocate --size 512M --zone-size 16M --cache 32M d{4..7}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 --size 128M d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC"
echo "# seed $SEED (ZA_CRASH_SEED=$SEED to replay), $ITERATIONS iterations"

python3 - "$ZARRAYD" "$ZARRAY" "$SOCK" "$RUN" "$STATE" "$DLOG" "$PIDFILE" \
	"$ITERATIONS" "$SEED" <<'EOF' || fail "crash loop failed (seed $SEED)"
import os, random, signal, subprocess, sys, time

(zarrayd, zarray, sock, run, state, dlog, pidfile, iters, seed) = sys.argv[1:]
iters, seed = int(iters), int(seed)
rnd = random.Random(seed)
BLK = 4096
VOL = 128 << 20
NBLK = VOL // BLK
HOT = (8 << 20) // BLK
URI = "nbd+unix:///t?socket=%s/t.nbd" % run
DRIVES = sorted("d%d.img" % i for i in range(8))
T = 60  # seconds any one client may take before it is a stall

def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

# The oracle, per 4 KiB block: cands = versions it may hold now (one:
# exact), pend = versions written since the last completed flush (in
# order), seen = what the last check read (None: not read since).
cands = [{0} for _ in range(NBLK)]
pend = [[] for _ in range(NBLK)]
seen = [None] * NBLK
touched = set()  # blocks with pend, or with several cands
hist = {}  # block -> its events, for the failure message
it = 0

def event(b, what):
    h = hist.setdefault(b, [])
    h.append("it%d:%s" % (it, what))
    del h[:-12]

def wrote(blk0, n, v):
    for b in range(blk0, blk0 + n):
        pend[b].append(v)
        touched.add(b)
        event(b, "w%d" % v)

def flushed():
    """A flush completed: what each block holds now is durable."""
    for b in list(touched):
        event(b, "flush")
        if pend[b]:
            cands[b] = {pend[b][-1]}
            pend[b] = []
        elif seen[b] is not None:
            # read back after a crash and not written since: the flush
            # made that version durable
            cands[b] = {seen[b]}
        seen[b] = None
        if len(cands[b]) == 1:
            touched.discard(b)

def event_all(what):
    for b in hist:
        event(b, what)

daemon = None

def start():
    global daemon
    log = open(dlog, "ab")
    daemon = subprocess.Popen([zarrayd, "-f", "-s", sock, "--run-dir", run,
                               "--state-dir", state],
                              stdout=log, stderr=subprocess.STDOUT)
    log.close()
    with open(pidfile, "w") as f:
        f.write("%d\n" % daemon.pid)
    return time.monotonic()

def kill():
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()

def wait_export(t0):
    """Until nbdinfo answers on the export; returns the seconds taken."""
    while True:
        if daemon.poll() is not None:
            die("zarrayd exited %d while starting" % daemon.returncode)
        r = subprocess.run(["nbdinfo", "--size", URI], capture_output=True)
        if r.returncode == 0:
            return time.monotonic() - t0
        if time.monotonic() - t0 > T:
            die("the export did not answer within %d s" % T)
        time.sleep(0.01)

def runs(blocks):
    """Consecutive blocks with one exact version: (first, count, value)."""
    out = []
    for b in blocks:
        v = next(iter(cands[b]))
        if out and out[-1][0] + out[-1][1] == b and out[-1][2] == v:
            out[-1][1] += 1
        else:
            out.append([b, 1, v])
    return out

def dump():
    subprocess.run(["nbdcopy", URI, "dump.bin"], check=True, timeout=T)
    with open("dump.bin", "rb") as f:
        data = f.read()
    os.unlink("dump.bin")
    if len(data) != VOL:
        die("dump is %d bytes" % len(data))
    return data

def check():
    exact = [b for b in range(NBLK) if not pend[b] and len(cands[b]) == 1]
    cmds = []
    for b, n, v in runs(exact):
        cmds += ["-c", "read -P %d %d %d" % (v, b * BLK, n * BLK)]
    for i in range(0, len(cmds), 400):
        r = subprocess.run(["qemu-io", "-f", "raw"] + cmds[i:i + 400] + [URI],
                           capture_output=True, text=True, timeout=T)
        bad = [l for l in r.stdout.splitlines() + r.stderr.splitlines()
               if "fail" in l.lower() or "error" in l.lower()]
        if r.returncode or bad:
            data = dump()
            b = next(b for b in exact
                     if data[b * BLK:(b + 1) * BLK] !=
                     bytes([next(iter(cands[b]))]) * BLK)
            die("iteration %d: a write acknowledged before a completed "
                "flush does not read back: %s; first bad block %d "
                "(offset %d) holds %d, want %d; its history: %s" %
                (it, "; ".join(bad[:3]), b, b * BLK, data[b * BLK],
                 next(iter(cands[b])), " ".join(hist.get(b, []))))
    # Every block, the uncertain ones included, from one dump.
    data = dump()
    nuncertain = 0
    for b in range(NBLK):
        blk = data[b * BLK:(b + 1) * BLK]
        v = blk[0]
        ok = blk == bytes([v]) * BLK
        allowed = cands[b] | set(pend[b])
        if not ok or v not in allowed:
            die("iteration %d: block %d (offset %d) holds %s, allowed %s "
                "(exact: %s); its history: %s" %
                (it, b, b * BLK, "a torn block" if not ok else v,
                 sorted(allowed), not pend[b] and len(cands[b]) == 1,
                 " ".join(hist.get(b, []))))
        if pend[b] or len(cands[b]) > 1:
            nuncertain += 1
            cands[b] = allowed
            pend[b] = []
            seen[b] = v
            touched.add(b)
            event(b, "read%d" % v)
        else:
            seen[b] = None
    return len(exact), nuncertain

pattern = 0

def next_pattern():
    global pattern
    pattern = pattern % 255 + 1
    return pattern

def gen_writes(n):
    out = []
    for _ in range(n):
        size = rnd.choice([1, 1, 1, 2, 3, 8, 16, 16, 64, 256])
        lim = HOT if rnd.random() < 0.5 else NBLK
        size = min(size, lim)
        b = rnd.randrange(0, lim - size + 1)
        out.append(("w", b, size, next_pattern()))
    return out

def qemu_io(ops, background=False):
    cmds = []
    for op in ops:
        if op[0] == "w":
            cmds += ["-c", "write -P %d %d %d" % (op[3], op[1] * BLK,
                                                  op[2] * BLK)]
        elif op[0] == "s":
            cmds += ["-c", "sleep %d" % op[1]]
        else:
            cmds += ["-c", "flush"]
    for op in ops:
        if op[0] == "w":
            wrote(op[1], op[2], op[3])
    p = subprocess.Popen(["qemu-io", "-f", "raw"] + cmds + [URI],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    if background:
        return p
    return finish_qemu_io(p, ops, must_succeed=True)

def finish_qemu_io(p, ops, must_succeed):
    try:
        out, _ = p.communicate(timeout=T)
    except subprocess.TimeoutExpired:
        p.kill()
        die("qemu-io got no answer for %d s (a stalled reply?)" % T)
    done = sum(1 for l in out.splitlines() if l.startswith("wrote "))
    failed = any("fail" in l.lower() for l in out.splitlines())
    if must_succeed and (p.returncode or failed):
        die("qemu-io failed: %s" % out[-500:])
    # Commands run in order: a flush completed if a later write did, or
    # if qemu-io finished without a failure.
    nw = 0
    last_flush_done = -1
    for i, op in enumerate(ops):
        if op[0] == "w":
            nw += 1
        elif op[0] == "f" and (nw < done or
                               (p.returncode == 0 and not failed)):
            last_flush_done = i
    return last_flush_done, done, p.returncode == 0 and not failed

def batch_with_flush():
    ops = gen_writes(rnd.randrange(4, 24)) + [("f",)]
    last, _, _ = qemu_io(ops)
    if last != len(ops) - 1:
        die("a clean batch's flush did not complete")
    flushed()

recovery = []
for it in range(iters):
    mode = rnd.choice(["idle", "writes", "writes", "mixed", "mixed",
                       "startup"])
    powercut = it % 2 == 1
    t0 = start()
    if mode == "startup" and it > 0:
        time.sleep(rnd.uniform(0.0, 0.15))
        if daemon.poll() is None:
            kill()
            print("# iteration %d: killed while starting up" % it)
            t0 = start()
    rec = wait_export(t0)
    recovery.append(rec)
    nexact, nunc = check()
    for _ in range(rnd.randrange(1, 4)):
        batch_with_flush()
    if mode in ("writes", "mixed"):
        ops = gen_writes(rnd.randrange(40, 160))
        if mode == "mixed":
            for i in sorted(rnd.sample(range(1, len(ops)), 3), reverse=True):
                ops.insert(i, ("f",))
        # Pauses, so that the kill below lands in the middle of the run
        # more often than after it.
        for i in sorted(rnd.sample(range(1, len(ops)), len(ops) // 2),
                        reverse=True):
            ops.insert(i, ("s", rnd.randrange(2, 12)))
        p = qemu_io(ops, background=True)
        time.sleep(rnd.uniform(0.02, 0.4))
        kill()
        event_all("kill")
        last, done, clean = finish_qemu_io(p, ops, must_succeed=False)
        if last >= 0:
            # Every write before that flush was acknowledged before it:
            # take the writes after it out of the pending versions (they
            # are the newest), let the flush make the rest durable, and
            # put them back as pending.
            after = [op for op in ops[last + 1:] if op[0] == "w"]
            for op in after:
                for b in range(op[1], op[1] + op[2]):
                    pend[b].pop()
            flushed()
            for op in after:
                wrote(op[1], op[2], op[3])
        nw = sum(1 for op in ops if op[0] == "w")
        what = "%d of %d writes done%s" % (
            done, nw, ", a flush completed after %d" %
            sum(1 for op in ops[:last] if op[0] == "w") if last >= 0 else "")
    else:
        kill()
        event_all("kill")
        what = "idle"
    if powercut:
        r = subprocess.run([zarray, "emu", "powercut"] + DRIVES,
                           capture_output=True, text=True)
        if r.returncode:
            die("emu powercut: %s" % r.stderr)
        event_all("powercut")
    print("# iteration %2d: recovery %.3f s; checked %d exact + %d "
          "uncertain blocks; %s killed (%s)%s" %
          (it, rec, nexact, nunc, mode, what,
           ", power cut" if powercut else ""), flush=True)

t0 = start()
rec = wait_export(t0)
recovery.append(rec)
it = iters
nexact, nunc = check()
print("# final: recovery %.3f s; checked %d exact + %d uncertain blocks" %
      (rec, nexact, nunc))
daemon.send_signal(signal.SIGTERM)
if daemon.wait(timeout=30) != 0:
    die("zarrayd exited %d on SIGTERM" % daemon.returncode)
recovery.sort()
print("# recovery time (daemon start to export answering), %d starts: "
      "min %.3f s, median %.3f s, max %.3f s" %
      (len(recovery), recovery[0], recovery[len(recovery) // 2],
       recovery[-1]))
EOF
pass "crash loop: $ITERATIONS SIGKILLs (half with power cuts), every write acknowledged before a completed flush read back"
