// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon.c - the array service's frame: start (directories, locks, the
 * socket, the recorded arrays), run and stop; the requests of every
 * connection, one command at a time; the registry of running arrays and
 * their NBD exports.
 *
 * Requests come from rpc.c already decoded and version-checked, and go to
 * their handlers through the command table (daemon-cmd.c). Array calls
 * may run the loop themselves (synchronous superblock I/O), so while one
 * command runs others can arrive: every command the table does not mark
 * immediate (all but ping) is then parked in a FIFO and run, in order,
 * once the current one returns. No handler ever sees an array in the
 * middle of another's change, and the watch ticker skips its turn while
 * a command runs.
 *
 * Every running array's volume is exported over NBD (export.c) on
 * RUNDIR/NAME.nbd, and on TCP when asked; the export stops before its
 * array does (no new commands, those in flight complete), so the array's
 * final flush covers everything a client was told was written.
 *
 * This file answers no command itself (daemon-cmd.c), builds no status
 * message or watch stream (daemon-status.c) and neither reads nor writes
 * the state records (daemon-record.c); a shutdown leaves them as they
 * are, so that the next start assembles the same arrays.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ev.h>

#include "array.h"
#include "container.h"
#include "daemon-int.h"
#include "daemon.h"
#include "export.h"
#include "io.h"
#include "log.h"
#include "rpc.h"

bool za_daemon_name_valid(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n >= ZA_SB_NAME_BYTES || name[0] == '-' || name[0] == '.')
		return false;
	for (i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
		      ch == '-'))
			return false;
	}
	return true;
}

/* Member paths: absolute, printable, short enough for the array layer. */
bool za_daemon_path_valid(const char *path)
{
	size_t i, n = strlen(path);

	if (n < 2 || n >= D_MAX_PATH_BYTES || path[0] != '/')
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return false;
	return true;
}

void za_daemon_fmt_uuid(const struct za_uuid *u, char out[37])
{
	static const char hex[] = "0123456789abcdef";
	int i, o = 0;

	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u->b[i] >> 4];
		out[o++] = hex[u->b[i] & 15];
	}
	out[o] = '\0';
}

/* ---- the registry of running arrays ---- */

struct d_array *za_daemon_find_array(struct za_daemon *d, const char *name)
{
	struct d_array *e;

