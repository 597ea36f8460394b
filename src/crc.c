// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * crc.c - CRC32C through ISA-L's crc32_iscsi(), whose argument order
 * (buffer, length, seed) and pre/post inversion conventions differ from
 * most CRC APIs: it neither inverts the seed nor the result, so we do both.
 */
#include <assert.h>
#include <isa-l.h>

#include "crc.h"

uint32_t za_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	/* crc32_iscsi takes an int length: feed huge buffers in pieces. */
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	while (len) {
		size_t n = len > (1u << 30) ? (1u << 30) : len;

		c = crc32_iscsi((unsigned char *)p, (int)n, c);
		p += n;
		len -= n;
	}
	return ~c;
}

uint32_t za_crc32c(const void *buf, size_t len)
{
	return za_crc32c_update(0, buf, len);
}

uint32_t za_crc32c_zeroed(const void *buf, size_t len, size_t field_off)
{
	static const uint8_t zero[4];
	const uint8_t *b = buf;
	uint32_t c;

	assert(field_off + 4 <= len);
	c = za_crc32c(b, field_off);
	c = za_crc32c_update(c, zero, sizeof(zero));
	return za_crc32c_update(c, b + field_off + 4, len - field_off - 4);
}
