#!/bin/bash
# The short run of the randomized fault loop (tools/zloop): one minute by
# default, five in tools/test's faults tier (ZA_ZLOOP_MINUTES). Passes
# of 5-60 s, each a random array on emulated drives (hm-smr or
# zns, k+p, chunk, drive count) written through its NBD export while
# members fail, drives die under I/O, EIO bursts and bit rot hit up to p
# members, zarrayd is SIGKILLed (also while recovering) or dies at a
# crash point, and the drives are power-cut; after every restart and at
# the end of each pass every write acknowledged before a completed flush
# must read back exactly, and the array's state must be what the faults
# imply. tools/zloop's header says it all.
#
# A failing pass is kept in BUILDDIR/tests/zloop-kept/pass-SEED (drives,
# daemon log, pass log) and the log below gives the one command that
# replays it. ZA_ZLOOP_SEED=N starts from that seed (default 7000),
# ZA_ZLOOP_MINUTES=M runs longer. The long form, for hours on an idle machine:
#   nice tools/zloop -b build --minutes 480 --keep /var/tmp/zloop
# which ends with passes run, drive-hours and faults injected by kind.
# Skips (77) only if python3, nbdcopy or libnbd is missing.
. "$(dirname "$0")/lib.sh"
need python3
need nbdcopy
[ -e /usr/lib/x86_64-linux-gnu/libnbd.so.0 ] || ldconfig -p 2>/dev/null | grep libnbd.so.0 >/dev/null ||
	{ echo "SKIP: libnbd.so.0 not installed"; exit 77; }

# A fixed first seed, so that CI runs the same configurations each time
# (only the timing of kills varies): the short loop is a gate, the long
# form the search. ZA_ZLOOP_SEED=random draws one as the long form does.
seed=${ZA_ZLOOP_SEED:-7000}
args=(-b "$top_builddir" --minutes "${ZA_ZLOOP_MINUTES:-1}"
	--keep "$top_builddir/tests/zloop-kept")
[ "$seed" = random ] || args+=(--seed "$seed")
TMPDIR="$SCRATCH" "$top_srcdir/tools/zloop" "${args[@]}" | tee "$SCRATCH/out" ||
	fail "a fault loop pass failed: see the replay command above"
pass "$(grep '^# zloop: [0-9]* passes' "$SCRATCH/out" | sed 's/^# zloop: //')"
