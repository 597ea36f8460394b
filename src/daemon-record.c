// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon-record.c - the daemon's state directory: STATE/arrays/NAME.conf
 * records each array this daemon runs (name, uuid, member paths, TCP
 * address, where its scrub got to, the settings of its jobs: GC paused,
 * GC's and the rebuild's rate limits) so that the next start assembles,
 * exports and goes on scrubbing it again, with the same settings. A
 * paused rebuild is not kept paused: a restart restores redundancy first
 * (docs/design.md 13). A record is written to a
 * temporary file, fsynced and renamed, then the directory fsynced; read
 * back, it is checked like anything from outside (bounded lines, a valid
 * name that is the file's, absolute member paths). At start every record
 * is assembled from those of its drives that still exist. This file also
 * decides how often a moving scrub position is worth a write. It does not
 * create the directories or take the state lock (daemon.c, at start), and
 * it does not decide when an array's record is written or removed: the
 * commands that change the array do.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-int.h"
#include "log.h"

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int za_daemon_record_write(struct za_daemon *d, const struct d_array *e)
{
	const char *name = e->name;
	char tmp[D_FILE_BYTES], path[D_FILE_BYTES];
	unsigned i;
	FILE *f;
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", d->arrays_dir, name);
	snprintf(path, sizeof(path), "%s/%s.conf", d->arrays_dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0) {
		ret = -errno;
		goto err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		goto err_unlink;
	}
	fprintf(f,
		"# zarrayd: assembled at start; written by zarrayd, which "
		"rewrites it\nname %s\nuuid %s\n",
		name, e->uuid);
	for (i = 0; i < e->nr_paths; i++)
		fprintf(f, "member %s\n", e->paths[i]);
	if (e->tcp[0])
		fprintf(f, "tcp %s\n", e->tcp);
	/* Where a scrub got to: resumed at the next start if running. */
	if (e->scrub.running || e->scrub.position)
		fprintf(f, "scrub %s %llu %llu\n",
			e->scrub.running ? "running" : "stopped",
			(unsigned long long)e->scrub.position,
			(unsigned long long)e->scrub.rate_bps);
	if (e->gc_paused || e->gc_rate_bps)
		fprintf(f, "gc %s %llu\n", e->gc_paused ? "paused" : "running",
			(unsigned long long)e->gc_rate_bps);
	if (e->rebuild_rate_bps)
		fprintf(f, "rebuild-rate %llu\n",
			(unsigned long long)e->rebuild_rate_bps);
	if (fflush(f) != 0 || fsync(fd) < 0) {
		ret = -errno;
		fclose(f);
		goto err_unlink;
	}
	if (fclose(f) != 0) {
		ret = -errno;
		goto err_unlink;
	}
	if (rename(tmp, path) < 0) {
		ret = -errno;
		goto err_unlink;
	}
	ret = fsync_dir(d->arrays_dir);
	if (ret < 0)
		goto err;
	return 0;

err_unlink:
	unlink(tmp);
err:
	za_log_err("%s: cannot record array %s for the next start: %s", path,
		   name, strerror(-ret));
	return ret;
}

void za_daemon_record_remove(struct za_daemon *d, const char *name)
{
	char path[D_FILE_BYTES];

	snprintf(path, sizeof(path), "%s/%s.conf", d->arrays_dir, name);
	if (unlink(path) < 0 && errno != ENOENT) {
		za_log_err("%s: cannot remove: %s", path, strerror(errno));
		return;
	}
	fsync_dir(d->arrays_dir);
}

/* Digits only, up to the next space or the end; *@s moves past them. */
static int u64_parse(const char **s, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -ERANGE;
	*s = p;
	*out = v;
	return 0;
}

/* "running|stopped POSITION RATE" of a scrub line. Returns 0 or -EINVAL. */
static int scrub_parse(const char *s, struct za_array_scrub_save *out)
{
	memset(out, 0, sizeof(*out));
	if (!strncmp(s, "running ", 8))
		out->running = true;
	else if (strncmp(s, "stopped ", 8))
		return -EINVAL;
	s += 8;
	if (u64_parse(&s, &out->position) < 0 || *s++ != ' ' ||
	    u64_parse(&s, &out->rate_bps) < 0 || *s) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	return 0;
}

/* "paused|running RATE" of a gc line. Returns 0 or -EINVAL. */
static int gc_parse(const char *s, bool *paused, uint64_t *rate_bps)
{
	bool p;

	if (!strncmp(s, "paused ", 7))
		p = true;
	else if (!strncmp(s, "running ", 8))
		p = false;
	else
		return -EINVAL;
	s += p ? 7 : 8;
	if (u64_parse(&s, rate_bps) < 0 || *s) {
		*rate_bps = 0;
		return -EINVAL;
	}
	*paused = p;
	return 0;
}

void za_daemon_record_free(struct d_record *r)
{
	unsigned i;

	for (i = 0; i < r->nr_paths; i++)
		free(r->paths[i]);
	r->nr_paths = 0;
}

/* Read STATE/arrays/@file: za_daemon_record_parse() of its contents. */
static int record_read(struct za_daemon *d, const char *file,
		       struct d_record *r)
{
	char path[D_FILE_BYTES];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", d->arrays_dir, file);
	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		za_log_err("%s: %s", path, strerror(errno));
		return ret;
	}
	ret = za_daemon_record_parse(f, path, file, r);
	fclose(f);
	return ret;
}

