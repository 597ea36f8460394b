// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon-status.c - what zarrayd tells about its arrays: za_array_status()
 * as the protocol's messages (array, members, volume figures, export
 * counters, jobs), a member known only by its superblock's path hint
 * shown under the full path this daemon recorded; the job list that
 * `rebuild status` and `scrub status` answer; and the watch streams, fed
 * by polling status every watch interval (1 s) and ended once no job of
 * the array runs or is paused, or the array goes away. It changes
 * nothing: the only array call here is za_array_status(), and the watch
 * ticker skips its turn while a command runs, so no status is read in the
 * middle of a change. It does not register watches (the watch command
 * does) nor check who asks (rpc.c does, at accept).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-int.h"
#include "log.h"
#include "nbd.h"

static Zarray__JobStatus *job_msg_new(const struct za_array_job_status *j)
{
	Zarray__JobStatus *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	zarray__job_status__init(m);
	m->kind = (Zarray__JobKind)j->kind;
	m->state = (Zarray__JobState)j->state;
	m->done_bytes = j->done_bytes;
	m->total_bytes = j->total_bytes;
	m->has_rate_bps = true;
	m->rate_bps = j->rate_bps;
	m->has_eta_s = true;
	m->eta_s = j->eta_s;
	m->has_rate_limit_bps = true;
	m->rate_limit_bps = j->rate_limit_bps;
	if (j->state == ZA_JOB_DONE) {
		m->has_columns_left = true;
		m->columns_left = j->cols_left;
		/* A static string: job messages free only themselves. */
		if (j->error)
			m->error = (char *)strerror(-j->error);
	}
	if (j->kind == ZA_JOB_SCRUB) {
		m->has_position = true;
		m->position = j->position;
		m->has_start_position = true;
		m->start_position = j->start_position;
	}
	return m;
}

static void jobs_free(Zarray__JobStatus **jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(jobs[i]);
	free(jobs);
}

/* Jobs of @st, only those of @kind unless it is 0. */
static int jobs_msg_new(const struct za_array_status *st, enum za_job_kind kind,
			Zarray__JobStatus ***out, size_t *n)
{
	Zarray__JobStatus **jobs;
	unsigned i, nr = st->nr_jobs < ZA_ARRAY_MAX_JOBS ? st->nr_jobs :
							   ZA_ARRAY_MAX_JOBS;

	*n = 0;
	jobs = calloc(nr ? nr : 1, sizeof(*jobs));
	if (!jobs)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		if (kind && st->jobs[i].kind != kind)
			continue;
		jobs[*n] = job_msg_new(&st->jobs[i]);
		if (!jobs[*n]) {
			jobs_free(jobs, *n);
			return -ENOMEM;
		}
		(*n)++;
	}
	*out = jobs;
	return 0;
}

static void member_msg_free(Zarray__MemberStatus *m)
{
	if (!m)
		return;
	free(m->path);
	free(m->uuid);
	free(m);
}

static Zarray__MemberStatus *
member_msg_new(const struct za_array_member_status *s)
{
	Zarray__MemberStatus *m = calloc(1, sizeof(*m));
	char uuid[37];

	if (!m)
		return NULL;
	zarray__member_status__init(m);
	za_daemon_fmt_uuid(&s->uuid, uuid);
	m->path = strndup(s->path, sizeof(s->path) - 1);
	m->uuid = strdup(uuid);
	if (!m->path || !m->uuid) {
		member_msg_free(m);
		return NULL;
	}
	m->index = s->idx;
	m->state = (Zarray__MemberState)s->state;
	m->size_bytes = s->size_bytes;
	m->used_bytes = s->used_bytes;
	m->err_read = s->err_read;
	m->err_write = s->err_write;
	m->err_checksum = s->err_checksum;
	m->has_repaired_bytes = true;
	m->repaired_bytes = s->repaired_bytes;
	if (s->replaced_by >= 0) {
		m->has_replaced_by = true;
		m->replaced_by = (uint32_t)s->replaced_by;
	}
	m->has_read_bytes = m->has_written_bytes = true;
	m->read_bytes = s->read_bytes;
	m->written_bytes = s->written_bytes;
	return m;
}