	for (e = d->arrays; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* Take @name out of the registry (the caller stops or destroys it). */
void za_daemon_unlink_array(struct za_daemon *d, struct d_array *e)
{
	struct d_array **pp;

	for (pp = &d->arrays; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode))
		return a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * The first of @n drives (their stat in @sp; st_mode 0 matches nothing)
 * that is an online or draining member of a running array: its index,
 * with the array in *@arr and the member in *@mem; -1 if none. Each
 * array's status is taken once.
 */
int za_daemon_find_held(struct za_daemon *d, const struct stat *sp, size_t n,
			struct d_array **arr,
			struct za_array_member_status *mem)
{
	struct za_array_status st;
	struct d_array *e;
	struct stat sm;
	unsigned i;
	size_t p;

	for (e = d->arrays; e; e = e->next) {
		memset(&st, 0, sizeof(st));
		if (za_array_status(e->a, &st) < 0) {
			free(st.members);
			continue;
		}
		for (i = 0; i < st.nr_members; i++) {
			const struct za_array_member_status *m = &st.members[i];

			if ((m->state != ZA_MEMBER_ONLINE &&
			     m->state != ZA_MEMBER_DRAINING) ||
			    stat(m->path, &sm))
				continue;
			for (p = 0; p < n; p++) {
				if (!sp[p].st_mode || !same_file(&sp[p], &sm))
					continue;
				*arr = e;
				*mem = *m;
				free(st.members);
				return (int)p;
			}
		}
		free(st.members);
	}
	return -1;
}

void za_daemon_array_free(struct d_array *e)
{
	unsigned i;

	for (i = 0; i < e->nr_paths; i++)
		free(e->paths[i]);
	free(e->paths);
	free(e);
}

/*
 * Track @a, started from @paths, under @name; *@out is NULL (and @a
 * stopped) if that fails. The export is started separately.
 */
void za_daemon_register_array(struct za_daemon *d, struct za_array *a,
			      const char *name, char *const *paths, unsigned n,
			      struct d_array **out)
{
	struct d_array *e = calloc(1, sizeof(*e));
	struct za_array_status st;
	unsigned i;

	if (!e || !(e->paths = calloc(n ? n : 1, sizeof(*e->paths))))
		goto err;
	for (i = 0; i < n; i++) {
		e->paths[i] = strdup(paths[i]);
		if (!e->paths[i])
			goto err;
		e->nr_paths++;
	}
	memset(&st, 0, sizeof(st));
	if (za_array_status(a, &st) == 0)
		za_daemon_fmt_uuid(&st.uuid, e->uuid);
	else
		snprintf(e->uuid, sizeof(e->uuid), "unknown");
	free(st.members);
	e->a = a;
	e->d = d;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->next = d->arrays;
	d->arrays = e;
	za_array_set_scrub_saver(a, za_daemon_record_scrub, e);
	*out = e;
	return;

err:
	/* Cannot track it: do not leave it running unmanaged. */
	za_log_err("%s: out of memory; stopping it", name);
	if (e)
		za_daemon_array_free(e);
	za_array_stop(a);
	*out = NULL;
}

/*
 * Serve @e's volume over NBD on RUNDIR/NAME.nbd, and on TCP @tcp if not
 * NULL (remembered in @e for the state record). Returns 0 or -errno with
 * @err set; the Unix export may be up even when TCP failed.
 */
int za_daemon_export_start(struct za_daemon *d, struct d_array *e,
			   const char *tcp, char *err, size_t errlen)
{
	struct za_volume *vol = za_array_volume(e->a);
	struct za_export_params xp = { 0 };
	char path[D_FILE_BYTES], desc[96];
	struct za_array_status st;
	int ret;

	if (!e->exp) {
		if (!vol) {
			snprintf(err, errlen, "%s has no volume to export",
				 e->name);
			return -ENODEV;
		}
		snprintf(path, sizeof(path), "%s/%s.nbd", d->run_dir, e->name);
		memset(&st, 0, sizeof(st));
		if (za_array_status(e->a, &st) == 0)
			snprintf(desc, sizeof(desc), "zarray %s, %u+%u",
				 e->name, st.k, st.p);
		else
			snprintf(desc, sizeof(desc), "zarray %s", e->name);
		free(st.members);
		xp.name = e->name;
		xp.description = desc;
		xp.unix_path = path;
		xp.unix_mode = 0660;
		xp.rx_thread = d->nbd_rx_thread;
		xp.unix_gid = d->gid;
		ret = za_export_new(d->io, vol, &xp, &e->exp);
		if (ret < 0) {
			snprintf(err, errlen, "cannot serve NBD on %.160s: %s",
				 path, strerror(-ret));
			return ret;
		}
	}
	if (!tcp || !*tcp)
		return 0;
	ret = za_export_listen_tcp(e->exp, tcp);
	if (ret < 0) {
		snprintf(err, errlen, "cannot serve NBD on TCP %s: %s", tcp,
			 ret == -EBUSY ? "already on another TCP address" :
					 strerror(-ret));
		return ret;
	}
	/* The port as bound: a restart asks for the same one. */
	snprintf(e->tcp, sizeof(e->tcp), "%s", za_export_tcp_spec(e->exp));
	return 0;
}

/* Stop the exports of every array in @list: no new commands anywhere. */
static void exports_shutdown(struct d_array *list)
{
	for (; list; list = list->next)
		za_export_shutdown(list->exp);
}

/* The export first (its commands finish), then the array (flush). */
int za_daemon_array_stop(struct d_array *e, bool destroy)
{
	za_export_free(e->exp);
	e->exp = NULL;
	return destroy ? za_array_destroy(e->a) : za_array_stop(e->a);
}

/* ---- requests, one command at a time ---- */

void za_daemon_waiter_free(struct d_waiter *w)
{
	za_rpc_conn_put(w->c);
	za_rpc_request_free(w->req);
	free(w);
}

static void run_request(struct za_daemon *d, struct za_rpc_conn *c,
			Zarray__Request *req)
{
	const struct d_command *cmd = za_daemon_command_find(req->body_case);

	za_rpc_conn_get(c);
	d->busy = true;
	if (cmd) {
		cmd->handler(d, c, req);
	} else {
		/* A newer client's command decodes as no body at all. */
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EOPNOTSUPP,
				   "unknown command (a newer zarray than this "
				   "zarrayd %s?)",
				   PACKAGE_VERSION);
	}
	d->busy = false;
	za_rpc_request_free(req);
	za_rpc_conn_put(c);
}

static void drain_parked(struct za_daemon *d)
{
	while (!d->busy && !d->stopping && d->parked_head) {
		struct d_waiter *w = d->parked_head;
		Zarray__Request *req = w->req;

		d->parked_head = w->next;
		if (!d->parked_head)
			d->parked_tail = NULL;
		w->req = NULL;
		/* The client gave up while it waited: do not act for it. */
		if (za_rpc_conn_alive(w->c))
			run_request(d, w->c, req);
		else
			za_rpc_request_free(req);
		za_daemon_waiter_free(w);
	}
}

static void drain_cb(struct za_io_defer *df)
{
	struct za_daemon *d = container_of(df, struct za_daemon, drain);

	d->drain_queued = false;
	drain_parked(d);
}

static void schedule_drain(struct za_daemon *d)
{
	if (d->drain_queued || !d->parked_head)
		return;
	d->drain_queued = true;
	za_io_defer(d->io, &d->drain);
}

static void on_request(struct za_rpc_conn *c, Zarray__Request *req, void *priv)
{
	const struct d_command *cmd = za_daemon_command_find(req->body_case);
	struct za_daemon *d = priv;
	struct d_waiter *w;

	if (cmd && cmd->immediate) {
		cmd->handler(d, c, req);
		za_rpc_request_free(req);
		return;
	}
	if (za_daemon_status_early(d, c, req)) {
		za_rpc_request_free(req);
		return;
	}
	if (d->stopping) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_BUSY,
				   ESHUTDOWN, "zarrayd is shutting down");
		za_rpc_request_free(req);
		return;
	}
	if (!d->busy && !d->parked_head) {
		run_request(d, c, req);
		schedule_drain(d);
		return;
	}
	/* Another command is running (inside an array call's loop run). */
	w = calloc(1, sizeof(*w));
	if (!w) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "out of memory");
		za_rpc_request_free(req);
		return;
	}
	za_rpc_conn_get(c);
	w->c = c;
	w->id = req->id;
	w->req = req;
	if (d->parked_tail)
		d->parked_tail->next = w;
	else
		d->parked_head = w;
	d->parked_tail = w;
	if (!d->busy)
		schedule_drain(d);
}

