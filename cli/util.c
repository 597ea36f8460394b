// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * util.c - parsing and printing helpers shared by the CLI's commands.
 * Strict by design: a size or number that does not parse exactly is an
 * error, never a guess, because a typo in --size must not format a drive
 * with the wrong geometry.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int za_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
			return -ERANGE;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

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

void za_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void za_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zarray %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'zarray %s --help'.\n", cmd);
}
