# tools/deps.sh - sourced by tools/quickstart, tools/test and tools/vmtest:
# the Debian 12 packages zarray needs, and a function that installs the
# missing ones (and nothing else). Not meant to be run by itself.

# Build: compiler, autotools, libraries, protoc-c, check, clang-format.
ZA_BUILD_PKGS="build-essential autoconf automake libtool pkg-config
libisal-dev liburing-dev libzbd-dev libprotobuf-c-dev protobuf-c-compiler
libev-dev check clang-format python3"
# Tests: zone tools, and the guest for real zoned drives.
# NBD clients (nbdinfo, nbdcopy, nbdfuse), qemu-io, fio with its nbd engine,
# nbdkit (the reference peer), mkfs/fsck; gdb, for the threads of a hung
# test (tests/run-test), and procps for its process listing.
ZA_TEST_PKGS="zbd-utils util-linux python3 libnbd-bin qemu-utils fio nbdkit
e2fsprogs gdb procps"
ZA_VM_PKGS="qemu-system-x86 busybox-static cpio kmod"

za_missing_pkgs() {
	local p missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	echo "$missing"
}

# za_install_pkgs PKG... : install what is missing; fail clearly if we can't.
za_install_pkgs() {
	local missing
	missing=$(za_missing_pkgs "$@")
	[ -z "$missing" ] && return 0
	echo "==> installing:$missing"
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
				sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
			return
		fi
		echo "error: missing packages:$missing; as root run: apt-get install$missing" >&2
		return 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# za_build BUILDDIR [CONFIGURE-ARGS...] : configure (once) and build out of
# the tree, in BUILDDIR, so that several configurations can live side by side.
za_build() {
	local top bdir=$1
	shift
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	(cd "$top" && { [ -x configure ] || ./autogen.sh >/dev/null; }) || return 1
	if [ -f "$top/Makefile" ]; then
		echo "error: $top holds an in-tree build; run 'make distclean' there first" >&2
		return 1
	fi
	mkdir -p "$bdir" || return 1
	(
		cd "$bdir" &&
			{ [ -f Makefile ] && [ "${ZA_RECONFIGURE:-0}" != 1 ] ||
				"$top/configure" -q "$@"; } &&
			make -s -j"$(nproc)"
	)
}
