#!/bin/bash
# Shows that a hostile or broken NBD client never hurts zarrayd's export
# or its other clients. A python client of its own (raw sockets, no
# libnbd) talks to the export of a 4+2 array on 8 emulated drives while
# one good connection, opened first, writes, flushes and reads back a
# block between every case below (and a connection that only read the
# greeting stalls):
#  - the connection cap (64): the connections past it are closed at
#    once, and one may connect again as soon as another leaves;
#  - export names: 4097 bytes in OPT_GO gets ERR_INVALID and the same
#    connection then goes on to transmission, 4096 bytes of a wrong name
#    gets ERR_UNKNOWN, 4097 in OPT_EXPORT_NAME closes;
#  - option lengths: 64 KiB of an unknown option is read and answered
#    ERR_UNSUP, then OPT_LIST and OPT_ABORT work; 64 KiB + 1 and 4 GiB - 1
#    close at the header, without the server waiting for the data;
#    option 1025 closes; unknown client flags close; a command before the
#    handshake ends closes;
#  - requests: offsets and lengths that wrap past 2^64 or end past the
#    size, unaligned ranges, a READ above the payload limit, unknown
#    commands and flags each get their error (EINVAL, or ENOSPC for
#    writes) and the connection goes on; a WRITE of exactly the payload
#    limit succeeds, one block more closes; a bad request magic closes;
#  - abrupt disconnects: before the greeting, mid option, mid request
#    header, mid payload, with 64 writes in flight (reset), and with 16 MiB
#    reads unread;
#  - the stalled connection is closed by the handshake timeout (30 s),
#    while the good one, past its handshake, is not.
# Then qemu-io and nbdinfo read the good connection's last block, the
# daemon's log names each refusal, and `zarray status` answers and
# counts them (connections, refusals, protocol errors, error replies).
# Skips (77) only if python3, qemu-io or nbdinfo is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need python3
need qemu-io
need nbdinfo

cd "$SCRATCH"
"$ZARRAY" emu create --size 256M --zone-size 16M d{0..7}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
NBD="$RUN/t.nbd"
[ -S "$NBD" ] || fail "no export socket at $NBD"

timeout 300 python3 - "$NBD" "$DAEMON_PID" >abuse.out 2>&1 <<'EOF' ||
import os, socket, struct, sys, time

path, daemon_pid = sys.argv[1], int(sys.argv[2])
IHAVEOPT, OPT_REPLY = 0x49484156454F5054, 0x3E889045565A9
REQ, REPLY = 0x25609513, 0x67446698
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO = 1, 2, 3, 6, 7
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN = 0x80000001, 0x80000003, 0x80000006
READ, WRITE, FLUSH, TRIM, ZEROES = 0, 1, 3, 4, 6
EINVAL, ENOSPC = 22, 28
BLK = 4096


def ok(msg):
    print("ok - " + msg, flush=True)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def daemon_alive(what):
    try:
        os.kill(daemon_pid, 0)
    except ProcessLookupError:
        fail("zarrayd died: " + what)


