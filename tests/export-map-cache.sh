#!/bin/bash
# Shows that zarrayd --map-cache bounds the block map in memory and that
# what left memory is read back, correctly, through a real NBD client: on
# a 4+2 array of six emulated drives served with --map-cache 64K,
#  - status --json says the limit (volume.map.cache_bytes = 65536);
#  - 3,000 scattered 4 KiB blocks written with qemu-io, each with its own
#    pattern, make a map of ~3,000 extents (well over 64 KiB), flushed;
#  - after a clean restart (SIGTERM: a checkpoint, then its pages on the
#    drives) the map in memory is back under the limit
#    (volume.map.bytes < 64 KiB, and less than before the restart);
#  - every block reads back with its pattern (qemu-io read -P), which
#    needed map pages read back from the drives (volume.map.pages_read
#    > 0) and none unreadable (page_errors = 0);
#  - 500 of them written again and a SIGKILL: after the restart (the
#    replay on top of the paged checkpoint) every block reads back as
#    last written; recovery loaded the checkpoint's root only (its log
#    says so) and read only the pages its replay needed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
need qemu-io
need python3

KiB=1024
N=3000

cd "$SCRATCH"
"$ZARRAY" emu create --size 512M --zone-size 16M d{0..5}.img >/dev/null
start_daemon --map-cache 64K
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
URI=$("$ZARRAY" export t) || fail "export t"

expect() {
	local got
	got=$(json "$1") || fail "status --json: $(cat st.json)"
	[ "$got" = "$2" ] || fail "$3: $1 is $got, not $2"
}

# qio_script FILE: run qemu-io's commands in FILE against the export.
qio_script() {
	timeout 300 qemu-io -f raw "$URI" <"$1" >qio.out 2>&1 ||
		fail "qemu-io: $(tail -5 qio.out)"
	! grep -qi 'fail\|error\|mismatch\|pattern' qio.out ||
		fail "qemu-io: $(grep -i 'fail\|error\|mismatch\|pattern' qio.out | head -5)"
}

# Block i at every third block from 0; its pattern (i % 251) + 1, or
# (i % 241) + 2 once written again.
python3 - "$N" >write.cmds <<'EOF'
import sys
n = int(sys.argv[1])
for i in range(n):
    print("write -P %d %d 4k" % (i % 251 + 1, i * 3 * 4096))
print("flush")
EOF
python3 - "$N" >read.cmds <<'EOF'
import sys
n = int(sys.argv[1])
for i in range(n):
    print("read -P %d %d 4k" % (i % 251 + 1, i * 3 * 4096))
EOF

expect 'd["volume"]["map"]["cache_bytes"]' $((64 * KiB)) "the limit"
qio_script write.cmds
expect 'd["volume"]["map"]["extents"] >= 3000' True "after $N scattered blocks"
before=$(json 'd["volume"]["map"]["bytes"]')
[ "$before" -gt $((64 * KiB)) ] || fail "a map of $before bytes is not over the limit"
pass "$N scattered 4 KiB blocks: a map of $before bytes, over the 64 KiB limit"

stop_daemon TERM
start_daemon --map-cache 64K
expect 'd["volume"]["checkpoint"]["pages"] > 0' True "after a clean stop"
expect "d['volume']['map']['bytes'] < min($before, 64 * 1024)" True "after a restart"
pass "restarted: the map in memory is under the limit ($(json 'd["volume"]["map"]["bytes"]') bytes)"

qio_script read.cmds
expect 'd["volume"]["map"]["pages_read"] > 0' True "after reading every block"
expect 'd["volume"]["map"]["page_errors"]' 0 "after reading every block"
pass "every block reads back with its pattern; $(json 'd["volume"]["map"]["pages_read"]') map pages read back"

python3 - "$N" >write2.cmds <<'EOF'
import sys
n = int(sys.argv[1])
for i in range(0, n, 6):
    print("write -P %d %d 4k" % (i % 241 + 2, i * 3 * 4096))
print("flush")
EOF
python3 - "$N" >read2.cmds <<'EOF'
import sys
n = int(sys.argv[1])
for i in range(n):
    p = i % 241 + 2 if i % 6 == 0 else i % 251 + 1
    print("read -P %d %d 4k" % (p, i * 3 * 4096))
EOF
qio_script write2.cmds
stop_daemon KILL
start_daemon --map-cache 64K
expect 'd["volume"]["recovered_stripes"] > 0' True "after SIGKILL"
rec=$(grep "volume: recovered" "$DLOG" | tail -1)
case $rec in
*"the checkpoint's root loaded"*) ;;
*) fail "recovery did not load the root only: $rec" ;;
esac
qio_script read2.cmds
expect 'd["volume"]["map"]["page_errors"]' 0 "after the crash"
expect 'd["volume"]["recovery"]["count_mismatches"]' 0 "after the crash"
pass "500 written again, SIGKILL: every block reads back as last written"
