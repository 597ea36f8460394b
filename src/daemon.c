// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon.c - the array service: control socket, command handlers, the
 * registry of running arrays, the state directory, watch streams.
 *
 * Requests come from rpc.c already decoded and version-checked; each
 * handler validates what it was sent (names, paths, enum values: nothing
 * from a socket is trusted), calls array.h and answers with the array
 * layer's one-line message and an ErrorCode mapped from its -errno.
 *
 * Array calls may run the loop themselves (synchronous superblock I/O),
 * so while one command runs others can arrive: every command but ping is
 * then parked in a FIFO and run, in order, once the current one returns.
 * No handler ever sees an array in the middle of another's change, and
 * the watch ticker skips its turn while a command runs.
 *
 * Every running array's volume is exported over NBD (export.c) on
 * RUNDIR/NAME.nbd, and on TCP when asked; the export stops before its
 * array does (no new commands, those in flight complete), so the array's
 * final flush covers everything a client was told was written.
 *
 * State: STATE/arrays/NAME.conf records each array this daemon created or
 * assembled (name, uuid, member paths, TCP address, where its scrub got
 * to; written to a temporary file, fsynced, renamed), so that the next
 * start assembles and exports it again and goes on with a scrub that was
 * running. `stop` and `destroy` remove the record; a shutdown (SIGTERM,
 * `zarray shutdown`) keeps it.
 *
 * Drive lifecycle (add, remove, replace), rebuild and scrub commands go
 * to array.c, which starts the background jobs; their progress reaches
 * `status` and `watch` through the array's job list.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#include "container.h"
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
#include "daemon-int.h"
#include "daemon.h"
#include "export.h"
#include "io.h"
#include "log.h"
#include "nbd.h"
#include "rpc.h"
#include "volume.h"

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

struct d_array *za_daemon_find_array(struct za_daemon *d, const char *name)
{
	struct d_array *e;

	for (e = d->arrays; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* Take @name out of the registry (the caller stops or destroys it). */
static void unlink_array(struct za_daemon *d, struct d_array *e)
{
	struct d_array **pp;

	for (pp = &d->arrays; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

static const char *peer_str(struct za_rpc_conn *c, char *buf, size_t len)
{
	const struct za_rpc_peer *p = za_rpc_conn_peer(c);

	snprintf(buf, len, "uid %u pid %d", (unsigned)p->uid, (int)p->pid);
	return buf;
}

/* ---- replies ---- */

static void reply_done(struct za_rpc_conn *c, uint64_t id, const char *msg)
{
	Zarray__Response r;
	Zarray__Done done;

	zarray__response__init(&r);
	zarray__done__init(&done);
	done.message = (char *)msg;
	r.id = id;
	r.body_case = ZARRAY__RESPONSE__BODY_DONE;
	r.done = &done;
	za_rpc_reply(c, &r);
}

/* An array-layer failure: its line if it gave one, else strerror. */
static void reply_array_err(struct za_rpc_conn *c, uint64_t id, int ret,
			    const char *what, const char *err)
{
	za_rpc_reply_error(c, id, za_rpc_errno_code(ret), ret, "%s",
			   err && *err ? err : what);
}

static void reply_not_found(struct za_rpc_conn *c, uint64_t id,
			    const char *name)
{
	za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_NOT_FOUND, ENOENT,
			   "no array named '%s' is running", name);
}

/* Check the name a request carries; answers and returns false if bad. */
static bool check_name(struct za_rpc_conn *c, uint64_t id, const char *name)
{
	if (za_daemon_name_valid(name))
		return true;
	za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_INVALID, EINVAL,
			   "invalid array name '%.80s': use 1 to 63 of "
			   "A-Z a-z 0-9 _ . -, not starting with - or .",
			   name);
	return false;
}

static bool check_paths(struct za_rpc_conn *c, uint64_t id, char *const *paths,
			size_t n, size_t min)
{
	size_t i, j;

	if (n < min) {
		za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL, "no devices given");
		return false;
	}
	if (n > D_MAX_MEMBERS) {
		za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL, "%zu devices: at most %u", n,
				   D_MAX_MEMBERS);
		return false;
	}
	for (i = 0; i < n; i++) {
		if (!za_daemon_path_valid(paths[i])) {
			za_rpc_reply_error(
				c, id, ZARRAY__ERROR_CODE__ERR_INVALID, EINVAL,
				"device path '%.80s' is not an absolute path "
				"of fewer than %u printable characters",
				paths[i], D_MAX_PATH_BYTES);
			return false;
		}
	}
	/* Quadratic, but n <= 1024 and this runs once per command. */
	for (i = 0; i < n; i++) {
		for (j = i + 1; j < n; j++) {
			if (!strcmp(paths[i], paths[j])) {
				za_rpc_reply_error(
					c, id, ZARRAY__ERROR_CODE__ERR_INVALID,
					EINVAL, "%s is given twice", paths[i]);
				return false;
			}
		}
	}
	return true;
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

/*
 * A running array keeps its members' drives open and locked: to the array
 * layer a drive given again is only "in use by another process". Say
 * whose it is instead. Answers and returns false if one of @paths is an
 * online or draining member of a running array. A failed or removed
 * member's path is left to the array layer (a new drive may be there
 * now), as is a path that does not stat.
 */
static bool check_not_held(struct za_daemon *d, struct za_rpc_conn *c,
			   uint64_t id, char *const *paths, size_t n)
{
	struct za_array_member_status m;
	struct d_array *e = NULL;
	struct stat *sp;
	size_t p;
	int held;

	sp = calloc(n ? n : 1, sizeof(*sp));
	if (!sp)
		return true; /* the array layer still refuses, less clearly */
	for (p = 0; p < n; p++)
		if (stat(paths[p], &sp[p]))
			sp[p].st_mode = 0; /* matches nothing */
	held = za_daemon_find_held(d, sp, n, &e, &m);
	if (held >= 0)
		za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_BUSY, EBUSY,
				   "%s is in use: member %u (%s) of the "
				   "running array '%s'",
				   paths[held], m.idx,
				   za_member_state_str(m.state), e->name);
	free(sp);
	return held < 0;
}

