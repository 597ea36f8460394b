# SPDX-License-Identifier: GPL-2.0-or-later
"""
zatest.py - what the Python-driven crash and fault tests share: an NBD
client (Debian's libnbd through ctypes: the system python3 has no nbd
module), an oracle of acknowledged writes and completed flushes, a
zarrayd under test, and the emulated drive file's zone table.

The oracle works per 4 KiB block. Every write gives its blocks a new
version; a block's bytes name the block, its version and the run (so
misplaced, stale, torn or corrupted blocks are told apart from right
ones); version 0 is zeros (never written, trimmed, zeroed). Writes to
overlapping ranges are never in flight together, so each block's writes
are ordered. A FLUSH makes durable every write acknowledged before it
was sent (on any connection), a FUA write itself when it is
acknowledged; after a crash a block may hold its durable version or any
version written after it, never anything else, and after it is read back
the version read is the one the next completed flush makes durable.

It does not drive faults or decide what to test: tools/zloop and
tests/crash-points.sh do. Standard library only.
"""
import collections
import ctypes
import json
import os
import select
import signal
import struct
import subprocess
import time

BLK = 4096
CRASH_EXIT = 86  # ZA_CRASH_EXIT (src/crash.h): died at a crash point
MAGIC = b"ZLOOPBLK"
ZERO = bytes(BLK)


class Failure(Exception):
    """What a test found wrong: one line (or a few) for the operator."""


# ---- the NBD client: libnbd through ctypes ----

class _Completion(ctypes.Structure):
    # nbd_completion_callback, passed by value; all NULL: poll instead.
    _fields_ = [("callback", ctypes.c_void_p),
                ("user_data", ctypes.c_void_p),
                ("free", ctypes.c_void_p)]


_lib = None


def _libnbd():
    global _lib
    if _lib is not None:
        return _lib
    try:
        lib = ctypes.CDLL("libnbd.so.0")
    except OSError as e:
        raise Failure("libnbd.so.0 not found (install libnbd0 / "
                      "libnbd-bin): %s" % e)
    vp, u64, i64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64
    for name, res, args in (
            ("nbd_create", vp, []),
            ("nbd_connect_uri", ctypes.c_int, [vp, ctypes.c_char_p]),
            ("nbd_get_error", ctypes.c_char_p, []),
            ("nbd_get_size", i64, [vp]),
            ("nbd_aio_pwrite", i64, [vp, ctypes.c_char_p, ctypes.c_size_t,
                                     u64, _Completion, ctypes.c_uint32]),
            ("nbd_aio_trim", i64, [vp, u64, u64, _Completion,
                                   ctypes.c_uint32]),
            ("nbd_aio_zero", i64, [vp, u64, u64, _Completion,
                                   ctypes.c_uint32]),
            ("nbd_aio_flush", i64, [vp, _Completion, ctypes.c_uint32]),
            ("nbd_poll", ctypes.c_int, [vp, ctypes.c_int]),
            ("nbd_aio_command_completed", ctypes.c_int, [vp, u64]),
            ("nbd_aio_in_flight", ctypes.c_int, [vp]),
            ("nbd_aio_get_fd", ctypes.c_int, [vp]),
            ("nbd_aio_get_direction", ctypes.c_uint, [vp]),
            ("nbd_aio_notify_read", ctypes.c_int, [vp]),
            ("nbd_aio_notify_write", ctypes.c_int, [vp]),
            ("nbd_can_multi_conn", ctypes.c_int, [vp]),
            ("nbd_can_fua", ctypes.c_int, [vp]),
            ("nbd_aio_pread", i64, [vp, vp, ctypes.c_size_t, u64,
                                    _Completion, ctypes.c_uint32]),
            ("nbd_aio_connect_uri", ctypes.c_int, [vp, ctypes.c_char_p]),
            ("nbd_aio_is_connecting", ctypes.c_int, [vp]),
            ("nbd_aio_is_ready", ctypes.c_int, [vp]),
            ("nbd_close", None, [vp])):
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    _lib = lib
    return lib


class NbdError(Failure):
    pass


