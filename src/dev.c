// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev.c - what every device backend shares: opening a member by path,
 * the argument and zone-state checks that make all backends answer alike,
 * completion delivery on the loop, counters, and synchronous helpers for
 * tools and tests.
 *
 * It does no I/O itself; the backends (dev-emu.c, dev-zbd.c, dev-fault.c)
 * do. Nor does it name them: za_dev_open() walks the table of backends
 * (dev-backends.h), so the backends depend on this layer and never the
 * other way round. The checks here are the device layer's contract in
 * code: a backend that tracks zone state calls za_dev_check_zone() before
 * touching the medium, so that an emulated drive and a real one return
 * the same -errno for the same mistake.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "container.h"
#include "dev-backends.h"
#include "dev.h"
#include "io.h"
#include "log.h"

const char *za_dev_model_str(enum za_dev_model m)
{
	switch (m) {
	case ZA_DEV_MODEL_HM_SMR:
		return "hm-smr";
	case ZA_DEV_MODEL_ZNS:
		return "zns";
	}
	return "unknown";
}

int za_dev_model_parse(const char *s, enum za_dev_model *out)
{
	if (!strcmp(s, "hm-smr") || !strcmp(s, "smr")) {
		*out = ZA_DEV_MODEL_HM_SMR;
		return 0;
	}
	if (!strcmp(s, "zns")) {
		*out = ZA_DEV_MODEL_ZNS;
		return 0;
	}
	return -EINVAL;
}

const char *za_zone_type_str(enum za_zone_type t)
{
	switch (t) {
	case ZA_ZONE_TYPE_CNV:
		return "cnv";
	case ZA_ZONE_TYPE_SWR:
		return "swr";
	case ZA_ZONE_TYPE_SWP:
		return "swp";
	}
	return "unknown";
}

const char *za_zone_cond_str(enum za_zone_cond c)
{
	switch (c) {
	case ZA_ZONE_COND_NOT_WP:
		return "not-wp";
	case ZA_ZONE_COND_EMPTY:
		return "empty";
	case ZA_ZONE_COND_IMP_OPEN:
		return "imp-open";
	case ZA_ZONE_COND_EXP_OPEN:
		return "exp-open";
	case ZA_ZONE_COND_CLOSED:
		return "closed";
	case ZA_ZONE_COND_READONLY:
		return "read-only";
	case ZA_ZONE_COND_FULL:
		return "full";
	case ZA_ZONE_COND_OFFLINE:
		return "offline";
	}
	return "unknown";
}

const char *za_dev_op_str(enum za_dev_op op)
{
	switch (op) {
	case ZA_DEV_OP_READ:
		return "read";
	case ZA_DEV_OP_WRITE:
		return "write";
	case ZA_DEV_OP_APPEND:
		return "append";
	case ZA_DEV_OP_RESET:
		return "reset";
	case ZA_DEV_OP_FINISH:
		return "finish";
	case ZA_DEV_OP_OPEN_ZONE:
		return "open";
	case ZA_DEV_OP_CLOSE_ZONE:
		return "close";
	case ZA_DEV_OP_FLUSH:
		return "flush";
	}
	return "unknown";
}

int za_dev_open(struct za_io *io, const char *path, unsigned flags,
		struct za_dev **out)
{
	const struct za_dev_backend *const *b, *refused = NULL;
	struct stat st;

	if (stat(path, &st) < 0) {
		int ret = -errno;

		za_log_err("%s: %s", path, strerror(errno));
		return ret;
	}
	/* The first backend for this kind of file that takes it opens it;
	 * if all turn it down, the first one says why. */
	for (b = za_dev_backends; *b; b++) {
		if ((st.st_mode & S_IFMT) != (*b)->file_type)
			continue;
		if (!(*b)->probe || (*b)->probe(path))
			return (*b)->open(io, path, flags, out);
		if (!refused)
			refused = *b;
	}
	if (refused) {
		za_log_err("%s: %s", path, refused->refusal);
		return -EMEDIUMTYPE;
	}
	za_log_err("%s: neither a block device nor an emulated-drive file",
		   path);
	return -EMEDIUMTYPE;
}

