// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-emu.c - the emulated drive: geometries from a table, the volatile
 * cache and power cuts (sequential and conventional zones), cache
 * write-back when full, persistence across reopen, open/active limits,
 * the performance model's lower bound and its priorities (LOW requests
 * after NORMAL ones, with aging), and refusal of corrupted,
 * truncated or foreign files with a clear error instead of a crash; zone
 * table entries that a process killed at any instruction leaves valid.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "byteorder.h"
#include "crc.h"
#include "dev-fault.h"
#include "emu-util.h"
#include "log.h"

static const struct egeo {
	enum za_dev_model model;
	uint64_t size, zsize, zcap;
	int conv;
} egeos[] = {
	{ ZA_DEV_MODEL_HM_SMR, 16 << 20, 1 << 20, 0, 2 },
	{ ZA_DEV_MODEL_HM_SMR, 64 << 20, 4 << 20, 0, 0 },
	{ ZA_DEV_MODEL_ZNS, 16 << 20, 1 << 20, 768 << 10, 0 },
	{ ZA_DEV_MODEL_ZNS, 40 << 20, 2 << 20, 2 << 20, 1 },
	{ ZA_DEV_MODEL_HM_SMR, (16 << 20) + (512 << 10), 1 << 20, 0, 3 },
};

START_TEST(test_geometry)
{
	const struct egeo *g = &egeos[_i];
	struct za_emu_params p;
	struct tdrive t;
	struct za_zone *zones;
	unsigned nr, i;

	za_emu_params_default(&p, g->model);
	p.size_bytes = g->size;
	p.zone_size_bytes = g->zsize;
	p.zone_cap_bytes = g->zcap;
	p.nr_conv_zones = g->conv;
	tdrive_make(&t, &p);
	ck_assert_uint_eq(t.dev->caps.nr_zones, g->size / g->zsize);
	ck_assert_uint_eq(t.dev->caps.capacity_bytes,
			  g->size / g->zsize * g->zsize);
	ck_assert_uint_eq(t.dev->caps.nr_conv_zones, (unsigned)g->conv);
	ck_assert_uint_eq(t.dev->caps.zone_cap_bytes,
			  g->zcap ? g->zcap : g->zsize);
	ck_assert_int_eq(t.dev->caps.native_append,
			 g->model == ZA_DEV_MODEL_ZNS);
	ck_assert_int_eq(za_dev_report_all(t.dev, &zones, &nr), 0);
	ck_assert_uint_eq(nr, t.dev->caps.nr_zones);
	for (i = 0; i < nr; i++) {
		ck_assert_uint_eq(zones[i].start_bytes, (uint64_t)i * g->zsize);
		ck_assert_int_eq(zones[i].type, (int)i < g->conv ?
							ZA_ZONE_TYPE_CNV :
							ZA_ZONE_TYPE_SWR);
		ck_assert_int_eq(zones[i].cond, (int)i < g->conv ?
							ZA_ZONE_COND_NOT_WP :
							ZA_ZONE_COND_EMPTY);
	}
	free(zones);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_bad_params)
{
	struct za_emu_params p;
	char path[] = "/tmp/za-unit-bad-XXXXXX";
	int fd = mkstemp(path);

	close(fd);
	za_log_set_sink(NULL);
	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.zone_cap_bytes = p.zone_size_bytes + BLK;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.zone_size_bytes = 1000;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	/* Zone positions are 32-bit block counts: zones below 16 TiB. */
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.zone_size_bytes = (uint64_t)UINT32_MAX * BLK + BLK;
	p.size_bytes = 2 * p.zone_size_bytes;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.size_bytes = p.zone_size_bytes - 1;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.size_bytes = 4 * p.zone_size_bytes;
	p.nr_conv_zones = 4;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.max_open_zones = 20;
	ck_assert_int_eq(za_emu_create(path, &p, true), -EINVAL);
	/* An existing file is kept unless forced. */
	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.size_bytes = 1 << 30;
	ck_assert_int_eq(za_emu_create(path, &p, false), -EEXIST);
	ck_assert_int_eq(za_emu_create(path, &p, true), 0);
	unlink(path);
}
END_TEST