static void d_array_free(struct d_array *e)
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
		d_array_free(e);
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
static int array_stop(struct d_array *e, bool destroy)
{
	za_export_free(e->exp);
	e->exp = NULL;
	return destroy ? za_array_destroy(e->a) : za_array_stop(e->a);
}

void za_daemon_waiter_free(struct d_waiter *w)
{
	za_rpc_conn_put(w->c);
	za_rpc_request_free(w->req);
	free(w);
}

/* ---- handlers ---- */

static void h_ping(struct za_daemon *d, struct za_rpc_conn *c,
		   const Zarray__Request *req)
{
	Zarray__Response r;
	Zarray__Pong pong;

	(void)d;
	zarray__response__init(&r);
	zarray__pong__init(&pong);
	pong.daemon_version = (char *)PACKAGE_VERSION;
	pong.has_protocol_version = true;
	pong.protocol_version = ZA_RPC_VERSION;
	r.id = req->id;
	r.body_case = ZARRAY__RESPONSE__BODY_PONG;
	r.pong = &pong;
	za_rpc_reply(c, &r);
}

static void h_create(struct za_daemon *d, struct za_rpc_conn *c,
		     const Zarray__Request *req)
{
	const Zarray__Create *m = req->create;
	struct za_array_create_params p;
	struct za_array *a = NULL;
	struct d_array *e;
	Zarray__Response r;
	Zarray__Created created;
	char err[256] = "", xerr[256] = "", peer[64];
	char host[ZA_EXPORT_HOST_BYTES], port[8];
	int ret;

	if (!check_name(c, req->id, m->name) ||
	    !check_paths(c, req->id, m->paths, m->n_paths, 1))
		return;
	if (m->k < 1 || m->p < 1 || m->k + m->p > 255) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "geometry %u+%u: data and parity must be at "
				   "least 1 and add up to at most 255",
				   m->k, m->p);
		return;
	}
	if (m->n_paths < (size_t)m->k + m->p) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "too few devices: %u+%u needs at least %u, "
				   "%zu given",
				   m->k, m->p, m->k + m->p, m->n_paths);
		return;
	}
	/* 0 means "the default" to the array layer: a 0 given is an error. */
	if (m->has_chunk_bytes && !m->chunk_bytes) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "--chunk 0: the chunk size must be a power "
				   "of two from 4 KiB to 1 MiB");
		return;
	}
	if (m->has_size_bytes && !m->size_bytes) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "--size 0: the volume size must be a "
				   "multiple of 4 KiB above 0 (without --size: "
				   "what the devices hold)");
		return;
	}
	if (m->tcp && za_export_parse_tcp(m->tcp, host, port) < 0) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "bad TCP address '%.80s': want [HOST:]PORT",
				   m->tcp);
		return;
	}
	if (za_daemon_find_array(d, m->name)) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_EXISTS,
				   EEXIST, "an array named '%s' is running",
				   m->name);
		return;
	}
	if (!check_not_held(d, c, req->id, m->paths, m->n_paths))
		return;
	za_log_info("%s: create %u+%u on %zu devices%s%s%s (%s)", m->name, m->k,
		    m->p, m->n_paths,
		    m->has_force && m->force ? ", forced" : "",
		    m->tcp ? ", TCP " : "", m->tcp ? m->tcp : "",
		    peer_str(c, peer, sizeof(peer)));
	memset(&p, 0, sizeof(p));
	p.name = m->name;
	p.k = m->k;
	p.p = m->p;
	p.chunk_bytes = m->has_chunk_bytes ? m->chunk_bytes : 0;
	p.size_bytes = m->has_size_bytes ? m->size_bytes : 0;
	p.paths = (const char *const *)m->paths;
	p.nr_paths = (unsigned)m->n_paths;
	p.force = m->has_force && m->force;
	ret = za_array_create(d->io, &p, &a, err, sizeof(err));
	if (ret < 0) {
		za_log_warn("%s: create failed: %s", m->name,
			    *err ? err : strerror(-ret));
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	za_daemon_register_array(d, a, m->name, m->paths, (unsigned)m->n_paths,
				 &e);
	if (!e) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "%s: out of memory", m->name);
		return;
	}
	/* The array exists now whatever the export does: say both. */
	if (za_daemon_export_start(d, e, m->tcp, xerr, sizeof(xerr)) < 0)
		za_log_err("%s: created, but not exported: %s", m->name, xerr);
	za_daemon_record_write(d, e);
	zarray__response__init(&r);
	zarray__created__init(&created);
	created.name = m->name;
	created.uuid = e->uuid;
	if (*xerr)
		created.export_error = xerr;
	else if (m->tcp)
		created.export_uri = (char *)za_export_tcp_uri(e->exp);
	else
		created.export_uri = (char *)za_export_uri(e->exp);
	r.id = req->id;
	r.body_case = ZARRAY__RESPONSE__BODY_CREATED;
	r.created = &created;
	za_rpc_reply(c, &r);
}