struct open_many {
	struct za_io *io;
	const char *const *paths;
	unsigned n, flags;
	atomic_uint next;
	struct za_dev **devs;
	int *rcs;
};

static void *open_many_thread(void *arg)
{
	struct open_many *om = arg;
	unsigned i;

	while ((i = atomic_fetch_add(&om->next, 1)) < om->n)
		om->rcs[i] = za_dev_open(om->io, om->paths[i], om->flags,
					 &om->devs[i]);
	return NULL;
}

void za_dev_open_many(struct za_io *io, const char *const *paths, unsigned n,
		      unsigned flags, struct za_dev **devs, int *rcs)
{
	struct open_many om = { .io = io,
				.paths = paths,
				.n = n,
				.flags = flags,
				.devs = devs,
				.rcs = rcs };
	unsigned i, nt = n < ZA_DEV_OPEN_THREADS ? n : ZA_DEV_OPEN_THREADS;
	pthread_t *th = NULL;
	bool blk = false;

	atomic_init(&om.next, 0);
	for (i = 0; i < n; i++) {
		struct stat st;

		devs[i] = NULL;
		rcs[i] = -EINPROGRESS;
		blk |= stat(paths[i], &st) == 0 && S_ISBLK(st.st_mode);
	}
	/*
	 * The one thing an open shares: a block device's may set up the
	 * loop's io_uring (NVMe passthrough), which also watches the loop.
	 * Set up here first, it is only looked at in the threads; if that
	 * fails, the opens go one after the other, as za_dev_open() alone.
	 */
	if (nt >= 2 && !(blk && za_io_ring_setup(io) < 0))
		th = calloc(nt, sizeof(*th));
	for (i = 0; th && i < nt; i++)
		if (pthread_create(&th[i], NULL, open_many_thread, &om))
			break;
	/* Fewer threads than asked (none) is only slower: this one opens
	 * what the others have not taken. */
	open_many_thread(&om);
	nt = th ? i : 0;
	for (i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	free(th);
}

void za_dev_close(struct za_dev *dev)
{
	if (!dev)
		return;
	assert(dev->inflight == 0);
	dev->ops->close(dev);
}

int za_dev_report_zones(struct za_dev *dev, uint64_t from_bytes,
			struct za_zone *zones, unsigned *nr)
{
	if (from_bytes >= dev->caps.capacity_bytes) {
		*nr = 0;
		return 0;
	}
	return dev->ops->report_zones(dev, from_bytes, zones, nr);
}

int za_dev_report_all(struct za_dev *dev, struct za_zone **zones, unsigned *nr)
{
	unsigned total = dev->caps.nr_zones, got = 0;
	struct za_zone *z = calloc(total ? total : 1, sizeof(*z));
	int ret;

	if (!z)
		return -ENOMEM;
	while (got < total) {
		unsigned n = total - got;
		uint64_t from = (uint64_t)got * dev->caps.zone_size_bytes;

		ret = za_dev_report_zones(dev, from, z + got, &n);
		if (ret < 0)
			goto err_free;
		if (n == 0)
			break;
		got += n;
	}
	*zones = z;
	*nr = got;
	return 0;

err_free:
	free(z);
	return ret;
}

int za_dev_power_cut(struct za_dev *dev)
{
	if (!dev->ops->power_cut)
		return -EOPNOTSUPP;
	return dev->ops->power_cut(dev);
}

int za_dev_stage(struct za_dev *dev, uint64_t off_bytes, const void *buf,
		 uint64_t len_bytes)
{
	if (!dev->ops->stage)
		return -EOPNOTSUPP;
	/* The engine stages its own slots: a bad range is a bug there. */
	assert(len_bytes && off_bytes % dev->caps.lblock_bytes == 0 &&
	       len_bytes % dev->caps.lblock_bytes == 0 &&
	       off_bytes / dev->caps.zone_size_bytes ==
		       (off_bytes + len_bytes - 1) /
			       dev->caps.zone_size_bytes &&
	       off_bytes + len_bytes <= dev->caps.capacity_bytes);
	return dev->ops->stage(dev, off_bytes, buf, len_bytes);
}

void za_dev_stage_fence(void)
{
#ifdef __SSE2__
	_mm_sfence(); /* streaming stores are ordered by a fence only */
#endif
	atomic_thread_fence(memory_order_release);
}

static void dev_done_cb(struct za_io_defer *d)
{
	struct za_dev_req *req = container_of(d, struct za_dev_req, defer);
	struct za_dev *dev = req->dev;

	assert(dev->inflight > 0);
	dev->inflight--;
	req->done(req);
}

static void dev_account(struct za_dev_req *req, int result)
{
	struct za_dev_stats *s = &req->dev->stats;

	req->result = result;
	if (result < 0) {
		s->errors++;
		return;
	}
	switch (req->op) {
	case ZA_DEV_OP_READ:
		s->reads++;
		s->read_bytes += req->len_bytes;
		break;
	case ZA_DEV_OP_WRITE:
		s->writes++;
		s->write_bytes += req->len_bytes;
		break;
	case ZA_DEV_OP_APPEND:
		s->appends++;
		s->write_bytes += req->len_bytes;
		break;
	case ZA_DEV_OP_RESET:
		s->resets++;
		break;
	case ZA_DEV_OP_FINISH:
		s->finishes++;
		break;
	case ZA_DEV_OP_FLUSH:
		s->flushes++;
		break;
	case ZA_DEV_OP_OPEN_ZONE:
	case ZA_DEV_OP_CLOSE_ZONE:
		break;
	}
}

void za_dev_complete(struct za_dev_req *req, int result)
{
	dev_account(req, result);
	req->defer.fn = dev_done_cb;
	za_io_defer(req->dev->io, &req->defer);
}

void za_dev_complete_at(struct za_dev_req *req, int result, uint64_t when_ns)
{
	dev_account(req, result);
	req->defer.fn = dev_done_cb;
	za_io_defer_at(req->dev->io, &req->defer, when_ns);
}

static bool is_zone_op(enum za_dev_op op)
{
	return op == ZA_DEV_OP_APPEND || op == ZA_DEV_OP_RESET ||
	       op == ZA_DEV_OP_FINISH || op == ZA_DEV_OP_OPEN_ZONE ||
	       op == ZA_DEV_OP_CLOSE_ZONE;
}

int za_dev_check_args(const struct za_dev *dev, const struct za_dev_req *req)
{
	const struct za_dev_caps *c = &dev->caps;
	uint64_t off = req->off_bytes, len = req->len_bytes;

	switch (req->op) {
	case ZA_DEV_OP_FLUSH:
		return 0;
	case ZA_DEV_OP_READ:
	case ZA_DEV_OP_WRITE:
	case ZA_DEV_OP_APPEND:
	case ZA_DEV_OP_RESET:
	case ZA_DEV_OP_FINISH:
	case ZA_DEV_OP_OPEN_ZONE:
	case ZA_DEV_OP_CLOSE_ZONE:
		break;
	default:
		return -EINVAL;
	}
	if (off >= c->capacity_bytes)
		return -EINVAL;
	if (is_zone_op(req->op) && off % c->zone_size_bytes)
		return -EINVAL;
	if (req->op != ZA_DEV_OP_READ && req->op != ZA_DEV_OP_WRITE &&
	    req->op != ZA_DEV_OP_APPEND)
		return 0;

	if (!len || len % c->lblock_bytes || !req->buf ||
	    (uintptr_t)req->buf % c->lblock_bytes)
		return -EINVAL;
	if (req->op != ZA_DEV_OP_READ &&
	    (len % c->write_gran_bytes || off % c->write_gran_bytes))
		return -EINVAL;
	if (off % c->lblock_bytes)
		return -EINVAL;
	if (len > (req->op == ZA_DEV_OP_APPEND ? c->max_append_bytes :
						 c->max_io_bytes))
		return -EINVAL;
	/* No wrap: off < capacity was checked, so capacity - off is safe. */
	if (len > c->capacity_bytes - off)
		return -EINVAL;
	if (off / c->zone_size_bytes != (off + len - 1) / c->zone_size_bytes)
		return -EINVAL;
	return 0;
}

int za_dev_check_zone(const struct za_dev *dev, const struct za_zone *z,
		      const struct za_dev_req *req)
{
	uint64_t end = req->off_bytes + req->len_bytes;
	uint64_t cap_end = z->start_bytes + z->cap_bytes;

	(void)dev;
	if (req->op == ZA_DEV_OP_FLUSH)
		return 0;
	if (z->cond == ZA_ZONE_COND_OFFLINE)
		return -EIO;
	if (z->type == ZA_ZONE_TYPE_CNV)
		return is_zone_op(req->op) ? -EINVAL : 0;

	switch (req->op) {
	case ZA_DEV_OP_READ:
		if (z->cond == ZA_ZONE_COND_FULL ||
		    z->cond == ZA_ZONE_COND_READONLY)
			return end <= cap_end ? 0 : -ENODATA;
		return end <= z->wp_bytes ? 0 : -ENODATA;
	case ZA_DEV_OP_WRITE:
		if (z->cond == ZA_ZONE_COND_READONLY)
			return -EROFS;
		if (z->cond == ZA_ZONE_COND_FULL)
			return -ENOSPC;
		if (req->off_bytes != z->wp_bytes)
			return -ESPIPE;
		return end <= cap_end ? 0 : -ENOSPC;
	case ZA_DEV_OP_APPEND:
		if (z->cond == ZA_ZONE_COND_READONLY)
			return -EROFS;
		if (z->cond == ZA_ZONE_COND_FULL)
			return -ENOSPC;
		return req->len_bytes <= cap_end - z->wp_bytes ? 0 : -ENOSPC;
	case ZA_DEV_OP_RESET:
	case ZA_DEV_OP_FINISH:
	case ZA_DEV_OP_OPEN_ZONE:
	case ZA_DEV_OP_CLOSE_ZONE:
		return z->cond == ZA_ZONE_COND_READONLY ? -EROFS : 0;
	case ZA_DEV_OP_FLUSH:
		break;
	}
	return 0;
}

void za_dev_submit(struct za_dev *dev, struct za_dev_req *req)
{
	int ret;

	assert(req->done);
	req->dev = dev;
	req->result = 0;
	req->landed_bytes = 0;
	req->next = NULL;
	req->flags = 0;
	req->submit_ns = 0;
	dev->inflight++;
	ret = za_dev_check_args(dev, req);
	if (ret < 0) {
		za_log_debug("%s: %s off %llu len %llu: bad arguments",
			     dev->path, za_dev_op_str(req->op),
			     (unsigned long long)req->off_bytes,
			     (unsigned long long)req->len_bytes);
		za_dev_complete(req, ret);
		return;
	}
	if (req->op != ZA_DEV_OP_FLUSH)
		req->zone_idx = za_dev_zone_idx(dev, req->off_bytes);
	dev->ops->submit(dev, req);
}

struct sync_ctx {
	bool done;
};

static void sync_done(struct za_dev_req *req)
{
	((struct sync_ctx *)req->priv)->done = true;
}

int za_dev_io_sync(struct za_dev *dev, enum za_dev_op op, uint64_t off_bytes,
		   void *buf, uint64_t len_bytes, uint64_t *landed_bytes)
{
	struct sync_ctx ctx = { false };
	struct za_dev_req req;

	memset(&req, 0, sizeof(req));
	req.op = op;
	req.off_bytes = off_bytes;
	req.len_bytes = len_bytes;
	req.buf = buf;
	req.done = sync_done;
	req.priv = &ctx;
	za_dev_submit(dev, &req);
	za_io_run_until(dev->io, &ctx.done, 0);
	if (landed_bytes)
		*landed_bytes = req.landed_bytes;
	return req.result;
}