START_TEST(test_powercut_sequential)
{
	struct tdrive t;
	uint8_t *w = talloc(8 * BLK), *r = talloc(8 * BLK);
	uint64_t z5 = 5ull << 20, z6 = 6ull << 20;
	struct za_zone zone;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	tfill(w, 8 * BLK, 1);
	/* z5: 4 blocks flushed, then 4 not. z6: 2 blocks, never flushed. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z5, w, 4 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z5 + 4 * BLK, w + 4 * BLK,
			     4 * BLK),
			 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z6, w, 2 * BLK), 0);
	/* Before the cut everything reads back. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z5, r, 8 * BLK), 0);
	ck_assert_mem_eq(r, w, 8 * BLK);

	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	zone = tzone(t.dev, 5);
	ck_assert_uint_eq(zone.wp_bytes, z5 + 4 * BLK);
	ck_assert_int_eq(zone.cond, ZA_ZONE_COND_CLOSED);
	zone = tzone(t.dev, 6);
	ck_assert_uint_eq(zone.wp_bytes, z6);
	ck_assert_int_eq(zone.cond, ZA_ZONE_COND_EMPTY);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z5, r, 4 * BLK), 0);
	ck_assert_mem_eq(r, w, 4 * BLK);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z5, r, 5 * BLK), -ENODATA);
	/* The lost range is writable again, at the rolled-back pointer. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z5 + 4 * BLK, w, BLK), 0);
	/* And the cut survives a reopen (it is on "disk"). */
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	zone = tzone(t.dev, 5);
	ck_assert_uint_eq(zone.wp_bytes, z5 + 5 * BLK);
	free(w);
	free(r);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_powercut_conventional)
{
	struct tdrive t;
	uint8_t *a = talloc(4 * BLK), *b = talloc(4 * BLK),
		*r = talloc(4 * BLK);

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	tfill(a, 4 * BLK, 10);
	tfill(b, 4 * BLK, 20);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 8 * BLK, a, 4 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	/* Overwrite twice without a flush: the cut must restore "a". */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 8 * BLK, b, 4 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 9 * BLK, b, 2 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, 9 * BLK, r, 2 * BLK), 0);
	ck_assert_mem_eq(r, b, 2 * BLK);
	/* The cut is simulated in a new process's view: close and reopen. */
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, 8 * BLK, r, 4 * BLK), 0);
	ck_assert_mem_eq(r, a, 4 * BLK);
	/* A never-written block comes back as zeroes. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 100 * BLK, b, BLK), 0);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, 100 * BLK, r, BLK), 0);
	memset(a, 0, BLK);
	ck_assert_mem_eq(r, a, BLK);
	free(a);
	free(b);
	free(r);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_cache_writeback_when_full)
{
	struct tdrive t;
	/* the small drive has a 256 KiB cache: 320 KiB must write back */
	uint64_t len = 64 << 10, z = 4ull << 20, off;
	uint8_t *w = talloc(len);
	struct za_zone zone;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	for (off = 0; off < 5 * len; off += len) {
		tfill(w, len, (uint8_t)off);
		ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z + off, w, len),
				 0);
	}
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	zone = tzone(t.dev, 4);
	/* Something was written back; not everything survived. */
	ck_assert_uint_gt(zone.wp_bytes, z);
	ck_assert_uint_lt(zone.wp_bytes, z + 5 * len);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_write_through)
{
	struct za_emu_params p;
	struct tdrive t;
	uint8_t *w = talloc(BLK);

	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.size_bytes = 8 << 20;
	p.zone_size_bytes = 1 << 20;
	p.zone_cap_bytes = 0;
	p.cache_bytes = 0;
	tdrive_make(&t, &p);
	ck_assert(!t.dev->caps.volatile_cache);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 1 << 20, w, BLK), 0);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_uint_eq(tzone(t.dev, 1).wp_bytes, (1 << 20) + BLK);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_limits)
{
	struct za_emu_params p;
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	uint64_t zs = 1 << 20;

	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.size_bytes = 8 * zs;
	p.zone_size_bytes = zs;
	p.zone_cap_bytes = 0;
	p.max_open_zones = 2;
	p.max_active_zones = 3;
	tdrive_make(&t, &p);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 0 * zs, w, BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 1 * zs, w, BLK), 0);
	/* A third open: the drive closes the least recently used zone 0. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 2 * zs, w, BLK), 0);
	ck_assert_int_eq(tzone(t.dev, 0).cond, ZA_ZONE_COND_CLOSED);
	/* A fourth active zone is refused. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 3 * zs, w, BLK),
			 -EOVERFLOW);
	/* Closed zones stay active: writing one reopens it. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 0 * zs + BLK, w, BLK), 0);
	/* Finish releases an active slot. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FINISH, 1 * zs, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 3 * zs, w, BLK), 0);
	/* Explicit opens are not closed behind the host's back. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_RESET, 0, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_RESET, 2 * zs, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_RESET, 3 * zs, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_OPEN_ZONE, 4 * zs, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_OPEN_ZONE, 5 * zs, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 6 * zs, w, BLK),
			 -ETOOMANYREFS);
	/* Conditions and counts survive a reopen. */
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_int_eq(tzone(t.dev, 4).cond, ZA_ZONE_COND_EXP_OPEN);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, 6 * zs, w, BLK),
			 -ETOOMANYREFS);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_perf_model)
{
	struct tdrive t;
	uint8_t *w = talloc(1 << 20);
	uint64_t t0, z = 4ull << 20;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	/* 1 MiB at 50 MB/s takes at least 20 ms, plus 2 x 1 ms latency. */
	ck_assert_int_eq(za_emu_set_perf(t.dev, 50000000, 1000000, 0), 0);
	t0 = za_io_now_ns();
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z, w, 512 << 10), 0);
	ck_assert_int_eq(
		tio(t.dev, ZA_DEV_OP_WRITE, z + (512 << 10), w, 512 << 10), 0);
	ck_assert_uint_ge(za_io_now_ns() - t0, 22000000ull);
	free(w);
	tdrive_free(&t);
}
END_TEST

