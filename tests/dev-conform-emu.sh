#!/bin/bash
# Shows that the emulated backend passes the whole device conformance suite
# (tests/za-conform, the same checks tools/vmtest runs on null_blk and NVMe
# ZNS drives in a guest): for an SMR-like drive with conventional zones and
# open-zone limits, and a ZNS-like drive with zone capacity below zone size
# and open/active limits, created with the real CLI.
. "$(dirname "$0")/lib.sh"

"$ZARRAY" emu create --model hm-smr --size 1G --zone-size 64M --conv-zones 2 \
	--max-open 8 "$SCRATCH/smr.img" >/dev/null
"$ZARRAY" emu create --model zns --size 1G --zone-size 64M --zone-cap 60M \
	--max-open 12 --max-active 14 "$SCRATCH/zns.img" >/dev/null
"$ZARRAY" emu create --model zns --size 512M --zone-size 32M --cache 0 \
	"$SCRATCH/zns-wt.img" >/dev/null
for d in smr zns zns-wt; do
	"$ZA_CONFORM" --destructive "$SCRATCH/$d.img" >"$SCRATCH/$d.tap" ||
		{ cat "$SCRATCH/$d.tap"; fail "conformance on $d"; }
	n=$(grep -c '^ok' "$SCRATCH/$d.tap")
	s=$(grep -c '# SKIP' "$SCRATCH/$d.tap" || true)
	pass "$d: $n checks passed ($s skipped)"
done
# The read-only mode changes nothing.
before=$(md5sum <"$SCRATCH/smr.img")
"$ZA_CONFORM" "$SCRATCH/smr.img" >/dev/null
[ "$before" = "$(md5sum <"$SCRATCH/smr.img")" ] || fail "read-only run changed the drive"
pass "non-destructive run leaves the drive untouched"
