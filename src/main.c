// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - zarrayd: options, daemonising, signals; the service itself is
 * daemon.h (daemon.c and its daemon-*.c).
 *
 * Without -f it forks and the parent waits until the child has its
 * socket and has assembled the recorded arrays (or has failed, having
 * said why on the shared stderr), so `zarrayd && zarray status` never
 * races. The child then moves its messages to syslog. SIGTERM and SIGINT
 * stop every array cleanly and exit 0; SIGPIPE is ignored (a client that
 * goes away is the socket code's business, not a reason to die).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "array.h"
#include "daemon.h"
#include "io.h"
#include "log.h"
#include "units.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "?"
#endif

enum { EXIT_USAGE = 2 };

/*
 * How long the loop polls after work before it sleeps (za_io_set_poll()).
 * On 2 vCPUs, a loop that polls takes the core from the threads beside
 * it: once kept payloads moved the sequential work to the worker, 300 us
 * cost fio's 1 MiB writes a fifth of their rate, and 0, 20, 50 and 100
 * us did not (random 4 KiB writes: the same within the noise, 50 us
 * ahead of 0 in one of two sets): bench/results/notes.md, P1.
 */
#define ZAD_POLL_US 50u
#define ZAD_POLL_US_MAX 100000u

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: zarrayd [-s SOCKET] [--run-dir DIR] [--state-dir DIR] "
		"[-f] [-v]\n"
		"               [--rebuild auto|manual] [--max-read-errors N]\n"
		"               [--fault-injection]\n"
		"\n"
		"The zarray array service: assembles the arrays recorded in "
		"its state\ndirectory and serves the zarray command over a "
		"Unix socket.\n"
		"\n"
		"  -s, --socket PATH   control socket (default %s)\n"
		"      --run-dir DIR   runtime directory (default %s)\n"
		"      --state-dir DIR state directory (default %s)\n"
		"  -f, --foreground    stay in the foreground, log to stderr\n"
		"  -v, --verbose       debug messages\n"
		"      --rebuild POLICY  auto (default): rebuild lost "
		"redundancy by itself;\n"
		"                      manual: only on zarray rebuild start\n"
		"      --max-read-errors N  fail a member after more than N "
		"read errors\n"
		"                      (default %u, as md; 0: never)\n"
		"      --idle-gc-ms N  collect garbage while a volume is idle, "
		"checked\n"
		"                      every N ms (default %u; 0: only when "
		"space is short)\n"
		"      --map-cache SIZE  keep at most SIZE of each volume's "
		"block map in\n"
		"                      memory (K, M, G, T; default a quarter "
		"of the\n"
		"                      host's memory; 0: no limit)\n"
		"      --poll-us N     poll for N microseconds after work before "
		"sleeping\n"
		"                      (default %u; 0: sleep at once)\n"
		"      --rx-thread     NBD exports: read large writes on a "
		"thread per\n"
		"                      connection, not on the event loop\n"
		"      --fault-injection  testing only: zarray debug inject\n"
		"  -V, --version       print the version\n"
		"  -h, --help          this help\n"
		"\nSee zarrayd(8).\n",
		ZA_DAEMON_SOCKET, ZA_DAEMON_RUN_DIR, ZA_DAEMON_STATE_DIR,
		ZA_ARRAY_MAX_READ_ERRORS, ZA_ARRAY_IDLE_GC_MS, ZAD_POLL_US);
}

/*
 * A decimal count from 0 to @max, digits only: strtoul() alone would take
 * "-1" (as ULONG_MAX), "+5" and " 5".
 */
static bool parse_count(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!*s || s[0] == '-' || s[0] == '+' || s[0] == ' ')
		return false;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return !*end && !errno && *out <= max;
}

/* The daemon changes to / : make every path absolute first. */
static char *absolute(const char *path)
{
	char cwd[PATH_MAX], *out;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s/%s", cwd, path) < 0)
		return NULL;
	return out;
}

