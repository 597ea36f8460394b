/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * units.c - parsing sizes (units.h). Moved here from the CLI so that
 * zarrayd's --map-cache takes the same spellings as zarray's --size.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "units.h"

int za_parse_size(const char *s, uint64_t *out)
{
	uint64_t ip = 0, frac = 0, fdiv = 1, mult = 1, v;
	const char *p = s;
	int shift = 0;

	if (!s || !*s)
		return -EINVAL;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(ip, 10, &ip) ||
		    __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
			return -ERANGE;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (fdiv >= 1000000000ull)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
			fdiv *= 10;
		}
	}
	switch (*p) {
	case '\0':
		break;
	case 'b':
	case 'B':
		p++;
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case 'p':
	case 'P':
		shift = 50;
		break;
	default:
		return -EINVAL;
	}
	if (shift) {
		p++;
		if (!strcmp(p, "iB") || !strcmp(p, "B") || !strcmp(p, "ib"))
			p += strlen(p);
	}
	if (*p)
		return -EINVAL;
	mult = 1ull << shift;
	if (__builtin_mul_overflow(ip, mult, &v))
		return -ERANGE;
	if (frac) {
		/* The fraction must come out to whole bytes. */
		unsigned __int128 f = (unsigned __int128)frac * mult;

		if (f % fdiv)
			return -EINVAL;
		if (__builtin_add_overflow(v, (uint64_t)(f / fdiv), &v))
			return -ERANGE;
	}
	*out = v;
	return 0;
}
