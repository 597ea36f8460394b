// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev-fault.c - the fault-injecting wrapper around any device backend.
 *
 * Each request submitted to the wrapper is counted, checked against the
 * configured faults and, if none applies, re-submitted to the inner device
 * as a shadow request allocated here; the shadow's completion completes
 * the original (plus any injected latency). Zone faults are an overlay:
 * the inner drive is not changed, but reports show the overlaid condition
 * and requests to such a zone are refused as the drive would refuse them.
 * A failed drive answers every request and report with -ENODEV.
 *
 * Randomness comes from a seeded xorshift generator so that a failing run
 * can be replayed. It does not corrupt data on the medium: bit rot on disk
 * is injected by writing to the emulated drive's file directly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev-fault.h"
#include "log.h"

struct fault {
	struct za_dev dev;
	struct za_dev *inner;
	struct za_fault_cfg cfg;
	struct za_fault_stats st;
	bool failed;
	uint64_t rng;
	uint8_t *zone_cond; /* overlay per zone; 0 = none */
};

struct fault_req {
	struct za_dev_req shadow;
	struct za_dev_req *orig;
	struct fault *f;
};

static const struct za_dev_ops fault_ops;

static struct fault *to_fault(struct za_dev *dev)
{
	return (struct fault *)dev;
}

bool za_dev_is_fault(const struct za_dev *dev)
{
	return dev->ops == &fault_ops;
}

struct za_dev *za_fault_inner(struct za_dev *dev)
{
	return to_fault(dev)->inner;
}

static uint64_t rng_next(struct fault *f)
{
	uint64_t x = f->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	f->rng = x;
	return x;
}

static bool rng_ppm(struct fault *f, uint32_t ppm)
{
	return ppm && rng_next(f) % 1000000u < ppm;
}

static void fault_finish(struct fault *f, struct za_dev_req *req, int result)
{
	if (f->cfg.latency_ns)
		za_dev_complete_at(req, result,
				   za_io_now_ns() + f->cfg.latency_ns);
	else
		za_dev_complete(req, result);
}

