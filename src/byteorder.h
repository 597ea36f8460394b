/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * byteorder.h - little-endian loads and stores for on-disk structures.
 * Every on-disk integer in zarray is little-endian (docs/format.md); these
 * helpers make that explicit and do not assume alignment.
 */
#ifndef ZA_BYTEORDER_H
#define ZA_BYTEORDER_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Are the @len bytes at @p all zero (reserved fields, unused tails)? */
static inline bool za_all_zero(const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len--)
		if (*b++)
			return false;
	return true;
}

static inline uint64_t za_get_le64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline uint32_t za_get_le32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint16_t za_get_le16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline void za_put_le64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline void za_put_le32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void za_put_le16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

#endif /* ZA_BYTEORDER_H */
