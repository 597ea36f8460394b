// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-crash.c - named crash points: the list of names, arming specs
 * (good and bad), and that an armed point kills the process the Nth time
 * it is reached, with ZA_CRASH_EXIT, and not before (each in a child
 * process). Arming through the environment is covered by
 * tests/crash-points.sh, which arms zarrayd that way.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash.h"
#include "log.h"

static void quiet(enum za_log_level l, const char *msg)
{
	(void)l;
	(void)msg;
}

START_TEST(test_known)
{
	static const char *const names[] = {
		"journal-append", "stripe-complete", "gc-move",
		"zone-reset",	  "sb-write",	     "checkpoint",
		"rebuild-step",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(za_crash_known(names[i]), "%s", names[i]);
	ck_assert(!za_crash_known("gc"));
	ck_assert(!za_crash_known("gc-move "));
	ck_assert(!za_crash_known(""));
}
END_TEST

static const char *const bad_specs[] = {
	"nosuch",
	"gc-move:0",
	"gc-move:",
	"gc-move:x",
	"gc-move:-1",
	"gc-move:+1",
	"gc-move:1x",
	"gc-move:1:2",
	":1",
	"GC-MOVE",
	"gc-move:99999999999999999999999",
	"a-name-far-too-long-for-any-crash-point:1",
};

START_TEST(test_bad_spec)
{
	const char *spec = bad_specs[_i];
	int i;

	za_log_set_sink(quiet);
	ck_assert_int_eq(za_crash_arm("gc-move"), 0);
	ck_assert_msg(za_crash_arm(spec) == -EINVAL, "%s", spec);
	/* Nothing stays armed: reaching any point returns. */
	for (i = 0; i < 3; i++) {
		za_crash_point("gc-move");
		za_crash_point("journal-append");
	}
	za_log_set_sink(NULL);
}
END_TEST

START_TEST(test_disarm)
{
	int i;

	za_log_set_sink(quiet);
	ck_assert_int_eq(za_crash_arm("sb-write:2"), 0);
	ck_assert_int_eq(za_crash_arm(""), 0);
	for (i = 0; i < 5; i++)
		za_crash_point("sb-write");
	ck_assert_int_eq(za_crash_arm("sb-write"), 0);
	ck_assert_int_eq(za_crash_arm(NULL), 0);
	for (i = 0; i < 5; i++)
		za_crash_point("sb-write");
	za_log_set_sink(NULL);
}
END_TEST

static const struct {
	const char *spec, *name;
	int n; /* the call that must die */
} arm_cases[] = {
	{ "journal-append", "journal-append", 1 },
	{ "stripe-complete:1", "stripe-complete", 1 },
	{ "gc-move:2", "gc-move", 2 },
	{ "zone-reset:7", "zone-reset", 7 },
	{ "sb-write:3", "sb-write", 3 },
	{ "rebuild-step:5", "rebuild-step", 5 },
};

/*
 * In a child: arm, reach other points (which must not count), then reach
 * the armed one up to 10 times, writing one byte to the pipe each time
 * it returns. The parent counts the bytes and checks how it died.
 */
START_TEST(test_dies_nth)
{
	int pfd[2], status, got = 0;
	char buf[16];
	ssize_t r;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int i;

		close(pfd[0]);
		za_log_set_sink(quiet);
		if (za_crash_arm(arm_cases[_i].spec))
			_exit(1);
		for (i = 0; i < 20; i++) {
			za_crash_point(strcmp(arm_cases[_i].name, "gc-move") ?
					       "gc-move" :
					       "zone-reset");
			za_crash_point("checkpoint");
		}
		for (i = 0; i < 10; i++) {
			za_crash_point(arm_cases[_i].name);
			if (write(pfd[1], "x", 1) != 1)
				_exit(2);
		}
		_exit(0);
	}
	close(pfd[1]);
	while ((r = read(pfd[0], buf, sizeof(buf))) > 0)
		got += (int)r;
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), ZA_CRASH_EXIT);
	ck_assert_int_eq(got, arm_cases[_i].n - 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("crash");
	TCase *tc = tcase_create("crash");

	tcase_add_test(tc, test_known);
	tcase_add_loop_test(tc, test_bad_spec, 0,
			    sizeof(bad_specs) / sizeof(bad_specs[0]));
	tcase_add_test(tc, test_disarm);
	tcase_add_loop_test(tc, test_dies_nth, 0,
			    sizeof(arm_cases) / sizeof(arm_cases[0]));
	suite_add_tcase(s, tc);
	return trun(s);
}
