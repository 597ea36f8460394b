#!/bin/bash
# Shows that the man pages render without a single warning (man
# --warnings and groff -ww, either of which is enough; skipped only when
# neither is installed), and that zarray(8) documents, and gives an
# example of, every command `zarray --help` lists, every action of
# rebuild, scrub and gc, and emu create and powercut.
. "$(dirname "$0")/lib.sh"

pages=("$top_srcdir/man/zarray.8" "$top_srcdir/man/zarrayd.8")
linted=0
for p in "${pages[@]}"; do
	[ -f "$p" ] || fail "$p missing"
	if command -v man >/dev/null 2>&1; then
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=all -l "$p" >/dev/null 2>"$SCRATCH/warn" ||
			fail "man -l $p: exit $?: $(cat "$SCRATCH/warn")"
		[ ! -s "$SCRATCH/warn" ] || fail "man warnings in $p: $(cat "$SCRATCH/warn")"
		linted=1
	fi
	if command -v groff >/dev/null 2>&1; then
		groff -man -ww -z "$p" 2>"$SCRATCH/warn" || fail "groff $p: exit $?"
		[ ! -s "$SCRATCH/warn" ] || fail "groff warnings in $p: $(cat "$SCRATCH/warn")"
		linted=1
	fi
done
if [ "$linted" -eq 0 ]; then
	echo "SKIP: neither man nor groff installed"
	exit 77
fi
pass "zarray.8 and zarrayd.8 render without warnings"

man8="$top_srcdir/man/zarray.8"
examples=$(sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$man8")
cmds=$("$ZARRAY" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
[ -n "$cmds" ] || fail "no commands in zarray --help"
for c in $cmds; do
	grep -q "^\.B $c\( \|$\)" "$man8" || fail "zarray.8 does not describe '$c'"
	grep -q "^zarray \(.*\)\?$c\( \|$\)" <<<"$examples" || fail "zarray.8 has no example of '$c'"
done
pass "every command of zarray --help is described and has an example: $(echo $cmds)"

# The actions of rebuild, scrub and gc, and emu's subcommands, one example each.
for a in "rebuild [^ ]* start" "rebuild [^ ]* pause" "rebuild [^ ]* resume" \
	"rebuild [^ ]* status" "scrub [^ ]* start" "scrub [^ ]* stop" \
	"scrub [^ ]* status" "scrub [^ ]* pause" "scrub [^ ]* resume" "gc [^ ]* pause" "gc [^ ]* resume" \
	"gc [^ ]* status" "gc [^ ]* rate" "emu create" "emu powercut" "status .*--test" \
	"status .*--json" "destroy .*--force"; do
	grep -q "^zarray \(.* \)\?$a\( \|$\)" <<<"${examples//\\-/-}" ||
		fail "zarray.8 has no example of 'zarray $a'"
done
pass "and of every rebuild, scrub and gc action, emu create and powercut, status --test and --json, destroy --force"
