// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array.c - array lifecycle: create (format members, first superblocks),
 * assemble (resolve members from their superblocks, refuse what cannot be
 * trusted), start the engine and the volume on them, stop and destroy;
 * the array's policy settings and fault injection (a test aid).
 *
 * It owns the member devices and the segment engine; the volume (map,
 * journal, GC) and the NBD export sit above it and are not here. Policy
 * lives here: an array starts degraded with up to p members lost and
 * refuses to start with more. Membership changes while it runs are in
 * array-members.c, its background jobs in array-jobs.c, its status in
 * array-status.c.
 */
#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "array-int.h"
#include "container.h"
#include "dev-fault.h"
#include "dev.h"
#include "log.h"

void arr_seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

const char *za_array_state_str(enum za_array_state s)
{
	switch (s) {
	case ZA_ARRAY_HEALTHY:
		return "healthy";
	case ZA_ARRAY_DEGRADED:
		return "degraded";
	case ZA_ARRAY_FAILED:
		return "failed";
	}
	return "unknown";
}

static bool name_ok(const char *n)
{
	size_t i, len = n ? strlen(n) : 0;

	if (!len || len >= ZA_SB_NAME_BYTES)
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && !strchr("_.-", n[i]))
			return false;
	return true;
}

void arr_rebuild_quiesce(struct za_array *a);

static void array_free(struct za_array *a)
{
	unsigned i;

	if (!a)
		return;
	if (a->vol) {
		za_volume_gc_stop(a->vol);
		while (za_volume_busy(a->vol))
			za_io_run_once(a->io);
	}
	arr_rebuild_quiesce(a);
	if (a->eng) {
		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
	}
	za_rebuild_free(a->rb);
	za_scrub_free(a->scrub);
	za_volume_free(a->vol);
	za_engine_free(a->eng);
	for (i = 0; i < a->nr_members; i++)
		if (a->devs && a->devs[i])
			za_dev_close(a->devs[i]);
	free(a->devs);
	free(a->paths);
	free(a->states);
	free(a->sb_ops);
	free(a->sb);
	free(a);
}

static struct za_array *array_alloc(struct za_io *io, unsigned n)
{
	struct za_array *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->io = io;
	a->nr_members = n;
	a->sb = calloc(1, sizeof(*a->sb));
	a->devs = calloc(n, sizeof(*a->devs));
	a->paths = calloc(n, sizeof(*a->paths));
	a->states = calloc(n, 1);
	a->sb_ops = calloc(n, sizeof(*a->sb_ops));
	if (!a->sb || !a->devs || !a->paths || !a->states || !a->sb_ops) {
		array_free(a);
		return NULL;
	}
	return a;
}

void za_array_policy_default(struct za_array_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->auto_rebuild = true;
	p->max_read_errors = ZA_ARRAY_MAX_READ_ERRORS;
	p->idle_gc_ms = ZA_ARRAY_IDLE_GC_MS;
	p->map_cache_bytes = za_array_map_cache_default();
}

uint64_t za_array_map_cache_default(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t q;

	if (pages <= 0 || psz <= 0)
		return ZA_ARRAY_MAP_CACHE_MIN;
	q = (uint64_t)pages * (uint64_t)psz / 4;
	return q > ZA_ARRAY_MAP_CACHE_MIN ? q : ZA_ARRAY_MAP_CACHE_MIN;
}

/* ---- fault injection (a test aid: zarrayd --fault-injection) ---- */

/* za_dev_open(), wrapped in the fault injector if @fault. */
int arr_member_open(struct za_io *io, const char *path, bool fault,
		    struct za_dev **out)
{
	struct za_dev *dev;
	int ret = za_dev_open(io, path, 0, &dev);

	if (ret || !fault) {
		*out = ret ? NULL : dev;
		return ret;
	}
	ret = za_fault_wrap(dev, out);
	if (ret)
		za_dev_close(dev);
	return ret;
}