class Conn:
    def __init__(self, timeout=20):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.cookie = 0

    def rd(self, n):
        b = b""
        while len(b) < n:
            try:
                c = self.s.recv(n - len(b))
            except ConnectionResetError:
                c = b""
            if not c:
                return None
            b += c
        return b

    def send(self, b):
        self.s.sendall(b)

    def close(self):
        self.s.close()

    def greeting(self):
        g = self.rd(18)
        if g is None:
            return False
        magic, opt, flags = struct.unpack(">QQH", g)
        assert magic == 0x4E42444D41474943 and opt == IHAVEOPT, g
        assert flags & 1, "server without fixed newstyle"
        return True

    def start(self, flags=3):  # FIXED_NEWSTYLE | NO_ZEROES
        assert self.greeting(), "no greeting"
        self.send(struct.pack(">I", flags))

    def opt(self, opt, data=b"", length=None):
        n = len(data) if length is None else length
        self.send(struct.pack(">QII", IHAVEOPT, opt, n) + data)

    def opt_reply(self):
        h = self.rd(20)
        assert h is not None, "closed instead of an option reply"
        magic, opt, typ, n = struct.unpack(">QIII", h)
        assert magic == OPT_REPLY, hex(magic)
        return opt, typ, self.rd(n) if n else b""

    def go(self, name=b"t", opt=OPT_GO):
        self.opt(opt, struct.pack(">I", len(name)) + name +
                 struct.pack(">HH", 1, 3))  # ask for INFO_BLOCK_SIZE
        info = {}
        while True:
            o, typ, d = self.opt_reply()
            assert o == opt, (o, opt)
            if typ == REP_ACK:
                return info
            if typ != REP_INFO:
                return {"error": typ, "msg": d}
            it = struct.unpack(">H", d[:2])[0]
            if it == 0:
                info["size"], info["flags"] = struct.unpack(">QH", d[2:])
            elif it == 3:
                info["min"], info["pref"], info["max"] = \
                    struct.unpack(">III", d[2:])

    def req(self, typ, off, n, data=b"", flags=0):
        self.cookie += 1
        self.send(struct.pack(">IHHQQI", REQ, flags, typ, self.cookie,
                              off, n) + data)
        return self.cookie

    def reply(self, cookie, nread=0):
        r = self.rd(16)
        assert r is not None, "closed instead of a reply"
        magic, err, c = struct.unpack(">IIQ", r)
        assert magic == REPLY and c == cookie, (hex(magic), c, cookie)
        data = self.rd(nread) if nread and not err else b""
        return err, data

    def call(self, typ, off, n, data=b"", flags=0, nread=0):
        return self.reply(self.req(typ, off, n, data, flags), nread)

    def expect_eof(self, what, within=10):
        self.s.settimeout(within)
        try:
            while True:
                try:
                    c = self.s.recv(65536)
                except ConnectionResetError:
                    c = b""
                if not c:
                    break
        except socket.timeout:
            fail("%s: the connection is still open after %d s" %
                 (what, within))
        self.close()


def client():
    c = Conn()
    c.start()
    info = c.go()
    assert "error" not in info, info
    return c, info


# A connection that reads the greeting and then says nothing.
stalled = Conn(timeout=60)
assert stalled.greeting()
t_stalled = time.monotonic()

# The good connection, and what it keeps proving.
good, info = client()
SIZE, MAXP = info["size"], info["max"]
assert info["min"] == BLK, info
assert SIZE % BLK == 0 and SIZE > 64 << 20, info
assert MAXP == 32 << 20, "payload limit %d, not 32 MiB" % MAXP
GOOD_OFF = 1 << 20
gen = [0]


def good_roundtrip(after):
    daemon_alive(after)
    gen[0] += 1
    pat = bytes([gen[0] % 250 + 1]) * BLK
    err, _ = good.call(WRITE, GOOD_OFF, BLK, pat)
    assert err == 0, "good client's write after %s: error %d" % (after, err)
    err, _ = good.call(FLUSH, 0, 0)
    assert err == 0, "good client's flush after %s: error %d" % (after, err)
    err, d = good.call(READ, GOOD_OFF, BLK, nread=BLK)
    assert err == 0 and d == pat, "good client's read-back after " + after


good_roundtrip("the handshake")
ok("handshake: size %d, block sizes %d/%d/%d" %
   (SIZE, info["min"], info["pref"], MAXP))

# ---- the connection cap ----
held = []
refused = None
for i in range(80):
    c = Conn()
    if not c.greeting():
        refused = len(held)
        c.close()
        break
    c.send(struct.pack(">I", 3))
    r = c.go()
    assert "error" not in r, r
    held.append(c)
# 64 in all: the stalled and the good connection, and 62 more.
if refused != 62:
    fail("connection cap: %s connections taken besides the two open" %
         (len(held) if refused is None else refused))
good_roundtrip("the cap was reached")
held.pop().close()


def conn_when_room(what):
    """A greeted connection once the server has seen others leave (it
    notices their EOF on its loop, a moment after the close)."""
    for i in range(250):
        c = Conn()
        if c.greeting():
            return c
        c.close()
        time.sleep(0.02)
    fail("connection cap: no room within 5 s after " + what)