class Nbd:
    """One NBD connection; asynchronous writes, trims, zeroes, flushes."""

    # No reply within this long is a stalled server, not a slow one: the
    # caller fails rather than waits forever (writes have their own, in
    # Client).
    TIMEOUT_S = 60

    def __init__(self, uri):
        self.lib = _libnbd()
        self.h = self.lib.nbd_create()
        if not self.h:
            raise NbdError("nbd_create: %s" % self._err())
        # The handshake asynchronously, so that it can time out.
        try:
            if self.lib.nbd_aio_connect_uri(self.h, uri.encode()) != 0 or \
                    not self._wait(lambda: self.lib.nbd_aio_is_connecting(
                        self.h) != 1, "connect %s" % uri) or \
                    self.lib.nbd_aio_is_ready(self.h) != 1:
                raise NbdError("connect %s: %s" % (uri, self._err()))
        except NbdError:
            self.close()
            raise
        self.size = self.lib.nbd_get_size(self.h)
        self.multi_conn = self.lib.nbd_can_multi_conn(self.h) == 1
        self.fua = self.lib.nbd_can_fua(self.h) == 1
        self.bufs = {}  # cookie -> buffer libnbd may still read
        self.last_error = None

    def _wait(self, done, what):
        """Poll until done(): True; False if the connection failed; raise
        NbdError after TIMEOUT_S (a stalled server)."""
        t0 = time.monotonic()
        while not done():
            if time.monotonic() - t0 > self.TIMEOUT_S:
                raise NbdError("%s: no reply within %d s (a stalled "
                               "server?)" % (what, self.TIMEOUT_S))
            if self.lib.nbd_poll(self.h, 1000) < 0:
                return False
        return True

    def _err(self):
        e = self.lib.nbd_get_error()
        return e.decode(errors="replace") if e else "unknown error"

    def _cookie(self, c, what):
        if c < 0:
            raise NbdError("%s: %s" % (what, self._err()))
        return c

    def aio_write(self, off, data, fua=False):
        c = self._cookie(self.lib.nbd_aio_pwrite(
            self.h, data, len(data), off, _Completion(),
            1 if fua else 0), "write")  # LIBNBD_CMD_FLAG_FUA
        self.bufs[c] = data
        return c

    def aio_trim(self, off, n):
        return self._cookie(self.lib.nbd_aio_trim(
            self.h, n, off, _Completion(), 0), "trim")

    def aio_zero(self, off, n):
        return self._cookie(self.lib.nbd_aio_zero(
            self.h, n, off, _Completion(), 0), "zero")

    def aio_flush(self):
        return self._cookie(self.lib.nbd_aio_flush(
            self.h, _Completion(), 0), "flush")

    def poll(self, timeout_ms):
        """Wait for the server; False if the connection is gone."""
        return self.lib.nbd_poll(self.h, timeout_ms) >= 0

    def fd_events(self):
        """(fd, wants read, wants write) for select()."""
        d = self.lib.nbd_aio_get_direction(self.h)
        return self.lib.nbd_aio_get_fd(self.h), bool(d & 1), bool(d & 2)

    def notify(self, readable, writable):
        """After select(): False if the connection is gone."""
        ok = True
        if readable:
            ok = self.lib.nbd_aio_notify_read(self.h) >= 0
        if writable and ok:
            ok = self.lib.nbd_aio_notify_write(self.h) >= 0
        return ok

    def completed(self, c):
        """None: in flight; True: done; False: failed (or conn lost)."""
        r = self.lib.nbd_aio_command_completed(self.h, c)
        if r == 0:
            return None
        self.bufs.pop(c, None)
        if r != 1:
            self.last_error = self._err()
        return r == 1

    def in_flight(self):
        return self.lib.nbd_aio_in_flight(self.h)

    def pread(self, off, n):
        buf = ctypes.create_string_buffer(n)
        what = "read of %d bytes at %d" % (n, off)
        c = self._cookie(self.lib.nbd_aio_pread(
            self.h, buf, n, off, _Completion(), 0), "read")
        r = [0]

        def done():
            r[0] = self.lib.nbd_aio_command_completed(self.h, c)
            return r[0] != 0

        if not self._wait(done, what) or r[0] != 1:
            raise NbdError("%s: %s" % (what, self._err()))
        return buf.raw

    def read_all(self, piece=4 << 20):
        out = bytearray()
        for off in range(0, self.size, piece):
            out += self.pread(off, min(piece, self.size - off))
        return bytes(out)

    def close(self):
        if self.h:
            self.lib.nbd_close(self.h)
            self.h = None


def nbdcopy_read(uri, size, timeout=120):
    """The whole export through nbdcopy: a second, independent client."""
    r = subprocess.run(["nbdcopy", uri, "-"], capture_output=True,
                       timeout=timeout)
    if r.returncode or len(r.stdout) != size:
        raise Failure("nbdcopy %s: exit %d, %d bytes of %d: %s" %
                      (uri, r.returncode, len(r.stdout), size,
                       r.stderr.decode(errors="replace").strip()[-300:]))
    return r.stdout


