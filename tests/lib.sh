# Shared by the integration tests: where the binaries are, a scratch
# directory removed on exit, and small assertion helpers. Sourced, not run.
set -euo pipefail
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
ZARRAY="$top_builddir/cli/zarray"
ZA_CONFORM="$top_builddir/tests/za-conform"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/za-test.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not installed"; exit 77; }; }

# expect_fail CODE DESC CMD... : CMD must exit with CODE and say something
# on stderr (a clear error), and must not crash (no signal exit).
expect_fail() {
	local want=$1 desc=$2 rc=0
	shift 2
	"$@" >"$SCRATCH/out" 2>"$SCRATCH/err" || rc=$?
	[ "$rc" -eq "$want" ] || fail "$desc: exit $rc, want $want ($(cat "$SCRATCH/err"))"
	[ -s "$SCRATCH/err" ] || fail "$desc: no error message"
	pass "$desc: exit $rc: $(head -n1 "$SCRATCH/err")"
}