static void on_closed(struct za_rpc_conn *c, void *priv)
{
	struct za_daemon *d = priv;
	struct d_waiter **pp = &d->watches;

	/* Watches end now; parked requests are skipped when their turn
	 * comes, shutdown answers simply fail. */
	while (*pp) {
		struct d_waiter *w = *pp;

		if (w->c == c) {
			*pp = w->next;
			za_daemon_waiter_free(w);
			continue;
		}
		pp = &w->next;
	}
	if (!d->watches)
		ev_timer_stop(d->loop, &d->watch_timer);
}

/* ---- lifecycle ---- */

/* mkdir -p; the last component gets @mode. Returns 1 if it was created. */
static int make_dir(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	char *p;
	struct stat st;

	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, mode) < 0)
		return errno == EEXIST ? 0 : -errno;
	/* Not subject to the umask: the mode is the point. */
	if (chmod(path, mode) < 0)
		return -errno;
	return 1;
}

/*
 * flock @path; on contention say who holds it. The holder writes its
 * pid there, so the message names it.
 */
static int take_lock(const char *path, const char *what, int *out)
{
	char buf[32] = "";
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		ret = -errno;
		za_log_err("%s: cannot open the lock file: %s", path,
			   strerror(errno));
		return ret;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (ret == -EADDRINUSE)
			za_log_err("another zarrayd%s%s%s is already using %s; "
				   "not starting",
				   *buf ? " (pid " : "", buf, *buf ? ")" : "",
				   what);
		else
			za_log_err("%s: flock: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		za_log_warn("%s: cannot write our pid: %s", path,
			    strerror(errno));
	*out = fd;
	return 0;
}

