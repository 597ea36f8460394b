#!/bin/bash
# Shows that bad input gets a clear error, a stable exit code and no crash:
# unknown commands and options, bad sizes, impossible geometries, existing
# files, non-zoned files and devices, truncated and corrupted drive files.
. "$(dirname "$0")/lib.sh"

expect_fail 2 "no command" "$ZARRAY"
expect_fail 2 "unknown command" "$ZARRAY" frobnicate
expect_fail 2 "zones without a device" "$ZARRAY" zones
expect_fail 2 "emu without a subcommand" "$ZARRAY" emu
expect_fail 2 "emu create without a path" "$ZARRAY" emu create
expect_fail 2 "bad model" "$ZARRAY" emu create --model ssd "$SCRATCH/x"
expect_fail 2 "bad size" "$ZARRAY" emu create --size 12Q "$SCRATCH/x"
expect_fail 2 "size with garbage" "$ZARRAY" emu create --size 1G2 "$SCRATCH/x"
expect_fail 2 "fractional bytes" "$ZARRAY" emu create --size 1.3B "$SCRATCH/x"
expect_fail 2 "size overflow" "$ZARRAY" emu create --size 99999999999P "$SCRATCH/x"
expect_fail 2 "zone capacity above zone size" \
	"$ZARRAY" emu create --model zns --zone-size 64M --zone-cap 65M "$SCRATCH/x"
expect_fail 2 "zone size not a multiple of 4 KiB" \
	"$ZARRAY" emu create --zone-size 100000 "$SCRATCH/x"
expect_fail 2 "drive smaller than a zone" \
	"$ZARRAY" emu create --size 1M --zone-size 64M "$SCRATCH/x"
expect_fail 2 "only conventional zones" \
	"$ZARRAY" emu create --size 256M --zone-size 64M --conv-zones 4 "$SCRATCH/x"
expect_fail 2 "max open above max active" \
	"$ZARRAY" emu create --model zns --max-open 20 --max-active 10 "$SCRATCH/x"
[ ! -e "$SCRATCH/x" ] || fail "a refused create left a file behind"
pass "refused creates leave no file"

"$ZARRAY" emu create --size 1G "$SCRATCH/d.img" >/dev/null
cp "$SCRATCH/d.img" "$SCRATCH/d.orig"
expect_fail 1 "create over an existing drive" "$ZARRAY" emu create "$SCRATCH/d.img"
cmp -s "$SCRATCH/d.img" "$SCRATCH/d.orig" || fail "refused create changed the file"
pass "existing drive untouched without --force"

echo "just some text" >"$SCRATCH/plain"
expect_fail 1 "zones of a plain file" "$ZARRAY" zones "$SCRATCH/plain"
grep -q "not an emulated zoned drive" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
expect_fail 1 "zones of a character device" "$ZARRAY" zones /dev/null
expect_fail 1 "zones of a missing path" "$ZARRAY" zones "$SCRATCH/nope"

# A non-zoned block device, if this machine can make a loop device.
if command -v losetup >/dev/null && [ "$(id -u)" = 0 ] &&
	truncate -s 64M "$SCRATCH/loop.img" &&
	loopdev=$(losetup -f --show "$SCRATCH/loop.img" 2>/dev/null); then
	expect_fail 1 "zones of a non-zoned block device" "$ZARRAY" zones "$loopdev"
	grep -q "not a zoned block device" "$SCRATCH/err" ||
		{ losetup -d "$loopdev"; fail "message: $(cat "$SCRATCH/err")"; }
	losetup -d "$loopdev"
else
	echo "# no loop device here: non-zoned block device case not run"
fi

cp "$SCRATCH/d.orig" "$SCRATCH/trunc.img"
truncate -s 100M "$SCRATCH/trunc.img"
expect_fail 1 "truncated drive file" "$ZARRAY" zones "$SCRATCH/trunc.img"
grep -q "truncated" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
cp "$SCRATCH/d.orig" "$SCRATCH/short.img"
truncate -s 2000 "$SCRATCH/short.img"
expect_fail 1 "drive file cut inside its header" "$ZARRAY" zones "$SCRATCH/short.img"
cp "$SCRATCH/d.orig" "$SCRATCH/bad.img"
printf '\x55' | dd of="$SCRATCH/bad.img" bs=1 seek=40 conv=notrunc status=none
expect_fail 1 "corrupted header" "$ZARRAY" zones "$SCRATCH/bad.img"
grep -q "checksum" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
cp "$SCRATCH/d.orig" "$SCRATCH/badz.img"
printf '\x01' | dd of="$SCRATCH/badz.img" bs=1 seek=$((4096 + 32 * 2 + 3)) conv=notrunc status=none
expect_fail 1 "corrupted zone table" "$ZARRAY" zones "$SCRATCH/badz.img"
grep -q "zone 2" "$SCRATCH/err" || fail "message: $(cat "$SCRATCH/err")"
# Random garbage over the whole header area, many times: never a crash.
for i in $(seq 1 40); do
	cp "$SCRATCH/d.orig" "$SCRATCH/fz.img"
	head -c $((RANDOM % 8192 + 1)) /dev/urandom |
		dd of="$SCRATCH/fz.img" bs=1 seek=$((RANDOM % 5000)) conv=notrunc status=none
	rc=0
	"$ZARRAY" zones "$SCRATCH/fz.img" >/dev/null 2>&1 || rc=$?
	[ "$rc" -le 1 ] || fail "garbage header run $i: exit $rc (crash?)"
done
pass "40 randomly damaged drive files: clean errors or valid reports, no crash"