static void reply_arrays(struct za_rpc_conn *c, uint64_t id,
			 Zarray__ArrayStatus **arr, size_t n)
{
	Zarray__Response r;
	Zarray__ArrayList list;

	zarray__response__init(&r);
	zarray__array_list__init(&list);
	list.n_arrays = n;
	list.arrays = arr;
	r.id = id;
	r.body_case = ZARRAY__RESPONSE__BODY_ARRAYS;
	r.arrays = &list;
	za_rpc_reply(c, &r);
}

static void h_assemble(struct za_daemon *d, struct za_rpc_conn *c,
		       const Zarray__Request *req)
{
	const Zarray__Assemble *m = req->assemble;
	Zarray__ArrayStatus *st;
	struct za_array *a = NULL;
	struct d_array *e;
	char err[256] = "", peer[64];
	int ret;

	if (!check_name(c, req->id, m->name) ||
	    !check_paths(c, req->id, m->paths, m->n_paths, 1))
		return;
	if (za_daemon_find_array(d, m->name)) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_EXISTS,
				   EEXIST, "array '%s' is already running",
				   m->name);
		return;
	}
	if (!check_not_held(d, c, req->id, m->paths, m->n_paths))
		return;
	za_log_info("%s: assemble from %zu devices (%s)", m->name, m->n_paths,
		    peer_str(c, peer, sizeof(peer)));
	ret = za_array_assemble(d->io, m->name, (const char *const *)m->paths,
				(unsigned)m->n_paths, &a, err, sizeof(err));
	if (ret < 0) {
		za_log_warn("%s: assemble failed: %s", m->name,
			    *err ? err : strerror(-ret));
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	za_daemon_register_array(d, a, m->name, m->paths, (unsigned)m->n_paths,
				 &e);
	if (!e) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "%s: out of memory", m->name);
		return;
	}
	/* Not exported shows as no URI in the status it is answered. */
	if (za_daemon_export_start(d, e, NULL, err, sizeof(err)) < 0)
		za_log_err("%s: assembled, but not exported: %s", m->name, err);
	za_daemon_record_write(d, e);
	st = za_daemon_status_of(e);
	if (!st) {
		reply_done(c, req->id, "assembled");
		return;
	}
	reply_arrays(c, req->id, &st, 1);
	za_daemon_array_msg_free(st);
}