int za_daemon_start(struct za_io *io, const struct za_daemon_params *p,
		    struct za_daemon **out)
{
	const char *group = p->group ? p->group : ZA_RPC_DEFAULT_GROUP;
	struct za_rpc_server_params sp = { 0 };
	static const struct za_rpc_server_ops ops = {
		.request = on_request,
		.closed = on_closed,
	};
	gid_t gid = (gid_t)-1;
	char lock[D_FILE_BYTES], sock_dir[PATH_MAX], *slash;
	struct za_daemon *d;
	int ret, lfd;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->io = io;
	d->loop = za_io_loop(io);
	d->sock_lock_fd = d->state_lock_fd = -1;
	d->watch_interval_s = p->watch_interval_s > 0 ? p->watch_interval_s :
							1.0;
	d->nbd_rx_thread = p->nbd_rx_thread;
	if (p->policy)
		d->policy = *p->policy;
	else
		za_array_policy_default(&d->policy);
	d->drain.fn = drain_cb;
	ev_init(&d->watch_timer, za_daemon_watch_tick_cb);
	d->watch_timer.data = d;
	ev_init(&d->save_timer, za_daemon_record_tick_cb);
	d->save_timer.data = d;
	if (snprintf(d->socket_path, sizeof(d->socket_path), "%s",
		     p->socket_path) >= (int)sizeof(d->socket_path) ||
	    snprintf(d->state_dir, sizeof(d->state_dir), "%s", p->state_dir) >=
		    (int)sizeof(d->state_dir) ||
	    snprintf(d->arrays_dir, sizeof(d->arrays_dir), "%s/arrays",
		     p->state_dir) >= (int)sizeof(d->arrays_dir)) {
		za_log_err("path too long");
		ret = -ENAMETOOLONG;
		goto err_free;
	}
	if (za_rpc_group_gid(group, &gid) < 0)
		gid = (gid_t)-1;
	d->gid = gid;
	if (snprintf(d->run_dir, sizeof(d->run_dir), "%s", p->run_dir) >=
	    (int)sizeof(d->run_dir)) {
		za_log_err("path too long");
		ret = -ENAMETOOLONG;
		goto err_free;
	}

	/* The run dir, and the socket's directory if that is elsewhere. */
	ret = make_dir(p->run_dir, 0750);
	if (ret < 0) {
		za_log_err("%s: cannot create the run directory: %s",
			   p->run_dir, strerror(-ret));
		goto err_free;
	}
	if (ret == 1 && gid != (gid_t)-1 && chown(p->run_dir, (uid_t)-1, gid))
		za_log_warn("%s: chgrp %s: %s", p->run_dir, group,
			    strerror(errno));
	snprintf(sock_dir, sizeof(sock_dir), "%s", d->socket_path);
	slash = strrchr(sock_dir, '/');
	if (slash && slash != sock_dir) {
		*slash = '\0';
		ret = make_dir(sock_dir, 0750);
		if (ret < 0) {
			za_log_err("%s: cannot create the socket's directory: "
				   "%s",
				   sock_dir, strerror(-ret));
			goto err_free;
		}
		if (ret == 1 && gid != (gid_t)-1 &&
		    chown(sock_dir, (uid_t)-1, gid))
			za_log_warn("%s: chgrp %s: %s", sock_dir, group,
				    strerror(errno));
	}
	ret = make_dir(d->state_dir, 0750);
	if (ret >= 0)
		ret = make_dir(d->arrays_dir, 0750);
	if (ret < 0) {
		za_log_err("%s: cannot create the state directory: %s",
			   d->arrays_dir, strerror(-ret));
		goto err_free;
	}

	snprintf(lock, sizeof(lock), "%s.lock", d->socket_path);
	ret = take_lock(lock, d->socket_path, &d->sock_lock_fd);
	if (ret < 0)
		goto err_free;
	snprintf(lock, sizeof(lock), "%s/zarrayd.lock", d->state_dir);
	ret = take_lock(lock, d->state_dir, &d->state_lock_fd);
	if (ret < 0)
		goto err_unlock;

