// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon-cmd.c - zarrayd's commands: one handler per request of the
 * protocol, and the table that maps a request's body to its handler
 * (za_daemon_command_find()). Each handler checks what it was sent (names
 * become file names, paths must be absolute and printable, enum values
 * known: nothing from a socket is trusted), logs who changes what (uid
 * and pid), calls array.h and answers with the array layer's one-line
 * message and an ErrorCode mapped from its -errno; it keeps the registry
 * and the state record in step with what it did. Drive lifecycle (add,
 * remove, replace), rebuild and scrub go to array.c, which runs the
 * background jobs. A handler runs alone and answers its one request: it
 * does not park or order requests, nor manage connections (daemon.c),
 * build status messages (daemon-status.c) or format records on disk
 * (daemon-record.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon-int.h"
#include "log.h"
#include "volume.h"

/* ---- replies and checks ---- */

static const char *peer_str(struct za_rpc_conn *c, char *buf, size_t len)
{
	const struct za_rpc_peer *p = za_rpc_conn_peer(c);

	snprintf(buf, len, "uid %u pid %d", (unsigned)p->uid, (int)p->pid);
	return buf;
}

void za_daemon_reply_done(struct za_rpc_conn *c, uint64_t id, const char *msg)
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
	p.policy = &d->policy;
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
	ret = za_daemon_assemble(d, m->name, (const char *const *)m->paths,
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
		za_daemon_reply_done(c, req->id, "assembled");
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
	za_daemon_unlink_array(d, e);
	/* Its record goes: nothing more to save in it. */
	za_array_set_scrub_saver(e->a, NULL, NULL);
	za_daemon_watches_end(d, name, "was stopped");
	ret = za_daemon_array_stop(e, false);
	za_daemon_array_free(e);
	za_daemon_record_remove(d, name);
	if (ret < 0) {
		za_log_err("%s: stop: %s", name, strerror(-ret));
		za_rpc_reply_error(c, req->id, za_rpc_errno_code(ret), ret,
				   "%s: stopped, but flushing failed: %s", name,
				   strerror(-ret));
		return;
	}
	za_daemon_reply_done(c, req->id, "stopped");
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
	za_daemon_unlink_array(d, e);
	za_array_set_scrub_saver(e->a, NULL, NULL);
	za_daemon_watches_end(d, m->name, "was destroyed");
	ret = za_daemon_array_stop(e, true);
	za_daemon_array_free(e);
	za_daemon_record_remove(d, m->name);
	if (ret < 0) {
		za_log_err("%s: destroy: %s", m->name, strerror(-ret));
		za_rpc_reply_error(c, req->id, za_rpc_errno_code(ret), ret,
				   "%s: stopped, but clearing its superblocks "
				   "failed: %s",
				   m->name, strerror(-ret));
		return;
	}
	za_daemon_reply_done(c, req->id, "destroyed");
}

int za_daemon_assemble(struct za_daemon *d, const char *name,
		       const char *const *paths, unsigned n,
		       struct za_array **a, char *err, size_t errlen)
{
	struct za_array_policy pol = d->policy;
	int ret;

	snprintf(d->assembling.name, sizeof(d->assembling.name), "%s", name);
	za_progress_set(&d->assembling.prog, "starting", 0, 0);
	pol.progress = &d->assembling.prog;
	ret = za_array_assemble(d->io, name, paths, n, &pol, a, err, errlen);
	d->assembling.name[0] = 0;
	return ret;
}

/* The status of an array being assembled: its name and progress. */
static Zarray__ArrayStatus *assembling_msg_new(struct za_daemon *d)
{
	Zarray__ArrayStatus *m = calloc(1, sizeof(*m));
	Zarray__AssemblyProgress *p = calloc(1, sizeof(*p));

	if (!m || !p)
		goto err;
	zarray__array_status__init(m);
	zarray__assembly_progress__init(p);
	m->name = strdup(d->assembling.name);
	m->uuid = strdup("");
	p->phase = strdup(d->assembling.prog.phase ? d->assembling.prog.phase :
						     "starting");
	if (!m->name || !m->uuid || !p->phase)
		goto err;
	m->state = ZARRAY__ARRAY_STATE__ARRAY_ASSEMBLING;
	p->done = d->assembling.prog.done;
	p->total = d->assembling.prog.total;
	m->assembly = p;
	return m;

err:
	if (p)
		free(p->phase);
	if (m) {
		m->assembly = NULL;
		za_daemon_array_msg_free(m);
	}
	free(p);
	return NULL;
}

/* list and status: every array, or the one named. */
static void reply_status(struct za_daemon *d, struct za_rpc_conn *c,
			 const Zarray__Request *req, const char *name)
{
	Zarray__ArrayStatus **arr;
	struct d_array *e;
	size_t n = 0, i;

	bool asm_too = d->assembling.name[0] &&
		       (!name || !strcmp(name, d->assembling.name));

	if (name) {
		if (!check_name(c, req->id, name))
			return;
		if (!za_daemon_find_array(d, name) && !asm_too) {
			reply_not_found(c, req->id, name);
			return;
		}
	}
	for (e = d->arrays; e; e = e->next)
		n++;
	arr = calloc(n + 1, sizeof(*arr));
	if (!arr)
		goto err;
	n = 0;
	if (asm_too) {
		arr[n] = assembling_msg_new(d);
		if (!arr[n])
			goto err_free;
		n++;
	}
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

/*
 * While an array assembles (minutes, at scale), status answers at once,
 * with where the assembly is, instead of waiting behind it as other
 * commands do. Safe: the assembly touches only the array it builds,
 * which is not in d->arrays yet, and status only reads. `list` still
 * waits: scripts take its answer as "the arrays are up".
 */
bool za_daemon_status_early(struct za_daemon *d, struct za_rpc_conn *c,
			    const Zarray__Request *req)
{
	if (!d->assembling.name[0] ||
	    req->body_case != ZARRAY__REQUEST__BODY_STATUS)
		return false;
	h_status(d, c, req);
	return true;
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
	za_daemon_reply_done(c, req->id, "marked failed");
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
	za_daemon_reply_done(c, req->id, "faults set");
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
	za_daemon_reply_done(c, req->id,
			     op == D_ADD    ? "added" :
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
	if (m->has_rate_bps) {
		/* The limit holds for later runs too: kept for restarts. */
		e->rebuild_rate_bps = m->rate_bps;
		za_daemon_record_write(d, e);
	}
	ret = za_array_rebuild(e->a, op, 0, err, sizeof(err));
	if (ret == -EALREADY && m->has_rate_bps &&
	    op != ZA_ARRAY_REBUILD_PAUSE) {
		za_daemon_reply_done(c, req->id, "rate limit changed");
		return;
	}
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	za_daemon_reply_done(c, req->id, what);
}

static void h_gc(struct za_daemon *d, struct za_rpc_conn *c,
		 const Zarray__Request *req)
{
	const Zarray__Gc *m = req->gc;
	struct d_array *e = named(d, c, req->id, m->name);
	enum za_array_gc_op op;
	char err[256] = "", peer[64], done[64];
	int ret;

	if (!e)
		return;
	switch (m->action) {
	case ZARRAY__GC_ACTION__GC_STATUS:
		za_daemon_reply_jobs(d, c, req->id, e, ZA_JOB_GC);
		return;
	case ZARRAY__GC_ACTION__GC_PAUSE:
		op = ZA_ARRAY_GC_PAUSE;
		snprintf(done, sizeof(done), "gc paused");
		break;
	case ZARRAY__GC_ACTION__GC_RESUME:
		op = ZA_ARRAY_GC_RESUME;
		snprintf(done, sizeof(done), "gc running");
		break;
	case ZARRAY__GC_ACTION__GC_RATE:
		if (!m->has_rate_bps) {
			za_rpc_reply_error(c, req->id,
					   ZARRAY__ERROR_CODE__ERR_MALFORMED,
					   EINVAL, "gc rate: no rate given");
			return;
		}
		op = ZA_ARRAY_GC_RATE;
		snprintf(done, sizeof(done), "gc rate limit set");
		break;
	default:
		za_rpc_reply_error(c, req->id,
				   ZARRAY__ERROR_CODE__ERR_MALFORMED, EINVAL,
				   "unknown gc action %d", (int)m->action);
		return;
	}
	za_log_info("%s: gc %s (%s)", m->name,
		    op == ZA_ARRAY_GC_PAUSE  ? "pause" :
		    op == ZA_ARRAY_GC_RESUME ? "resume" :
					       "rate",
		    peer_str(c, peer, sizeof(peer)));
	ret = za_array_gc(e->a, op, m->rate_bps, err, sizeof(err));
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	/* Kept for the next start (daemon-record.c). */
	if (op == ZA_ARRAY_GC_RATE)
		e->gc_rate_bps = m->rate_bps;
	else
		e->gc_paused = op == ZA_ARRAY_GC_PAUSE;
	za_daemon_record_write(d, e);
	za_daemon_reply_done(c, req->id, done);
}

static void h_scrub(struct za_daemon *d, struct za_rpc_conn *c,
		    const Zarray__Request *req)
{
	static const struct {
		enum za_array_scrub_op op;
		const char *name, *done;
		bool rate; /* takes a rate */
	} acts[] = {
		[ZARRAY__SCRUB_ACTION__SCRUB_START] = { ZA_ARRAY_SCRUB_START,
							"start",
							"scrub running", true },
		[ZARRAY__SCRUB_ACTION__SCRUB_STOP] = { ZA_ARRAY_SCRUB_STOP,
						       "stop", "scrub stopped",
						       false },
		[ZARRAY__SCRUB_ACTION__SCRUB_PAUSE] = { ZA_ARRAY_SCRUB_PAUSE,
							"pause", "scrub paused",
							false },
		[ZARRAY__SCRUB_ACTION__SCRUB_RESUME] = { ZA_ARRAY_SCRUB_RESUME,
							 "resume",
							 "scrub running",
							 true },
	};
	const Zarray__Scrub *m = req->scrub;
	struct d_array *e = named(d, c, req->id, m->name);
	char err[256] = "", peer[64];
	unsigned a = (unsigned)m->action;
	int ret;

	if (!e)
		return;
	if (m->action == ZARRAY__SCRUB_ACTION__SCRUB_STATUS) {
		za_daemon_reply_jobs(d, c, req->id, e, ZA_JOB_SCRUB);
		return;
	}
	if (a >= sizeof(acts) / sizeof(acts[0]) || !acts[a].name) {
		za_rpc_reply_error(c, req->id,
				   ZARRAY__ERROR_CODE__ERR_MALFORMED, EINVAL,
				   "unknown scrub action %d", (int)m->action);
		return;
	}
	if (m->has_rate_bps && !acts[a].rate) {
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EINVAL,
				   "a rate applies to start and resume only");
		return;
	}
	za_log_info("%s: scrub %s%s (%s)", m->name, acts[a].name,
		    m->has_rate_bps ? " with a rate limit" : "",
		    peer_str(c, peer, sizeof(peer)));
	/* Without --rate: the limit it had (restored ones too). */
	ret = za_array_scrub(e->a, acts[a].op,
			     m->has_rate_bps ? m->rate_bps : UINT64_MAX, err,
			     sizeof(err));
	/* A rate given to a scrub under way changes its limit, as for a
	 * rebuild. */
	if (ret == -EALREADY && m->has_rate_bps) {
		ret = za_array_scrub(e->a, ZA_ARRAY_SCRUB_RATE, m->rate_bps,
				     err, sizeof(err));
		if (ret >= 0) {
			za_daemon_reply_done(c, req->id, "rate limit changed");
			return;
		}
	}
	if (ret < 0) {
		reply_array_err(c, req->id, ret, strerror(-ret), err);
		return;
	}
	za_daemon_reply_done(c, req->id, acts[a].done);
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

/* In the protocol's order (proto/zarray.proto). */
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
	{ ZARRAY__REQUEST__BODY_GC, "gc", h_gc, false },
	{ ZARRAY__REQUEST__BODY_WATCH, "watch", h_watch, false },
	{ ZARRAY__REQUEST__BODY_EXPORT, "export", h_export, false },
	{ ZARRAY__REQUEST__BODY_SHUTDOWN, "shutdown", h_shutdown, false },
	{ ZARRAY__REQUEST__BODY_GROW, "grow", h_grow, false },
	{ ZARRAY__REQUEST__BODY_DEBUG_INJECT, "debug inject", h_debug_inject,
	  false },
};

/* NULL: a body this daemon does not know (none, or a newer client's). */
const struct d_command *
za_daemon_command_find(Zarray__Request__BodyCase body_case)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].body_case == body_case)
			return &commands[i];
	return NULL;
}
