/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crc.h - CRC32C (Castagnoli) for every checksum zarray writes to a drive,
 * computed with ISA-L. Check value: za_crc32c("123456789", 9) == 0xe3069283.
 */
#ifndef ZA_CRC_H
#define ZA_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t za_crc32c(const void *buf, size_t len);
/* Continue a CRC: za_crc32c_update(za_crc32c(a), b) == za_crc32c(a + b). */
uint32_t za_crc32c_update(uint32_t crc, const void *buf, size_t len);
/*
 * The CRC32C of @len bytes at @buf with the 4 bytes at @field_off taken
 * as zero: the checksum a block carries inside itself (stripe headers,
 * checkpoint and engine table blocks).
 */
uint32_t za_crc32c_zeroed(const void *buf, size_t len, size_t field_off);

#endif /* ZA_CRC_H */