/* Completion order of requests given to a drive with its model on. */
struct prio_rec {
	struct za_dev_req req;
	unsigned id;
	unsigned *order, *n;
};

static void prio_done(struct za_dev_req *req)
{
	struct prio_rec *r = (struct prio_rec *)req;

	ck_assert_int_eq(req->result, 0);
	r->order[(*r->n)++] = r->id;
}

static void prio_submit(struct za_dev *dev, struct prio_rec *r, unsigned id,
			enum za_dev_op op, uint64_t off, void *buf,
			uint64_t len, enum za_dev_prio prio, unsigned *order,
			unsigned *n)
{
	memset(r, 0, sizeof(*r));
	r->req.op = op;
	r->req.off_bytes = off;
	r->req.len_bytes = len;
	r->req.buf = buf;
	r->req.prio = prio;
	r->req.done = prio_done;
	r->id = id;
	r->order = order;
	r->n = n;
	za_dev_submit(dev, &r->req);
}

/*
 * One request at a time, NORMAL before LOW: a 4 KiB write submitted behind
 * four queued 256 KiB LOW reads completes right after the one in service,
 * not after all of them; NORMAL requests alone stay first come first
 * served. _i = 1 goes through the fault wrapper, which passes prio on.
 */
START_TEST(test_perf_priority)
{
	struct prio_rec r[6];
	unsigned order[6], n = 0, i;
	struct za_dev *dev;
	struct tdrive t;
	uint8_t *w = talloc(1 << 20), *rd = talloc(4 << 20);
	uint64_t z = 4ull << 20, z2 = 5ull << 20, t0;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z, w, 1 << 20), 0);
	dev = t.dev;
	if (_i) {
		ck_assert_int_eq(za_fault_wrap(t.dev, &dev), 0);
		t.dev = dev; /* closing the wrapper closes the drive */
	}
	ck_assert_int_eq(
		za_emu_set_perf(za_dev_is_emu(dev) ? dev : za_fault_inner(dev),
				100000000, 0, 0),
		0);
	/* LOW reads 0..3 (0 is served at once), then NORMAL write 4. */
	for (i = 0; i < 4; i++)
		prio_submit(dev, &r[i], i, ZA_DEV_OP_READ,
			    z + (uint64_t)i * (256 << 10),
			    rd + (size_t)i * (256 << 10), 256 << 10,
			    ZA_DEV_PRIO_LOW, order, &n);
	prio_submit(dev, &r[4], 4, ZA_DEV_OP_WRITE, z2, w, BLK,
		    ZA_DEV_PRIO_NORMAL, order, &n);
	t0 = za_io_now_ns();
	while (n < 5)
		za_io_run_once(t.io);
	ck_assert_uint_eq(order[0], 0);
	ck_assert_uint_eq(order[1], 4);
	for (i = 2; i < 5; i++)
		ck_assert_uint_eq(order[i], i - 1);
	/* Still a 100 MB/s drive: 1 MiB + 4 KiB takes >= 10 ms. */
	ck_assert_uint_ge(za_io_now_ns() - t0, 10000000ull);
	/* NORMAL alone: first come, first served. */
	n = 0;
	for (i = 0; i < 4; i++)
		prio_submit(dev, &r[i], i, ZA_DEV_OP_READ,
			    z + (uint64_t)(3 - i) * (256 << 10),
			    rd + (size_t)i * (256 << 10), 256 << 10,
			    ZA_DEV_PRIO_NORMAL, order, &n);
	while (n < 4)
		za_io_run_once(t.io);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(order[i], i);
	free(w);
	free(rd);
	tdrive_free(&t);
}
END_TEST

