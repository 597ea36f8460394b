#!/bin/bash
# Shows that a drive that is gone when zarrayd starts (a pulled disk: its
# path no longer exists) does not keep its array down: the daemon
# assembles the array from the recorded drives that remain, says which
# one is gone, the member is "missing", the array degraded, its data
# reads back exactly, and with two drives gone (p = 2) still; with three
# gone the array is refused with one line naming the members, and the
# daemon keeps serving. Policy manual, so that no rebuild moves the
# missing members' columns while the test looks.
# Skips (77) only if nbdcopy is not installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need nbdcopy
need python3

MiB=$((1024 * 1024))
cd "$SCRATCH"
"$ZARRAY" emu create --size 64M --zone-size 4M d{0..5}.img >/dev/null
start_daemon --rebuild manual
"$ZARRAY" create t --data 4 --parity 2 --size 48M d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
URI=$("$ZARRAY" export t) || fail "export t"
head -c $((32 * MiB)) /dev/urandom >data.bin
nbdcopy data.bin "$URI" || fail "nbdcopy in"
stop_daemon TERM

verify() {
	rm -f back.bin
	nbdcopy "$URI" back.bin || fail "nbdcopy out ($1)"
	cmp -n $((32 * MiB)) data.bin back.bin || fail "data differs ($1)"
}

mv d2.img gone2.img
start_daemon --rebuild manual
grep -q "t: .*/d2.img is gone: assembling without it" "$DLOG" ||
	fail "the daemon does not say d2.img is gone: $(tail -n 5 "$DLOG")"
[ "$(json 'd["state"]')" = degraded ] || fail "state $(json 'd["state"]') with d2.img gone"
[ "$(json '[m["state"] for m in d["members"] if m["index"] == 2][0]')" = missing ] ||
	fail "member 2 is not missing: $(cat st.json)"
URI=$("$ZARRAY" export t) || fail "export t after the restart"
verify "d2.img gone"
pass "a drive gone at start: the array assembles degraded, member 2 missing, data exact"

stop_daemon TERM
mv d4.img gone4.img
start_daemon --rebuild manual
[ "$(json 'd["state"]')" = degraded ] || fail "state $(json 'd["state"]') with two drives gone"
verify "d2.img and d4.img gone"
pass "two drives gone (p = 2): still degraded and exact"

stop_daemon TERM
mv d5.img gone5.img
start_daemon --rebuild manual
grep -q "t: not assembled at start: .*3 members lost, parity covers 2" "$DLOG" ||
	fail "three gone: not refused as expected: $(tail -n 5 "$DLOG")"
"$ZARRAY" list >/dev/null || fail "the daemon does not answer after refusing the array"
pass "three drives gone: refused with one line naming them; the daemon still answers"