static void h_stop(struct za_daemon *d, struct za_rpc_conn *c,
		   const Zarray__Request *req)
{
	const char *name = req->stop->name;
	struct d_array *e;
	char peer[64];
	int ret;

	if (!check_name(c, req->id, name))
		return;
	e = za_daemon_find_array(d, name);
	if (!e) {
		reply_not_found(c, req->id, name);
		return;
	}
	za_log_info("%s: stop (%s)", name, peer_str(c, peer, sizeof(peer)));
	unlink_array(d, e);
	/* Its record goes: nothing more to save in it. */
	za_array_set_scrub_saver(e->a, NULL, NULL);
	za_daemon_watches_end(d, name, "was stopped");
	ret = array_stop(e, false);
	d_array_free(e);
	za_daemon_record_remove(d, name);
	if (ret < 0) {
		za_log_err("%s: stop: %s", name, strerror(-ret));
		za_rpc_reply_error(c, req->id, za_rpc_errno_code(ret), ret,
				   "%s: stopped, but flushing failed: %s", name,
				   strerror(-ret));
		return;
	}
	reply_done(c, req->id, "stopped");
}

static void h_destroy(struct za_daemon *d, struct za_rpc_conn *c,
		      const Zarray__Request *req)
{
	const Zarray__Destroy *m = req->destroy;
	bool force = m->has_force && m->force;
	struct za_array_status st;
	struct d_array *e;
	char peer[64], sz[32];
	int ret;

	if (!check_name(c, req->id, m->name))
		return;
	e = za_daemon_find_array(d, m->name);
	if (!e) {
		reply_not_found(c, req->id, m->name);
		return;
	}
	if (!force) {
		memset(&st, 0, sizeof(st));
		ret = za_array_status(e->a, &st);
		free(st.members);
		if (ret < 0 || st.used_bytes) {
			if (ret < 0)
				snprintf(sz, sizeof(sz), "an unknown amount");
			else
				za_fmt_size(st.used_bytes, sz, sizeof(sz));
			za_rpc_reply_error(c, req->id,
					   ZARRAY__ERROR_CODE__ERR_BUSY, EBUSY,
					   "%s holds %s of data; use --force "
					   "to destroy it",
					   m->name, sz);
			return;
		}
	}
	za_log_info("%s: destroy%s (%s)", m->name, force ? ", forced" : "",
		    peer_str(c, peer, sizeof(peer)));
	unlink_array(d, e);
	za_array_set_scrub_saver(e->a, NULL, NULL);
	za_daemon_watches_end(d, m->name, "was destroyed");
	ret = array_stop(e, true);
	d_array_free(e);
	za_daemon_record_remove(d, m->name);
	if (ret < 0) {
		za_log_err("%s: destroy: %s", m->name, strerror(-ret));
		za_rpc_reply_error(c, req->id, za_rpc_errno_code(ret), ret,
				   "%s: stopped, but clearing its superblocks "
				   "failed: %s",
				   m->name, strerror(-ret));
		return;
	}
	reply_done(c, req->id, "destroyed");
}

/* list and status: every array, or the one named. */
static void reply_status(struct za_daemon *d, struct za_rpc_conn *c,
			 const Zarray__Request *req, const char *name)
{
	Zarray__ArrayStatus **arr;
	struct d_array *e;
	size_t n = 0, i;

	if (name) {
		if (!check_name(c, req->id, name))
			return;
		if (!za_daemon_find_array(d, name)) {
			reply_not_found(c, req->id, name);
			return;
		}
	}
	for (e = d->arrays; e; e = e->next)
		n++;
	arr = calloc(n ? n : 1, sizeof(*arr));
	if (!arr)
		goto err;
	n = 0;
	for (e = d->arrays; e; e = e->next) {
		if (name && strcmp(e->name, name))
			continue;
		arr[n] = za_daemon_status_of(e);
		if (!arr[n])
			goto err_free;
		n++;
	}
	reply_arrays(c, req->id, arr, n);
	for (i = 0; i < n; i++)
		za_daemon_array_msg_free(arr[i]);
	free(arr);
	return;

err_free:
	for (i = 0; i < n; i++)
		za_daemon_array_msg_free(arr[i]);
	free(arr);
err:
	za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL, ENOMEM,
			   "cannot read the arrays' status");
}

static void h_list(struct za_daemon *d, struct za_rpc_conn *c,
		   const Zarray__Request *req)
{
	reply_status(d, c, req, NULL);
}