/*
 * The member @path names: one in service first, since a removed member's
 * drive may have been added again as a new member; else a removed one.
 */
int arr_member_find(const struct za_array *a, const char *path)
{
	int found = -1;
	unsigned i;

	for (i = 0; i < a->nr_members; i++) {
		if (strcmp(a->paths[i], path))
			continue;
		if (a->states[i] != ZA_MEMBER_REMOVED)
			return (int)i;
		found = (int)i;
	}
	return found;
}

int za_array_inject(struct za_array *a, const char *path, const char *spec,
		    char *err, size_t errlen)
{
	struct za_fault_cfg cfg = { 0 };
	const char *bad = NULL;
	int i = arr_member_find(a, path);

	if (i < 0) {
		arr_seterr(err, errlen, "%s is not a member of array '%s'",
			   path, a->sb->name);
		return -ENOENT;
	}
	if (!a->devs[i]) {
		arr_seterr(err, errlen,
			   "%s is %s: zarrayd holds no device for it", path,
			   za_member_state_str(a->states[i]));
		return -ENODEV;
	}
	if (!za_dev_is_fault(a->devs[i])) {
		arr_seterr(
			err, errlen,
			"fault injection is off: zarrayd was started without "
			"--fault-injection");
		return -EOPNOTSUPP;
	}
	if (strcmp(spec, "none") && za_fault_parse(spec, &cfg, &bad)) {
		arr_seterr(err, errlen, "invalid fault spec at '%.40s'",
			   bad ? bad : spec);
		return -EINVAL;
	}
	za_log_warn("array %s: member %d (%s): injecting faults: %s",
		    a->sb->name, i, path, spec);
	za_fault_set(a->devs[i], &cfg);
	return 0;
}

static void on_member_failed(struct za_engine *e, unsigned idx, int err,
			     void *priv)
{
	struct za_array *a = priv;

	(void)e;
	a->states[idx] = ZA_MEMBER_FAILED;
	za_log_err("array %s: member %u (%s) failed: %s; %u of %u lost",
		   a->sb->name, idx, a->paths[idx], strerror(-err),
		   za_engine_nr_lost(a->eng), (unsigned)a->sb->geom.p);
	arr_replaces_abandon(a);
	arr_sb_round(a);
	arr_rebuild_kick(a);
}

static int engine_start(struct za_array *a, uint64_t next_seq,
			uint64_t next_seg, bool recover)
{
	struct za_engine_params prm = { 0 };

	prm.recover = recover;
	prm.geom = a->sb->geom;
	prm.array_uuid = a->sb->array_uuid;
	prm.nr_members = a->nr_members;
	prm.devs = a->devs;
	prm.states = a->states;
	prm.next_seq = next_seq;
	prm.next_seg_id = next_seg;
	/* md's default (max_corrected_read_errors): a few unreadable
	 * sectors in a drive's life are normal and repaired from parity; a
	 * drive that keeps returning them is dying, and its reads cost a
	 * decode each. Our count is of failed reads, never decayed, and
	 * starts again at each assembly. */
	prm.max_read_errors = a->pol.max_read_errors;
	prm.member_failed = on_member_failed;
	prm.priv = a;
	prm.progress = a->pol.progress;
	return za_engine_new(a->io, &prm, &a->eng);
}

static int volume_start(struct za_array *a)
{
	struct za_volume_params vp = { 0 };

	vp.eng = a->eng;
	vp.size_bytes = a->sb->volume_bytes;
	/* Garbage collected while idle, so that writes after a quiet spell
	 * find room (docs/design.md 10.1). */
	vp.idle_gc_ms = a->pol.idle_gc_ms;
	vp.map_cache_bytes = a->pol.map_cache_bytes;
	/* Checkpoints are live once the superblocks name them (9.6). */
	vp.anchor = arr_anchor;
	vp.anchor_priv = a;
	vp.anchor_rec = a->sb->volume_meta;
	return za_volume_new(a->io, &vp, &a->vol);
}