c = conn_when_room("one connection left")
c.send(struct.pack(">I", 3))
assert "error" not in c.go()
err, _ = c.call(READ, GOOD_OFF, BLK, nread=BLK)
assert err == 0
held.append(c)
for c in held:
    c.close()
conn_when_room("they all left").close()
ok("connection cap: 62 taken beside the 2 open, the next closed at once; "
   "room again when one left")

# ---- export names ----
c = Conn()
c.start()
r = c.go(b"x" * 4097)
assert r.get("error") == ERR_INVALID, r
r = c.go(b"y" * 4096)
assert r.get("error") == ERR_UNKNOWN, r
r = c.go(b"t")
assert "error" not in r, r
err, d = c.call(READ, GOOD_OFF, BLK, nread=BLK)
assert err == 0 and len(d) == BLK
c.close()
good_roundtrip("long export names")
ok("export names: 4097 bytes ERR_INVALID, 4096 unknown ERR_UNKNOWN, then "
   "GO on the same connection")

c = Conn()
c.start()
c.opt(OPT_EXPORT_NAME, b"t" * 4097)
c.expect_eof("OPT_EXPORT_NAME of 4097 bytes")
good_roundtrip("OPT_EXPORT_NAME of 4097 bytes")
ok("OPT_EXPORT_NAME of 4097 bytes: closed")

# ---- option lengths, counts, flags, order ----
c = Conn()
c.start()
c.opt(99, b"\xa5" * 65536)
o, typ, _ = c.opt_reply()
assert (o, typ) == (99, ERR_UNSUP), (o, hex(typ))
c.opt(OPT_LIST)
o, typ, d = c.opt_reply()
assert (o, typ) == (OPT_LIST, REP_SERVER) and d[4:5] == b"t", (o, typ, d)
while typ != REP_ACK:
    o, typ, d = c.opt_reply()
c.opt(OPT_ABORT)
o, typ, _ = c.opt_reply()
assert (o, typ) == (OPT_ABORT, REP_ACK)
c.expect_eof("OPT_ABORT")
ok("64 KiB unknown option: ERR_UNSUP; then OPT_LIST, OPT_ABORT answered")

for n in (65537, 0xFFFFFFFF):
    c = Conn()
    c.start()
    c.opt(OPT_GO, length=n)  # the header only: the data never comes
    c.expect_eof("an option of %d bytes" % n)
    good_roundtrip("an option of %d bytes" % n)
ok("options of 64 KiB + 1 and 4 GiB - 1 bytes: closed at the header")

c = Conn()
c.start()
for i in range(1024):
    c.opt(OPT_LIST)
    typ = 0
    while typ != REP_ACK:
        _, typ, _ = c.opt_reply()
c.opt(OPT_LIST)
c.expect_eof("option 1025")
good_roundtrip("1025 options")
ok("1024 options answered, the 1025th closed")

c = Conn()
c.start(flags=0x80 | 3)
c.expect_eof("unknown client flags")
c = Conn()
c.start()
c.send(struct.pack(">IHHQQI", REQ, 0, READ, 1, 0, BLK))
c.expect_eof("a command before the handshake")
good_roundtrip("a command before the handshake")
ok("unknown client flags, a command before the handshake ends: closed")