static Zarray__VolumeStatus *
volume_msg_new(const struct za_array_volume_status *s)
{
	Zarray__VolumeStatus *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	zarray__volume_status__init(m);
	m->live_bytes = s->live_bytes;
	m->read_bytes = s->read_bytes;
	m->written_bytes = s->written_bytes;
	m->flushes = s->flushes;
	m->data_stripes = s->data_stripes;
	m->padded_stripes = s->padded_stripes;
	m->journal_writes = s->journal_writes;
	m->gc_runs = s->gc_runs;
	m->gc_idle_runs = s->gc_idle_runs;
	m->gc_moved_bytes = s->gc_moved_bytes;
	m->gc_freed_groups = s->gc_freed_groups;
	m->writes_stalled = s->writes_stalled;
	m->has_gc_active = true;
	m->gc_active = s->gc_active;
	m->map_extents = s->map_extents;
	m->map_bytes = s->map_bytes;
	m->checkpoints = s->checkpoints;
	m->checkpoint_failures = s->checkpoint_failures;
	m->checkpoint_seq = s->checkpoint_seq;
	m->recovered_stripes = s->recovered_stripes;
	m->has_table_segments = m->has_table_mismatches = true;
	m->table_segments = s->table_segments;
	m->table_mismatches = s->table_mismatches;
	m->has_quarantined_zones = true;
	m->quarantined_zones = s->quarantined_zones;
	m->has_quarantine_breaks = true;
	m->quarantine_breaks = s->quarantine_breaks;
	m->has_anchored = m->has_anchor_mismatches = true;
	m->anchored = s->anchored;
	m->anchor_mismatches = s->anchor_mismatches;
	m->has_recovery_table = m->has_recovery_zones = true;
	m->has_recovery_headers = m->has_recovery_table_segments = true;
	m->recovery_table = s->recovery_table;
	m->recovery_zones = s->recovery_zones;
	m->recovery_headers = s->recovery_headers;
	m->recovery_table_segments = s->recovery_table_segments;
	m->has_checkpoint_pages = m->has_checkpoint_pages_written = true;
	m->has_checkpoint_pages_cleaned = true;
	m->checkpoint_pages = s->checkpoint_pages;
	m->checkpoint_pages_written = s->checkpoint_pages_written;
	m->checkpoint_pages_cleaned = s->checkpoint_pages_cleaned;
	m->has_recovery_counts = m->has_recovery_count_mismatches = true;
	m->recovery_counts = s->recovery_counts;
	m->recovery_count_mismatches = s->recovery_count_mismatches;
	m->has_map_cache_bytes = m->has_map_pages_read = true;
	m->has_map_page_waits = m->has_map_page_errors = true;
	m->map_cache_bytes = s->map_cache_bytes;
	m->map_pages_read = s->map_pages_read;
	m->map_page_waits = s->map_page_waits;
	m->map_page_errors = s->map_page_errors;
	return m;
}

/* The export's counters (export_stats in the status message). */
static Zarray__ExportStatus *export_msg_new(const struct za_export *x)
{
	Zarray__ExportStatus *m = calloc(1, sizeof(*m));
	struct za_nbd_stats st;

	if (!m)
		return NULL;
	zarray__export_status__init(m);
	za_export_stats(x, &st);
	m->conns_open = st.conns_open;
	m->conns_accepted = st.conns_accepted;
	m->conns_refused = st.conns_refused;
	m->handshakes = st.handshakes;
	m->handshake_timeouts = st.handshake_timeouts;
	m->protocol_errors = st.protocol_errors;
	m->error_replies = st.errors;
	m->read_bytes = st.read_bytes;
	m->written_bytes = st.write_bytes;
	m->trimmed_bytes = st.trim_bytes;
	m->zeroed_bytes = st.zero_bytes;
	m->inflight = st.inflight;
	return m;
}

void za_daemon_array_msg_free(Zarray__ArrayStatus *m)
{
	size_t i;

	if (!m)
		return;
	free(m->export_stats);
	for (i = 0; i < m->n_members; i++)
		member_msg_free(m->members[i]);
	free(m->members);
	jobs_free(m->jobs, m->n_jobs);
	free(m->volume);
	if (m->assembly)
		free(m->assembly->phase);
	free(m->assembly);
	free(m->name);
	free(m->uuid);
	free(m->export_uri);
	free(m->export_tcp_uri);
	free(m);
}

