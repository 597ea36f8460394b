#!/bin/bash
# Shows that a filesystem lives on an array's NBD export: zarrayd serves a
# 4+2 array of 8 emulated drives; nbdfuse turns the export into a file
# (the kernel here has no NBD client), a loop device into a block device;
# mkfs.ext4 (which discards the whole device first: TRIM), mount, copy a
# generated tree of 3000 files (about 150 MB, sizes 0 to 4 MiB, nested
# directories, symlinks, an empty directory), umount, fsck.ext4 -fn finds
# it clean, a second mount and diff -r find the copy identical; then the
# same after zarrayd was stopped with SIGTERM and started again (the
# array assembled from the state directory). Everything mounted or
# attached is undone on exit, failure included.
# Needs root, /dev/fuse, nbdfuse and losetup; skips (77) otherwise.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/daemon-lib.sh"
[ "$(id -u)" -eq 0 ] || {
	echo "SKIP: needs root (mount, losetup)"
	exit 77
}
[ -c /dev/fuse ] || {
	echo "SKIP: no /dev/fuse"
	exit 77
}
need nbdfuse
need losetup
need mkfs.ext4
need fsck.ext4
need python3

MNT="$SCRATCH/nbd"     # nbdfuse's mount point: holds the file "disk"
FS="$SCRATCH/fs"       # where the ext4 filesystem is mounted
SRC="$SCRATCH/src"     # the tree copied in
FUSE_PID=""
LOOP=""
T=120 # seconds any one step may take before the test calls it a stall

fs_cleanup() {
	if mountpoint -q "$FS" 2>/dev/null; then
		umount "$FS" 2>/dev/null || umount -l "$FS" 2>/dev/null || true
	fi
	if [ -n "$LOOP" ]; then
		losetup -d "$LOOP" 2>/dev/null || true
		LOOP=""
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then
		umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	if [ -n "$FUSE_PID" ]; then
		kill "$FUSE_PID" 2>/dev/null || true
		wait "$FUSE_PID" 2>/dev/null || true
		FUSE_PID=""
	fi
}
cleanup_all() {
	local rc=$?
	fs_cleanup
	(exit "$rc")
	daemon_cleanup
}
trap cleanup_all EXIT

# attach: nbdfuse on the export's socket, then a loop device on its file.
attach() {
	local i
	nbdfuse "$MNT/disk" --unix "$RUN/t.nbd" >>"$SCRATCH/nbdfuse.log" 2>&1 &
	FUSE_PID=$!
	for i in $(seq 200); do
		[ -e "$MNT/disk" ] && break
		kill -0 "$FUSE_PID" 2>/dev/null ||
			fail "nbdfuse exited: $(cat "$SCRATCH/nbdfuse.log")"
		sleep 0.05
	done
	[ -e "$MNT/disk" ] || fail "nbdfuse: no $MNT/disk after 10 s"
	LOOP=$(losetup -f --show "$MNT/disk") || fail "losetup -f --show $MNT/disk"
}

# detach: the loop device, then nbdfuse (which must exit by itself).
detach() {
	local i
	losetup -d "$LOOP" || fail "losetup -d $LOOP"
	LOOP=""
	umount "$MNT" || fail "umount $MNT (nbdfuse)"
	for i in $(seq 100); do
		kill -0 "$FUSE_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$FUSE_PID" 2>/dev/null && fail "nbdfuse still running after its unmount"
	wait "$FUSE_PID" || fail "nbdfuse exited $?: $(cat "$SCRATCH/nbdfuse.log")"
	FUSE_PID=""
}

# check_fs: fsck clean, then mounted again, identical to the source.
check_fs() {
	local rc=0
	timeout "$T" fsck.ext4 -fn "$LOOP" >"$SCRATCH/fsck.out" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "fsck.ext4 -fn: exit $rc: $(tail -n 20 "$SCRATCH/fsck.out")"
	mount -o ro "$LOOP" "$FS" || fail "mount $LOOP again"
	timeout "$T" diff -r --no-dereference "$SRC" "$FS/tree" >"$SCRATCH/diff.out" 2>&1 ||
		fail "diff -r: $(head -n 20 "$SCRATCH/diff.out")"
	umount "$FS" || fail "umount $FS"
}

mkdir -p "$MNT" "$FS"
cd "$SCRATCH"
# A tree of 3000 files: mostly small, some up to 4 MiB, nested
# four deep, with symlinks and an empty directory.
python3 - "$SRC" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(20240611)
dirs = [root]
os.makedirs(root)
for i in range(120):
    d = os.path.join(rnd.choice(dirs), "d%03d" % i)
    if d.count(os.sep) - root.count(os.sep) <= 4:
        os.makedirs(d)
        dirs.append(d)
total = 0
for i in range(3000):
    n = rnd.choice([0, 1, 100, 4095, 4096, 4097, 9000]) if i % 3 else \
        int(rnd.expovariate(1 / 65536))
    if i % 100 == 7:
        n = rnd.randrange(1 << 20, 4 << 20)
    n = min(n, 4 << 20)
    with open(os.path.join(rnd.choice(dirs), "f%04d" % i), "wb") as f:
        f.write(rnd.randbytes(n))
    total += n
for i in range(20):
    os.symlink("../f%04d" % i, os.path.join(rnd.choice(dirs), "l%02d" % i))
os.makedirs(os.path.join(root, "empty"))
print("# source tree: %d dirs, 3000 files, %d bytes" % (len(dirs), total))
EOF

"$ZARRAY" emu create --size 256M --zone-size 16M d{0..7}.img >/dev/null
start_daemon
"$ZARRAY" create t --data 4 --parity 2 d*.img >/dev/null 2>create.err ||
	fail "create: $(cat create.err)"
[ -S "$RUN/t.nbd" ] || fail "no NBD socket at $RUN/t.nbd"

attach
timeout "$T" mkfs.ext4 -q -F "$LOOP" >mkfs.out 2>&1 || fail "mkfs.ext4: $(cat mkfs.out)"
mount "$LOOP" "$FS" || fail "mount $LOOP"
timeout "$T" cp -a "$SRC" "$FS/tree" || fail "cp -a into the filesystem"
umount "$FS" || fail "umount $FS"
pass "nbdfuse + $LOOP: mkfs.ext4, mount, copied $(find "$SRC" | wc -l) entries, umount"
check_fs
pass "fsck.ext4 -fn clean; mounted again, diff -r identical"
detach

stop_daemon TERM
[ "$DAEMON_RC" -eq 0 ] || fail "zarrayd exited $DAEMON_RC on SIGTERM"
start_daemon
for _ in $(seq 100); do
	[ -S "$RUN/t.nbd" ] && break
	sleep 0.05
done
attach
check_fs
detach
pass "after a zarrayd restart: fsck clean, diff -r identical; all detached"