	ret = za_rpc_listen(d->socket_path, 0660, gid, &lfd);
	if (ret < 0)
		goto err_unlock;
	d->socket_made = true;
	sp.max_conns = p->max_conns;
	sp.timeout_s = p->conn_timeout_s;
	sp.group = group;
	ret = za_rpc_server_new(io, lfd, &sp, &ops, d, &d->srv);
	if (ret < 0) {
		close(lfd);
		goto err_unlink;
	}
	za_log_info("listening on %s (group %s%s); state in %s", d->socket_path,
		    group, gid == (gid_t)-1 ? ": absent, root only" : "",
		    d->state_dir);

	/* Commands that arrive while arrays assemble wait their turn. */
	d->busy = true;
	za_daemon_assemble_recorded(d);
	d->busy = false;
	schedule_drain(d);
	*out = d;
	return 0;

err_unlink:
	unlink(d->socket_path);
err_unlock:
	if (d->state_lock_fd >= 0)
		close(d->state_lock_fd);
	if (d->sock_lock_fd >= 0)
		close(d->sock_lock_fd);
err_free:
	free(d);
	return ret;
}

void za_daemon_request_stop(struct za_daemon *d, const char *why)
{
	if (!d->stopping)
		za_log_info("stopping: %s", why);
	d->stopping = true;
}

bool za_daemon_stopping(const struct za_daemon *d)
{
	return d->stopping;
}

void za_daemon_run(struct za_daemon *d)
{
	/*
	 * One iteration at a time rather than ev_break(): array calls run
	 * the loop nested inside handlers, and a break must not cut their
	 * runs short. A stop requested in there is seen once they return.
	 */
	while (!d->stopping)
		ev_run(d->loop, EVRUN_ONCE);
}

int za_daemon_free(struct za_daemon *d)
{
	int ret, first = 0;

	if (!d)
		return 0;
	ev_timer_stop(d->loop, &d->watch_timer);
	while (d->watches) {
		struct d_waiter *w = d->watches;

		d->watches = w->next;
		za_rpc_reply_error(w->c, w->id, ZARRAY__ERROR_CODE__ERR_BUSY,
				   ESHUTDOWN, "zarrayd is shutting down");
		za_daemon_waiter_free(w);
	}
	while (d->parked_head) {
		struct d_waiter *w = d->parked_head;

		d->parked_head = w->next;
		za_rpc_reply_error(w->c, w->id, ZARRAY__ERROR_CODE__ERR_BUSY,
				   ESHUTDOWN,
				   "zarrayd is shutting down; not done");
		za_daemon_waiter_free(w);
	}
	d->parked_tail = NULL;
	/* Still busy for whatever arrives while arrays stop: refused. */
	d->busy = true;
	/* No export takes new commands while the first arrays stop. */
	exports_shutdown(d->arrays);
	while (d->arrays) {
		struct d_array *e = d->arrays;

		d->arrays = e->next;
		za_log_info("%s: stopping", e->name);
		ret = za_daemon_array_stop(e, false);
		if (ret < 0) {
			za_log_err("%s: stop: %s", e->name, strerror(-ret));
			if (!first)
				first = ret;
		}
		za_daemon_array_free(e);
	}
	while (d->shutdown_waiters) {
		struct d_waiter *w = d->shutdown_waiters;

		d->shutdown_waiters = w->next;
		if (first)
			za_rpc_reply_error(w->c, w->id,
					   za_rpc_errno_code(first), first,
					   "arrays stopped, but one failed to "
					   "flush: %s",
					   strerror(-first));
		else
			za_daemon_reply_done(w->c, w->id, "zarrayd stopped");
		za_daemon_waiter_free(w);
	}
	if (d->drain_queued) {
		/* The queue is empty; the callback must not run on freed
		 * memory, so give it an empty run now. */
		d->stopping = true;
		while (d->drain_queued)
			ev_run(d->loop, EVRUN_NOWAIT);
	}
	/* Every array stopped: their last scrub states were written. */
	ev_timer_stop(d->loop, &d->save_timer);
	za_rpc_server_free(d->srv);
	if (d->socket_made && unlink(d->socket_path) < 0 && errno != ENOENT)
		za_log_warn("%s: %s", d->socket_path, strerror(errno));
	close(d->state_lock_fd);
	close(d->sock_lock_fd);
	za_log_info("stopped");
	free(d);
	return first;
}