int za_daemon_record_parse(FILE *f, const char *path, const char *file,
			   struct d_record *r)
{
	char line[D_RECORD_LINE_BYTES];
	size_t flen = strlen(file);
	unsigned lineno = 0;
	int ret = -EBADMSG;

	memset(r, 0, sizeof(*r));
	if (flen < 5 || strcmp(file + flen - 5, ".conf")) {
		za_log_err("%s: not a NAME.conf file", path);
		return -EBADMSG;
	}
	flen -= 5;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);

		lineno++;
		if (n == 0 || line[n - 1] != '\n') {
			za_log_err("%s:%u: line too long or unterminated", path,
				   lineno);
			goto err;
		}
		line[n - 1] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (!strncmp(line, "name ", 5)) {
			if (!za_daemon_name_valid(line + 5) ||
			    strlen(line + 5) != flen ||
			    strncmp(line + 5, file, flen)) {
				za_log_err("%s:%u: bad name or not the file's "
					   "name",
					   path, lineno);
				goto err;
			}
			snprintf(r->name, sizeof(r->name), "%.63s", line + 5);
		} else if (!strncmp(line, "member ", 7)) {
			if (!za_daemon_path_valid(line + 7) ||
			    r->nr_paths >= D_MAX_MEMBERS) {
				za_log_err("%s:%u: bad member path or too many",
					   path, lineno);
				goto err;
			}
			r->paths[r->nr_paths] = strdup(line + 7);
			if (!r->paths[r->nr_paths]) {
				ret = -ENOMEM;
				goto err;
			}
			r->nr_paths++;
		} else if (!strncmp(line, "tcp ", 4)) {
			char host[ZA_EXPORT_HOST_BYTES], port[8];

			if (za_export_parse_tcp(line + 4, host, port) < 0) {
				za_log_err("%s:%u: bad TCP address", path,
					   lineno);
				goto err;
			}
			/* parse_tcp bounded its length */
			snprintf(r->tcp, sizeof(r->tcp), "%.*s",
				 (int)sizeof(r->tcp) - 1, line + 4);
		} else if (!strncmp(line, "scrub ", 6)) {
			/* Not worth refusing the array over: the scrub
			 * starts from the beginning next time. */
			if (scrub_parse(line + 6, &r->scrub) < 0)
				za_log_warn("%s:%u: bad scrub state ignored",
					    path, lineno);
		} else if (!strncmp(line, "gc ", 3)) {
			/* Settings: bad ones are dropped, not the array. */
			if (gc_parse(line + 3, &r->gc_paused, &r->gc_rate_bps) <
			    0)
				za_log_warn("%s:%u: bad gc settings ignored",
					    path, lineno);
		} else if (!strncmp(line, "rebuild-rate ", 13)) {
			const char *s = line + 13;

			if (u64_parse(&s, &r->rebuild_rate_bps) < 0 || *s) {
				r->rebuild_rate_bps = 0;
				za_log_warn("%s:%u: bad rebuild rate ignored",
					    path, lineno);
			}
		} else if (strncmp(line, "uuid ", 5)) {
			/* Written by a newer zarrayd: keep going. */
			za_log_warn("%s:%u: unknown line ignored", path,
				    lineno);
		}
	}
	if (ferror(f) || !r->name[0] || !r->nr_paths) {
		za_log_err("%s: no name or no member", path);
		goto err;
	}
	return 0;

err:
	za_daemon_record_free(r);
	return ret;
}

static int conf_filter(const struct dirent *de)
{
	size_t n = strlen(de->d_name);

	return de->d_name[0] != '.' && n > 5 &&
	       !strcmp(de->d_name + n - 5, ".conf");
}

/*
 * The array's scrub moved on, started or ended: record it. A position
 * alone is written at most once a second (a rename and two fsyncs each
 * time; a restart then re-checks at most a second's worth of segments),
 * everything else at once: a run that ends, or is cut short by a stop,
 * must be on disk before the daemon exits.
 */
void za_daemon_record_scrub(void *priv, const struct za_array_scrub_save *s)
{
	struct d_array *e = priv;
	struct za_daemon *d = e->d;
	ev_tstamp now = ev_now(d->loop);

	e->scrub = *s;
	e->scrub.progress = false;
	if (s->progress && now - e->scrub_written < 1.0) {
		e->scrub_dirty = true;
		if (!ev_is_active(&d->save_timer)) {
			ev_timer_set(&d->save_timer, 1.0, 0.0);
			ev_timer_start(d->loop, &d->save_timer);
		}
		return;
	}
	e->scrub_dirty = false;
	e->scrub_written = now;
	za_daemon_record_write(d, e);
}