/*
 * LOW requests age: one queued behind a NORMAL stream longer than the
 * model's aging (0.5 s) is served before the rest of the stream.
 */
START_TEST(test_perf_priority_aging)
{
	enum { NW = 40 };
	struct prio_rec *r = calloc(NW + 2, sizeof(*r));
	unsigned order[NW + 2], n = 0, i, pos = 0;
	struct tdrive t;
	uint8_t *w = talloc(128 << 10), *rd = talloc(BLK);
	uint64_t z = 4ull << 20, zr = 12ull << 20;

	ck_assert_ptr_nonnull(r);
	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, zr, rd, BLK), 0);
	/* 5 MB/s: each 128 KiB write takes 26 ms, the stream 1 s. */
	ck_assert_int_eq(za_emu_set_perf(t.dev, 5000000, 0, 0), 0);
	prio_submit(t.dev, &r[0], 0, ZA_DEV_OP_WRITE, z, w, 128 << 10,
		    ZA_DEV_PRIO_NORMAL, order, &n);
	prio_submit(t.dev, &r[1], 1, ZA_DEV_OP_READ, zr, rd, BLK,
		    ZA_DEV_PRIO_LOW, order, &n);
	for (i = 2; i < NW + 2; i++)
		prio_submit(t.dev, &r[i], i, ZA_DEV_OP_WRITE,
			    z + (uint64_t)(i - 1) * (128 << 10), w, 128 << 10,
			    ZA_DEV_PRIO_NORMAL, order, &n);
	while (n < NW + 2)
		za_io_run_once(t.io);
	for (i = 0; i < NW + 2; i++)
		if (order[i] == 1)
			pos = i;
	/* Not first (NORMAL ones went ahead), not last (it aged). */
	ck_assert_uint_gt(pos, 2);
	ck_assert_uint_lt(pos, NW);
	free(r);
	free(w);
	free(rd);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_double_open)
{
	struct tdrive t;
	struct za_dev *second;

	tdrive_small(&t, ZA_DEV_MODEL_ZNS);
	ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &second), -EBUSY);
	ck_assert_int_eq(za_dev_open(t.io, t.path, ZA_DEV_OPEN_RDONLY, &second),
			 0);
	za_dev_close(second);
	tdrive_free(&t);
}
END_TEST

