// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * crash.c - named crash points (crash.h): the list of names, the parsing
 * of ZA_CRASH_POINT, and the exit itself.
 *
 * State is three statics read on the loop thread: whether the environment
 * was read, the armed name (empty: none) and how many more times it may
 * be reached. The exit is _exit(), not abort() or raise(SIGKILL): no core
 * file, no handler, and a status (ZA_CRASH_EXIT) that tells a test the
 * process died where it was asked to rather than of some other fault. It
 * does not decide where points go: the code paths do, one call each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"
#include "log.h"

static const char *const names[] = {
	"journal-append", "stripe-complete", "gc-move",	     "zone-reset",
	"sb-write",	  "checkpoint",	     "rebuild-step",
};

static bool env_read;
static char armed[32]; /* "": nothing armed */
static unsigned long left; /* reaches before the one that dies */
static unsigned long hits;

bool za_crash_known(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

int za_crash_arm(const char *spec)
{
	const char *colon;
	unsigned long n = 1;
	size_t len;

	env_read = true;
	armed[0] = '\0';
	hits = 0;
	if (!spec || !*spec)
		return 0;
	colon = strchr(spec, ':');
	len = colon ? (size_t)(colon - spec) : strlen(spec);
	if (colon) {
		char *end;

		errno = 0;
		n = strtoul(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || n == 0 ||
		    colon[1] == '-' || colon[1] == '+') {
			za_log_err("%s=%s: the count must be a number >= 1; "
				   "nothing armed",
				   ZA_CRASH_ENV, spec);
			return -EINVAL;
		}
	}
	if (len >= sizeof(armed)) {
		za_log_err("%s=%s: unknown crash point; nothing armed",
			   ZA_CRASH_ENV, spec);
		return -EINVAL;
	}
	memcpy(armed, spec, len);
	armed[len] = '\0';
	if (!za_crash_known(armed)) {
		za_log_err("%s=%s: unknown crash point; nothing armed",
			   ZA_CRASH_ENV, spec);
		armed[0] = '\0';
		return -EINVAL;
	}
	left = n - 1;
	za_log_warn("crash point %s armed: the process dies the %lu%s time "
		    "it is reached",
		    armed, n,
		    n % 10 == 1 && n % 100 != 11 ? "st" :
		    n % 10 == 2 && n % 100 != 12 ? "nd" :
		    n % 10 == 3 && n % 100 != 13 ? "rd" :
						   "th");
	return 0;
}

void za_crash_point(const char *name)
{
	if (!env_read)
		za_crash_arm(getenv(ZA_CRASH_ENV));
	if (!armed[0] || strcmp(armed, name))
		return;
	hits++;
	if (left) {
		left--;
		return;
	}
	za_log_err("crash point %s reached (time %lu): exiting now, as if "
		   "killed",
		   name, hits);
	_exit(ZA_CRASH_EXIT);
}
