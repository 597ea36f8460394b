/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * units.h - sizes as admins type them ("64M", "1.5G"), for the CLI and
 * zarrayd's options alike. Pure; no allocation.
 */
#ifndef ZA_UNITS_H
#define ZA_UNITS_H

#include <stdint.h>

/*
 * Parse a size: digits with an optional binary suffix K, M, G, T, P
 * (also KiB/KB/k...; all powers of 1024) or B. Rejects empty strings,
 * garbage, fractions that do not land on a byte, and overflow: 0 or
 * -EINVAL/-ERANGE, *out untouched then.
 */
int za_parse_size(const char *s, uint64_t *out);

#endif /* ZA_UNITS_H */
