#!/bin/bash
# Shows that every C source and header in the tree is formatted as the
# committed .clang-format says (kernel style, tabs): make check fails on an
# unformatted file. Generated protobuf sources are not ours and are skipped.
set -euo pipefail
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format || true)}
if [ -z "$CLANG_FORMAT" ]; then
	echo "SKIP: clang-format not installed"
	exit 77
fi
cd "$top_srcdir"
bad=0
while IFS= read -r f; do
	if ! "$CLANG_FORMAT" --dry-run -Werror --style=file "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run: clang-format -i $f)"
		bad=1
	fi
done < <(find src cli tests tools bench fuzz -name '*.[ch]' ! -name '*.pb-c.*' 2>/dev/null | sort)
[ "$bad" -eq 0 ] && echo "all C sources formatted"
exit $bad