/* Corrupt byte @off of the file (xor 0x40) and expect open to fail. */
static void corrupt_and_open(struct tdrive *t, off_t off, int want)
{
	struct za_dev *dev = NULL;
	uint8_t b;
	int fd = open(t->path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	ck_assert_int_eq(za_dev_open(t->io, t->path, 0, &dev), want);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
	ck_assert_int_eq(za_dev_open(t->io, t->path, 0, &dev), 0);
	za_dev_close(dev);
}

static void quiet(enum za_log_level l, const char *msg)
{
	(void)l;
	(void)msg;
}

START_TEST(test_corrupt_files)
{
	struct tdrive t;
	struct za_dev *dev = NULL;
	struct stat st;
	uint8_t hdr[4096];
	off_t off;
	int fd;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	za_dev_close(t.dev);
	t.dev = NULL;
	za_log_set_sink(quiet);
	/* Every header byte that is covered by the CRC. */
	for (off = 8; off < 200; off += 7)
		corrupt_and_open(&t, off, -EUCLEAN);
	corrupt_and_open(&t, 4092, -EUCLEAN);
	/* Bad magic: not recognised as an emulated drive at all. */
	corrupt_and_open(&t, 0, -EMEDIUMTYPE);
	/* A zone table entry. */
	corrupt_and_open(&t, 4096 + 3 * 32 + 1, -EUCLEAN);

	/* Version from the future, with a valid CRC. */
	fd = open(t.path, O_RDWR);
	ck_assert_int_eq(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	za_put_le32(hdr + 8, 99);
	za_put_le32(hdr + 4092, za_crc32c(hdr, 4092));
	ck_assert_int_eq(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &dev), -EPROTONOSUPPORT);
	/* A flag this version does not know, with a valid CRC. */
	za_put_le32(hdr + 8, 1);
	za_put_le32(hdr + 76, 1u << 7);
	za_put_le32(hdr + 4092, za_crc32c(hdr, 4092));
	ck_assert_int_eq(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &dev), -EUCLEAN);
	/* A write pointer beyond the zone, with a valid entry CRC. */
	za_put_le32(hdr + 76, 0);
	za_put_le32(hdr + 4092, za_crc32c(hdr, 4092));
	ck_assert_int_eq(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	{
		uint8_t z[32] = { 0 };

		za_put_le64(z, 2ull << 20);
		z[16] = ZA_ZONE_COND_CLOSED;
		za_put_le32(z + 28, za_crc32c(z, 28));
		ck_assert_int_eq(pwrite(fd, z, 32, 4096 + 5 * 32), 32);
		ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &dev), -EUCLEAN);
	}
	/* Truncated. */
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(ftruncate(fd, st.st_size / 2), 0);
	ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &dev), -EUCLEAN);
	ck_assert_int_eq(ftruncate(fd, 100), 0);
	ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &dev), -EUCLEAN);
	close(fd);
	za_log_set_sink(NULL);
	tdrive_free(&t);
}
END_TEST

/* Allocated bytes of a file. */
static uint64_t talloc_bytes(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/* A WRITE whose data was staged: @buf is what the request carries. */
static bool staged_done_flag;

static void staged_done(struct za_dev_req *req)
{
	(void)req;
	staged_done_flag = true;
}

static int tio_staged(struct za_dev *dev, uint64_t off, void *buf, uint64_t len)
{
	struct za_dev_req req;

	memset(&req, 0, sizeof(req));
	req.op = ZA_DEV_OP_WRITE;
	req.off_bytes = off;
	req.len_bytes = len;
	req.buf = buf;
	req.staged = true;
	req.done = staged_done;
	staged_done_flag = false;
	za_dev_submit(dev, &req);
	za_io_run_until(dev->io, &staged_done_flag, 0);
	return req.result;
}

/*
 * za_dev_stage() on a preallocated drive puts a sequential zone's data in
 * place ahead of its WRITE: nothing past the write pointer reads back
 * before the WRITE (nor after a power cut), the staged WRITE then moves
 * the pointer without reading its buffer (here all zeros) and the staged
 * bytes read back, also after a flush and a reopen. Sparse drives,
 * conventional zones (overwritable: staging would change live data) and
 * read-only opens refuse with -EOPNOTSUPP, so callers write normally.
 * Loop: hm-smr, zns.
 */
START_TEST(test_stage)
{
	enum za_dev_model m = _i ? ZA_DEV_MODEL_ZNS : ZA_DEV_MODEL_HM_SMR;
	uint8_t *w = talloc(4 * BLK), *r = talloc(4 * BLK),
		*z = talloc(4 * BLK);
	struct za_dev *ro;
	struct tdrive t;
	uint64_t zs;

	tfill(w, 4 * BLK, 9);
	tdrive_small_prealloc(&t, m, true);
	zs = (uint64_t)(t.dev->caps.nr_conv_zones + 1) *
	     t.dev->caps.zone_size_bytes;
	if (t.dev->caps.nr_conv_zones)
		ck_assert_int_eq(za_dev_stage(t.dev, 0, w, BLK), -EOPNOTSUPP);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, zs, w, BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	/* Staged past the write pointer: not readable. */
	ck_assert_int_eq(za_dev_stage(t.dev, zs + BLK, w + BLK, 3 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, zs, r, 2 * BLK), -ENODATA);
	ck_assert_uint_eq(tzone(t.dev,
				(uint32_t)(zs / t.dev->caps.zone_size_bytes))
				  .wp_bytes,
			  zs + BLK);
	/* The WRITE takes what was staged, not its buffer. */
	ck_assert_int_eq(tio_staged(t.dev, zs + BLK, z, 2 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, zs, r, 3 * BLK), 0);
	ck_assert_mem_eq(r, w, 3 * BLK);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, zs, r, 4 * BLK), -ENODATA);
	/* Unflushed: a power cut takes it back, and the staged block past
	 * the pointer stays unreadable. */
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, zs, r, 2 * BLK), -ENODATA);
	/* Staged again, written, flushed: it survives a reopen. */
	ck_assert_int_eq(za_dev_stage(t.dev, zs + BLK, w + BLK, 3 * BLK), 0);
	ck_assert_int_eq(tio_staged(t.dev, zs + BLK, z, 3 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, zs, r, 4 * BLK), 0);
	ck_assert_mem_eq(r, w, 4 * BLK);
	/* Read-only opens refuse. */
	ck_assert_int_eq(za_dev_open(t.io, t.path, ZA_DEV_OPEN_RDONLY, &ro), 0);
	ck_assert_int_eq(za_dev_stage(ro, zs + 4 * BLK, w, BLK), -EOPNOTSUPP);
	za_dev_close(ro);
	tdrive_free(&t);
	/* Sparse drives refuse. */
	tdrive_small_prealloc(&t, m, false);
	ck_assert_int_eq(za_dev_stage(t.dev, zs, w, BLK), -EOPNOTSUPP);
	tdrive_free(&t);
	free(w);
	free(r);
	free(z);
}
END_TEST

