#!/bin/sh
# tests/vm/guest-conform.sh - default script of tools/vmtest, run as /run.sh
# inside the guest (busybox sh) on Debian's kernel.
#
# For each of /dev/nullb0, /dev/nullb1 (null_blk, host-managed, SMR-like)
# and /dev/nvme0n1 (QEMU NVMe ZNS):
#   1. environment: the device exists and has the zone model and geometry
#      that tools/vmtest asked for (host-managed; null_blk: 2 conventional
#      zones first; ZNS: 64 MiB zones of 60 MiB capacity);
#   2. `zbd report -i DEV` (when zbd is in the image);
#   3. a raw sanity check of the kernel's zoned block layer, independent of
#      zarray: reset the first sequential zone, write 4 KiB at its start with
#      O_DIRECT, see the write pointer move, read the data back, see a write
#      that is not at the write pointer fail, write at the write pointer,
#      finish the zone (full), reset it (empty again);
#   4. `zarray zones DEV` and `za-conform --destructive DEV` when those
#      binaries are in the image (TAP output from za-conform).
# Every check prints a [PASS]/[FAIL]/[SKIP] line; the exit status is 1 if
# any check or command failed, 0 otherwise.

DEVS="/dev/nullb0 /dev/nullb1 /dev/nvme0n1"
MiB=1048576

npass=0
nfail=0
nskip=0
failed=""

pass() {
	echo "[PASS] $*"
	npass=$((npass + 1))
}
fail() {
	echo "[FAIL] $*"
	nfail=$((nfail + 1))
	failed="$failed
  $*"
}
skip() {
	echo "[SKIP] $*"
	nskip=$((nskip + 1))
}
# verdict STATUS PASS-MESSAGE FAIL-MESSAGE
verdict() {
	if [ "$1" -eq 0 ]; then pass "$2"; else fail "$3"; fi
}
have() { command -v "$1" >/dev/null 2>&1; }

# run LABEL CMD...: run a command, its output as it comes, pass if it exits 0.
run() {
	label=$1
	shift
	echo "--- $label: $*"
	"$@"
	rc=$?
	if [ $rc -eq 0 ]; then
		pass "$label"
	else
		fail "$label (exit status $rc)"
	fi
	return $rc
}

# zone_field DEV OFST FIELD: one field of the zone starting at byte OFST,
# from `zbd report -csv` (columns: num, type, ofst, len, cap, wp, cond, ...).
zone_field() {
	zbd report -csv -ofst "$2" -len 4096 "$1" 2>/dev/null |
		awk -F', *' -v f="$3" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			{ v = $col[f]; if (v ~ /^0x/) print v; else print v + 0; exit }'
}

# Check the zone model and geometry tools/vmtest set up.
check_environment() {
	dev=$1
	name=${dev##*/}
	q=/sys/block/$name/queue
	model=$(cat "$q/zoned" 2>/dev/null)
	if [ "$model" = host-managed ]; then
		pass "$dev: zone model host-managed"
	else
		fail "$dev: zone model is '$model', expected host-managed"
		return 1
	fi
	zsz=$(($(cat "$q/chunk_sectors") * 512))
	[ "$zsz" -eq $((64 * MiB)) ]
	verdict $? "$dev: zone size 64 MiB" \
		"$dev: zone size $zsz, expected $((64 * MiB))"
	have zbd || {
		skip "$dev: zone capacity and types (no zbd in the image)"
		return 0
	}
	case $name in
	nullb*)
		t0=$(zone_field "$dev" 0 type)
		t1=$(zone_field "$dev" $zsz type)
		t2=$(zone_field "$dev" $((2 * zsz)) type)
		[ "$t0/$t1/$t2" = 1/1/2 ]
		verdict $? "$dev: zones 0-1 conventional, zone 2 sequential" \
			"$dev: zone types $t0/$t1/$t2, expected 1/1/2 (2 conventional zones)"
		;;
	nvme*)
		cap=$(zone_field "$dev" 0 cap)
		[ "$cap" = $((60 * MiB)) ]
		verdict $? "$dev: zone capacity 60 MiB (below the 64 MiB zone size)" \
			"$dev: zone capacity '$cap', expected $((60 * MiB))"
		ag=$(cat "$q/zone_append_max_bytes" 2>/dev/null)
		[ "${ag:-0}" -gt 0 ]
		verdict $? "$dev: native zone append (zone_append_max_bytes=$ag)" \
			"$dev: no zone append (zone_append_max_bytes='$ag')"
		;;
	esac
	return 0
}