# ---- requests ----
c, _ = client()
WRAP = (1 << 64) - BLK
cases = [
    ("READ wrapping past 2^64", READ, WRAP, 2 * BLK, 0, EINVAL),
    ("WRITE wrapping past 2^64", WRITE, WRAP, 2 * BLK, 0, ENOSPC),
    ("TRIM wrapping past 2^64", TRIM, WRAP, 2 * BLK, 0, EINVAL),
    ("WRITE_ZEROES wrapping past 2^64", ZEROES, WRAP, 2 * BLK, 0, ENOSPC),
    ("READ at the size", READ, SIZE, BLK, 0, EINVAL),
    ("READ across the end", READ, SIZE - BLK, 2 * BLK, 0, EINVAL),
    ("WRITE across the end", WRITE, SIZE - BLK, 2 * BLK, 0, ENOSPC),
    ("TRIM of 4 GiB - 4 KiB", TRIM, 0, 0xFFFFF000, 0, EINVAL),
    ("READ above the payload limit", READ, 0, MAXP + BLK, 0, EINVAL),
    ("READ of 4 GiB - 4 KiB", READ, 0, 0xFFFFF000, 0, EINVAL),
    ("unaligned READ", READ, 512, BLK, 0, EINVAL),
    ("unaligned WRITE", WRITE, BLK, 512, 0, EINVAL),
    ("unknown command", 99, 0, BLK, 0, EINVAL),
    ("unknown command flag", READ, 0, BLK, 0x80, EINVAL),
]
for what, typ, off, n, flags, want in cases:
    data = b"\x77" * n if typ == WRITE else b""
    err, _ = c.call(typ, off, n, data, flags)
    if err != want:
        fail("%s: error %d, want %d" % (what, err, want))
    # The same connection goes on: it reads what the good one wrote.
    err, d = c.call(READ, GOOD_OFF, BLK, nread=BLK)
    assert err == 0 and d == bytes([gen[0] % 250 + 1]) * BLK, what
ok("%d bad requests answered EINVAL/ENOSPC; the connection went on" %
   len(cases))
good_roundtrip("bad requests")

