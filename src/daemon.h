/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h - the array service behind zarrayd: its control socket, the
 * commands it answers (one handler per protocol message, each calling
 * array.h), the registry of running arrays with their NBD exports
 * (export.h, on RUNDIR/NAME.nbd), and the state directory that says
 * which arrays to assemble and export when it starts.
 *
 * It runs on the libev loop of a struct za_io and never blocks it except
 * inside array calls, which may run the loop themselves (superblock I/O):
 * while one command runs, the others wait in a FIFO, so a handler never
 * sees an array another handler is changing. It does not parse the
 * command line, fork or handle signals: main.c does.
 */
#ifndef ZA_DAEMON_H
#define ZA_DAEMON_H

#include <stdbool.h>

struct za_io;
struct za_daemon;
struct za_array_policy;

#define ZA_DAEMON_SOCKET "/run/zarray/zarrayd.sock"
#define ZA_DAEMON_RUN_DIR "/run/zarray"
#define ZA_DAEMON_STATE_DIR "/var/lib/zarray"

struct za_daemon_params {
	const char *socket_path; /* absolute */
	const char *run_dir; /* created 0750 if missing */
	const char *state_dir; /* created 0750 if missing */
	const char *group; /* NULL: "zarray" (may not exist) */
	unsigned max_conns; /* 0: the rpc default */
	double conn_timeout_s; /* 0: the rpc default */
	double watch_interval_s; /* 0: 1 s */
	/* Exports read large writes on a thread per connection
	 * (za_nbd_params.rx_thread). */
	bool nbd_rx_thread;
	/* What every array it creates or assembles does by itself; NULL:
	 * za_array_policy_default(). */
	const struct za_array_policy *policy;
};

/*
 * Take the locks (one per socket, one per state directory: a second
 * daemon on either refuses to start), create the directories and the
 * socket, then assemble every array recorded in the state directory
 * (failures are logged; the daemon starts anyway). Returns 0 or -errno
 * after logging one clear line: -EADDRINUSE when another zarrayd holds
 * the socket or the state directory.
 */
int za_daemon_start(struct za_io *io, const struct za_daemon_params *p,
		    struct za_daemon **out);
/* Serve until za_daemon_request_stop() or a shutdown command. */
void za_daemon_run(struct za_daemon *d);
/* Ask the loop to end (signal handlers, tests); @why is logged. */
void za_daemon_request_stop(struct za_daemon *d, const char *why);
bool za_daemon_stopping(const struct za_daemon *d);
/*
 * Stop every NBD export (commands in flight finish), then every array
 * (flush, superblocks), answer those who asked for the shutdown, close
 * every connection, remove the sockets and free @d.
 * Returns 0, or the first error of za_array_stop().
 */
int za_daemon_free(struct za_daemon *d);

/* Array names: 1-63 characters of [A-Za-z0-9_.-], not starting with '-'
 * or '.'. */
bool za_daemon_name_valid(const char *name);

#endif /* ZA_DAEMON_H */