# ---- block contents ----

def block_bytes(blk, ver, tag):
    if ver == 0:
        return ZERO
    x = ((blk * 0x9E3779B97F4A7C15) ^ (ver * 0xC2B2AE3D27D4EB4F) ^
         (tag * 0x165667B19E3779F9)) & 0xFFFFFFFFFFFFFFFF
    return (MAGIC + struct.pack("<QQQ", blk, ver, tag) +
            struct.pack("<Q", x) * ((BLK - 32) // 8))


def describe_block(data, blk, tag):
    """What a read block holds: its version, or why it is garbage."""
    if data == ZERO:
        return 0, None
    if data[:8] != MAGIC:
        return None, "garbage (no magic)"
    b, v, t = struct.unpack_from("<QQQ", data, 8)
    if t != tag:
        return None, "a block of another run (tag %d)" % t
    if b != blk:
        return None, "block %d's data (version %d)" % (b, v)
    if data != block_bytes(blk, v, tag):
        return None, "version %d, torn or corrupted" % v
    return v, None


# ---- the oracle ----

class Write:
    __slots__ = ("ver", "blk0", "n", "seq", "kind")

    def __init__(self, ver, blk0, n, kind):
        self.ver, self.blk0, self.n, self.kind = ver, blk0, n, kind
        self.seq = None  # ack order, once acknowledged


class _Blk:
    __slots__ = ("cands", "hist", "seen", "seen_gen", "events")

    def __init__(self):
        self.cands = {0}  # versions it may durably hold
        self.hist = []  # writes since, oldest first (maybe durable)
        self.seen = None  # version read back after a crash
        self.seen_gen = 0
        self.events = collections.deque(maxlen=16)


class Oracle:
    def __init__(self, nblocks, tag):
        self.nblocks = nblocks
        self.tag = tag
        self.blks = {}
        self.next_ver = 1
        self.ack_seq = 0
        self.acked = collections.deque()  # acked, not yet made durable
        self.read_gen = 1
        self.seen_blks = set()
        self.epoch = 0  # bumped by crash(): older ops are void
        self.stats = collections.Counter()

    def _b(self, blk):
        b = self.blks.get(blk)
        if b is None:
            b = self.blks[blk] = _Blk()
        return b

    def new_write(self, blk0, n, kind="w"):
        """A write about to be sent: kind w (data), f (data, FUA), t
        (trim), z (write zeroes)."""
        ver = 0
        if kind in ("w", "f"):
            ver = self.next_ver
            self.next_ver += 1
        w = Write(ver, blk0, n, kind)
        for blk in range(blk0, blk0 + n):
            b = self._b(blk)
            b.hist.append(w)
            b.events.append("%s%d" % (kind, ver) if ver else kind)
        self.stats["writes"] += 1
        return w

    def data(self, w):
        return b"".join(block_bytes(blk, w.ver, self.tag)
                        for blk in range(w.blk0, w.blk0 + w.n))

    def acked_write(self, w):
        self.ack_seq += 1
        w.seq = self.ack_seq
        self.acked.append(w)
        self.stats["acked"] += 1
        if w.kind == "f":
            self._durable(w)  # FUA: durable when acknowledged

    def _durable(self, w):
        for blk in range(w.blk0, w.blk0 + w.n):
            b = self.blks[blk]
            for i, h in enumerate(b.hist):
                if h is w:
                    b.cands = {w.ver}
                    del b.hist[:i + 1]
                    b.events.append("durable%d" % w.ver)
                    # What was read back before it is history now.
                    b.seen = None
                    self.seen_blks.discard(blk)
                    break

    def flush_sent(self):
        return (self.epoch, self.ack_seq, self.read_gen)

    def flush_done(self, token):
        epoch, seq, gen = token
        if epoch != self.epoch:
            return
        self.stats["flushes"] += 1
        for blk in list(self.seen_blks):
            b = self.blks[blk]
            if b.seen_gen < gen:
                b.cands = {b.seen}
                b.seen = None
                b.events.append("flush(seen)")
                self.seen_blks.discard(blk)
        while self.acked and self.acked[0].seq <= seq:
            self._durable(self.acked.popleft())

    def crash(self, what):
        """The server died: nothing pending will be made durable."""
        self.epoch += 1
        self.acked.clear()
        for b in self.blks.values():
            if b.hist or len(b.cands) > 1:
                b.events.append(what)

    def _hist(self, blk):
        b = self.blks.get(blk)
        return " ".join(b.events) if b else "never written"

    def check(self, data, live, what):
        """
        Check every block of @data (the whole volume). @live: no crash
        since the writes, so each block must hold exactly its newest
        version. Otherwise (after a restart) blocks whose versions were
        uncertain must hold one of them, and what they hold is what the
        next flush makes durable. Returns (exact, uncertain) counts;
        raises Failure.
        """
        if len(data) < self.nblocks * BLK:
            raise Failure("%s: read %d bytes, want %d" %
                          (what, len(data), self.nblocks * BLK))
        nexact = nunc = 0
        tag = self.tag
        for blk in range(self.nblocks):
            blkdata = data[blk * BLK:(blk + 1) * BLK]
            b = self.blks.get(blk)
            if b is None:
                if blkdata != ZERO:
                    v, why = describe_block(blkdata, blk, tag)
                    raise Failure(
                        "%s: block %d (offset %d) was never written but "
                        "holds %s" % (what, blk, blk * BLK,
                                      why or "version %d" % v))
                nexact += 1
                continue
            if live:
                if b.hist:
                    want = b.hist[-1].ver
                elif b.seen is not None:
                    want = b.seen
                else:
                    assert len(b.cands) == 1
                    want = next(iter(b.cands))
                if blkdata != block_bytes(blk, want, tag):
                    v, why = describe_block(blkdata, blk, tag)
                    raise Failure(
                        "%s: block %d (offset %d) holds %s, want version "
                        "%d (the newest acknowledged); its history: %s" %
                        (what, blk, blk * BLK,
                         why or "version %d" % v, want, self._hist(blk)))
                nexact += 1
                continue
            exact = not b.hist and len(b.cands) == 1
            allowed = set(b.cands) | {w.ver for w in b.hist}
            v, why = describe_block(blkdata, blk, tag)
            if v is None or v not in allowed:
                raise Failure(
                    "%s: block %d (offset %d) holds %s; %s %s; its "
                    "history: %s" %
                    (what, blk, blk * BLK, why or "version %d" % v,
                     "a write acknowledged before a completed flush "
                     "must read back exactly: want" if exact else
                     "allowed:", sorted(allowed), self._hist(blk)))
            if exact:
                nexact += 1
                continue
            nunc += 1
            b.cands = allowed
            b.hist = []
            b.seen = v
            b.seen_gen = self.read_gen
            b.events.append("read%d" % v)
            self.seen_blks.add(blk)
        self.read_gen += 1
        return nexact, nunc


def poll_many(nbds, timeout_s):
    """Wait until one of @nbds can make progress; False if one is gone."""
    rd, wr, by_fd = [], [], {}
    for n in nbds:
        fd, r, w = n.fd_events()
        if fd < 0:
            return False
        by_fd[fd] = n
        if r:
            rd.append(fd)
        if w:
            wr.append(fd)
    r, w, _ = select.select(rd, wr, [], timeout_s)
    ok = True
    for fd in set(r) | set(w):
        ok &= by_fd[fd].notify(fd in r, fd in w)
    return ok


class Client:
    """
    Random writes through one or more connections to one export (which
    must then advertise multi-conn: a FLUSH on one covers writes
    acknowledged on all), recorded in an oracle.
    """

    def __init__(self, uri, oracle, rnd, qd=8, conns=1, timeout_s=60):
        self.uri = uri
        self.o = oracle
        self.rnd = rnd
        self.qd = qd
        self.timeout_s = timeout_s
        self.deadline = None  # time.monotonic() after which waits fail
        self.nbds = []
        try:
            for _ in range(conns):
                self.nbds.append(Nbd(uri))
        except NbdError:
            self.close()
            raise
        if conns > 1 and not self.nbds[0].multi_conn:
            self.close()
            raise Failure("%s: several connections, but the export does "
                          "not advertise multi-conn" % uri)
        self.fua = self.nbds[0].fua
        self.inflight = {}  # (conn, cookie) -> Write, or a flush token
        self.busy = set()  # blocks written by writes in flight
        self.dead = False
        self.nfailed = 0  # commands that failed (a dead conn fails all)
        self.failures = []  # the last few of them, and why

    def close(self):
        for n in self.nbds:
            n.close()

    def _reap(self, block):
        """Collect completions (waiting if @block). False: conn gone."""
        if self.dead:
            return False
        if block and not poll_many(self.nbds, 1.0):
            self.dead = True
        for key in list(self.inflight):
            r = self.nbds[key[0]].completed(key[1])
            if r is None:
                continue
            op = self.inflight.pop(key)
            if isinstance(op, Write):
                self.busy.difference_update(range(op.blk0,
                                                  op.blk0 + op.n))
            if not r:
                # A failed command is not acknowledged: it stays a
                # maybe. A dead connection fails them all.
                self.nfailed += 1
                self.failures.append("%s: %s" % (
                    "flush" if not isinstance(op, Write) else
                    "%s of blocks %d+%d" % ({"w": "write", "f": "FUA write",
                                             "t": "trim", "z": "zeroes"}
                                            [op.kind], op.blk0, op.n),
                    self.nbds[key[0]].last_error))
                del self.failures[:-5]
                continue
            if isinstance(op, Write):
                self.o.acked_write(op)
            else:
                self.o.flush_done(op)
        return not self.dead

    def _wait_room(self, n):
        t0 = time.monotonic()
        while len(self.inflight) > n:
            if not self._reap(True):
                return False
            now = time.monotonic()
            if now - t0 > self.timeout_s:
                raise Failure("no reply from the server for %d s (a "
                              "stalled command?)" % self.timeout_s)
            if self.deadline is not None and now > self.deadline:
                # Replies that each come within timeout_s, but so slowly
                # that the caller's whole run never ends: a crawl.
                raise Failure("past the deadline with %d commands in "
                              "flight (the server crawls?)" %
                              len(self.inflight))
        return True

    def drain(self):
        return self._wait_room(0)

    def pick_range(self, maxblk, hot_blocks):
        rnd = self.rnd
        n = rnd.choice([1, 1, 1, 2, 3, 8, 16, 16, 32, 64, 128, 256])
        lim = hot_blocks if rnd.random() < 0.4 else maxblk
        n = min(n, lim)
        return rnd.randrange(0, lim - n + 1), n

    def _conn(self):
        return self.rnd.randrange(len(self.nbds))

    def submit_write(self, blk0, n, kind="w"):
        """
        Send one write: kind w (data), f (data with FUA), t (trim), z
        (write zeroes). Waits first while it overlaps one in flight.
        """
        rng = range(blk0, blk0 + n)
        while any(b in self.busy for b in rng):
            if not self._reap(True):
                return False
        if not self._wait_room(self.qd - 1):
            return False
        i = self._conn()
        w = self.o.new_write(blk0, n, kind)
        try:
            if kind in ("w", "f"):
                c = self.nbds[i].aio_write(blk0 * BLK, self.o.data(w),
                                           fua=kind == "f")
            elif kind == "t":
                c = self.nbds[i].aio_trim(blk0 * BLK, n * BLK)
            else:
                c = self.nbds[i].aio_zero(blk0 * BLK, n * BLK)
        except NbdError:
            self.dead = True
            return False
        self.inflight[(i, c)] = w
        self.busy.update(rng)
        return True

    def submit_flush(self):
        if self.dead:
            return False
        token = self.o.flush_sent()
        i = self._conn()
        try:
            c = self.nbds[i].aio_flush()
        except NbdError:
            self.dead = True
            return False
        self.inflight[(i, c)] = token
        return True

    def burst(self, nops, flush_p, trim_p=0.03, fua_p=0.03,
              hot_blocks=2048, stop=None):
        """
        @nops random writes (some trims, zeroes, FUA writes), a flush
        after each with probability @flush_p. @stop(i) is called before
        op i and may kill the server (a crash in the middle of the
        burst). Returns False if a connection died.
        """
        nb = self.o.nblocks
        for i in range(nops):
            if stop is not None:
                stop(i)
            blk0, n = self.pick_range(nb, min(hot_blocks, nb))
            r = self.rnd.random()
            kind = "t" if r < trim_p else "z" if r < 2 * trim_p else \
                "f" if r < 2 * trim_p + fua_p and self.fua else "w"
            if not self.submit_write(blk0, n, kind):
                return False
            if self.rnd.random() < flush_p and not self.submit_flush():
                return False
            self._reap(False)
        return True

    def flush_sync(self):
        """One flush, waited for; False if it failed or the conn died."""
        before = self.o.stats["flushes"]
        if not self.submit_flush() or not self.drain():
            return False
        return self.o.stats["flushes"] > before


# ---- the daemon under test ----

class Daemon:
    """A foreground zarrayd on private directories under @work."""

    def __init__(self, build, work, args=(), log="daemon.log"):
        self.zarrayd = os.path.join(build, "src", "zarrayd")
        self.zarray = os.path.join(build, "cli", "zarray")
        self.work = work
        self.sock = os.path.join(work, "run", "zarrayd.sock")
        self.run_dir = os.path.join(work, "run")
        self.state = os.path.join(work, "state")
        self.log = os.path.join(work, log)
        self.args = list(args)
        self.proc = None
        self.env = dict(os.environ, ZARRAY_SOCKET=self.sock)
        self.env.pop("ZA_CRASH_POINT", None)

    def uri(self, name):
        return "nbd+unix:///%s?socket=%s/%s.nbd" % (name, self.run_dir,
                                                     name)

    def logline(self, msg):
        with open(self.log, "a") as f:
            f.write("### %s %s\n" % (time.strftime("%H:%M:%S"), msg))

    def start(self, crash_point=None, timeout_s=30):
        """Start it and wait until it answers (its arrays assembled)."""
        self.spawn(crash_point)
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise Failure("zarrayd exited %d while starting: %s" %
                              (self.proc.returncode, self.tail()))
            if self.cli("list", check=False).returncode == 0:
                return
            if time.monotonic() - t0 > timeout_s:
                raise Failure("zarrayd did not answer within %d s" %
                              timeout_s)
            time.sleep(0.02)

    def spawn(self, crash_point=None):
        """Start it; do not wait (to kill it while it recovers)."""
        env = dict(self.env)
        if crash_point:
            env["ZA_CRASH_POINT"] = crash_point
        self.logline("start%s" % (" with ZA_CRASH_POINT=" + crash_point
                                  if crash_point else ""))
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [self.zarrayd, "-f", "-s", self.sock, "--run-dir",
             self.run_dir, "--state-dir", self.state] + self.args,
            stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

    def wait_export(self, name, timeout_s=60):
        """Until the export answers (recovery done); returns seconds."""
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise Failure("zarrayd exited %d while recovering: %s" %
                              (self.proc.returncode, self.tail()))
            try:
                Nbd(self.uri(name)).close()
                return time.monotonic() - t0
            except NbdError:
                pass
            if time.monotonic() - t0 > timeout_s:
                raise Failure("the export of %s did not answer within "
                              "%d s" % (name, timeout_s))
            time.sleep(0.02)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        """Send @sig and reap; returns the exit status (negative: signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure("zarrayd still running 60 s after signal %d" %
                          sig)
        self.logline("exited %d" % rc)
        self.proc = None
        return rc

    def wait_exit(self, timeout_s):
        """Wait for it to die by itself; None if it is still running."""
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self.logline("exited %d" % rc)
        self.proc = None
        return rc

    def cli(self, *args, check=True, timeout=120):
        r = subprocess.run([self.zarray] + list(args), capture_output=True,
                           text=True, env=self.env, timeout=timeout)
        if check and r.returncode:
            raise Failure("zarray %s: exit %d: %s" %
                          (" ".join(args), r.returncode,
                           r.stderr.strip()))
        return r

    def status(self, name):
        return json.loads(self.cli("--json", "status", name).stdout)

    def tail(self, n=15):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def emu_create(zarray, paths, opts):
    r = subprocess.run([zarray, "emu", "create"] + list(opts) + list(paths),
                       capture_output=True, text=True)
    if r.returncode:
        raise Failure("zarray emu create: %s" % r.stderr.strip())


def emu_powercut(zarray, paths):
    r = subprocess.run([zarray, "emu", "powercut"] + list(paths),
                       capture_output=True, text=True)
    if r.returncode:
        raise Failure("zarray emu powercut: %s" % r.stderr.strip())


def emu_written(path):
    """
    The emulated drive's sequential zones that hold data, as (zone index,
    file offset of its start, bytes written) (docs/format.md, "Emulated
    drive file").
    """
    with open(path, "rb") as f:
        h = f.read(4096)
        zsize, = struct.unpack_from("<Q", h, 32)
        nz, nconv = struct.unpack_from("<II", h, 48)
        zt_off, = struct.unpack_from("<Q", h, 112)
        data_off, = struct.unpack_from("<Q", h, 136)
        f.seek(zt_off)
        zt = f.read(32 * nz)
    out = []
    for z in range(nconv, nz):
        wp, = struct.unpack_from("<Q", zt, 32 * z)
        if wp:
            out.append((z, data_off + z * zsize, wp))
    return out