big = bytes(range(256)) * (MAXP // 256)
err, _ = c.call(WRITE, 64 << 20, MAXP, big)
assert err == 0, "WRITE of the payload limit: error %d" % err
err, d = c.call(READ, 64 << 20, MAXP, nread=MAXP)
assert err == 0 and d == big, "32 MiB read-back"
c.req(WRITE, 0, MAXP + BLK)  # the header only: no payload is read
c.expect_eof("a WRITE above the payload limit")
good_roundtrip("a WRITE above the payload limit")
ok("WRITE of 32 MiB read back; WRITE of 32 MiB + 4 KiB closed")

c, _ = client()
c.send(struct.pack(">IHHQQI", 0x12345678, 0, READ, 1, 0, BLK))
c.expect_eof("a bad request magic")
good_roundtrip("a bad request magic")
ok("bad request magic: closed")

# ---- abrupt disconnects ----
for i in range(10):
    Conn().close()
c = Conn()
c.start()
c.send(struct.pack(">QI", IHAVEOPT, OPT_GO))  # half an option header
c.close()
c, _ = client()
c.send(struct.pack(">IHH", REQ, 0, WRITE))  # half a request header
c.close()
c, _ = client()
c.send(struct.pack(">IHHQQI", REQ, 0, WRITE, 1, 8 << 20, 1 << 20) +
       b"\x11" * (100 << 10))  # a tenth of the payload
c.close()
c, _ = client()
c.s.settimeout(2)  # should the server stop reading, stop sending
for i in range(64):
    try:
        c.req(WRITE, (16 << 20) + i * 65536, 65536, b"\x22" * 65536)
    except OSError:
        break
c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()  # a reset, with replies unread
c, _ = client()
c.s.setblocking(False)
for i in range(8):
    try:
        c.req(READ, i * (16 << 20) % (SIZE - (16 << 20)), 16 << 20)
    except BlockingIOError:
        break
c.close()  # 128 MiB of replies with nobody to read them
time.sleep(0.5)
good_roundtrip("abrupt disconnects")
ok("abrupt disconnects: before the greeting, mid option, mid header, mid "
   "payload, 64 writes in flight reset, 16 MiB reads unread")

# ---- the handshake timeout ----
# The stalled connection has been open through all of the above; the
# server must end it at 30 s, the good one (in transmission) never.
left = 30 - (time.monotonic() - t_stalled)
if left < 3:
    fail("the stalled connection was open %.1f s before its check: the "
         "cases above took too long to see the timeout" %
         (30 - left))
stalled.expect_eof("a stalled handshake", within=left + 15)
took = time.monotonic() - t_stalled
if took < 29:
    fail("a stalled handshake closed after %.1f s, before the 30 s "
         "timeout" % took)
good_roundtrip("the handshake timeout")
ok("stalled handshake closed after %.1f s; the good connection still "
   "served" % took)
print("PATTERN %d" % (gen[0] % 250 + 1))
EOF
	fail "$(tail -n 5 abuse.out)"
sed -n 's/^ok - /ok - /p' abuse.out
PAT=$(sed -n 's/^PATTERN //p' abuse.out)
[ -n "$PAT" ] || fail "no final pattern: $(tail -n 3 abuse.out)"

URI="nbd+unix:///t?socket=$NBD"
timeout 60 qemu-io -f raw -c "read -P $PAT 1M 4k" "$URI" >qemu-io.out 2>&1 ||
	fail "qemu-io: $(tail -n 3 qemu-io.out)"
! grep -qi 'fail\|error\|mismatch' qemu-io.out ||
	fail "qemu-io read-back: $(head -n 3 qemu-io.out)"
timeout 60 nbdinfo --json "$URI" >info.json 2>&1 || fail "nbdinfo: $(cat info.json)"
pass "qemu-io reads the good connection's last block; nbdinfo answers"

# Each refusal is logged once, where it was detected, with its reason.
for want in "refusing more" "OPT_EXPORT_NAME: name of 4097 bytes" \
	"length 65537 above the 65536-byte cap" \
	"length 4294967295 above the 65536-byte cap" \
	"more than 1024 options" "unknown client flags" \
	"bad option magic" "bad request magic" \
	"above the 33554432-byte payload limit" \
	"handshake not finished within 30.0 s"; do
	grep -qF "$want" "$DLOG" || fail "the daemon's log does not say '$want'"
done
pass "the daemon's log names each refusal"
kill -0 "$DAEMON_PID" || fail "zarrayd exited"
"$ZARRAY" status t >status.out 2>&1 || fail "status: $(cat status.out)"
pass "zarrayd still serves its control socket"

# The export's counters in `zarray status`: at least what the cases above
# did - 8 connections closed for a violation (a name of 4097 bytes in
# OPT_EXPORT_NAME, option lengths 64 KiB + 1 and 4 GiB - 1, option 1025,
# unknown client flags, a command before the handshake, a bad request
# magic, a payload past the limit), the 14 bad requests answered with an
# error, one connection refused over the cap, the stalled handshake -
# and no connection left open once every client is gone (the loop may
# take a moment to see the last EOF).
for i in $(seq 50); do
	[ "$(json "d['export']['stats']['conns_open']")" = 0 ] && break
	sleep 0.1
done
json "d['export']['stats']" >xstats.out
python3 - st.json <<'EOF' || fail "export counters: $(cat xstats.out)"
import json, sys
x = json.load(open(sys.argv[1]))["export"]["stats"]
want = {"protocol_errors": 8, "error_replies": 14, "conns_refused": 1,
        "handshake_timeouts": 1, "handshakes": 3}
bad = ["%s %d, want >= %d" % (k, x[k], n) for k, n in want.items() if x[k] < n]
if x["conns_open"] != 0 or x["inflight"] != 0:
    bad.append("%d connections and %d commands left" % (x["conns_open"], x["inflight"]))
if x["conns_accepted"] < x["conns_refused"] + x["handshakes"]:
    bad.append("accepted %d < refused + handshakes" % x["conns_accepted"])
if x["written_bytes"] < 32 << 20:
    bad.append("written %d, below the 32 MiB WRITE alone" % x["written_bytes"])
if bad:
    sys.exit("; ".join(bad))
EOF
"$ZARRAY" status t >status.out 2>&1 || fail "status: $(cat status.out)"
grep -q '^ *0 connections open, [1-9][0-9]* since start, [1-9][0-9]* error replies$' status.out &&
	grep -q '^ *refused [1-9][0-9]* over the cap, [1-9][0-9]* handshake timeouts\?, [1-9][0-9]* protocol errors$' status.out ||
	fail "zarray status has no export counters line: $(grep -A2 export status.out)"
pass "zarray status counts the refusals, errors and connections"
