/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon-int.h - the array service's own state, shared by its files and
 * by nothing else: struct za_daemon's body, a running array's registry
 * entry (struct d_array), a connection that waits (struct d_waiter), a
 * command's entry in the table (struct d_command), and what one file of
 * the daemon calls in another. daemon.h is the service's interface; only
 * src/daemon*.c include this header. The files: daemon.c (start, stop,
 * requests in order, the registry), daemon-cmd.c (the commands),
 * daemon-status.c (status and watch), daemon-record.c (the state
 * directory).
 */
#ifndef ZA_DAEMON_INT_H
#define ZA_DAEMON_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <ev.h>

#include "array.h"
#include "daemon.h"
#include "export.h"
#include "io.h"
#include "rpc.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "?"
#endif

#define D_MAX_PATH_BYTES 256 /* struct za_array_member_status.path */
#define D_MAX_MEMBERS 1024 /* ZA_SB_MAX_MEMBERS */
#define D_RECORD_LINE_BYTES 4096
/* A file under one of our directories: the directory + a name. */
#define D_FILE_BYTES (PATH_MAX + 384)

struct d_array {
	struct d_array *next;
	struct za_daemon *d;
	struct za_array *a;
	struct za_export *exp; /* NULL: not exported (logged why) */
	char name[ZA_SB_NAME_BYTES];
	/* What the state record says: kept to rewrite it. */
	char uuid[37];
	char **paths;
	unsigned nr_paths;
	char tcp[ZA_EXPORT_TCP_SPEC_BYTES]; /* "[HOST:]PORT", "": none */
	/* The scrub's state as last told (za_array_set_scrub_saver). */
	struct za_array_scrub_save scrub;
	bool scrub_dirty; /* told, not written yet (at most 1 s late) */
	ev_tstamp scrub_written; /* when the record was last written */
	/* Job settings an admin gave, kept across restarts (0: no limit). */
	bool gc_paused;
	uint64_t gc_rate_bps;
	uint64_t rebuild_rate_bps;
};

/* A connection waiting for something: a watch, a parked request, or the
 * answer to a shutdown. Holds a reference on the connection. */
struct d_waiter {
	struct d_waiter *next;
	struct za_rpc_conn *c;
	uint64_t id;
	Zarray__Request *req; /* parked requests only */
	char name[ZA_SB_NAME_BYTES]; /* watches only */
};

struct za_daemon {
	struct za_io *io;
	struct za_array_policy policy; /* for every array (za_daemon_params) */
	struct ev_loop *loop;
	char socket_path[PATH_MAX];
	char run_dir[PATH_MAX];
	char state_dir[PATH_MAX];
	char arrays_dir[PATH_MAX];
	int sock_lock_fd, state_lock_fd;
	gid_t gid; /* the zarray group; (gid_t)-1 if absent */
	bool socket_made;
	struct za_rpc_server *srv;
	struct d_array *arrays;
	struct d_waiter *watches;
	struct d_waiter *parked_head, *parked_tail;
	struct d_waiter *shutdown_waiters;
	ev_timer watch_timer;
	double watch_interval_s;
	bool nbd_rx_thread;
	ev_timer save_timer; /* records with a scrub position to write */
	struct za_io_defer drain;
	bool drain_queued;
	bool busy; /* a command (or the start-up assembly) is running */
	bool stopping;
	/*
	 * The array being assembled (name[0] != 0), and where its assembly
	 * is: status requests are answered from it meanwhile instead of
	 * waiting (za_daemon_assemble(), za_daemon_status_early()).
	 */
	struct {
		char name[ZA_SB_NAME_BYTES];
		struct za_progress prog;
	} assembling;
};

/*
 * The commands, by the body of the request. A command marked immediate is
 * answered as soon as it arrives, even while another command runs or the
 * daemon stops: never parked, never refused. Only ping is: it says the
 * daemon is alive, and must not wait behind a create that takes minutes.
 */
/* za_array_assemble() with status answered meanwhile (daemon-cmd.c). */
int za_daemon_assemble(struct za_daemon *d, const char *name,
		       const char *const *paths, unsigned n,
		       struct za_array **a, char *err, size_t errlen);
/*
 * Answer a status request at once while an array assembles; false if
 * none does or the request is not a status request (daemon-cmd.c).
 */
bool za_daemon_status_early(struct za_daemon *d, struct za_rpc_conn *c,
			    const Zarray__Request *req);

struct d_command {
	Zarray__Request__BodyCase body_case;
	const char *name; /* as the CLI says it: what a reader looks for */
	void (*handler)(struct za_daemon *d, struct za_rpc_conn *c,
			const Zarray__Request *req);
	bool immediate;
};

struct stat;

/* ---- daemon.c: names, paths, the registry, connections ---- */