/* ---- create ---- */

bool arr_same_file(const struct stat *x, const struct stat *y)
{
	if (S_ISBLK(x->st_mode) && S_ISBLK(y->st_mode))
		return x->st_rdev == y->st_rdev;
	return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

/* Default rows: a column of at least 256 KiB per header, at most 1 MiB. */
static uint8_t default_rows(uint32_t chunk)
{
	uint32_t rows = chunk >= (256u << 10) ? 1 : (256u << 10) / chunk;

	return (uint8_t)(rows > 255 ? 255 : rows);
}

/* Drives that hold no volume of k+p with the GC reserve, asked or not. */
static void seterr_too_small(char *err, size_t errlen, unsigned k, unsigned p)
{
	arr_seterr(err, errlen,
		   "these drives are too small for %u+%u with the reserve "
		   "garbage collection needs",
		   k, p);
}

int za_array_create(struct za_io *io, const struct za_array_create_params *p,
		    struct za_array **out, char *err, size_t errlen)
{
	struct stat *st = NULL;
	struct za_array *a = NULL;
	const char *why = NULL;
	struct za_geom g = { 0 };
	unsigned i, j, n = p->nr_paths;
	int ret;

	if (!name_ok(p->name)) {
		arr_seterr(err, errlen,
			   "invalid array name '%s': 1-63 characters of "
			   "A-Z a-z 0-9 _ . -",
			   p->name ? p->name : "");
		return -EINVAL;
	}
	g.k = (uint8_t)p->k;
	g.p = (uint8_t)p->p;
	g.matrix = ZA_EC_MATRIX_CAUCHY;
	g.chunk_bytes = p->chunk_bytes ? p->chunk_bytes : 64u << 10;
	g.stripe_rows = default_rows(g.chunk_bytes);
	g.lblock_bytes = 4096;
	g.hdr_bytes = 4096;
	if (p->k < 1 || p->k > 63 || p->p < 1 || p->p > 6 ||
	    za_geom_check(&g, &why)) {
		arr_seterr(err, errlen, "invalid geometry %u+%u, chunk %u: %s",
			   p->k, p->p, g.chunk_bytes,
			   why ? why : "data must be 1-63, parity 1-6");
		return -EINVAL;
	}
	if (n < p->k + p->p) {
		arr_seterr(err, errlen,
			   "%u+%u needs at least %u drives, %u given", p->k,
			   p->p, p->k + p->p, n);
		return -EINVAL;
	}
	if (p->size_bytes % 4096) {
		arr_seterr(err, errlen,
			   "the volume size must be a multiple of 4 KiB");
		return -EINVAL;
	}
	if (n > ZA_SB_MAX_MEMBERS) {
		arr_seterr(err, errlen, "at most %u drives per array",
			   ZA_SB_MAX_MEMBERS);
		return -EINVAL;
	}
	st = calloc(n, sizeof(*st));
	a = array_alloc(io, n);
	if (a) {
		if (p->policy)
			a->pol = *p->policy;
		else
			za_array_policy_default(&a->pol);
	}
	if (!st || !a) {
		ret = -ENOMEM;
		arr_seterr(err, errlen, "out of memory");
		goto err_free;
	}
	for (i = 0; i < n; i++) {
		if (stat(p->paths[i], &st[i])) {
			ret = -errno;
			arr_seterr(err, errlen, "%s: %s", p->paths[i],
				   strerror(errno));
			goto err_free;
		}
		for (j = 0; j < i; j++)
			if (arr_same_file(&st[i], &st[j])) {
				ret = -EINVAL;
				arr_seterr(err, errlen,
					   "%s and %s are the same drive",
					   p->paths[j], p->paths[i]);
				goto err_free;
			}
	}
	/* Open and check every drive before writing anything to any. */
	for (i = 0; i < n; i++) {
		struct za_sb *old;

		snprintf(a->paths[i], sizeof(a->paths[i]), "%s", p->paths[i]);
		ret = arr_member_open(io, p->paths[i], a->pol.fault_injection,
				      &a->devs[i]);
		if (ret) {
			arr_seterr(err, errlen, "%s: %s", p->paths[i],
				   ret == -EMEDIUMTYPE ?
					   "not a zoned drive" :
				   ret == -EWOULDBLOCK || ret == -EBUSY ?
					   "in use by another process" :
					   strerror(-ret));
			if (ret == -EWOULDBLOCK)
				ret = -EBUSY;
			goto err_free;
		}
		ret = za_sb_check_dev(a->devs[i]);
		if (ret) {
			arr_seterr(err, errlen,
				   "%s: unsuitable drive (too few or too small "
				   "zones, or blocks other than 4096 bytes)",
				   p->paths[i]);
			goto err_free;
		}
		old = malloc(sizeof(*old));
		if (!old) {
			ret = -ENOMEM;
			goto err_free;
		}
		ret = za_sb_read(a->devs[i], old);
		if (ret == 0 && !p->force) {
			char u[37];

			za_uuid_fmt(&old->array_uuid, u);
			arr_seterr(
				err, errlen,
				"%s belongs to array '%s' (%s); use --force to "
				"overwrite it",
				p->paths[i], old->name, u);
			free(old);
			ret = -EBUSY;
			goto err_free;
		}
		free(old);
		if (ret && ret != -ENOENT && ret != -EBADMSG &&
		    ret != -EPROTONOSUPPORT) {
			arr_seterr(err, errlen, "%s: cannot read: %s",
				   p->paths[i], strerror(-ret));
			goto err_free;
		}
	}
	/* Format: clear old superblocks and data zones, then write ours. */
	ret = za_uuid_gen(&a->sb->array_uuid);
	if (ret)
		goto err_free;
	snprintf(a->sb->name, sizeof(a->sb->name), "%s", p->name);
	a->sb->generation = 1;
	a->sb->ctime_s = (uint64_t)time(NULL);
	a->sb->geom = g;
	a->sb->volume_bytes = p->size_bytes;
	a->sb->nr_members = n;
	for (i = 0; i < n; i++) {
		struct za_sb_member *m = &a->sb->members[i];
		const struct za_dev_caps *c = &a->devs[i]->caps;
		const char *hint = p->paths[i];

		if (strlen(hint) >= ZA_SB_HINT_BYTES)
			hint += strlen(hint) - (ZA_SB_HINT_BYTES - 1);
		ret = za_uuid_gen(&m->uuid);
		if (ret)
			goto err_free;
		m->state = ZA_MEMBER_ONLINE;
		m->nr_zones = c->nr_zones;
		m->capacity_bytes = c->capacity_bytes;
		m->zone_size_bytes = c->zone_size_bytes;
		snprintf(m->path_hint, sizeof(m->path_hint), "%s", hint);
		a->states[i] = ZA_MEMBER_ONLINE;
	}
	for (i = 0; i < n; i++) {
		ret = za_sb_clear(a->devs[i]);
		if (!ret)
			ret = za_engine_format(a->devs[i]);
		if (!ret) {
			a->sb->member_uuid = a->sb->members[i].uuid;
			a->sb->member_idx = i;
			ret = za_sb_write(a->devs[i], a->sb);
		}
		if (ret) {
			arr_seterr(err, errlen, "%s: formatting failed: %s",
				   p->paths[i], strerror(-ret));
			goto err_free;
		}
	}
	ret = engine_start(a, 1, 1, false);
	if (ret) {
		arr_seterr(err, errlen, "cannot start the array: %s",
			   strerror(-ret));
		goto err_free;
	}
	{
		uint64_t usable = za_volume_default_size(a->eng);
		char b1[32], b2[32];

		if (p->size_bytes && !usable) {
			seterr_too_small(err, errlen, p->k, p->p);
			ret = -ENOSPC;
			goto err_clear;
		}
		if (p->size_bytes > usable) {
			arr_seterr(
				err, errlen,
				"--size %s is more than the %s these drives "
				"can hold with %u+%u and a reserve for garbage "
				"collection (at most %llu bytes)",
				za_fmt_size(p->size_bytes, b1, sizeof(b1)),
				za_fmt_size(usable, b2, sizeof(b2)), p->k, p->p,
				(unsigned long long)usable);
			ret = -EINVAL;
			goto err_clear;
		}
	}
	ret = volume_start(a);
	if (ret) {
		if (ret == -ENOSPC)
			seterr_too_small(err, errlen, p->k, p->p);
		else
			arr_seterr(err, errlen,
				   "cannot start the volume (%u+%u)", p->k,
				   p->p);
		goto err_clear;
	}
	ret = arr_rebuild_new(a);
	if (ret) {
		arr_seterr(err, errlen, "out of memory");
		goto err_clear;
	}
	if (!p->size_bytes) {
		a->sb->volume_bytes = za_volume_size(a->vol);
		a->sb->generation++;
		for (i = 0; i < n && !ret; i++) {
			a->sb->member_uuid = a->sb->members[i].uuid;
			a->sb->member_idx = i;
			ret = za_sb_write(a->devs[i], a->sb);
		}
		if (ret) {
			arr_seterr(err, errlen,
				   "%s: superblock write failed: %s",
				   p->paths[i - 1], strerror(-ret));
			goto err_clear;
		}
	}
	free(st);
	za_log_info("array %s created: %u+%u over %u drives", p->name, p->k,
		    p->p, n);
	*out = a;
	return 0;

err_clear:
	/* Leave no half-made array behind. */
	za_engine_free(a->eng);
	a->eng = NULL;
	for (i = 0; i < n; i++)
		za_sb_clear(a->devs[i]);
err_free:
	free(st);
	array_free(a);
	return ret;
}

/* ---- assemble ---- */

int za_array_assemble(struct za_io *io, const char *name,
		      const char *const *paths, unsigned n,
		      const struct za_array_policy *policy,
		      struct za_array **out, char *err, size_t errlen)
{
	struct za_array_policy pol;
	struct za_dev **devs = NULL;
	struct za_sb **sbs = NULL;
	struct za_asm_result *res = NULL;
	struct za_array *a = NULL;
	int *rc = NULL, ret;
	unsigned i, nm;
	bool changed = false;

	if (!n || n > ZA_SB_MAX_MEMBERS) {
		arr_seterr(err, errlen, "give between 1 and %u drives",
			   ZA_SB_MAX_MEMBERS);
		return -EINVAL;
	}
	if (policy)
		pol = *policy;
	else
		za_array_policy_default(&pol);
	devs = calloc(n, sizeof(*devs));
	sbs = calloc(n, sizeof(*sbs));
	rc = calloc(n, sizeof(*rc));
	res = calloc(1, sizeof(*res));
	if (!devs || !sbs || !rc || !res) {
		ret = -ENOMEM;
		goto out;
	}
	/* Every drive's zone report at once (each is ~75,000 zones on a
	 * 20 TB SMR drive); then their superblocks. */
	za_progress_set(pol.progress, "opening drives", 0, n);
	za_dev_open_many(io, paths, n, 0, devs, rc);
	for (i = 0; i < n; i++) {
		za_progress_set(pol.progress, "reading superblocks", i, n);
		ret = rc[i];
		if (!ret && pol.fault_injection) {
			struct za_dev *raw = devs[i];

			ret = za_fault_wrap(raw, &devs[i]);
			if (ret) {
				devs[i] = NULL;
				za_dev_close(raw);
			}
		}
		if (ret) {
			arr_seterr(err, errlen, "%s: %s", paths[i],
				   ret == -EMEDIUMTYPE ?
					   "not a zoned drive" :
				   ret == -EWOULDBLOCK ?
					   "in use by another process" :
					   strerror(-ret));
			if (ret == -EWOULDBLOCK)
				ret = -EBUSY;
			goto out;
		}
		sbs[i] = malloc(sizeof(**sbs));
		if (!sbs[i]) {
			ret = -ENOMEM;
			goto out;
		}
	}
	/* Every member's newest records at once, then checked in turn. */
	ret = za_sb_read_many(devs, n, sbs, rc);
	if (ret)
		goto out;
	for (i = 0; i < n; i++) {
		if (rc[i]) {
			free(sbs[i]);
			sbs[i] = NULL;
		}
	}
	ret = za_sb_assemble((const struct za_sb *const *)sbs, rc, n, name,
			     res);
	if (ret == -ENOENT) {
		arr_seterr(err, errlen,
			   "no drive given belongs to an array '%s'",
			   name ? name : "");
		goto out;
	}
	if (ret == -EEXIST) {
		arr_seterr(err, errlen,
			   "two different arrays are called '%s' among these "
			   "drives: give the drives of one",
			   name ? name : "");
		goto out;
	}
	if (ret) {
		arr_seterr(err, errlen, "assembly failed: %s", strerror(-ret));
		goto out;
	}
	for (i = 0; i < n; i++)
		if (res->dev_state[i] != ZA_ASM_DEV_MEMBER)
			za_log_warn("%s: not used: %s", paths[i],
				    za_asm_dev_str(res->dev_state[i]));
	nm = res->ref->nr_members;
	if (res->nr_lost > res->ref->geom.p) {
		char list[512] = "";
		size_t off = 0;

		for (i = 0; i < nm && off < sizeof(list) - 64; i++)
			if (res->member_state[i] == ZA_MEMBER_MISSING ||
			    res->member_state[i] == ZA_MEMBER_FAILED)
				off += (size_t)snprintf(
					list + off, sizeof(list) - off,
					"%s%u (%s, last seen %s)",
					off ? ", " : "", i,
					za_member_state_str(
						res->member_state[i]),
					res->ref->members[i].path_hint);
		arr_seterr(err, errlen,
			   "array '%s' cannot start: %u members lost, parity "
			   "covers %u: %s",
			   res->ref->name, res->nr_lost, res->ref->geom.p,
			   list);
		ret = -ENXIO;
		goto out;
	}
	a = array_alloc(io, nm);
	if (a)
		a->pol = pol;
	if (!a) {
		ret = -ENOMEM;
		goto out;
	}
	*a->sb = *res->ref;
	for (i = 0; i < nm; i++) {
		int d = res->member_dev[i];

		a->states[i] = res->member_state[i];
		if (a->states[i] != a->sb->members[i].state)
			changed = true;
		if (d >= 0) {
			a->devs[i] = devs[d];
			devs[d] = NULL;
			snprintf(a->paths[i], sizeof(a->paths[i]), "%s",
				 paths[d]);
		} else {
			const char *path = a->sb->members[i].path_hint;
			unsigned x;

			/* A drive given that this member was (stale: failed
			 * or removed since) has its full path; the hint is
			 * only the path's end. */
			for (x = 0; x < n; x++)
				if (sbs[x] &&
				    res->dev_state[x] == ZA_ASM_DEV_STALE &&
				    za_uuid_eq(&sbs[x]->member_uuid,
					       &a->sb->members[i].uuid)) {
					path = paths[x];
					break;
				}
			snprintf(a->paths[i], sizeof(a->paths[i]), "%s", path);
		}
	}
	/*
	 * Data zones already written are kept (USED) by the engine until
	 * recovery has read them; sequence numbers and ids then continue
	 * after the highest found on the drives.
	 */
	ret = engine_start(a, 1, 1, true);
	if (ret) {
		arr_seterr(err, errlen, "cannot start the array: %s",
			   strerror(-ret));
		goto out;
	}
	ret = volume_start(a);
	if (!ret)
		ret = za_volume_recover(a->vol);
	if (!ret)
		ret = arr_rebuild_new(a);
	if (!ret)
		ret = za_rebuild_mark_dead_now(a->rb);
	if (ret) {
		arr_seterr(err, errlen, "cannot recover the volume: %s",
			   strerror(-ret));
		goto out;
	}
	/* A replace goes on onto the drive it was given, not spread over
	 * the other members with the new drive left empty (NEWS: seed
	 * 7025). One whose drive is gone stops. */
	changed |= arr_replaces_abandon(a);
	for (i = 0; i < nm; i++) {
		int r = arr_replacement_of(a, i);

		if (r < 0)
			continue;
		za_rebuild_set_dest(a->rb, i, r);
		za_log_info("array %s: member %u (%s) is still being replaced "
			    "by member %d (%s)",
			    a->sb->name, i, a->paths[i], r, a->paths[r]);
	}
	/* Columns lost before the restart (or a rebuild interrupted by it)
	 * are found again on the drives: carry on. A lost or draining member
	 * with nothing left to rebuild (GC freed its last columns) needs a
	 * run too: only the end of one retires members (arr_rb_flushed). */
	if (za_engine_degraded(a->eng, NULL, 0) || arr_members_to_retire(a))
		arr_rebuild_kick(a);
	if (changed)
		arr_sb_round(a);
	za_log_info("array %s assembled: %u members, %u lost", a->sb->name, nm,
		    res->nr_lost);
	a->pol.progress = NULL;
	*out = a;
	a = NULL;
	ret = 0;
out:
	if (a)
		array_free(a);
	for (i = 0; devs && i < n; i++) {
		if (devs[i])
			za_dev_close(devs[i]);
		if (sbs)
			free(sbs[i]);
	}
	free(devs);
	free(sbs);
	free(rc);
	free(res);
	return ret;
}

/* ---- running ---- */

int za_array_stop(struct za_array *a)
{
	int ret = 0;

	if (!a)
		return 0;
	arr_rebuild_quiesce(a);
	a->stopping = true;
	if (a->vol) {
		/* Nothing new for GC to start: a stop must end. */
		za_volume_gc_stop(a->vol);
		ret = za_volume_flush_sync(a->vol);
	}
	/* A clean stop leaves nothing to replay at the next assembly. A
	 * checkpoint that fails loses nothing: the stop goes on. */
	if (a->vol && !ret && za_volume_checkpoint_sync(a->vol))
		za_log_warn("array %s: no checkpoint at stop: the next "
			    "assembly replays the log",
			    a->sb->name);
	if (a->eng) {
		int r;

		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
		r = za_engine_flush_sync(a->eng);
		if (!ret)
			ret = r;
	}
	za_log_info("array %s stopped", a->sb->name);
	array_free(a);
	return ret;
}

int za_array_destroy(struct za_array *a)
{
	unsigned i;
	int ret = 0, r;

	if (!a)
		return 0;
	arr_rebuild_quiesce(a);
	a->stopping = true;
	if (a->vol) {
		za_volume_gc_stop(a->vol);
		while (za_volume_busy(a->vol))
			za_io_run_once(a->io);
		za_volume_free(a->vol);
		a->vol = NULL;
	}
	if (a->eng) {
		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
		za_engine_free(a->eng);
		a->eng = NULL;
	}
	for (i = 0; i < a->nr_members; i++) {
		if (!a->devs[i])
			continue;
		r = za_sb_clear(a->devs[i]);
		if (!r)
			r = za_engine_format(a->devs[i]);
		if (r && !ret)
			ret = r;
	}
	za_log_info("array %s destroyed", a->sb->name);
	array_free(a);
	return ret;
}

const char *za_array_name(const struct za_array *a)
{
	return a->sb->name;
}

struct za_engine *za_array_engine(struct za_array *a)
{
	return a->eng;
}

struct za_volume *za_array_volume(struct za_array *a)
{
	return a->vol;
}