void za_daemon_record_tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct za_daemon *d = t->data;
	struct d_array *e;

	(void)loop;
	(void)revents;
	for (e = d->arrays; e; e = e->next) {
		if (!e->scrub_dirty)
			continue;
		e->scrub_dirty = false;
		e->scrub_written = ev_now(d->loop);
		za_daemon_record_write(d, e);
	}
}

/*
 * Assemble a recorded array from the recorded paths that still exist: a
 * pulled drive's node is gone, and the array must come up degraded
 * without it (its member is then missing), not stay down. A path that
 * exists but is not the drive it was is sorted out by the superblocks.
 */
static int assemble_record(struct za_daemon *d, const struct d_record *r,
			   struct za_array **a, char *err, size_t errlen)
{
	const char **paths =
		calloc(r->nr_paths ? r->nr_paths : 1, sizeof(*paths));
	unsigned i, n = 0;
	int ret;

	if (!paths)
		return -ENOMEM;
	for (i = 0; i < r->nr_paths; i++) {
		struct za_array_member_status m;
		struct d_array *e;
		struct stat sp;

		if (access(r->paths[i], F_OK) < 0 && errno == ENOENT) {
			za_log_warn("%s: %s is gone: assembling without it",
				    r->name, r->paths[i]);
			continue;
		}
		/* Removed from this array, and since a member of one that
		 * is running: not this array's, and locked by the other. */
		if (!stat(r->paths[i], &sp) &&
		    za_daemon_find_held(d, &sp, 1, &e, &m) >= 0) {
			za_log_info("%s: %s is member %u of '%s' now: "
				    "assembling without it",
				    r->name, r->paths[i], m.idx, e->name);
			continue;
		}
		paths[n++] = r->paths[i];
	}
	ret = n ? za_daemon_assemble(d, r->name, paths, n, a, err, errlen) :
		  -ENOENT;
	if (!n)
		snprintf(err, errlen, "none of its recorded drives exists");
	free(paths);
	return ret;
}

/*
 * The job settings the record kept, given back to the array as if asked
 * again; one that does not take is logged and dropped from the record
 * (rewritten at the next change).
 */
static void settings_restore(struct d_array *e, const struct d_record *r)
{
	char err[256] = "";

	if (r->gc_rate_bps &&
	    za_array_gc(e->a, ZA_ARRAY_GC_RATE, r->gc_rate_bps, err,
			sizeof(err)) >= 0)
		e->gc_rate_bps = r->gc_rate_bps;
	if (r->gc_paused &&
	    za_array_gc(e->a, ZA_ARRAY_GC_PAUSE, 0, err, sizeof(err)) >= 0)
		e->gc_paused = true;
	if (r->rebuild_rate_bps &&
	    za_array_rebuild(e->a, ZA_ARRAY_REBUILD_RATE, r->rebuild_rate_bps,
			     err, sizeof(err)) >= 0)
		e->rebuild_rate_bps = r->rebuild_rate_bps;
	if (*err)
		za_log_err("%s: a job setting not restored: %s", r->name, err);
}

/* Assemble what the state directory lists; failures are only logged. */
void za_daemon_assemble_recorded(struct za_daemon *d)
{
	struct dirent **list;
	int i, n;

	n = scandir(d->arrays_dir, &list, conf_filter, alphasort);
	if (n < 0) {
		za_log_err("%s: %s", d->arrays_dir, strerror(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		struct za_array *a = NULL;
		struct d_array *e;
		struct d_record r;
		char err[256] = "";
		int ret;

		if (record_read(d, list[i]->d_name, &r) < 0) {
			free(list[i]);
			continue;
		}
		free(list[i]);
		if (za_daemon_find_array(d, r.name)) {
			za_daemon_record_free(&r);
			continue;
		}
		ret = assemble_record(d, &r, &a, err, sizeof(err));
		if (ret < 0) {
			za_log_err("%s: not assembled at start: %s", r.name,
				   *err ? err : strerror(-ret));
			za_daemon_record_free(&r);
			continue;
		}
		za_daemon_register_array(d, a, r.name, r.paths, r.nr_paths, &e);
		if (e) {
			za_log_info("%s: assembled from %u recorded "
				    "devices",
				    r.name, r.nr_paths);
			/* Kept even if it cannot listen now: it is wanted. */
			snprintf(e->tcp, sizeof(e->tcp), "%s", r.tcp);
			if (za_daemon_export_start(d, e, r.tcp, err,
						   sizeof(err)) < 0)
				za_log_err("%s: not exported: %s", r.name, err);
			/* A scrub that was running goes on where it got to. */
			e->scrub = r.scrub;
			if ((r.scrub.running || r.scrub.position) &&
			    za_array_scrub_restore(a, &r.scrub, err,
						   sizeof(err)) < 0)
				za_log_err("%s: scrub not resumed: %s", r.name,
					   err);
			settings_restore(e, &r);
		}
		za_daemon_record_free(&r);
	}
	free(list);
}
