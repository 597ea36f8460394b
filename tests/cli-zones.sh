#!/bin/bash
# Shows that `zarray zones` reports an emulated drive's geometry and zone
# states correctly, in text and in --json (parsed with python3's json), and
# that `zarray emu create` applies its options.
. "$(dirname "$0")/lib.sh"

"$ZARRAY" emu create --model zns --size 256M --zone-size 16M --zone-cap 12M \
	--max-open 6 --max-active 8 "$SCRATCH/z.img" >"$SCRATCH/create.out"
grep -q "emulated zns drive, 256 MiB in zones of 16 MiB" "$SCRATCH/create.out" ||
	fail "create output: $(cat "$SCRATCH/create.out")"
pass "emu create prints what it made"

"$ZARRAY" zones "$SCRATCH/z.img" >"$SCRATCH/zones.txt"
grep -q "16 zones of 16 MiB (capacity 12 MiB), 0 conventional" "$SCRATCH/zones.txt" ||
	fail "text header: $(head -3 "$SCRATCH/zones.txt")"
grep -q "max open zones 6, max active zones 8, native zone append yes" "$SCRATCH/zones.txt" ||
	fail "limits line: $(sed -n 4p "$SCRATCH/zones.txt")"
[ "$(grep -c ' swr  empty ' "$SCRATCH/zones.txt")" -eq 16 ] || fail "16 empty zones expected"
pass "text report: geometry, limits and 16 empty zones"

"$ZARRAY" --json zones "$SCRATCH/z.img" >"$SCRATCH/zones.json"
python3 - "$SCRATCH/zones.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == "zns", d["model"]
assert d["nr_zones"] == 16 and len(d["zones"]) == 16
assert d["zone_size_bytes"] == 16 << 20 and d["zone_cap_bytes"] == 12 << 20
assert d["max_open_zones"] == 6 and d["max_active_zones"] == 8
assert d["native_append"] is True and d["volatile_cache"] is True
for i, z in enumerate(d["zones"]):
    assert z["index"] == i and z["start_bytes"] == i * (16 << 20)
    assert z["cond"] == "empty" and z["wp_bytes"] == z["start_bytes"]
PY
pass "--json report parses and holds the same facts"

# After the conformance suite has written, filled, finished and reset
# zones, the report must still parse and show only valid conditions.
"$ZA_CONFORM" --destructive "$SCRATCH/z.img" >/dev/null
"$ZARRAY" zones --json "$SCRATCH/z.img" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = {"empty", "imp-open", "exp-open", "closed", "full"}
assert all(z["cond"] in ok for z in d["zones"]), d["zones"]'
pass "report after heavy use parses"

"$ZARRAY" emu create --size 1G "$SCRATCH/smr.img" >/dev/null
"$ZARRAY" zones --json "$SCRATCH/smr.img" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["model"] == "hm-smr" and d["zone_size_bytes"] == 256 << 20
assert d["nr_conv_zones"] == 1 and d["zones"][0]["type"] == "cnv"
assert d["zones"][0]["cond"] == "not-wp" and d["native_append"] is False'
pass "hm-smr defaults: 256 MiB zones, one conventional zone"

# Regression: options after the operand were ignored (the global parser's
# "stop at the first operand" mode leaked into the commands), and -V
# printed "?" for the version.
"$ZARRAY" zones "$SCRATCH/smr.img" --json | python3 -c '
import json, sys
assert json.load(sys.stdin)["model"] == "hm-smr"'
"$ZARRAY" emu create "$SCRATCH/late.img" --size 512M >/dev/null
[ "$("$ZARRAY" zones --json "$SCRATCH/late.img" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity_bytes"])')" = $((512 << 20)) ] ||
	fail "emu create PATH --size: size ignored"
"$ZARRAY" -V | grep '^zarray [0-9]' >/dev/null || fail "-V: $("$ZARRAY" -V)"
pass "options after operands; -V prints the version"