static void h_status(struct za_daemon *d, struct za_rpc_conn *c,
		     const Zarray__Request *req)
{
	reply_status(d, c, req, req->status->name);
}

/* Find the array a request names; answers and returns NULL if none. */
static struct d_array *named(struct za_daemon *d, struct za_rpc_conn *c,
			     uint64_t id, const char *name)
{
	struct d_array *e;

	if (!check_name(c, id, name))
		return NULL;
	e = za_daemon_find_array(d, name);
	if (!e)
		reply_not_found(c, id, name);
	return e;
}

static void h_fail(struct za_daemon *d, struct za_rpc_conn *c,
		   const Zarray__Request *req)
{
	const Zarray__Fail *m = req->fail;
	struct d_array *e = named(d, c, req->id, m->name);
	char err[256] = "", peer[64];
	int ret;

	if (!e || !check_paths(c, req->id, &m->path, 1, 1))
		return;
	za_log_info("%s: fail %s (%s)", m->name, m->path,
		    peer_str(c, peer, sizeof(peer)));
	ret = za_array_fail(e->a, m->path, err, sizeof(err));
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	reply_done(c, req->id, "marked failed");
}

/* Testing only (zarrayd --fault-injection): set a member's faults. */
static void h_debug_inject(struct za_daemon *d, struct za_rpc_conn *c,
			   const Zarray__Request *req)
{
	const Zarray__DebugInject *m = req->debug_inject;
	struct d_array *e = named(d, c, req->id, m->name);
	char err[256] = "", peer[64];
	size_t i, n = strlen(m->spec);
	int ret;

	if (!e || !check_paths(c, req->id, &m->path, 1, 1))
		return;
	for (i = 0; i < n && m->spec[i] > ' ' && m->spec[i] < 0x7f; i++)
		;
	if (!n || n > 256 || i < n) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "a fault spec is 1-256 printable "
				   "characters without spaces");
		return;
	}
	za_log_info("%s: debug inject %s %s (%s)", m->name, m->path, m->spec,
		    peer_str(c, peer, sizeof(peer)));
	ret = za_array_inject(e->a, m->path, m->spec, err, sizeof(err));
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	reply_done(c, req->id, "faults set");
}