# The raw sanity check on the first sequential zone of DEV.
# zone_op_check OP COND WP DESC: `zbd OP` on the sanity zone ($dev, $start,
# $len from the caller), then the zone must be in COND (and at WP, if given).
zone_op_check() {
	local op=$1 want_cond=$2 want_wp=$3 desc=$4 cond wp
	if ! zbd "$op" -ofst "$start" -len "$len" "$dev"; then
		fail "$desc: zbd $op failed"
		return
	fi
	cond=$(zone_field "$dev" "$start" cond)
	wp=$(zone_field "$dev" "$start" wp)
	[ "$cond" = "$want_cond" ] && { [ -z "$want_wp" ] || [ "$wp" = "$want_wp" ]; }
	verdict $? "$desc" "$desc: got cond=$cond wp=$wp, expected cond=$want_cond${want_wp:+ wp=$want_wp}"
}

sanity_check() {
	dev=$1
	have zbd || {
		skip "$dev: raw zone sanity check (no zbd in the image)"
		return 0
	}
	z=$(zbd report -csv "$dev" 2>/dev/null | awk -F', *' 'NR > 1 && $2 == 2 { print $3 + 0, $4 + 0; exit }')
	if [ -z "$z" ]; then
		fail "$dev: sanity: no sequential zone found"
		return 1
	fi
	# shellcheck disable=SC2086 # two numbers, split on purpose
	set -- $z
	start=$1 len=$2
	lba4k=$((start / 4096))
	tag="$dev: sanity (zone at $((start / MiB)) MiB)"
	echo "--- $tag: reset, write 4 KiB at the start, read back, off-wp write, finish, reset"

	dd if=/dev/urandom of=/tmp/pat bs=4096 count=1 2>/dev/null
	dd if=/dev/urandom of=/tmp/pat2 bs=4096 count=1 2>/dev/null

	if ! zbd reset -ofst "$start" -len "$len" "$dev"; then
		fail "$tag: zbd reset failed"
		return 1
	fi
	wp=$(zone_field "$dev" "$start" wp)
	cond=$(zone_field "$dev" "$start" cond)
	[ "$wp" = "$start" ] && [ "$cond" = 0x1 ]
	verdict $? "$tag: reset -> empty, wp at zone start" \
		"$tag: after reset wp=$wp cond=$cond, expected wp=$start cond=0x1 (empty)"

	if dd if=/tmp/pat of="$dev" bs=4096 count=1 seek=$lba4k oflag=direct 2>/tmp/dd.err; then
		pass "$tag: 4 KiB O_DIRECT write at the write pointer"
	else
		fail "$tag: 4 KiB O_DIRECT write at the write pointer: $(cat /tmp/dd.err)"
	fi
	wp=$(zone_field "$dev" "$start" wp)
	cond=$(zone_field "$dev" "$start" cond)
	[ "$wp" = $((start + 4096)) ] && [ "$cond" = 0x2 ]
	verdict $? "$tag: wp moved by 4096, zone implicitly open" \
		"$tag: after write wp=$wp cond=$cond, expected wp=$((start + 4096)) cond=0x2"

	dd if="$dev" of=/tmp/back bs=4096 count=1 skip=$lba4k iflag=direct 2>/dev/null
	cmp -s /tmp/pat /tmp/back
	verdict $? "$tag: read back what was written" \
		"$tag: data read back differs from data written"

	# The zoned block layer must refuse a write that is not at the wp.
	echo "    (the kernel logs an I/O error for the next write: that is expected)"
	if dd if=/tmp/pat2 of="$dev" bs=4096 count=1 seek=$lba4k oflag=direct 2>/dev/null; then
		fail "$tag: a write at the zone start (behind the wp) succeeded"
	else
		pass "$tag: a write behind the write pointer is refused"
	fi
	dd if="$dev" of=/tmp/back bs=4096 count=1 skip=$lba4k iflag=direct 2>/dev/null
	cmp -s /tmp/pat /tmp/back
	verdict $? "$tag: refused write left the data intact" \
		"$tag: refused write changed the data"
	wp=$(zone_field "$dev" "$start" wp)
	[ "$wp" = $((start + 4096)) ]
	verdict $? "$tag: refused write left the wp in place" \
		"$tag: wp=$wp after a refused write, expected $((start + 4096))"

	if dd if=/tmp/pat2 of="$dev" bs=4096 count=1 seek=$((lba4k + 1)) oflag=direct 2>/tmp/dd.err; then
		wp=$(zone_field "$dev" "$start" wp)
		[ "$wp" = $((start + 8192)) ]
		verdict $? "$tag: second write at the wp, wp moved to +8192" \
			"$tag: after a second write wp=$wp, expected $((start + 8192))"
	else
		fail "$tag: second write at the write pointer: $(cat /tmp/dd.err)"
	fi

	zone_op_check finish 0xe "" "$tag: finish -> full"
	zone_op_check reset 0x1 "$start" "$tag: reset -> empty again"
	rm -f /tmp/pat /tmp/pat2 /tmp/back /tmp/dd.err
}