/*
 * A preallocated drive (loop: hm-smr, zns) has every byte of its file
 * allocated from creation on, and keeps them through writes, resets and
 * power cuts; still, nothing it did not acknowledge becomes readable: a
 * reset zone is empty, reads past a write pointer are refused, and a
 * finish over bytes an earlier life of the zone wrote reads zeros.
 */
START_TEST(test_prealloc_keeps_blocks)
{
	enum za_dev_model m = _i ? ZA_DEV_MODEL_ZNS : ZA_DEV_MODEL_HM_SMR;
	uint8_t *w = talloc(8 * BLK), *r = talloc(8 * BLK);
	struct tdrive t;
	struct za_zone zone;
	uint64_t full, z;
	uint32_t zi;

	tdrive_small_prealloc(&t, m, true);
	zi = t.dev->caps.nr_conv_zones + 1;
	z = (uint64_t)zi * t.dev->caps.zone_size_bytes;
	full = talloc_bytes(t.path);
	ck_assert_uint_ge(full, t.dev->caps.capacity_bytes);
	tfill(w, 8 * BLK, 3);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z, w, 8 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_RESET, z, NULL, 0), 0);
	ck_assert_uint_eq(talloc_bytes(t.path), full);
	zone = tzone(t.dev, zi);
	ck_assert_int_eq(zone.cond, ZA_ZONE_COND_EMPTY);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z, r, BLK), -ENODATA);
	/* Two blocks flushed, two more lost in a power cut. */
	tfill(w, 8 * BLK, 4);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z, w, 2 * BLK), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, z + 2 * BLK, w + 2 * BLK,
			     2 * BLK),
			 0);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_uint_eq(talloc_bytes(t.path), full);
	ck_assert_uint_eq(tzone(t.dev, zi).wp_bytes, z + 2 * BLK);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z + 2 * BLK, r, BLK),
			 -ENODATA);
	/* The file still holds blocks 2-7 of two lives; finish hides them. */
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FINISH, z, NULL, 0), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_READ, z, r, 8 * BLK), 0);
	ck_assert_mem_eq(r, w, 2 * BLK);
	memset(w, 0, 6 * BLK);
	ck_assert_mem_eq(r + 2 * BLK, w, 6 * BLK);
	ck_assert_uint_eq(talloc_bytes(t.path), full);
	/* It is still a preallocated drive after a reopen. */
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_RESET, z, NULL, 0), 0);
	ck_assert_uint_eq(talloc_bytes(t.path), full);
	free(w);
	free(r);
	tdrive_free(&t);
}
END_TEST

/*
 * Writes into a preallocated drive's mapping take streaming stores
 * (za_emu_copy_to_drive()), which the CPU may hold in its write
 * buffers; every write must read back exactly, at once, in a sequential
 * and a conventional zone, and after a flush and a reopen. Loop over a
 * table of (blocks before, blocks written).
 */
static const struct {
	uint32_t skip, blocks;
} pcopies[] = {
	{ 0, 1 }, { 1, 1 }, { 3, 2 }, { 0, 16 }, { 5, 33 }, { 2, 64 },
};