static void fault_shadow_done(struct za_dev_req *shadow)
{
	struct fault_req *fr = (struct fault_req *)shadow;
	struct za_dev_req *orig = fr->orig;
	struct fault *f = fr->f;
	int result = shadow->result;

	orig->landed_bytes = shadow->landed_bytes;
	if (result == 0 && orig->op == ZA_DEV_OP_READ &&
	    rng_ppm(f, f->cfg.flip_rate_ppm)) {
		uint64_t bit = rng_next(f) % (orig->len_bytes * 8);

		((uint8_t *)orig->buf)[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		f->st.flips++;
	}
	free(fr);
	fault_finish(f, orig, result);
}

static bool is_data_op(enum za_dev_op op)
{
	return op == ZA_DEV_OP_READ || op == ZA_DEV_OP_WRITE ||
	       op == ZA_DEV_OP_APPEND;
}

static void fault_submit(struct za_dev *dev, struct za_dev_req *req)
{
	struct fault *f = to_fault(dev);
	struct fault_req *fr;
	uint64_t n = ++f->st.ops;

	if (f->cfg.fail_at_op && n >= f->cfg.fail_at_op && !f->failed) {
		f->failed = true;
		za_log_info("%s: injected drive failure at op %llu", dev->path,
			    (unsigned long long)n);
	}
	if (f->failed) {
		f->st.enodev++;
		fault_finish(f, req, -ENODEV);
		return;
	}
	if ((f->cfg.eio_at_op && n == f->cfg.eio_at_op) ||
	    (is_data_op(req->op) && rng_ppm(f, f->cfg.eio_rate_ppm))) {
		f->st.eio++;
		za_log_debug("%s: injected EIO on %s at %llu (op %llu)",
			     dev->path, za_dev_op_str(req->op),
			     (unsigned long long)req->off_bytes,
			     (unsigned long long)n);
		fault_finish(f, req, -EIO);
		return;
	}
	if (req->op != ZA_DEV_OP_FLUSH && f->zone_cond[req->zone_idx]) {
		enum za_zone_cond c = f->zone_cond[req->zone_idx];

		if (c == ZA_ZONE_COND_OFFLINE) {
			f->st.zone_errs++;
			fault_finish(f, req, -EIO);
			return;
		}
		if (c == ZA_ZONE_COND_READONLY && req->op != ZA_DEV_OP_READ) {
			f->st.zone_errs++;
			fault_finish(f, req, -EROFS);
			return;
		}
	}
	fr = calloc(1, sizeof(*fr));
	if (!fr) {
		fault_finish(f, req, -ENOMEM);
		return;
	}
	fr->orig = req;
	fr->f = f;
	fr->shadow.op = req->op;
	fr->shadow.off_bytes = req->off_bytes;
	fr->shadow.len_bytes = req->len_bytes;
	fr->shadow.buf = req->buf;
	fr->shadow.prio = req->prio;
	fr->shadow.staged = req->staged;
	fr->shadow.done = fault_shadow_done;
	za_dev_submit(f->inner, &fr->shadow);
}

static int fault_report_zones(struct za_dev *dev, uint64_t from_bytes,
			      struct za_zone *zones, unsigned *nr)
{
	struct fault *f = to_fault(dev);
	unsigned i;
	int ret;

	if (f->failed)
		return -ENODEV;
	ret = za_dev_report_zones(f->inner, from_bytes, zones, nr);
	if (ret < 0)
		return ret;
	for (i = 0; i < *nr; i++) {
		uint32_t z = za_dev_zone_idx(dev, zones[i].start_bytes);

		if (f->zone_cond[z])
			zones[i].cond = f->zone_cond[z];
	}
	return 0;
}

/*
 * Any thread: staging is passed on untouched. It reads none of the
 * wrapper's state (the loop owns that); the WRITE that follows meets the
 * injected faults like any other, and a refused one leaves the staged
 * bytes past the write pointer, where nothing reads them.
 */
static int fault_stage(struct za_dev *dev, uint64_t off_bytes, const void *buf,
		       uint64_t len_bytes)
{
	return za_dev_stage(to_fault(dev)->inner, off_bytes, buf, len_bytes);
}

static int fault_power_cut(struct za_dev *dev)
{
	return za_dev_power_cut(to_fault(dev)->inner);
}

static void fault_close(struct za_dev *dev)
{
	struct fault *f = to_fault(dev);

	za_dev_close(f->inner);
	free(f->zone_cond);
	free(f);
}

static const struct za_dev_ops fault_ops = {
	.name = "fault",
	.stage = fault_stage,
	.report_zones = fault_report_zones,
	.submit = fault_submit,
	.power_cut = fault_power_cut,
	.close = fault_close,
};

int za_fault_wrap(struct za_dev *inner, struct za_dev **out)
{
	struct fault *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->zone_cond = calloc(inner->caps.nr_zones, 1);
	if (!f->zone_cond) {
		free(f);
		return -ENOMEM;
	}
	f->dev.ops = &fault_ops;
	f->dev.io = inner->io;
	f->dev.caps = inner->caps;
	memcpy(f->dev.path, inner->path, sizeof(f->dev.path));
	f->inner = inner;
	f->rng = 1;
	*out = &f->dev;
	return 0;
}

void za_fault_set(struct za_dev *dev, const struct za_fault_cfg *cfg)
{
	struct fault *f = to_fault(dev);

	f->cfg = *cfg;
	f->rng = cfg->seed ? cfg->seed : 1;
	if (cfg->fail_at_op && f->st.ops >= cfg->fail_at_op)
		f->failed = true;
}

void za_fault_get(struct za_dev *dev, struct za_fault_cfg *cfg)
{
	*cfg = to_fault(dev)->cfg;
}

void za_fault_stats(struct za_dev *dev, struct za_fault_stats *st)
{
	*st = to_fault(dev)->st;
}

void za_fault_fail(struct za_dev *dev)
{
	struct fault *f = to_fault(dev);

	if (!f->failed)
		za_log_info("%s: injected drive failure", dev->path);
	f->failed = true;
}

bool za_fault_failed(struct za_dev *dev)
{
	return to_fault(dev)->failed;
}

int za_fault_zone_cond(struct za_dev *dev, uint32_t zone_idx,
		       enum za_zone_cond cond)
{
	struct fault *f = to_fault(dev);

	if (zone_idx >= dev->caps.nr_zones ||
	    (cond != ZA_ZONE_COND_OFFLINE && cond != ZA_ZONE_COND_READONLY &&
	     cond != ZA_ZONE_COND_NOT_WP))
		return -EINVAL;
	f->zone_cond[zone_idx] = (uint8_t)cond;
	return 0;
}

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len || len > 20)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			return -EINVAL;
	}
	*out = v;
	return 0;
}

int za_fault_parse(const char *spec, struct za_fault_cfg *cfg, const char **bad)
{
	const char *p = spec;

	memset(cfg, 0, sizeof(*cfg));
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		uint64_t v = 0;
		int ret = 0;

		if (eq)
			ret = parse_u64(eq + 1, len - klen - 1, &v);
		if (ret == 0) {
#define KEY(k) (klen == strlen(k) && !strncmp(p, k, klen))
			if (KEY("fail") && !eq)
				cfg->fail_at_op = 1;
			else if (KEY("fail-at") && eq && v)
				cfg->fail_at_op = v;
			else if (KEY("eio-at") && eq && v)
				cfg->eio_at_op = v;
			else if (KEY("eio-ppm") && eq && v <= 1000000)
				cfg->eio_rate_ppm = (uint32_t)v;
			else if (KEY("flip-ppm") && eq && v <= 1000000)
				cfg->flip_rate_ppm = (uint32_t)v;
			else if (KEY("latency-us") && eq && v <= 60000000)
				cfg->latency_ns = v * 1000;
			else if (KEY("seed") && eq)
				cfg->seed = v;
			else
				ret = -EINVAL;
#undef KEY
		}
		if (ret < 0) {
			if (bad)
				*bad = p;
			return -EINVAL;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}