echo "=== guest-conform: kernel $(uname -r); zbd: $(have zbd && echo yes || echo no);" \
	"zarray: $(have zarray && echo yes || echo no); za-conform: $(have za-conform && echo yes || echo no)"

for dev in $DEVS; do
	echo
	echo "=== $dev"
	if [ ! -b "$dev" ]; then
		fail "$dev: no such block device"
		continue
	fi
	check_environment "$dev" || continue

	if have zbd; then
		run "$dev: zbd report -i" zbd report -i "$dev"
	fi

	sanity_check "$dev"

	if have zarray; then
		run "$dev: zarray zones" zarray zones "$dev"
	else
		skip "$dev: zarray zones (no zarray in the image)"
	fi
	if have za-conform; then
		run "$dev: za-conform --destructive" za-conform --destructive "$dev"
	else
		skip "$dev: za-conform (no za-conform in the image)"
	fi
done

# A drive that vanishes while open: a configfs null_blk device, powered
# off underneath za-conform, must turn every request into an error.
vanish_check() {
	local cfg=/sys/kernel/config/nullb/zavanish dev i b before
	if ! have za-conform; then
		skip "vanishing device (no za-conform in the image)"
		return
	fi
	if ! mkdir "$cfg" 2>/dev/null; then
		fail "vanishing device: cannot create $cfg (configfs?)"
		return
	fi
	before=$(ls /sys/block)
	echo 512 >"$cfg/size" && echo 4096 >"$cfg/blocksize" &&
		echo 1 >"$cfg/memory_backed" && echo 1 >"$cfg/zoned" &&
		echo 64 >"$cfg/zone_size" && echo 1 >"$cfg/power" ||
		{ fail "vanishing device: configfs setup"; rmdir "$cfg"; return; }
	# The disk's name depends on the kernel (nullbN, or the item's name):
	# take whatever appeared.
	dev=""
	i=0
	while [ -z "$dev" ] && [ $i -lt 50 ]; do
		for b in $(ls /sys/block); do
			echo "$before" | grep -qx "$b" || dev=/dev/$b
		done
		[ -n "$dev" ] && [ -b "$dev" ] && break
		dev=""
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$dev" ]; then
		fail "vanishing device: no new block device appeared"
		rmdir "$cfg" 2>/dev/null || :
		return
	fi
	run "$dev: za-conform --vanish" za-conform --vanish "echo 0 > $cfg/power" "$dev"
	rmdir "$cfg" 2>/dev/null || :
}
echo
echo "=== vanishing device"
vanish_check

echo
echo "=== guest-conform: $npass passed, $nfail failed, $nskip skipped"
if [ $nfail -gt 0 ]; then
	echo "failed:$failed"
	exit 1
fi
exit 0