START_TEST(test_prealloc_writes_read_back)
{
	uint32_t skip = pcopies[_i].skip * BLK, len = pcopies[_i].blocks * BLK;
	uint8_t *w = talloc(skip + len), *r = talloc(skip + len);
	uint64_t zs[2];
	struct tdrive t;
	int j;

	tdrive_small_prealloc(&t, ZA_DEV_MODEL_HM_SMR, true);
	ck_assert_uint_ge(t.dev->caps.nr_conv_zones, 1);
	zs[0] = 0; /* conventional */
	zs[1] = (uint64_t)(t.dev->caps.nr_conv_zones + 1) *
		t.dev->caps.zone_size_bytes;
	tfill(w, skip + len, (uint8_t)(_i + 7));
	for (j = 0; j < 2; j++) {
		if (skip)
			ck_assert_int_eq(
				tio(t.dev, ZA_DEV_OP_WRITE, zs[j], w, skip), 0);
		ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_WRITE, zs[j] + skip,
				     w + skip, len),
				 0);
		ck_assert_int_eq(
			tio(t.dev, ZA_DEV_OP_READ, zs[j], r, skip + len), 0);
		ck_assert_mem_eq(r, w, skip + len);
	}
	ck_assert_int_eq(tio(t.dev, ZA_DEV_OP_FLUSH, 0, NULL, 0), 0);
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	for (j = 0; j < 2; j++) {
		memset(r, 0, skip + len);
		ck_assert_int_eq(
			tio(t.dev, ZA_DEV_OP_READ, zs[j], r, skip + len), 0);
		ck_assert_mem_eq(r, w, skip + len);
	}
	free(w);
	free(r);
	tdrive_free(&t);
}
END_TEST

/*
 * Regression: bytes in the file past a zone's write pointer (a write that
 * reached the file before a SIGKILL, but not the write pointer) became
 * readable after FINISH, and survived a power cut, so crash recovery found
 * a stripe that was never acknowledged. Loop: sparse and preallocated
 * drives (the latter never punches, so it must hide such bytes itself).
 */
START_TEST(test_stale_bytes_past_wp)
{
	struct tdrive t;
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	uint64_t z1, data_off;
	int fd, pass;

	for (pass = 0; pass < 2; pass++) {
		tdrive_small_prealloc(&t, ZA_DEV_MODEL_HM_SMR, _i);
		z1 = 2 * t.dev->caps.zone_size_bytes; /* a sequential zone */
		memset(buf, 0x11, sizeof(buf));
		ck_assert_int_eq(za_dev_io_sync(t.dev, ZA_DEV_OP_WRITE, z1, buf,
						4096, NULL),
				 0);
		ck_assert_int_eq(za_dev_io_sync(t.dev, ZA_DEV_OP_FLUSH, 0, NULL,
						0, NULL),
				 0);
		/* The killed process's write: in the file, past the wp. */
		fd = open(t.path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &data_off, 8, 136), 8);
		memset(buf, 0xee, sizeof(buf));
		ck_assert_int_eq(pwrite(fd, buf, 4096,
					(off_t)(data_off + z1 + 4096)),
				 4096);
		close(fd);
		if (pass == 1) /* and a power cut before anything else */
			ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
		ck_assert_int_eq(za_dev_io_sync(t.dev, ZA_DEV_OP_FINISH, z1,
						NULL, 0, NULL),
				 0);
		ck_assert_int_eq(za_dev_io_sync(t.dev, ZA_DEV_OP_READ,
						z1 + 4096, buf, 4096, NULL),
				 0);
		ck_assert_uint_eq(buf[0], 0);
		ck_assert_uint_eq(buf[4095], 0);
		tdrive_free(&t);
	}
}
END_TEST

/*
 * Regression: a zone table entry was updated in place with several
 * stores (cleared, then its fields, then its CRC), so a process killed
 * between two of them left an entry failing its checksum and a drive
 * file that would not open again ("zone table entry checksum mismatch",
 * seen after a SIGKILL in tests/export-crash.sh). Deterministic: a child
 * process is single-stepped (ptrace) through the submission of a write,
 * a flush, a finish and a reset of one zone (the drive executes them
 * there), and after every instruction that zone's entry, as the file
 * holds it for whoever opens it next, must pass its checksum.
 */
struct step_op {
	enum za_dev_op op;
	uint64_t len;
};

static void step_done(struct za_dev_req *req)
{
	(void)req; /* never runs: the child does not run its loop */
}