static Zarray__ArrayStatus *array_msg_new(const struct za_array_status *st)
{
	Zarray__ArrayStatus *m = calloc(1, sizeof(*m));
	char uuid[37];
	unsigned i;

	if (!m)
		return NULL;
	zarray__array_status__init(m);
	za_daemon_fmt_uuid(&st->uuid, uuid);
	m->name = strndup(st->name, sizeof(st->name) - 1);
	m->uuid = strdup(uuid);
	if (!m->name || !m->uuid)
		goto err;
	m->state = (Zarray__ArrayState)st->state;
	m->data = st->k;
	m->parity = st->p;
	m->chunk_bytes = st->chunk_bytes;
	m->size_bytes = st->size_bytes;
	m->has_max_size_bytes = true;
	m->max_size_bytes = st->max_size_bytes;
	m->used_bytes = st->used_bytes;
	m->has_generation = true;
	m->generation = st->generation;
	if (st->nr_members) {
		m->members = calloc(st->nr_members, sizeof(*m->members));
		if (!m->members)
			goto err;
	}
	for (i = 0; i < st->nr_members; i++) {
		m->members[i] = member_msg_new(&st->members[i]);
		if (!m->members[i])
			goto err;
		m->n_members++;
	}
	if (jobs_msg_new(st, 0, &m->jobs, &m->n_jobs) < 0)
		goto err;
	if (st->has_volume) {
		m->volume = volume_msg_new(&st->vol);
		if (!m->volume)
			goto err;
	}
	return m;

err:
	za_daemon_array_msg_free(m);
	return NULL;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return k && k <= n && !strcmp(s + n - k, suffix);
}

/*
 * A member without a drive (failed, removed, missing) is known to the
 * array only by its superblock's path hint: the last ZA_SB_HINT_BYTES - 1
 * bytes of its path. Show the full path this daemon recorded for it
 * instead: the one recorded path that ends with the hint and is no other
 * member's (none, or several: the hint stays).
 */
static void full_paths(const struct d_array *e, struct za_array_status *st)
{
	unsigned i, j, p, found = 0, n = 0;

	for (i = 0; i < st->nr_members; i++) {
		const char *hint = st->members[i].path;
		bool recorded = false;

		for (p = 0; p < e->nr_paths && !recorded; p++)
			recorded = !strcmp(e->paths[p], hint);
		if (recorded)
			continue;
		for (p = n = 0; p < e->nr_paths; p++) {
			bool other = false;

			if (!has_suffix(e->paths[p], hint))
				continue;
			for (j = 0; j < st->nr_members && !other; j++)
				other = j != i && !strcmp(st->members[j].path,
							  e->paths[p]);
			if (!other) {
				found = p;
				n++;
			}
		}
		if (n == 1)
			snprintf(st->members[i].path,
				 sizeof(st->members[i].path), "%s",
				 e->paths[found]);
	}
}

/* za_array_status() into a message; NULL on failure (logged). */
Zarray__ArrayStatus *za_daemon_status_of(struct d_array *e)
{
	struct za_array_status st;
	Zarray__ArrayStatus *m;
	int ret;

	memset(&st, 0, sizeof(st));
	ret = za_array_status(e->a, &st);
	if (ret < 0) {
		za_log_err("%s: status: %s", e->name, strerror(-ret));
		free(st.members);
		return NULL;
	}
	full_paths(e, &st);
	m = array_msg_new(&st);
	free(st.members);
	if (m && e->exp) {
		const char *tcp = za_export_tcp_uri(e->exp);

		m->export_uri = strdup(za_export_uri(e->exp));
		m->export_tcp_uri = tcp ? strdup(tcp) : NULL;
		m->export_stats = export_msg_new(e->exp);
		if (!m->export_uri || (tcp && !m->export_tcp_uri) ||
		    !m->export_stats) {
			za_daemon_array_msg_free(m);
			return NULL;
		}
	}
	return m;
}

