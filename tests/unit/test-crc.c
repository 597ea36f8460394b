// SPDX-License-Identifier: GPL-2.0-or-later
/* test-crc.c - CRC32C against its published check value and chaining. */
#include <check.h>

#include "tap.h"
#include <stdlib.h>
#include <string.h>

#include "crc.h"

START_TEST(test_check_value)
{
	ck_assert_uint_eq(za_crc32c("123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(za_crc32c("", 0), 0);
}
END_TEST

START_TEST(test_chaining)
{
	unsigned char buf[1000];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 31 + 7);
	for (i = 0; i <= sizeof(buf); i += 37)
		ck_assert_uint_eq(za_crc32c_update(za_crc32c(buf, i), buf + i,
						   sizeof(buf) - i),
				  za_crc32c(buf, sizeof(buf)));
}
END_TEST

START_TEST(test_detects_flips)
{
	unsigned char buf[4096] = { 0 };
	uint32_t c0 = za_crc32c(buf, sizeof(buf));
	size_t bit;

	for (bit = 0; bit < sizeof(buf) * 8; bit += 61) {
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		ck_assert_uint_ne(za_crc32c(buf, sizeof(buf)), c0);
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("crc");
	TCase *tc = tcase_create("crc32c");

	tcase_add_test(tc, test_check_value);
	tcase_add_test(tc, test_chaining);
	tcase_add_test(tc, test_detects_flips);
	suite_add_tcase(s, tc);
	return trun(s);
}