static void step_child(const char *path, uint64_t zoff,
		       const struct step_op *ops, unsigned nr)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	static struct za_dev_req req[8];
	struct za_dev *dev;
	struct za_io *cio;
	unsigned i;

	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(77);
	if (za_io_new(NULL, &cio) || za_dev_open(cio, path, 0, &dev))
		_exit(2);
	for (i = 0; i < nr && i < 8; i++) {
		req[i].op = ops[i].op;
		req[i].off_bytes = zoff;
		req[i].len_bytes = ops[i].len;
		req[i].buf = ops[i].len ? buf : NULL;
		req[i].done = step_done;
		raise(SIGSTOP); /* the parent steps from here... */
		za_dev_submit(dev, &req[i]);
		raise(SIGSTOP); /* ...to here */
	}
	_exit(0);
}

START_TEST(test_zone_entry_update_atomic)
{
	static const struct step_op ops[] = {
		{ ZA_DEV_OP_WRITE, 4096 }, /* empty -> implicitly open */
		{ ZA_DEV_OP_FLUSH, 0 },
		{ ZA_DEV_OP_FINISH, 0 },
		{ ZA_DEV_OP_RESET, 0 },
	};
	struct tdrive t;
	uint8_t ent[32];
	uint64_t zoff, eoff, steps = 0;
	bool stepping = false;
	int status, fd;
	pid_t pid;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	zoff = 2 * t.dev->caps.zone_size_bytes; /* a sequential zone */
	eoff = 4096 + 2 * 32; /* its entry: docs/format.md, zone table */
	za_dev_close(t.dev); /* the child opens the drive */
	t.dev = NULL;
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		step_child(t.path, zoff, ops, sizeof(ops) / sizeof(ops[0]));
	fd = open(t.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (;;) {
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status))
			break;
		ck_assert(WIFSTOPPED(status));
		if (WSTOPSIG(status) == SIGSTOP) {
			stepping = !stepping;
		} else {
			ck_assert_int_eq(WSTOPSIG(status), SIGTRAP);
			/* The state a kill right here would leave. */
			ck_assert_int_eq(pread(fd, ent, 32, (off_t)eoff), 32);
			ck_assert_msg(
				za_get_le32(ent + 28) == za_crc32c(ent, 28),
				"instruction %llu: the zone's entry fails "
				"its checksum",
				(unsigned long long)steps);
			steps++;
		}
		ck_assert_int_eq(ptrace(stepping ? PTRACE_SINGLESTEP :
						   PTRACE_CONT,
					pid, NULL, NULL),
				 0);
	}
	close(fd);
	if (WEXITSTATUS(status) == 77) {
		/* No ptrace here (a sandbox): nothing to step through. */
		fprintf(stderr, "# test_zone_entry_update_atomic: ptrace "
				"not permitted; skipped\n");
	} else {
		ck_assert_int_eq(WEXITSTATUS(status), 0);
		ck_assert_uint_gt(steps, 20);
		/* And the drive opens, its zone empty again. */
		ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &t.dev), 0);
		ck_assert_uint_eq(tzone(t.dev, 2).cond, ZA_ZONE_COND_EMPTY);
	}
	if (!t.dev)
		ck_assert_int_eq(za_dev_open(t.io, t.path, 0, &t.dev), 0);
	tdrive_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("emu");
	TCase *tc = tcase_create("emu");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_geometry, 0,
			    sizeof(egeos) / sizeof(egeos[0]));
	tcase_add_test(tc, test_bad_params);
	tcase_add_loop_test(tc, test_stale_bytes_past_wp, 0, 2);
	tcase_add_loop_test(tc, test_prealloc_keeps_blocks, 0, 2);
	tcase_add_loop_test(tc, test_stage, 0, 2);
	tcase_add_loop_test(tc, test_prealloc_writes_read_back, 0,
			    sizeof(pcopies) / sizeof(pcopies[0]));
	tcase_add_test(tc, test_zone_entry_update_atomic);
	tcase_add_test(tc, test_powercut_sequential);
	tcase_add_test(tc, test_powercut_conventional);
	tcase_add_test(tc, test_cache_writeback_when_full);
	tcase_add_test(tc, test_write_through);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_perf_model);
	tcase_add_loop_test(tc, test_perf_priority, 0, 2);
	tcase_add_test(tc, test_perf_priority_aging);
	tcase_add_test(tc, test_double_open);
	tcase_add_test(tc, test_corrupt_files);
	suite_add_tcase(s, tc);
	return trun(s);
}
