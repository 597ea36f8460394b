// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array-members.c - membership and capacity changes of a running array:
 * superblock rounds (a failed member is recorded in every surviving
 * member's superblock before anyone relies on it), fail, add, remove
 * (drain), replace, and growing the volume. It starts the drain's job
 * (array-jobs.c) but does not run it, and does not assemble.
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

#include "array-int.h"
#include "container.h"
#include "dev-fault.h"
#include "dev.h"
#include "log.h"

/* ---- superblock updates while running ---- */

void arr_sb_round(struct za_array *a);

/*
 * A round has ended: every member in service has the record or has
 * failed. An anchor it carried is durable where assembly looks
 * (design.md 9.6).
 */
static void sb_round_end(struct za_array *a)
{
	if (a->anchor_in_round) {
		a->anchor_in_round = false;
		a->anchor_wait = false;
		if (a->vol)
			za_volume_anchored(a->vol);
	}
	if (a->sb_dirty && !a->sb_pending)
		arr_sb_round(a);
}

static void sb_write_done(struct za_sb_write_op *op, int result)
{
	struct za_array *a = op->priv;
	unsigned idx = (unsigned)(op - a->sb_ops);

	if (result) {
		za_log_err("%s: superblock update failed: %s", a->paths[idx],
			   strerror(-result));
		if (a->eng && !a->stopping)
			za_engine_member_fail(a->eng, idx, result);
	} else {
		a->sb_written++;
	}
	if (--a->sb_pending == 0)
		sb_round_end(a);
}

/*
 * The member that takes member @i's place (zarray replace), if its record
 * still holds, or -1: while @i is draining, failed or missing and the new
 * member is online; once @i is removed, or the new one is not in service,
 * the record is dropped (a draining @i is back in service then:
 * arr_replaces_abandon(); the rebuild puts a lost @i's columns anywhere).
 */
int arr_replacement_of(const struct za_array *a, unsigned i)
{
	unsigned r = a->sb->members[i].replacement;

	if (!r || r - 1 >= a->nr_members || r - 1 == i)
		return -1;
	if ((a->states[i] != ZA_MEMBER_DRAINING &&
	     a->states[i] != ZA_MEMBER_FAILED &&
	     a->states[i] != ZA_MEMBER_MISSING) ||
	    a->states[r - 1] != ZA_MEMBER_ONLINE)
		return -1;
	return (int)r - 1;
}

/*
 * Stop the replace of member @o, draining for it: @o goes back into
 * service, as md keeps the original device when its replacement fails or
 * is removed, and the record is dropped; the columns the new member had
 * taken are rebuilt from the others (it failed) or move off it like any
 * draining member's (it is being removed). 0, or -EINVAL if @o is not
 * draining.
 */
static int replace_stop(struct za_array *a, unsigned o, const char *why)
{
	unsigned r = a->sb->members[o].replacement;

	if (za_engine_member_undrain(a->eng, o))
		return -EINVAL;
	a->states[o] = ZA_MEMBER_ONLINE;
	a->sb->members[o].replacement = 0;
	if (a->rb)
		za_rebuild_set_dest(a->rb, o, -1);
	za_log_warn("array %s: replace of member %u (%s) stopped: its "
		    "replacement, member %u (%s), %s; member %u stays in "
		    "service",
		    a->sb->name, o, a->paths[o], r - 1, a->paths[r - 1], why,
		    o);
	return 0;
}

/* The member whose replace member @n is (draining for it), or -1. */
static int replaced_by_member(const struct za_array *a, unsigned n)
{
	unsigned o;

	for (o = 0; o < a->nr_members; o++)
		if (a->states[o] == ZA_MEMBER_DRAINING &&
		    arr_replacement_of(a, o) == (int)n)
			return (int)o;
	return -1;
}

/*
 * A replace whose new drive left service (failed, or missing at assembly)
 * before it had all of OLD's columns: an OLD that was whole, draining
 * only for the replace, goes back into service (replace_stop()). (A
 * failed OLD stays failed: its columns are rebuilt onto any member.) True
 * if any did.
 */
bool arr_replaces_abandon(struct za_array *a)
{
	char why[64];
	bool any = false;
	unsigned o, r;

	for (o = 0; o < a->nr_members; o++) {
		r = a->sb->members[o].replacement;
		if (!r || r - 1 >= a->nr_members || r - 1 == o ||
		    a->states[o] != ZA_MEMBER_DRAINING ||
		    a->states[r - 1] == ZA_MEMBER_ONLINE)
			continue;
		snprintf(why, sizeof(why), "is %s",
			 za_member_state_str(a->states[r - 1]));
		any |= replace_stop(a, o, why) == 0;
	}
	return any;
}

/*
 * Write the current record (with the next generation) to every member that
 * is still in service. A change made while a round is in flight is written
 * by the next round, so rounds never overlap on a drive.
 */
void arr_sb_round(struct za_array *a)
{
	unsigned i;

	if (a->sb_pending) {
		a->sb_dirty = true;
		return;
	}
	a->sb_dirty = false;
	a->anchor_in_round = a->anchor_wait;
	a->sb->generation++;
	for (i = 0; i < a->nr_members; i++)
		a->sb->members[i].state = a->states[i];
	for (i = 0; i < a->nr_members; i++)
		if (arr_replacement_of(a, i) < 0)
			a->sb->members[i].replacement = 0;
	for (i = 0; i < a->nr_members; i++) {
		if (!a->devs[i] || (a->states[i] != ZA_MEMBER_ONLINE &&
				    a->states[i] != ZA_MEMBER_DRAINING))
			continue;
		a->sb->member_uuid = a->sb->members[i].uuid;
		a->sb->member_idx = i;
		a->sb_pending++;
		if (za_sb_write_async(&a->sb_ops[i], a->devs[i], a->sb,
				      sb_write_done, a)) {
			a->sb_pending--;
			za_log_err("%s: cannot queue a superblock update",
				   a->paths[i]);
		}
	}
	/* No member in service: nothing to wait for. */
	if (!a->sb_pending)
		sb_round_end(a);
}

/* za_volume_params.anchor: the next round carries the anchor. */
void arr_anchor(void *priv, const uint8_t *rec)
{
	struct za_array *a = priv;

	memcpy(a->sb->volume_meta, rec, sizeof(a->sb->volume_meta));
	a->anchor_wait = true;
	arr_sb_round(a);
}

int za_array_fail(struct za_array *a, const char *path, char *err,
		  size_t errlen)
{
	int i = arr_member_find(a, path);

	if (i < 0) {
		arr_seterr(err, errlen, "%s is not a member of array '%s'",
			   path, a->sb->name);
		return -ENOENT;
	}
	if (a->states[i] == ZA_MEMBER_FAILED) {
		arr_seterr(err, errlen, "%s is already failed", path);
		return -EALREADY;
	}
	if (a->states[i] != ZA_MEMBER_ONLINE &&
	    a->states[i] != ZA_MEMBER_DRAINING) {
		arr_seterr(err, errlen, "%s is %s", path,
			   za_member_state_str(a->states[i]));
		return -EINVAL;
	}
	za_log_warn("array %s: member %d (%s) failed by request", a->sb->name,
		    i, path);
	za_engine_member_fail(a->eng, (unsigned)i, -ECANCELED);
	return 0;
}

/* ---- drive lifecycle: add, remove, replace ---- */

/* Grow the per-member arrays by one (no superblock write in flight). */
static int members_grow(struct za_array *a)
{
	unsigned n = a->nr_members + 1;
	struct za_dev **devs;
	char(*paths)[256];
	uint8_t *states;
	struct za_sb_write_op *ops;

	while (a->sb_pending) /* their ops live in sb_ops */
		za_io_run_once(a->io);
	devs = realloc(a->devs, n * sizeof(*devs));
	if (devs)
		a->devs = devs;
	paths = realloc(a->paths, n * sizeof(*paths));
	if (paths)
		a->paths = paths;
	states = realloc(a->states, n);
	if (states)
		a->states = states;
	ops = realloc(a->sb_ops, n * sizeof(*ops));
	if (ops)
		a->sb_ops = ops;
	if (!devs || !paths || !states || !ops)
		return -ENOMEM;
	a->devs[n - 1] = NULL;
	a->paths[n - 1][0] = 0;
	a->states[n - 1] = ZA_MEMBER_REMOVED;
	memset(&a->sb_ops[n - 1], 0, sizeof(a->sb_ops[n - 1]));
	return 0;
}

/* Open, check and format @path and make it member a->nr_members. */
static int add_one(struct za_array *a, const char *path, unsigned *idx,
		   char *err, size_t errlen)
{
	struct za_sb_member *m;
	struct za_dev *dev;
	struct za_sb *old;
	const char *hint = path;
	unsigned i, eidx;
	int ret, found;

	if (a->nr_members >= ZA_SB_MAX_MEMBERS) {
		arr_seterr(err, errlen, "array '%s' has %u members, the most",
			   a->sb->name, a->nr_members);
		return -ENOSPC;
	}
	found = arr_member_find(a, path);
	if (found >= 0 && a->states[found] != ZA_MEMBER_REMOVED) {
		arr_seterr(err, errlen, "%s is already a member of '%s'", path,
			   a->sb->name);
		return -EEXIST;
	}
	ret = arr_member_open(a->io, path, a->pol.fault_injection, &dev);
	if (ret) {
		arr_seterr(err, errlen, "%s: %s", path,
			   ret == -EMEDIUMTYPE ? "not a zoned drive" :
			   ret == -EWOULDBLOCK || ret == -EBUSY ?
						 "in use by another process" :
						 strerror(-ret));
		return ret == -EWOULDBLOCK ? -EBUSY : ret;
	}
	for (i = 0; i < a->nr_members; i++) {
		struct stat x, y;

		if (a->devs[i] && !stat(a->paths[i], &x) && !stat(path, &y) &&
		    arr_same_file(&x, &y)) {
			arr_seterr(err, errlen, "%s is member %s already", path,
				   a->paths[i]);
			ret = -EEXIST;
			goto err_close;
		}
	}
	ret = za_sb_check_dev(dev);
	if (ret) {
		arr_seterr(
			err, errlen,
			"%s: unsuitable drive (too few or too small zones, or "
			"blocks other than 4096 bytes)",
			path);
		goto err_close;
	}
	old = malloc(sizeof(*old));
	if (!old) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = za_sb_read(dev, old);
	if (!ret) {
		arr_seterr(
			err, errlen,
			"%s belongs to array '%s'; destroy that array or clear "
			"the drive first",
			path, old->name);
		free(old);
		ret = -EBUSY;
		goto err_close;
	}
	free(old);
	ret = members_grow(a);
	if (ret)
		goto err_close;
	ret = za_sb_clear(dev);
	if (!ret)
		ret = za_engine_format(dev);
	if (ret) {
		arr_seterr(err, errlen, "%s: formatting failed: %s", path,
			   strerror(-ret));
		goto err_close;
	}
	ret = za_engine_member_add(a->eng, dev, &eidx);
	if (ret) {
		arr_seterr(err, errlen, "%s: %s", path,
			   ret == -EBUSY ?
				   "a rebuild is running; add the drive "
				   "when it has finished" :
				   "the array cannot use this drive");
		goto err_close;
	}
	assert(eidx == a->nr_members);
	i = a->nr_members++;
	a->devs[i] = dev;
	snprintf(a->paths[i], sizeof(a->paths[i]), "%s", path);
	a->states[i] = ZA_MEMBER_ONLINE;
	a->sb->nr_members = a->nr_members;
	m = &a->sb->members[i];
	memset(m, 0, sizeof(*m));
	if (strlen(hint) >= ZA_SB_HINT_BYTES)
		hint += strlen(hint) - (ZA_SB_HINT_BYTES - 1);
	za_uuid_gen(&m->uuid);
	m->state = ZA_MEMBER_ONLINE;
	m->nr_zones = dev->caps.nr_zones;
	m->capacity_bytes = dev->caps.capacity_bytes;
	m->zone_size_bytes = dev->caps.zone_size_bytes;
	snprintf(m->path_hint, sizeof(m->path_hint), "%s", hint);
	*idx = i;
	return 0;

err_close:
	za_dev_close(dev);
	return ret;
}

int za_array_add(struct za_array *a, const char *const *paths, unsigned n,
		 char *err, size_t errlen)
{
	unsigned i, idx;
	int ret = 0;

	for (i = 0; i < n && !ret; i++) {
		ret = add_one(a, paths[i], &idx, err, errlen);
		if (!ret)
			za_log_info("array %s: member %u (%s) added",
				    a->sb->name, idx, paths[i]);
	}
	if (i > 1 || !ret) {
		arr_sb_round(a); /* the drives added so far are members */
		/* Columns that had nowhere to go (absent ones of segments
		 * opened on fewer than k+p members, lost ones with no member
		 * outside their segment) have somewhere now. */
		if (za_engine_degraded(a->eng, NULL, 0))
			arr_rebuild_kick(a);
	}
	return ret;
}

/*
 * Can the @n members @idx stop taking new segments, with the @nb members
 * @back (old drives of replaces the removal stops) in service again?
 * Enough writable members must remain for k+p, and they must hold the
 * whole volume (not only today's live data: the user may fill it at any
 * time) with the reserve garbage collection needs, the one the volume
 * was sized with. A drain that does not fit runs out of zones halfway
 * (NEWS: seed 30110); refusing up front leaves the array as it was.
 */
static int drain_check(struct za_array *a, const int *idx, unsigned n,
		       const int *back, unsigned nb, char *err, size_t errlen)
{
	unsigned w = (unsigned)a->sb->geom.k + a->sb->geom.p;
	unsigned left = za_engine_nr_writable(a->eng) + nb;
	enum za_space_change change[ZA_SB_MAX_MEMBERS] = { ZA_SPACE_AS_IS };
	uint64_t room, size;
	unsigned i;

	if (left < n || left - n < w) {
		arr_seterr(err, errlen,
			   "removing would leave %u writable members; %u+%u "
			   "needs %u",
			   left >= n ? left - n : 0, (unsigned)a->sb->geom.k,
			   (unsigned)a->sb->geom.p, w);
		return -ENOSPC;
	}
	if (!a->vol)
		return 0;
	assert(a->nr_members <= ZA_SB_MAX_MEMBERS);
	for (i = 0; i < n; i++)
		change[idx[i]] = ZA_SPACE_GONE;
	for (i = 0; i < nb; i++)
		change[back[i]] = ZA_SPACE_BACK;
	room = za_volume_max_size_if(a->vol, change);
	size = za_volume_size(a->vol);
	if (size > room) {
		char b1[32], b2[32];

		arr_seterr(
			err, errlen,
			"removing would leave room for %s of volume on %u "
			"writable members with %u+%u and the reserve garbage "
			"collection needs; '%s' is %s (add a drive first)",
			za_fmt_size(room, b1, sizeof(b1)), left - n,
			(unsigned)a->sb->geom.k, (unsigned)a->sb->geom.p,
			a->sb->name, za_fmt_size(size, b2, sizeof(b2)));
		return -ENOSPC;
	}
	return 0;
}

static int drain_start(struct za_array *a, unsigned idx)
{
	int ret = za_engine_member_drain(a->eng, idx);

	if (ret)
		return ret;
	a->states[idx] = ZA_MEMBER_DRAINING;
	return 0;
}

int za_array_remove(struct za_array *a, const char *const *paths, unsigned n,
		    char *err, size_t errlen)
{
	int idx[64], back[64];
	unsigned i, j, nb = 0;
	int ret, o;

	if (n > 64) {
		arr_seterr(err, errlen, "remove at most 64 drives at once");
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		idx[i] = arr_member_find(a, paths[i]);
		if (idx[i] < 0) {
			arr_seterr(err, errlen,
				   "%s is not a member of array '%s'", paths[i],
				   a->sb->name);
			return -ENOENT;
		}
		for (j = 0; j < i; j++)
			if (idx[j] == idx[i]) {
				arr_seterr(err, errlen, "%s is named twice",
					   paths[i]);
				return -EINVAL;
			}
		if (a->states[idx[i]] != ZA_MEMBER_ONLINE) {
			arr_seterr(err, errlen, "%s is %s", paths[i],
				   za_member_state_str(a->states[idx[i]]));
			return -EINVAL;
		}
	}
	/* Removing the new drive of a replace stops the replace: the old
	 * one stays (replace_stop()), and takes columns again. */
	for (i = 0; i < n; i++)
		if ((o = replaced_by_member(a, (unsigned)idx[i])) >= 0)
			back[nb++] = o;
	ret = drain_check(a, idx, n, back, nb, err, errlen);
	if (ret)
		return ret;
	for (i = 0; i < nb; i++)
		replace_stop(a, (unsigned)back[i], "is being removed");
	for (i = 0; i < n; i++) {
		drain_start(a, (unsigned)idx[i]);
		za_log_info("array %s: member %u (%s) draining for removal",
			    a->sb->name, idx[i], paths[i]);
	}
	arr_sb_round(a);
	arr_rebuild_now(a);
	return 0;
}

/*
 * Can NEW take OLD's place (member @o)? When the other members hold the
 * whole volume with GC's reserve without OLD, any NEW will do; otherwise
 * NEW must have at least OLD's data zones (by capacity), or the drain
 * runs out of space halfway, as a drain without a replacement would
 * (drain_check). Reads NEW's zones without claiming it; add_one() checks
 * everything else about it.
 */
static int replace_check(struct za_array *a, unsigned o, const char *new_path,
			 char *err, size_t errlen)
{
	enum za_space_change change[ZA_SB_MAX_MEMBERS] = { ZA_SPACE_AS_IS };
	uint64_t room, size, need, have = 0;
	char b1[32], b2[32], b3[32], b4[32];
	struct za_zone *z;
	struct za_dev *dev;
	unsigned nz, i;

	if (!a->vol)
		return 0;
	change[o] = ZA_SPACE_GONE;
	room = za_volume_max_size_if(a->vol, change);
	size = za_volume_size(a->vol);
	need = za_engine_member_data_bytes(a->eng, o);
	if (size <= room || !need)
		return 0;
	if (arr_member_open(a->io, new_path, a->pol.fault_injection, &dev))
		return 0; /* add_one() says why */
	if (za_dev_report_all(dev, &z, &nz)) {
		za_dev_close(dev);
		return 0;
	}
	za_dev_close(dev);
	for (i = ZA_SB_ZONES; i < nz; i++)
		if (z[i].type != ZA_ZONE_TYPE_CNV &&
		    z[i].cond != ZA_ZONE_COND_OFFLINE &&
		    z[i].cond != ZA_ZONE_COND_READONLY)
			have += z[i].cap_bytes;
	free(z);
	if (have >= need)
		return 0;
	arr_seterr(
		err, errlen,
		"%s has %s of data zones, fewer than the %s of the member it "
		"would replace, and the others could not hold the volume ('%s' "
		"is %s, room for %s without it): replace it by a drive at "
		"least as large, or add a drive first",
		new_path, za_fmt_size(have, b1, sizeof(b1)),
		za_fmt_size(need, b2, sizeof(b2)), a->sb->name,
		za_fmt_size(size, b3, sizeof(b3)),
		za_fmt_size(room, b4, sizeof(b4)));
	return -ENOSPC;
}

int za_array_replace(struct za_array *a, const char *old_path,
		     const char *new_path, char *err, size_t errlen)
{
	int o = arr_member_find(a, old_path);
	unsigned idx;
	int ret;

	if (o < 0) {
		arr_seterr(err, errlen, "%s is not a member of array '%s'",
			   old_path, a->sb->name);
		return -ENOENT;
	}
	if (a->states[o] != ZA_MEMBER_ONLINE &&
	    a->states[o] != ZA_MEMBER_FAILED &&
	    a->states[o] != ZA_MEMBER_MISSING) {
		arr_seterr(err, errlen, "%s is %s", old_path,
			   za_member_state_str(a->states[o]));
		return -EINVAL;
	}
	ret = replace_check(a, (unsigned)o, new_path, err, errlen);
	if (ret)
		return ret;
	ret = add_one(a, new_path, &idx, err, errlen);
	if (ret)
		return ret;
	/* OLD serves reads until NEW has its columns (a failed OLD is
	 * decoded instead); every column goes to NEW if NEW can take it. */
	if (a->states[o] == ZA_MEMBER_ONLINE)
		drain_start(a, (unsigned)o);
	za_rebuild_set_dest(a->rb, (unsigned)o, (int)idx);
	a->sb->members[o].replacement = (uint16_t)(idx + 1);
	za_log_info("array %s: replacing member %d (%s) with %u (%s)",
		    a->sb->name, o, old_path, idx, new_path);
	arr_sb_round(a);
	arr_rebuild_now(a);
	return 0;
}

/* ---- growing the volume ---- */

int za_array_grow(struct za_array *a, uint64_t size_bytes, char *err,
		  size_t errlen)
{
	uint64_t cur, max, old, written;
	int ret;

	if (!a->vol) {
		arr_seterr(err, errlen, "array '%s' has no volume",
			   a->sb->name);
		return -EINVAL;
	}
	cur = za_volume_size(a->vol);
	if (size_bytes % 4096) {
		arr_seterr(err, errlen,
			   "%llu bytes is not a multiple of 4 KiB (4096 bytes)",
			   (unsigned long long)size_bytes);
		return -EINVAL;
	}
	if (size_bytes < cur) {
		arr_seterr(
			err, errlen,
			"shrinking is not supported: '%s' is %llu bytes, %llu "
			"asked",
			a->sb->name, (unsigned long long)cur,
			(unsigned long long)size_bytes);
		return -EINVAL;
	}
	if (size_bytes == cur)
		return 0;
	max = za_volume_max_size(a->vol);
	if (size_bytes > max) {
		arr_seterr(
			err, errlen,
			"%llu bytes is more than '%s' can hold: at most %llu "
			"bytes over its %u writable members with %u+%u and the "
			"reserve garbage collection needs",
			(unsigned long long)size_bytes, a->sb->name,
			(unsigned long long)max, za_engine_nr_writable(a->eng),
			(unsigned)a->sb->geom.k, (unsigned)a->sb->geom.p);
		return -ENOSPC;
	}
	/*
	 * Superblocks first: recovery ignores blocks beyond the size it is
	 * given, so a block written past the old end must never be on the
	 * drives while the old size is all they say.
	 */
	old = a->sb->volume_bytes;
	written = a->sb_written;
	a->sb->volume_bytes = size_bytes;
	arr_sb_round(a);
	while (a->sb_pending)
		za_io_run_once(a->io);
	if (a->sb_written == written) {
		a->sb->volume_bytes = old;
		arr_seterr(err, errlen,
			   "cannot record the new size: no superblock could be "
			   "written");
		return -EIO;
	}
	ret = za_volume_grow(a->vol, size_bytes);
	if (ret) { /* checked above: not expected */
		arr_seterr(err, errlen, "cannot grow the volume: %s",
			   strerror(-ret));
		return ret;
	}
	za_log_info("array %s: volume grown from %llu to %llu bytes",
		    a->sb->name, (unsigned long long)cur,
		    (unsigned long long)size_bytes);
	return 0;
}