void za_daemon_reply_jobs(struct za_daemon *d, struct za_rpc_conn *c,
			  uint64_t id, struct d_array *e, enum za_job_kind kind)
{
	struct za_array_status st;
	Zarray__Response r;
	Zarray__Jobs jobs;
	int ret;

	(void)d;
	memset(&st, 0, sizeof(st));
	ret = za_array_status(e->a, &st);
	free(st.members);
	if (ret < 0) {
		za_rpc_reply_error(c, id, za_rpc_errno_code(ret), ret,
				   "%s: cannot read its status: %s", e->name,
				   strerror(-ret));
		return;
	}
	/* GC's row whatever its state: it is listed only while it runs,
	 * and its pause and rate limit are asked about at any time. */
	if (kind == ZA_JOB_GC)
		st.nr_jobs = !za_array_gc_status(e->a, &st.jobs[0]);
	zarray__response__init(&r);
	zarray__jobs__init(&jobs);
	jobs.name = e->name;
	if (jobs_msg_new(&st, kind, &jobs.jobs, &jobs.n_jobs) < 0) {
		za_rpc_reply_error(c, id, ZARRAY__ERROR_CODE__ERR_INTERNAL,
				   ENOMEM, "out of memory");
		return;
	}
	r.id = id;
	r.body_case = ZARRAY__RESPONSE__BODY_JOBS;
	r.jobs = &jobs;
	za_rpc_reply(c, &r);
	jobs_free(jobs.jobs, jobs.n_jobs);
}

/* ---- watch ---- */

static bool job_active(const Zarray__JobStatus *j)
{
	return j->state == ZARRAY__JOB_STATE__JOB_RUNNING ||
	       j->state == ZARRAY__JOB_STATE__JOB_PAUSED;
}

/*
 * Send @w the current state of its array. Returns true when that was the
 * final response (no job left running or paused, or the array is gone).
 */
bool za_daemon_watch_push(struct za_daemon *d, struct d_waiter *w)
{
	struct d_array *e = za_daemon_find_array(d, w->name);
	Zarray__ArrayStatus *st;
	Zarray__Response r;
	Zarray__Event ev;
	bool active = false;
	size_t i;

	if (!e) {
		za_rpc_reply_error(w->c, w->id,
				   ZARRAY__ERROR_CODE__ERR_NOT_FOUND, ENOENT,
				   "array '%s' is no longer running", w->name);
		return true;
	}
	st = za_daemon_status_of(e);
	if (!st) {
		za_rpc_reply_error(w->c, w->id,
				   ZARRAY__ERROR_CODE__ERR_INTERNAL, ENOMEM,
				   "%s: cannot read its status", w->name);
		return true;
	}
	for (i = 0; i < st->n_jobs; i++)
		active |= job_active(st->jobs[i]);
	zarray__response__init(&r);
	zarray__event__init(&ev);
	ev.name = st->name;
	ev.state = st->state;
	ev.n_jobs = st->n_jobs;
	ev.jobs = st->jobs;
	r.id = w->id;
	r.has_more = true;
	r.more = active;
	r.body_case = ZARRAY__RESPONSE__BODY_EVENT;
	r.event = &ev;
	za_rpc_reply(w->c, &r);
	za_daemon_array_msg_free(st);
	return !active;
}

void za_daemon_watch_tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct za_daemon *d = t->data;
	struct d_waiter *list, *w;

	(void)loop;
	(void)revents;
	if (d->busy)
		return; /* an array may be changing; next tick */
	/*
	 * Detach the list: a reply can close its connection, and on_closed()
	 * then edits d->watches; it must not free the entry we hold.
	 */
	list = d->watches;
	d->watches = NULL;
	while ((w = list)) {
		list = w->next;
		if (!za_rpc_conn_alive(w->c) || za_daemon_watch_push(d, w) ||
		    !za_rpc_conn_alive(w->c)) {
			za_daemon_waiter_free(w);
			continue;
		}
		w->next = d->watches;
		d->watches = w;
	}
	if (!d->watches)
		ev_timer_stop(d->loop, &d->watch_timer);
}

/* End the watches of @name with an error (the array is going away). */
void za_daemon_watches_end(struct za_daemon *d, const char *name,
			   const char *why)
{
	struct d_waiter **pp = &d->watches, *ending = NULL, *w;

	/* Unlink first, reply after: see za_daemon_watch_tick_cb(). */
	while (*pp) {
		w = *pp;
		if (strcmp(w->name, name)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->next = ending;
		ending = w;
	}
	while ((w = ending)) {
		ending = w->next;
		za_rpc_reply_error(w->c, w->id,
				   ZARRAY__ERROR_CODE__ERR_NOT_FOUND, ENOENT,
				   "array '%s' %s", name, why);
		za_daemon_waiter_free(w);
	}
	if (!d->watches)
		ev_timer_stop(d->loop, &d->watch_timer);
}
