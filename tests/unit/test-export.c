// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-export.c - the export's TCP address parser, za_export_parse_tcp(),
 * over a table of specs an admin or a client could give ("--tcp" on the
 * CLI, a create or export request on the control socket, the daemon's
 * state record): what is accepted, what host and port come out, and that
 * a host longer than its buffer is refused, not copied (a stack overflow
 * the state record's fuzz target found).
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "export.h"

static const struct {
	const char *spec;
	int ret;
	const char *host, *port; /* when accepted */
} specs[] = {
	{ "10809", 0, ZA_EXPORT_DEFAULT_HOST, "10809" },
	{ "0", 0, ZA_EXPORT_DEFAULT_HOST, "0" },
	{ "127.0.0.1:10809", 0, "127.0.0.1", "10809" },
	{ "nbd.example.org:65535", 0, "nbd.example.org", "65535" },
	{ "[::1]:10809", 0, "::1", "10809" },
	{ "[fe80::1]:1", 0, "fe80::1", "1" },
	{ "", -EINVAL, NULL, NULL },
	{ ":10809", -EINVAL, NULL, NULL },
	{ "host:", -EINVAL, NULL, NULL },
	{ "65536", -EINVAL, NULL, NULL },
	{ "123456", -EINVAL, NULL, NULL },
	{ "::1:10809", -EINVAL, NULL, NULL },
	{ "[::1]", -EINVAL, NULL, NULL },
	{ "[]:1", -EINVAL, NULL, NULL },
	{ "[::g]:1", -EINVAL, NULL, NULL },
	{ "ho st:1", -EINVAL, NULL, NULL },
	{ "host:1x", -EINVAL, NULL, NULL },
};

START_TEST(test_parse_tcp_table)
{
	char host[ZA_EXPORT_HOST_BYTES], port[8];
	int ret;

	ret = za_export_parse_tcp(specs[_i].spec, host, port);
	ck_assert_msg(ret == specs[_i].ret, "'%s': %d, want %d", specs[_i].spec,
		      ret, specs[_i].ret);
	if (ret)
		return;
	ck_assert_str_eq(host, specs[_i].host);
	ck_assert_str_eq(port, specs[_i].port);
}
END_TEST

/* Hosts of every length up to the spec's limit, plain and in brackets:
 * those that fit are accepted whole, the others refused. */
START_TEST(test_parse_tcp_long_host)
{
	char spec[ZA_EXPORT_TCP_SPEC_BYTES + 8];
	/* A guard on each side: a copy past host[] changes it. */
	struct {
		char before[16];
		char host[ZA_EXPORT_HOST_BYTES];
		char after[16];
	} b;
	char port[8];
	size_t len, i;
	int ret;

	for (len = 1; len + 8 < sizeof(spec); len++) {
		bool v6 = _i;

		memset(&b, 0x5a, sizeof(b));
		if (v6) {
			spec[0] = '[';
			memset(spec + 1, 'a', len);
			snprintf(spec + 1 + len, sizeof(spec) - 1 - len, "]:1");
		} else {
			memset(spec, 'a', len);
			snprintf(spec + len, sizeof(spec) - len, ":1");
		}
		ret = za_export_parse_tcp(spec, b.host, port);
		if (strlen(spec) >= ZA_EXPORT_TCP_SPEC_BYTES ||
		    len >= ZA_EXPORT_HOST_BYTES)
			ck_assert_int_eq(ret, -EINVAL);
		else
			ck_assert_msg(ret == 0 && strlen(b.host) == len,
				      "host of %zu: %d", len, ret);
		for (i = 0; i < sizeof(b.before); i++)
			ck_assert_int_eq(b.before[i], 0x5a);
		for (i = 0; i < sizeof(b.after); i++)
			ck_assert_int_eq(b.after[i], 0x5a);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("parse-tcp");

	tcase_add_loop_test(tc, test_parse_tcp_table, 0,
			    sizeof(specs) / sizeof(specs[0]));
	tcase_add_loop_test(tc, test_parse_tcp_long_host, 0, 2);
	suite_add_tcase(s, tc);
	return trun(s);
}