static void h_grow(struct za_daemon *d, struct za_rpc_conn *c,
		   const Zarray__Request *req)
{
	const Zarray__Grow *m = req->grow;
	struct d_array *e = named(d, c, req->id, m->name);
	struct za_volume *vol;
	char err[256] = "", peer[64];
	Zarray__Response r;
	Zarray__Grown grown;
	uint64_t old;
	int ret;

	if (!e)
		return;
	vol = za_array_volume(e->a);
	old = vol ? za_volume_size(vol) : 0;
	za_log_info("%s: grow to %llu bytes (%s)", m->name,
		    (unsigned long long)m->size_bytes,
		    peer_str(c, peer, sizeof(peer)));
	/* The size lives in the superblocks: nothing to record here. */
	ret = za_array_grow(e->a, m->size_bytes, err, sizeof(err));
	if (ret < 0) {
		za_log_warn("%s: grow failed: %s", m->name,
			    *err ? err : strerror(-ret));
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	zarray__response__init(&r);
	zarray__grown__init(&grown);
	grown.name = e->name;
	grown.old_size_bytes = old;
	grown.size_bytes = vol ? za_volume_size(vol) : m->size_bytes;
	r.id = req->id;
	r.body_case = ZARRAY__RESPONSE__BODY_GROWN;
	r.grown = &grown;
	za_rpc_reply(c, &r);
}

/* Remember new member paths in the array's state record. */
static void record_add_paths(struct za_daemon *d, struct d_array *e,
			     char *const *paths, size_t n)
{
	char **np = realloc(e->paths, (e->nr_paths + n) * sizeof(*np));
	size_t i;

	if (!np)
		return; /* the record stays as it was: logged below */
	e->paths = np;
	for (i = 0; i < n; i++) {
		size_t j;
		bool known = false;

		/* A removed member's drive added again is recorded once. */
		for (j = 0; j < e->nr_paths && !known; j++)
			known = !strcmp(e->paths[j], paths[i]);
		if (known)
			continue;
		e->paths[e->nr_paths] = strdup(paths[i]);
		if (e->paths[e->nr_paths])
			e->nr_paths++;
	}
	za_daemon_record_write(d, e);
}

enum d_member_op { D_ADD, D_REMOVE, D_REPLACE };

/* add, remove and replace: which drives join, which leave. */
static void change_members(struct za_daemon *d, struct za_rpc_conn *c,
			   const Zarray__Request *req, const char *name,
			   char *const *paths, size_t n, enum d_member_op op)
{
	struct d_array *e = named(d, c, req->id, name);
	char err[256] = "", peer[64];
	int ret;

	if (!e || !check_paths(c, req->id, paths, n, op == D_REPLACE ? 2 : 1))
		return;
	/* The drives that join: every one added, NEW of a replace. */
	if ((op == D_ADD && !check_not_held(d, c, req->id, paths, n)) ||
	    (op == D_REPLACE && !check_not_held(d, c, req->id, paths + 1, 1)))
		return;
	za_log_info("%s: %s %s%s%s (%s)", name,
		    op == D_ADD	   ? "add" :
		    op == D_REMOVE ? "remove" :
				     "replace",
		    paths[0], n > 1 ? " ..." : "", "",
		    peer_str(c, peer, sizeof(peer)));
	switch (op) {
	case D_ADD:
		ret = za_array_add(e->a, (const char *const *)paths,
				   (unsigned)n, err, sizeof(err));
		if (ret >= 0)
			record_add_paths(d, e, paths, n);
		break;
	case D_REMOVE:
		ret = za_array_remove(e->a, (const char *const *)paths,
				      (unsigned)n, err, sizeof(err));
		break;
	default:
		ret = za_array_replace(e->a, paths[0], paths[1], err,
				       sizeof(err));
		if (ret >= 0)
			record_add_paths(d, e, paths + 1, 1);
		break;
	}
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	reply_done(c, req->id,
		   op == D_ADD	  ? "added" :
		   op == D_REMOVE ? "draining; see zarray watch" :
				    "replacing; see zarray watch");
}

static void h_add(struct za_daemon *d, struct za_rpc_conn *c,
		  const Zarray__Request *req)
{
	change_members(d, c, req, req->add->name, req->add->paths,
		       req->add->n_paths, D_ADD);
}

static void h_remove(struct za_daemon *d, struct za_rpc_conn *c,
		     const Zarray__Request *req)
{
	change_members(d, c, req, req->remove->name, req->remove->paths,
		       req->remove->n_paths, D_REMOVE);
}

static void h_replace(struct za_daemon *d, struct za_rpc_conn *c,
		      const Zarray__Request *req)
{
	char *paths[2] = { req->replace->old_path, req->replace->new_path };

	change_members(d, c, req, req->replace->name, paths, 2, D_REPLACE);
}

static void h_rebuild(struct za_daemon *d, struct za_rpc_conn *c,
		      const Zarray__Request *req)
{
	const Zarray__Rebuild *m = req->rebuild;
	struct d_array *e = named(d, c, req->id, m->name);
	enum za_array_rebuild_op op;
	char err[256] = "", peer[64];
	const char *what;
	int ret;

	if (!e)
		return;
	switch (m->action) {
	case ZARRAY__REBUILD_ACTION__REBUILD_STATUS:
		if (m->has_rate_bps)
			break;
		za_daemon_reply_jobs(d, c, req->id, e, ZA_JOB_REBUILD);
		return;
	case ZARRAY__REBUILD_ACTION__REBUILD_PAUSE:
		if (m->has_rate_bps)
			break;
		op = ZA_ARRAY_REBUILD_PAUSE;
		what = "rebuild paused";
		goto act;
	case ZARRAY__REBUILD_ACTION__REBUILD_START:
		op = ZA_ARRAY_REBUILD_START;
		what = "rebuild running";
		goto act;
	case ZARRAY__REBUILD_ACTION__REBUILD_RESUME:
		op = ZA_ARRAY_REBUILD_RESUME;
		what = "rebuild running";
		goto act;
	default:
		za_rpc_reply_error(c, req->id,
				   ZARRAY__ERROR_CODE__ERR_MALFORMED, EINVAL,
				   "unknown rebuild action %d", (int)m->action);
		return;
	}
	za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID, EINVAL,
			   "a rate applies to start and resume only");
	return;

act:
	za_log_info("%s: rebuild %s%s (%s)", m->name,
		    op == ZA_ARRAY_REBUILD_PAUSE ? "pause" :
		    op == ZA_ARRAY_REBUILD_START ? "start" :
						   "resume",
		    m->has_rate_bps ? " with a rate limit" : "",
		    peer_str(c, peer, sizeof(peer)));
	/* A rate alone on a running job just changes the limit. */
	if (m->has_rate_bps &&
	    (ret = za_array_rebuild(e->a, ZA_ARRAY_REBUILD_RATE, m->rate_bps,
				    err, sizeof(err))) < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	ret = za_array_rebuild(e->a, op, 0, err, sizeof(err));
	if (ret == -EALREADY && m->has_rate_bps &&
	    op != ZA_ARRAY_REBUILD_PAUSE) {
		reply_done(c, req->id, "rate limit changed");
		return;
	}
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	reply_done(c, req->id, what);
}

static void h_scrub(struct za_daemon *d, struct za_rpc_conn *c,
		    const Zarray__Request *req)
{
	const Zarray__Scrub *m = req->scrub;
	struct d_array *e = named(d, c, req->id, m->name);

	if (!e)
		return;
	switch (m->action) {
	case ZARRAY__SCRUB_ACTION__SCRUB_STATUS:
		za_daemon_reply_jobs(d, c, req->id, e, ZA_JOB_SCRUB);
		return;
	case ZARRAY__SCRUB_ACTION__SCRUB_START:
	case ZARRAY__SCRUB_ACTION__SCRUB_STOP: {
		bool start = m->action == ZARRAY__SCRUB_ACTION__SCRUB_START;
		char err[256] = "", peer[64];
		int ret;

		za_log_info("%s: scrub %s (%s)", m->name,
			    start ? "start" : "stop",
			    peer_str(c, peer, sizeof(peer)));
		/* Without --rate: the limit it had (restored ones too). */
		ret = za_array_scrub(e->a, start,
				     m->has_rate_bps ? m->rate_bps : UINT64_MAX,
				     err, sizeof(err));
		if (ret < 0) {
			reply_array_err(c, req->id, ret, strerror(-ret), err);
			return;
		}
		reply_done(c, req->id,
			   start ? "scrub running" : "scrub stopped");
		return;
	}
	default:
		za_rpc_reply_error(c, req->id,
				   ZARRAY__ERROR_CODE__ERR_MALFORMED, EINVAL,
				   "unknown scrub action %d", (int)m->action);
		return;
	}
}

/* Registered, the request stays open: za_daemon_watch_tick_cb() answers. */
static void h_watch(struct za_daemon *d, struct za_rpc_conn *c,
		    const Zarray__Request *req)
{
	struct d_waiter *w;

	if (!named(d, c, req->id, req->watch->name))
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "out of memory");
		return;
	}
	za_rpc_conn_get(c);
	w->c = c;
	w->id = req->id;
	snprintf(w->name, sizeof(w->name), "%s", req->watch->name);
	if (za_daemon_watch_push(d, w)) {
		za_daemon_waiter_free(w);
		return;
	}
	w->next = d->watches;
	d->watches = w;
	if (!ev_is_active(&d->watch_timer)) {
		ev_timer_set(&d->watch_timer, d->watch_interval_s,
			     d->watch_interval_s);
		ev_timer_start(d->loop, &d->watch_timer);
	}
}