/*
 * The watchers exist before the daemon does: a SIGTERM that arrives while
 * the recorded arrays assemble must still stop them cleanly afterwards.
 */
static struct za_daemon *the_daemon;
static const char *stop_signal;

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)revents;
	stop_signal = w->signum == SIGTERM ? "SIGTERM" : "SIGINT";
	if (the_daemon)
		za_daemon_request_stop(the_daemon, stop_signal);
}

/*
 * Fork; the parent waits for one byte on a pipe that the child writes
 * once it serves (or closes by dying). Returns the pipe's write end in
 * the child, or exits in the parent.
 */
static int daemonise(void)
{
	int pfd[2], status;
	char ok;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		perror("zarrayd: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("zarrayd: fork");
		exit(1);
	}
	if (pid > 0) {
		close(pfd[1]);
		if (read(pfd[0], &ok, 1) == 1)
			exit(0);
		/* The child said why on stderr; report how it ended. */
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status))
			exit(WEXITSTATUS(status));
		exit(1);
	}
	close(pfd[0]);
	if (setsid() < 0)
		za_log_warn("setsid: %s", strerror(errno));
	return pfd[1];
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

int main(int argc, char **argv)
{
	enum {
		O_RUN_DIR = 256,
		O_STATE_DIR,
		O_FAULT_INJECTION,
		O_REBUILD,
		O_MAX_READ_ERRORS,
		O_POLL_US,
		O_IDLE_GC_MS,
		O_MAP_CACHE,
		O_RX_THREAD
	};
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "run-dir", required_argument, NULL, O_RUN_DIR },
		{ "state-dir", required_argument, NULL, O_STATE_DIR },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "fault-injection", no_argument, NULL, O_FAULT_INJECTION },
		{ "rebuild", required_argument, NULL, O_REBUILD },
		{ "max-read-errors", required_argument, NULL,
		  O_MAX_READ_ERRORS },
		{ "poll-us", required_argument, NULL, O_POLL_US },
		{ "idle-gc-ms", required_argument, NULL, O_IDLE_GC_MS },
		{ "map-cache", required_argument, NULL, O_MAP_CACHE },
		{ "rx-thread", no_argument, NULL, O_RX_THREAD },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *socket_arg = NULL, *run_arg = ZA_DAEMON_RUN_DIR,
		   *state_arg = ZA_DAEMON_STATE_DIR;
	struct za_daemon_params p = { 0 };
	struct za_array_policy pol;
	char *sock = NULL, *run = NULL, *state = NULL, *def_sock = NULL;
	struct za_daemon *d = NULL;
	ev_signal sigterm, sigint;
	struct ev_loop *loop;
	struct za_io *io;
	bool fg = false, faults = false;
	unsigned long poll_us = ZAD_POLL_US;
	int c, ret, ready_fd = -1, verbose = 0;

	za_log_set_ident("zarrayd");
	argv[0] = (char *)"zarrayd"; /* getopt's messages: "zarrayd: ..." */
	za_array_policy_default(&pol);
	while ((c = getopt_long(argc, argv, "s:fvVh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket_arg = optarg;
			break;
		case O_RUN_DIR:
			run_arg = optarg;
			break;
		case O_STATE_DIR:
			state_arg = optarg;
			break;
		case 'f':
			fg = true;
			break;
		case 'v':
			verbose++;
			break;
		case O_FAULT_INJECTION:
			faults = true;
			break;
		case O_REBUILD:
			if (!strcmp(optarg, "auto")) {
				pol.auto_rebuild = true;
			} else if (!strcmp(optarg, "manual")) {
				pol.auto_rebuild = false;
			} else {
				fprintf(stderr,
					"zarrayd: --rebuild is auto or "
					"manual, not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case O_MAX_READ_ERRORS: {
			unsigned long n;

			if (!parse_count(optarg, 1000000, &n)) {
				fprintf(stderr,
					"zarrayd: --max-read-errors is a "
					"number from 0 to 1000000, not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			pol.max_read_errors = (unsigned)n;
			break;
		}
		case O_POLL_US: {
			if (!parse_count(optarg, ZAD_POLL_US_MAX, &poll_us)) {
				fprintf(stderr,
					"zarrayd: --poll-us is a number of "
					"microseconds from 0 to %u, not '%s'\n",
					ZAD_POLL_US_MAX, optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case O_IDLE_GC_MS: {
			unsigned long n;

			if (!parse_count(optarg, ZA_ARRAY_IDLE_GC_MS_MAX, &n)) {
				fprintf(stderr,
					"zarrayd: --idle-gc-ms is a number of "
					"milliseconds from 0 to %u, not '%s'\n",
					ZA_ARRAY_IDLE_GC_MS_MAX, optarg);
				return EXIT_USAGE;
			}
			pol.idle_gc_ms = (unsigned)n;
			break;
		}
		case O_MAP_CACHE: {
			uint64_t b;

			if (za_parse_size(optarg, &b) < 0) {
				fprintf(stderr,
					"zarrayd: --map-cache is a size "
					"(64M, 2G, 0 for no limit), not "
					"'%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			pol.map_cache_bytes = b;
			break;
		}
		case O_RX_THREAD:
			p.nbd_rx_thread = true;
			break;
		case 'V':
			printf("zarrayd %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zarrayd: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!*run_arg || !*state_arg || (socket_arg && !*socket_arg)) {
		fprintf(stderr, "zarrayd: empty path\n");
		return EXIT_USAGE;
	}
	/* A daemon says what it does; -v adds debug detail. */
	za_log_set_level(verbose ? ZA_LOG_DEBUG : ZA_LOG_INFO);
	if (faults) {
		/* Every array's members are wrapped as they are opened. */
		pol.fault_injection = true;
		za_log_warn("fault injection is on: a testing mode, not for "
			    "arrays that hold data anyone needs");
	}

	run = absolute(run_arg);
	state = absolute(state_arg);
	if (!socket_arg && asprintf(&def_sock, "%s/zarrayd.sock", run_arg) < 0)
		def_sock = NULL;
	sock = absolute(socket_arg ? socket_arg : def_sock ? def_sock : "");
	free(def_sock);
	if (!run || !state || !sock) {
		fprintf(stderr, "zarrayd: cannot resolve paths: %s\n",
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!fg)
		ready_fd = daemonise();

	/* The default loop: the only one that may own signal watchers. */
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop) {
		za_log_err("cannot create the event loop");
		return 1;
	}
	ret = za_io_new(loop, &io);
	if (ret < 0) {
		za_log_err("cannot create the I/O context: %s", strerror(-ret));
		return 1;
	}
	za_io_set_poll(io, (uint64_t)poll_us * 1000);
	ev_signal_init(&sigterm, signal_cb, SIGTERM);
	ev_signal_start(loop, &sigterm);
	ev_signal_init(&sigint, signal_cb, SIGINT);
	ev_signal_start(loop, &sigint);
	p.socket_path = sock;
	p.run_dir = run;
	p.state_dir = state;
	p.policy = &pol;
	ret = za_daemon_start(io, &p, &d);
	if (ret < 0) {
		za_io_free(io);
		return 1; /* said why */
	}
	the_daemon = d;
	if (stop_signal)
		za_daemon_request_stop(d, stop_signal);
	za_log_info("zarrayd %s ready (pid %d)", PACKAGE_VERSION,
		    (int)getpid());
	if (!fg) {
		if (chdir("/") < 0)
			za_log_warn("chdir /: %s", strerror(errno));
		za_log_open_syslog();
		detach_stdio();
		if (write(ready_fd, "", 1) != 1)
			za_log_warn("cannot tell the parent we are ready");
		close(ready_fd);
	}

	za_daemon_run(d);

	ev_signal_stop(loop, &sigterm);
	ev_signal_stop(loop, &sigint);
	ret = za_daemon_free(d);
	za_io_free(io);
	free(sock);
	free(run);
	free(state);
	return ret < 0 ? 1 : 0;
}
