#!/bin/bash
# Shows that garbage on the control socket never hurts zarrayd: a python
# client (its own protobuf encoder, independent of ours) sends random
# bytes, a valid ping cut at every length, zero, oversized and 4 GiB
# length prefixes, a foreign protocol version, 100 connections at once
# and a half frame that then stalls; each bad connection is answered
# with an error when one can be given and closed, the stalled one within
# the daemon's timeout, while a valid ping on a fresh connection is
# answered throughout. Then an unprivileged peer (uid 65534, via setpriv
# or runuser) is kept out by the socket's mode and, with the modes
# opened up, by the daemon's credential check, which logs it; root is
# still served. Finally `zarray status` answers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need python3

start_daemon
python3 - "$SOCK" <<'PY'
import os, random, socket, struct, sys, time

path = sys.argv[1]
random.seed(20261121)

def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def ping(version=1, rid=7):
    # Request{version=1, id=2, ping=16 (empty message)}
    body = b"\x08" + varint(version) + b"\x10" + varint(rid) + b"\x82\x01\x00"
    return struct.pack(">I", len(body)) + body

def fields(buf):
    """Top-level fields of a protobuf message: {number: [values]}."""
    out, i = {}, 0
    while i < len(buf):
        key, shift = 0, 0
        while True:
            b = buf[i]; i += 1
            key |= (b & 0x7F) << shift; shift += 7
            if not b & 0x80:
                break
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, shift = 0, 0
            while True:
                b = buf[i]; i += 1
                v |= (b & 0x7F) << shift; shift += 7
                if not b & 0x80:
                    break
        elif wt == 2:
            n, shift = 0, 0
            while True:
                b = buf[i]; i += 1
                n |= (b & 0x7F) << shift; shift += 7
                if not b & 0x80:
                    break
            v = buf[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out

def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s

def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            return None
        buf += c
    return buf

def response(s):
    """The next response's top-level fields, or None at EOF."""
    try:
        h = recv_exact(s, 4)
    except ConnectionResetError:
        return None
    if h is None:
        return None
    n = struct.unpack(">I", h)[0]
    assert 0 < n <= 1 << 20, n
    return fields(recv_exact(s, n))

def error_code(r):
    return fields(r[3][0])[1][0] if 3 in r else None

def closed(s):
    try:
        while True:
            c = s.recv(4096)
            if not c:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False

def alive(what):
    s = conn()
    s.sendall(ping(rid=4242))
    r = response(s)
    assert r and r[2] == [4242] and 16 in r, (what, r)
    s.close()

ERR_VERSION, ERR_MALFORMED = 1, 2

# A valid ping, hand-encoded, gets a Pong with our id.
s = conn()
s.sendall(ping(rid=99))
r = response(s)
assert r[1] == [1] and r[2] == [99] and 16 in r and 3 not in r, r
s.sendall(ping(rid=100))        # and the connection stays usable
assert response(s)[2] == [100]
s.close()
print("ok - hand-encoded ping answered, connection reusable")

# The stall: half a frame, then nothing (checked at the end).
stall = conn()
stall.sendall(ping()[:5])
t_stall = time.monotonic()

# Random bytes, 60 connections.
for i in range(60):
    s = conn()
    junk = bytes(random.getrandbits(8) for _ in range(random.randint(1, 300)))
    try:
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass
    while True:            # any answers, then the daemon closes
        r = response(s)
        if r is None:
            break
        assert 3 in r or 16 in r, r
    s.close()
alive("random bytes")
print("ok - 60 connections of random bytes: closed, daemon alive")

# A valid frame cut at every length.
frame = ping()
for cut in range(1, len(frame)):
    s = conn()
    s.sendall(frame[:cut])
    s.shutdown(socket.SHUT_WR)
    assert response(s) is None, cut     # closed, nothing dispatched
    s.close()
alive("truncated frames")
print("ok - a ping cut at each of %d lengths: closed unanswered" % (len(frame) - 1))

# Bad lengths: answered right after the 4 header bytes, then closed.
for n in (0, (1 << 20) + 1, 0x7FFFFFFF, 0xFFFFFFFF):
    s = conn()
    s.sendall(struct.pack(">I", n))
    r = response(s)
    assert r is not None and error_code(r) == ERR_MALFORMED, (n, r)
    assert closed(s), n
    s.close()
alive("bad lengths")
print("ok - lengths 0, 1 MiB + 1, 2 GiB, 4 GiB: error, closed")

# A garbage body under a valid length.
s = conn()
s.sendall(struct.pack(">I", 16) + b"\xff" * 16)
r = response(s)
assert error_code(r) == ERR_MALFORMED and r[2] == [0], r
assert closed(s)
s.close()

# Foreign protocol versions.
for v in (0, 2, 1 << 31):
    s = conn()
    s.sendall(ping(version=v, rid=5))
    r = response(s)
    assert error_code(r) == ERR_VERSION and r[2] == [5], (v, r)
    assert closed(s)
    s.close()
alive("versions")
print("ok - undecodable body and versions 0, 2, 2^31: error, closed")

# 100 connections at once: all accepted and served.
many = [conn() for _ in range(100)]
for i, s in enumerate(many):
    s.sendall(ping(rid=1000 + i))
for i, s in enumerate(many):
    r = response(s)
    assert r and r[2] == [1000 + i] and 16 in r, (i, r)
alive("100 open connections")
for s in many:
    s.close()
print("ok - 100 simultaneous connections all answered")

# The stalled half frame is dropped within the timeout (5 s) + slack.
stall.settimeout(10)
assert closed(stall), "stalled connection still open"
waited = time.monotonic() - t_stall
assert waited < 9, waited
stall.close()
alive("after the stall")
print("ok - half frame then silence: closed after %.1f s" % waited)
PY
grep -q "closing connection of pid .*: no complete request within" "$DLOG" ||
	fail "the stall was not logged"
grep -q "frame length 4294967295 out of range" "$DLOG" || fail "the 4 GiB length was not logged"

# ---- unprivileged peers ----
if command -v setpriv >/dev/null 2>&1; then
	AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
elif command -v runuser >/dev/null 2>&1; then
	AS_NOBODY=(runuser -u nobody --)
else
	AS_NOBODY=()
fi
if [ "$(id -u)" -ne 0 ] || [ ${#AS_NOBODY[@]} -eq 0 ] || getent group zarray >/dev/null; then
	echo "# not root, no setpriv/runuser, or a zarray group exists: unprivileged peer not tried"
else
	# The modes keep nobody out first.
	chmod 0755 "$SCRATCH"
	expect_fail 1 "nobody, default modes" "${AS_NOBODY[@]}" "$ZARRAY" list
	grep -q "cannot reach zarrayd at $SOCK: Permission denied" "$SCRATCH/err" ||
		fail "message: $(cat "$SCRATCH/err")"
	# Opened up, the daemon's own check does.
	chmod 0755 "$RUN"
	chmod 0666 "$SOCK"
	for cmd in list "status" "shutdown"; do
		expect_fail 1 "nobody: $cmd" "${AS_NOBODY[@]}" "$ZARRAY" $cmd
		grep -q "permission denied: uid 65534 is not root nor in group 'zarray'" "$SCRATCH/err" ||
			fail "message: $(cat "$SCRATCH/err")"
	done
	grep -q "refused connection of pid [0-9]* uid 65534" "$DLOG" || fail "refusal not logged"
	kill -0 "$DAEMON_PID" || fail "daemon died"
	pass "unprivileged peer refused and logged; the daemon keeps serving"
fi

"$ZARRAY" status >/dev/null 2>&1 || fail "zarray status after the garbage: exit $?"
"$ZARRAY" --json status | python3 -m json.tool >/dev/null || fail "status --json"
pass "zarray status still answers"
