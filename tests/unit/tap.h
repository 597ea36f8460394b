/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tap.h - run a check suite with TAP output on stdout, for automake's
 * tap-driver; the exit status says whether anything failed.
 */
#ifndef ZA_TEST_TAP_H
#define ZA_TEST_TAP_H

#include <check.h>
#include <stdlib.h>

static inline int trun(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_set_tap(sr, "-");
	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* ZA_TEST_TAP_H */
