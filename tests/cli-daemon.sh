#!/bin/bash
# Shows that every daemon command of the zarray CLI answers bad input with
# a stable exit code and one clear line: a bad command line is a usage
# error (2) before anything is sent; no daemon is "cannot reach zarrayd
# at SOCKET" (1, and 4 for `status --test`); with a daemon, an array that
# does not exist, a bad name, bad geometry, too few or missing devices
# are refused (1) with the daemon's reason, and the daemon keeps serving.
# --chunk 0 and --size 0 are refused, not taken for the defaults; a size
# too large is said in IEC units; drives too small, as such. An empty
# ZARRAY_SOCKET is unset; an empty -s is a usage error. An array whose
# export failed is exported by `zarray export` once it can be, and the
# daemon logs who asked.
# --json output of list and status parses and has the documented shape.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"

"$ZARRAY" emu create --size 1G "$SCRATCH"/d{0..3}.img >/dev/null
D=("$SCRATCH"/d0.img "$SCRATCH"/d1.img "$SCRATCH"/d2.img)

# ---- usage errors: no daemon is running, and none is needed ----
u() { expect_fail 2 "$@"; }
u "create without a name" "$ZARRAY" create
u "create without devices" "$ZARRAY" create t --data 2 --parity 1
u "create without --data" "$ZARRAY" create t --parity 1 "${D[@]}"
u "create without --parity" "$ZARRAY" create t --data 2 "${D[@]}"
u "create --data not a number" "$ZARRAY" create t --data two --parity 1 "${D[@]}"
u "create --data above 255" "$ZARRAY" create t --data 300 --parity 1 "${D[@]}"
u "create --parity negative" "$ZARRAY" create t --data 2 --parity -1 "${D[@]}"
u "create bad --chunk" "$ZARRAY" create t --data 2 --parity 1 --chunk 64Q "${D[@]}"
u "create --chunk above 4 GiB" "$ZARRAY" create t --data 2 --parity 1 --chunk 8G "${D[@]}"
u "create bad --size" "$ZARRAY" create t --data 2 --parity 1 --size 1.5.5G "${D[@]}"
u "create unknown option" "$ZARRAY" create t --data 2 --parity 1 --frob "${D[@]}"
u "assemble without devices" "$ZARRAY" assemble t
u "assemble unknown option" "$ZARRAY" assemble --frob t "${D[@]}"
u "stop without a name" "$ZARRAY" stop
u "stop two names" "$ZARRAY" stop a b
u "destroy without a name" "$ZARRAY" destroy
u "destroy unknown option" "$ZARRAY" destroy --yes t
u "list with an argument" "$ZARRAY" list t
u "list unknown option" "$ZARRAY" list --long
u "status two names" "$ZARRAY" status a b
u "status unknown option" "$ZARRAY" status --verbose
u "add without devices" "$ZARRAY" add t
u "remove without devices" "$ZARRAY" remove t
u "fail without a device" "$ZARRAY" fail t
u "fail two devices" "$ZARRAY" fail t "${D[0]}" "${D[1]}"
u "replace with one device" "$ZARRAY" replace t "${D[0]}"
u "rebuild without an action" "$ZARRAY" rebuild t
u "rebuild unknown action" "$ZARRAY" rebuild t restart
u "rebuild bad --rate" "$ZARRAY" rebuild t start --rate fast
u "rebuild --rate with pause" "$ZARRAY" rebuild t pause --rate 10
u "scrub without an action" "$ZARRAY" scrub t
u "scrub unknown action" "$ZARRAY" scrub t frob
u "watch without a name" "$ZARRAY" watch
u "export without a name" "$ZARRAY" export
u "shutdown with an argument" "$ZARRAY" shutdown now
u "unknown global option" "$ZARRAY" --frob list
u "empty -s" "$ZARRAY" -s "" list
grep -q "^zarray: -s: empty socket path" "$SCRATCH/err" || fail "empty -s said: $(cat "$SCRATCH/err")"
"$ZARRAY" create --help | grep "^Usage: zarray create NAME --data K" >/dev/null || fail "create --help"
"$ZARRAY" --help | grep "rebuild" >/dev/null || fail "zarray --help lists rebuild"
# Every command `zarray --help` lists (and emu's two): --help is its usage
# on stdout, exit 0; an unknown option is "zarray CMD: unrecognized
# option" and the usage on stderr, nothing on stdout, exit 2.
cmds=$("$ZARRAY" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
[ "$(wc -w <<<"$cmds")" -ge 18 ] || fail "zarray --help lists only: $cmds"
for c in $cmds "emu create" "emu powercut"; do
	rc=0
	$ZARRAY $c --help >"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	[ "$rc" -eq 0 ] || fail "$c --help: exit $rc: $(cat "$SCRATCH/err")"
	grep -q "^Usage: zarray ${c%% *}\( \|$\)" "$SCRATCH/out" || fail "$c --help: $(cat "$SCRATCH/out")"
	[ ! -s "$SCRATCH/err" ] || fail "$c --help wrote to stderr: $(cat "$SCRATCH/err")"
	rc=0
	$ZARRAY $c --frobnicate x >"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "$c --frobnicate: exit $rc, want 2: $(cat "$SCRATCH/err")"
	[ "$(head -n 1 "$SCRATCH/err")" = "zarray $c: unrecognized option '--frobnicate'" ] ||
		fail "$c --frobnicate said: $(cat "$SCRATCH/err")"
	grep -q "^Usage: zarray ${c%% *}" "$SCRATCH/err" || fail "$c --frobnicate: no usage: $(cat "$SCRATCH/err")"
	[ ! -s "$SCRATCH/out" ] || fail "$c --frobnicate wrote to stdout: $(cat "$SCRATCH/out")"
done
# A subcommand's --help too (debug inject used to take it for NAME).
"$ZARRAY" debug inject --help >"$SCRATCH/out" 2>"$SCRATCH/err" || fail "debug inject --help: exit $?"
grep -q "^Usage: zarray debug inject NAME DEVICE SPEC" "$SCRATCH/out" || fail "debug inject --help: $(cat "$SCRATCH/out")"
pass "--help works (exit 0, stdout) and unknown options are refused (exit 2, usage on stderr) for: $(echo $cmds) and emu create, emu powercut, debug inject"

# ---- no daemon ----
nd() {
	expect_fail "$1" "$2 without a daemon" "${@:3}"
	grep -q "cannot reach zarrayd at $SOCK" "$SCRATCH/err" ||
		fail "$2: message: $(cat "$SCRATCH/err")"
	[ "$(wc -l <"$SCRATCH/err")" -eq 1 ] || fail "$2: more than one line"
}
nd 1 list "$ZARRAY" list
nd 1 status "$ZARRAY" status
nd 4 "status --test" "$ZARRAY" status --test
nd 4 "status --test NAME" "$ZARRAY" status --test t
nd 1 create "$ZARRAY" create t --data 2 --parity 1 "${D[@]}"
nd 1 assemble "$ZARRAY" assemble t "${D[@]}"
nd 1 stop "$ZARRAY" stop t
nd 1 destroy "$ZARRAY" destroy t
nd 1 add "$ZARRAY" add t "${D[0]}"
nd 1 remove "$ZARRAY" remove t "${D[0]}"
nd 1 fail "$ZARRAY" fail t "${D[0]}"
nd 1 replace "$ZARRAY" replace t "${D[0]}" "${D[1]}"
nd 1 rebuild "$ZARRAY" rebuild t status
nd 1 scrub "$ZARRAY" scrub t status
nd 1 watch "$ZARRAY" watch t
nd 1 export "$ZARRAY" export t
nd 1 shutdown "$ZARRAY" shutdown
expect_fail 1 "-s overrides ZARRAY_SOCKET" "$ZARRAY" -s "$SCRATCH/nowhere.sock" list
grep -q "cannot reach zarrayd at $SCRATCH/nowhere.sock" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
# An empty ZARRAY_SOCKET is the default socket (a zarrayd may serve it on
# this machine: then the list is answered).
rc=0
ZARRAY_SOCKET= "$ZARRAY" list >/dev/null 2>"$SCRATCH/err" || rc=$?
[ "$rc" -eq 0 ] || grep -q "cannot reach zarrayd at /run/zarray/zarrayd.sock: " "$SCRATCH/err" ||
	fail "empty ZARRAY_SOCKET: exit $rc: $(cat "$SCRATCH/err")"
pass "empty ZARRAY_SOCKET: the default socket"

# ---- with a daemon: arrays that do not exist ----
start_daemon
nf() {
	expect_fail "$1" "$2 of a missing array" "${@:3}"
	grep -q "no array named 'nosuch' is running" "$SCRATCH/err" ||
		fail "$2: message: $(cat "$SCRATCH/err")"
}
nf 1 status "$ZARRAY" status nosuch
nf 4 "status --test" "$ZARRAY" status --test nosuch
nf 1 stop "$ZARRAY" stop nosuch
nf 1 destroy "$ZARRAY" destroy --force nosuch
nf 1 add "$ZARRAY" add nosuch "${D[0]}"
nf 1 remove "$ZARRAY" remove nosuch "${D[0]}"
nf 1 fail "$ZARRAY" fail nosuch "${D[0]}"
nf 1 replace "$ZARRAY" replace nosuch "${D[0]}" "${D[1]}"
for a in start pause resume status; do
	nf 1 "rebuild $a" "$ZARRAY" rebuild nosuch $a
done
for a in start stop status; do
	nf 1 "scrub $a" "$ZARRAY" scrub nosuch $a
done
nf 1 watch "$ZARRAY" watch nosuch
nf 1 export "$ZARRAY" export nosuch

# ---- with a daemon: requests it refuses before touching a drive ----
expect_fail 1 "create: too few devices" "$ZARRAY" create t --data 3 --parity 1 "${D[@]}"
grep -q "too few devices: 3+1 needs at least 4, 3 given" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: no data chunks" "$ZARRAY" create t --data 0 --parity 1 "${D[@]}"
expect_fail 1 "create: no parity" "$ZARRAY" create t --data 2 --parity 0 "${D[@]}"
grep -q "geometry 2+0" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: --chunk 0" "$ZARRAY" create t --data 2 --parity 1 --chunk 0 "${D[@]}"
grep -q "^zarray create: --chunk 0: the chunk size must be a power of two" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: --size 0" "$ZARRAY" create t --data 2 --parity 1 --size 0 "${D[@]}"
grep -q "^zarray create: --size 0: " "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
# 1 GiB drives of 256 MiB zones hold no volume at all: said so, with
# --size too (not "more than the 0 B these drives can hold").
expect_fail 1 "create: drives too small" "$ZARRAY" create t --data 2 --parity 1 "${D[@]}"
grep -qx "zarray create: these drives are too small for 2+1 with the reserve garbage collection needs" "$SCRATCH/err" ||
	fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: drives too small, --size" "$ZARRAY" create t --data 2 --parity 1 --size 64M "${D[@]}"
grep -qx "zarray create: these drives are too small for 2+1 with the reserve garbage collection needs" "$SCRATCH/err" ||
	fail "message: $(cat "$SCRATCH/err")"
"$ZARRAY" emu create --size 64M --zone-size 4M "$SCRATCH"/s{0..2}.img >/dev/null
expect_fail 1 "create: --size too large" "$ZARRAY" create t --data 2 --parity 1 --size 1T "$SCRATCH"/s{0..2}.img
# In IEC units for people, and exact for scripts (tools/zloop reads it).
grep -Eq "^zarray create: --size 1 TiB is more than the [0-9.]+ MiB these drives can hold with 2\+1 and a reserve for garbage collection \(at most [0-9]+ bytes\)$" "$SCRATCH/err" ||
	fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: bad name" "$ZARRAY" create 'a/b' --data 2 --parity 1 "${D[@]}"
grep -q "invalid array name" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: name too long" "$ZARRAY" create "$(printf 'n%.0s' {1..64})" --data 2 --parity 1 "${D[@]}"
expect_fail 1 "create: a device given twice" "$ZARRAY" create t --data 2 --parity 1 "${D[0]}" "${D[1]}" "${D[0]}"
grep -q "is given twice" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "create: a missing device" "$ZARRAY" create t --data 2 --parity 1 "${D[0]}" "${D[1]}" "$SCRATCH/nope.img"
grep -q "nope.img: No such file or directory" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "assemble: a missing device" "$ZARRAY" assemble t "$SCRATCH/nope.img"
expect_fail 1 "status: bad name" "$ZARRAY" status '../x'
"$ZARRAY" list >/dev/null 2>&1 || fail "daemon stopped answering"
pass "daemon still serving after the refusals"

# ---- --json on an empty daemon ----
"$ZARRAY" --json status | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d == {"arrays": []}, d'
"$ZARRAY" list --json | python3 -m json.tool >/dev/null || fail "list --json"
"$ZARRAY" status --test || fail "status --test with no array: exit $?"
pass "--json of no arrays parses; status --test of no arrays is 0"

# ---- an export that failed, tried again ----
# Something else at RUNDIR/NAME.nbd: the array is created, its export is
# not (the create says why); `zarray export` once the path is free serves
# it, and the daemon's log says who asked, as for every change of state.
"$ZARRAY" emu create --size 64M --zone-size 4M "$SCRATCH"/x{0..2}.img >/dev/null
: >"$RUN/x.nbd"
expect_fail 1 "create: the socket path taken" "$ZARRAY" create x --data 2 --parity 1 "$SCRATCH"/x{0..2}.img
grep -qx "zarray create: x is not exported: cannot serve NBD on $RUN/x.nbd: File exists" "$SCRATCH/err" ||
	fail "create did not say why x is not exported: $(cat "$SCRATCH/err")"
"$ZARRAY" status x >/dev/null || fail "x is not running after its create"
expect_fail 1 "export: the path still taken" "$ZARRAY" export x
rm "$RUN/x.nbd"
URI=$("$ZARRAY" export x) || fail "export after the path was freed"
[ "$URI" = "nbd+unix:///x?socket=$RUN/x.nbd" ] || fail "export printed '$URI'"
[ -S "$RUN/x.nbd" ] || fail "no socket at $RUN/x.nbd"
grep -Eq "x: exported at nbd\+unix:///x\?socket=$RUN/x\.nbd \(uid $(id -u) pid [0-9]+\)" "$DLOG" ||
	fail "the new export is not in the log with its peer: $(grep 'x:' "$DLOG" | tail -n 3)"
"$ZARRAY" stop x >/dev/null || fail "stop x"
pass "an export that failed serves when asked again, and the log says who asked"