/*
 * The array's NBD URI; with a TCP address, listen there first (and record
 * it, so that a restart listens there again). An array whose export
 * failed earlier gets another try.
 */
static void h_export(struct za_daemon *d, struct za_rpc_conn *c,
		     const Zarray__Request *req)
{
	const Zarray__Export *m = req->export;
	struct d_array *e = named(d, c, req->id, m->name);
	char host[ZA_EXPORT_HOST_BYTES], port[8], err[256] = "", peer[64];
	bool had_unix, had_tcp;
	Zarray__Response r;
	Zarray__Exported ex;
	int ret;

	if (!e)
		return;
	if (m->tcp && za_export_parse_tcp(m->tcp, host, port) < 0) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "bad TCP address '%.80s': want [HOST:]PORT",
				   m->tcp);
		return;
	}
	had_unix = e->exp != NULL;
	had_tcp = e->exp && za_export_tcp_uri(e->exp);
	if (m->tcp && !had_tcp)
		za_log_info("%s: export on TCP %s (%s)", m->name, m->tcp,
			    peer_str(c, peer, sizeof(peer)));
	ret = za_daemon_export_start(d, e, m->tcp, err, sizeof(err));
	/* A new Unix export (one that failed at create or assemble, tried
	 * again) is a change of state: the log says who made it. */
	if (!had_unix && e->exp)
		za_log_info("%s: exported at %s (%s)", m->name,
			    za_export_uri(e->exp),
			    peer_str(c, peer, sizeof(peer)));
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	if (m->tcp && !had_tcp)
		za_daemon_record_write(d, e);
	zarray__response__init(&r);
	zarray__exported__init(&ex);
	ex.uri = (char *)(m->tcp ? za_export_tcp_uri(e->exp) :
				   za_export_uri(e->exp));
	r.id = req->id;
	r.body_case = ZARRAY__RESPONSE__BODY_EXPORTED;
	r.exported = &ex;
	za_rpc_reply(c, &r);
}