/* Member paths: absolute, printable, short enough for the array layer. */
bool za_daemon_path_valid(const char *path);
/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
void za_daemon_fmt_uuid(const struct za_uuid *u, char out[37]);
struct d_array *za_daemon_find_array(struct za_daemon *d, const char *name);
/*
 * Track @a, started from @paths, under @name; *@out is NULL (and @a
 * stopped) if that fails. The export is started separately.
 */
void za_daemon_register_array(struct za_daemon *d, struct za_array *a,
			      const char *name, char *const *paths, unsigned n,
			      struct d_array **out);
/*
 * Serve @e's volume over NBD on RUNDIR/NAME.nbd, and on TCP @tcp if not
 * NULL. Returns 0 or -errno with @err set.
 */
int za_daemon_export_start(struct za_daemon *d, struct d_array *e,
			   const char *tcp, char *err, size_t errlen);
/*
 * The first of @n drives (their stat in @sp) that is an online or
 * draining member of a running array: its index, with the array and the
 * member; -1 if none.
 */
int za_daemon_find_held(struct za_daemon *d, const struct stat *sp, size_t n,
			struct d_array **arr,
			struct za_array_member_status *mem);
/* Take @e out of the registry (the caller stops or destroys it). */
void za_daemon_unlink_array(struct za_daemon *d, struct d_array *e);
void za_daemon_array_free(struct d_array *e);
/* The export first (its commands finish), then the array (flush). */
int za_daemon_array_stop(struct d_array *e, bool destroy);
/* Drop @w's reference on its connection, its parked request, @w. */
void za_daemon_waiter_free(struct d_waiter *w);

/* ---- daemon-record.c: the state directory ---- */

/* One array's record, STATE/arrays/NAME.conf, as read back. */
struct d_record {
	char name[ZA_SB_NAME_BYTES];
	char *paths[D_MAX_MEMBERS];
	unsigned nr_paths;
	char tcp[ZA_EXPORT_TCP_SPEC_BYTES]; /* "": Unix socket only */
	struct za_array_scrub_save scrub; /* zero: no scrub line */
	bool gc_paused; /* "gc paused RATE" */
	uint64_t gc_rate_bps; /* 0: no limit */
	uint64_t rebuild_rate_bps; /* "rebuild-rate RATE"; 0: no limit */
};

/*
 * Parse a record from @f, the contents of the file named @file ("NAME.conf";
 * @path for messages). Checked like anything read from outside: bounded
 * lines, a valid name that is the file's, absolute member paths, at most
 * D_MAX_MEMBERS; malformed settings lines are logged and ignored. Returns
 * 0 (free @r with za_daemon_record_free()), -EBADMSG or -ENOMEM (nothing
 * to free).
 */
int za_daemon_record_parse(FILE *f, const char *path, const char *file,
			   struct d_record *r);
void za_daemon_record_free(struct d_record *r);

/* Write @e's record (logged on failure). Returns 0 or -errno. */
int za_daemon_record_write(struct za_daemon *d, const struct d_array *e);
void za_daemon_record_remove(struct za_daemon *d, const char *name);
/* za_array_set_scrub_saver()'s callback; @priv is the struct d_array. */
void za_daemon_record_scrub(void *priv, const struct za_array_scrub_save *s);
/* d->save_timer: writes the records whose scrub position is due. */
void za_daemon_record_tick_cb(struct ev_loop *loop, ev_timer *t, int revents);
/* At start: assemble and export every recorded array (failures logged). */
void za_daemon_assemble_recorded(struct za_daemon *d);

/* ---- daemon-status.c: status messages and watch streams ---- */

/* za_array_status() into a message; NULL on failure (logged). */
Zarray__ArrayStatus *za_daemon_status_of(struct d_array *e);
void za_daemon_array_msg_free(Zarray__ArrayStatus *m);
/* Answer @id with @e's jobs, only those of @kind unless it is 0. */
void za_daemon_reply_jobs(struct za_daemon *d, struct za_rpc_conn *c,
			  uint64_t id, struct d_array *e,
			  enum za_job_kind kind);
/*
 * Send @w the current state of its array. Returns true when that was the
 * final response (no job left running or paused, or the array is gone).
 */
bool za_daemon_watch_push(struct za_daemon *d, struct d_waiter *w);
/* d->watch_timer: pushes every watch its array's state. */
void za_daemon_watch_tick_cb(struct ev_loop *loop, ev_timer *t, int revents);
/* End the watches of @name with an error (the array is going away). */
void za_daemon_watches_end(struct za_daemon *d, const char *name,
			   const char *why);

/* ---- daemon-cmd.c: the commands ---- */

/* NULL: a body this daemon does not know (none, or a newer client's). */
const struct d_command *
za_daemon_command_find(Zarray__Request__BodyCase body_case);
/* Answer @id with Done and @msg. */
void za_daemon_reply_done(struct za_rpc_conn *c, uint64_t id, const char *msg);

#endif /* ZA_DAEMON_INT_H */