static void h_shutdown(struct za_daemon *d, struct za_rpc_conn *c,
		       const Zarray__Request *req)
{
	struct d_waiter *w = calloc(1, sizeof(*w));
	char peer[64], why[96];

	if (!w) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "out of memory");
		return;
	}
	/* Answered once every array is stopped (za_daemon_free). */
	za_rpc_conn_get(c);
	w->c = c;
	w->id = req->id;
	w->next = d->shutdown_waiters;
	d->shutdown_waiters = w;
	snprintf(why, sizeof(why), "shutdown requested by %s",
		 peer_str(c, peer, sizeof(peer)));
	za_daemon_request_stop(d, why);
}

/*
 * The commands, by the body of the request. A command marked immediate is
 * answered as soon as it arrives, even while another command runs or the
 * daemon stops: never parked, never refused. Only ping is: it says the
 * daemon is alive, and must not wait behind a create that takes minutes.
 */
struct d_command {
	Zarray__Request__BodyCase body_case;
	const char *name; /* as the CLI says it: what a reader looks for */
	void (*handler)(struct za_daemon *d, struct za_rpc_conn *c,
			const Zarray__Request *req);
	bool immediate;
};

static const struct d_command commands[] = {
	{ ZARRAY__REQUEST__BODY_PING, "ping", h_ping, true },
	{ ZARRAY__REQUEST__BODY_CREATE, "create", h_create, false },
	{ ZARRAY__REQUEST__BODY_ASSEMBLE, "assemble", h_assemble, false },
	{ ZARRAY__REQUEST__BODY_STOP, "stop", h_stop, false },
	{ ZARRAY__REQUEST__BODY_DESTROY, "destroy", h_destroy, false },
	{ ZARRAY__REQUEST__BODY_LIST, "list", h_list, false },
	{ ZARRAY__REQUEST__BODY_STATUS, "status", h_status, false },
	{ ZARRAY__REQUEST__BODY_ADD, "add", h_add, false },
	{ ZARRAY__REQUEST__BODY_REMOVE, "remove", h_remove, false },
	{ ZARRAY__REQUEST__BODY_FAIL, "fail", h_fail, false },
	{ ZARRAY__REQUEST__BODY_REPLACE, "replace", h_replace, false },
	{ ZARRAY__REQUEST__BODY_REBUILD, "rebuild", h_rebuild, false },
	{ ZARRAY__REQUEST__BODY_SCRUB, "scrub", h_scrub, false },
	{ ZARRAY__REQUEST__BODY_WATCH, "watch", h_watch, false },
	{ ZARRAY__REQUEST__BODY_EXPORT, "export", h_export, false },
	{ ZARRAY__REQUEST__BODY_SHUTDOWN, "shutdown", h_shutdown, false },
	{ ZARRAY__REQUEST__BODY_GROW, "grow", h_grow, false },
	{ ZARRAY__REQUEST__BODY_DEBUG_INJECT, "debug inject", h_debug_inject,
	  false },
};

/* NULL: a body this daemon does not know (none, or a newer client's). */
static const struct d_command *command_find(Zarray__Request__BodyCase body_case)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].body_case == body_case)
			return &commands[i];
	return NULL;
}

static void run_request(struct za_daemon *d, struct za_rpc_conn *c,
			Zarray__Request *req)
{
	const struct d_command *cmd = command_find(req->body_case);

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
	const struct d_command *cmd = command_find(req->body_case);
	struct za_daemon *d = priv;
	struct d_waiter *w;

	if (cmd && cmd->immediate) {
		cmd->handler(d, c, req);
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
		ret = array_stop(e, false);
		if (ret < 0) {
			za_log_err("%s: stop: %s", e->name, strerror(-ret));
			if (!first)
				first = ret;
		}
		d_array_free(e);
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
			reply_done(w->c, w->id, "zarrayd stopped");
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
