// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev-zbd.c - the "zbd" device backend: real zoned block devices
 * (host-managed SMR, null_blk, NVMe ZNS) through libzbd for zone reports and
 * zone management, io_uring for data, and NVMe Zone Append through io_uring
 * passthrough on /dev/ngXnY where the drive is ZNS and the ring allows it.
 * It keeps a compact software copy of every zone (write pointer, capacity,
 * condition, open/active counts) so that requests are refused with exactly
 * the errors the emulated backend gives (za_dev_check_zone() plus the
 * resource checks) before the drive sees them; at the open limit it closes
 * the least recently written implicitly open zone itself, as the emulated
 * drive does, instead of leaving that choice to drives that differ. It
 * serialises writes per sequential zone (one write in flight, the rest in a
 * per-zone FIFO) because the kernels we target (6.1) do not plug zone
 * writes; native appends to one zone may be in flight together. Zone
 * management runs synchronously when it reaches the head of that FIFO. A
 * failed write re-reads its zone before anything else runs there; a drive
 * that vanished answers -ENODEV from then on. It does not retry failed I/O
 * (only -EAGAIN, when nothing was transferred), does not split requests
 * (the caps say what fits in one command), does not take the block device
 * exclusively, and cannot simulate a power cut.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <libzbd/zbd.h>
#include <linux/nvme_ioctl.h>
#include <liburing.h>

#include "container.h"
#include "dev-zbd.h"
#include "dev.h"
#include "io.h"
#include "log.h"

/* libzbd 2.0.4 indexes a 1024-entry array by fd without a bounds check. */
#define ZB_FD_LIMIT 1024
/* Largest READ/WRITE we offer: bigger ones only cost latency. */
#define ZB_IO_MAX (1u << 20)
/* Zones per report ioctl when walking the whole device. */
#define ZB_REPORT_CHUNK 4096u
/* Resubmissions of an I/O the kernel answered with -EAGAIN. */
#define ZB_EAGAIN_MAX 8u
#define ZB_SECTOR_SHIFT 9

#define ZB_NVME_CMD_ZONE_APPEND 0x7d
/* NVMe status codes (SCT 1, command specific) of the zoned command set. */
#define ZB_NVME_SC_MASK 0x7ff
#define ZB_NVME_SC_ZONE_BOUNDARY 0x1b8
#define ZB_NVME_SC_ZONE_FULL 0x1b9
#define ZB_NVME_SC_ZONE_READ_ONLY 0x1ba
#define ZB_NVME_SC_ZONE_OFFLINE 0x1bb
#define ZB_NVME_SC_ZONE_INVALID_WRITE 0x1bc
#define ZB_NVME_SC_ZONE_TOO_MANY_ACTIVE 0x1bd
#define ZB_NVME_SC_ZONE_TOO_MANY_OPEN 0x1be

/* Zone flags. */
#define ZB_ZS_STALE (1u << 0) /* the copy may be wrong: re-read first */

/*
 * Software copy of one zone. 16 bytes, because a 20 TB SMR drive has about
 * 75,000 zones and an array may hold 256 of them: start and length follow
 * from the index, positions are 512-byte sectors from the zone start (so a
 * zone may be up to 2 TiB), and the FIFO lives in a slot that only busy
 * zones hold.
 */
struct zb_zs {
	uint32_t wp; /* completed write pointer; FULL: zone length */
	uint32_t cap; /* capacity */
	uint32_t slot; /* 0: idle, else 1 + index in zd->slots */
	uint8_t type;
	uint8_t cond;
	uint8_t flags;
	uint8_t pad;
};

_Static_assert(sizeof(struct zb_zs) == 16, "keep the zone copy small");

/* Per-zone FIFO and in-flight accounting of a busy zone. */
struct zb_zq {
	struct za_dev_req *head, *tail; /* waiting, in submission order */
	/*
	 * Native appends in flight (bytes from the zone start): the write
	 * pointer when the first of them left, below which everything has
	 * landed, and where it will be once all of them land, so that the
	 * next one is checked against the capacity that is really left.
	 */
	uint64_t resv_start, resv_end;
	uint32_t nr_reads; /* reads in flight (a reset waits for them) */
	uint32_t nr_appends; /* native appends in flight */
	uint32_t next_free; /* free list link, as a slot number */
	bool excl; /* a write, emulated append or zone op in flight */
};

struct zb_dev {
	struct za_dev dev; /* first: ops get a struct za_dev pointer */
	int fd; /* the block device, from zbd_open() */
	int ng_fd; /* NVMe generic char device, -1 without native append */
	uint32_t nsid;
	unsigned lba_shift; /* the namespace's LBA size, for passthrough */
	bool rdonly;
	bool dead; /* vanished or failed: everything answers -ENODEV */
	uint32_t nr_zones;
	uint64_t zone_size;
	uint32_t nr_active; /* IMP_OPEN + EXP_OPEN + CLOSED */
	uint32_t nr_exp_open; /* EXP_OPEN */
	uint32_t nr_imp_open; /* IMP_OPEN */
	/*
	 * With an open limit: the implicitly open zones, least recently
	 * written first (see zb_make_room()); at most max_open_zones.
	 */
	uint32_t *lru;
	uint32_t nr_lru;
	struct zb_zs *zones;
	struct zb_zq **slots;
	uint32_t nr_slots, max_slots;
	uint32_t free_slot; /* slot number, 0: none */
	char sysfs[64]; /* /sys/dev/block/MAJ:MIN */
	char diskseq[32]; /* sysfs diskseq at open ("" if unknown) */
	char name[64]; /* kernel name, e.g. nvme0n1 */
};

static const struct za_dev_ops zb_ops;

static struct zb_dev *to_zd(struct za_dev *dev)
{
	return (struct zb_dev *)dev;
}

static struct za_dev_req *cqe_to_req(struct za_io_cqe_handler *h)
{
	return container_of(h, struct za_dev_req, cqe);
}

static uint64_t zb_zone_start(const struct zb_dev *zd, uint32_t idx)
{
	return (uint64_t)idx * zd->zone_size;
}

/* The last zone may be smaller than the others (a "runt" zone). */
static uint64_t zb_zone_len(const struct zb_dev *zd, uint32_t idx)
{
	uint64_t start = zb_zone_start(zd, idx);
	uint64_t end = zd->dev.caps.capacity_bytes;

	return end - start < zd->zone_size ? end - start : zd->zone_size;
}

static bool zb_cond_active(unsigned cond)
{
	return cond == ZA_ZONE_COND_IMP_OPEN || cond == ZA_ZONE_COND_EXP_OPEN ||
	       cond == ZA_ZONE_COND_CLOSED;
}

static void zb_lru_del(struct zb_dev *zd, uint32_t idx)
{
	for (uint32_t i = 0; i < zd->nr_lru; i++) {
		if (zd->lru[i] != idx)
			continue;
		memmove(&zd->lru[i], &zd->lru[i + 1],
			(zd->nr_lru - i - 1) * sizeof(*zd->lru));
		zd->nr_lru--;
		return;
	}
}

/* @idx was just written (or opened implicitly): most recent now. */
static void zb_lru_touch(struct zb_dev *zd, uint32_t idx)
{
	if (!zd->lru)
		return;
	zb_lru_del(zd, idx);
	/* Full only if the drive was over its limit: leave it untracked. */
	if (zd->nr_lru < zd->dev.caps.max_open_zones)
		zd->lru[zd->nr_lru++] = idx;
}

/* Change a zone's condition, keeping the open/active counts true. */
static void zb_zs_set_cond(struct zb_dev *zd, struct zb_zs *zs, unsigned cond)
{
	uint32_t idx = (uint32_t)(zs - zd->zones);

	/* Not a transition: a zone that is read back keeps its LRU place. */
	if (cond == zs->cond)
		return;
	if (zb_cond_active(zs->cond))
		zd->nr_active--;
	if (zs->cond == ZA_ZONE_COND_EXP_OPEN)
		zd->nr_exp_open--;
	if (zs->cond == ZA_ZONE_COND_IMP_OPEN) {
		zd->nr_imp_open--;
		if (zd->lru)
			zb_lru_del(zd, idx);
	}
	if (zb_cond_active(cond))
		zd->nr_active++;
	if (cond == ZA_ZONE_COND_EXP_OPEN)
		zd->nr_exp_open++;
	if (cond == ZA_ZONE_COND_IMP_OPEN) {
		zd->nr_imp_open++;
		zb_lru_touch(zd, idx);
	}
	zs->cond = cond;
}

static void zb_zs_set_full(struct zb_dev *zd, uint32_t idx)
{
	struct zb_zs *zs = &zd->zones[idx];

	zb_zs_set_cond(zd, zs, ZA_ZONE_COND_FULL);
	zs->wp = (uint32_t)(zb_zone_len(zd, idx) >> ZB_SECTOR_SHIFT);
}

/* The software copy of a zone, as the checks shared with emu expect it. */
static void zb_zone_view(const struct zb_dev *zd, uint32_t idx,
			 struct za_zone *z)
{
	const struct zb_zs *zs = &zd->zones[idx];

	z->start_bytes = zb_zone_start(zd, idx);
	z->len_bytes = zb_zone_len(zd, idx);
	z->cap_bytes = (uint64_t)zs->cap << ZB_SECTOR_SHIFT;
	z->wp_bytes = z->start_bytes;
	if (zs->type != ZA_ZONE_TYPE_CNV)
		z->wp_bytes += (uint64_t)zs->wp << ZB_SECTOR_SHIFT;
	z->type = zs->type;
	z->cond = zs->cond;
}

/* ---- slots: FIFOs of busy zones ---- */

static struct zb_zq *zb_slot(const struct zb_dev *zd, const struct zb_zs *zs)
{
	return zs->slot ? zd->slots[zs->slot - 1] : NULL;
}

static struct zb_zq *zb_get_slot(struct zb_dev *zd, uint32_t idx)
{
	struct zb_zs *zs = &zd->zones[idx];
	struct zb_zq *q;
	uint32_t s;

	if (zs->slot)
		return zd->slots[zs->slot - 1];
	if (zd->free_slot) {
		s = zd->free_slot;
		q = zd->slots[s - 1];
		zd->free_slot = q->next_free;
	} else {
		if (zd->nr_slots == zd->max_slots) {
			uint32_t max = zd->max_slots ? 2 * zd->max_slots : 16;
			struct zb_zq **slots;

			slots = realloc(zd->slots, max * sizeof(*slots));
			if (!slots)
				return NULL;
			zd->slots = slots;
			zd->max_slots = max;
		}
		q = malloc(sizeof(*q));
		if (!q)
			return NULL;
		zd->slots[zd->nr_slots++] = q;
		s = zd->nr_slots;
	}
	memset(q, 0, sizeof(*q));
	zs->slot = s;
	return q;
}

/* Give the slot back once nothing waits or runs in the zone. */
static void zb_put_slot(struct zb_dev *zd, uint32_t idx)
{
	struct zb_zs *zs = &zd->zones[idx];
	struct zb_zq *q = zb_slot(zd, zs);

	if (!q || q->head || q->excl || q->nr_reads || q->nr_appends)
		return;
	q->next_free = zd->free_slot;
	zd->free_slot = zs->slot;
	zs->slot = 0;
}

static void zb_fifo_push(struct zb_zq *q, struct za_dev_req *req)
{
	req->next = NULL;
	if (q->tail)
		q->tail->next = req;
	else
		q->head = req;
	q->tail = req;
}

static struct za_dev_req *zb_fifo_pop(struct zb_zq *q)
{
	struct za_dev_req *req = q->head;

	q->head = req->next;
	if (!q->head)
		q->tail = NULL;
	req->next = NULL;
	return req;
}

/* ---- errors ---- */

static int zb_sysfs_str(const struct zb_dev *zd, const char *attr, char *buf,
			size_t size);

/*
 * A vanished drive answers all sorts of errors (-EIO, -ENOSPC from null_blk
 * after its zones are gone, zone reports with no zones), so an error is
 * checked against sysfs before it is believed.
 */
static bool zb_vanished(const struct zb_dev *zd)
{
	char seq[32];

	/* Gone, or another disk took its number (diskseq never repeats). */
	if (zb_sysfs_str(zd, "diskseq", seq, sizeof(seq)))
		return access(zd->sysfs, F_OK) != 0 || zd->diskseq[0];
	return zd->diskseq[0] && strcmp(seq, zd->diskseq);
}

/* Turn an error into the one to report, marking the device dead if gone. */
static int zb_map_err(struct zb_dev *zd, int err)
{
	if (zd->dead)
		return -ENODEV;
	if (err == -ENODEV || err == -ENXIO || zb_vanished(zd)) {
		zd->dead = true;
		za_log_err("%s: device failed or vanished (%s); failing every "
			   "request with ENODEV",
			   zd->dev.path, strerror(-err));
		return -ENODEV;
	}
	return err;
}

/* Log a failed request once, with what it takes to find it on the drive. */
static void zb_log_fail(struct zb_dev *zd, const struct za_dev_req *req,
			uint64_t off, int err, const char *detail)
{
	/* Once dead, the one message zb_map_err() printed says it all. */
	if (err == -ENODEV && zd->dead)
		return;
	za_log_err("%s: %s zone %u offset %llu length %llu failed: %s%s",
		   zd->dev.path, za_dev_op_str(req->op), req->zone_idx,
		   (unsigned long long)off, (unsigned long long)req->len_bytes,
		   strerror(-err), detail ? detail : "");
}

/* ---- zone reports ---- */

/* Report zones [idx, idx + *nr) from the drive, in libzbd's layout. */
static int zb_report_raw(struct zb_dev *zd, uint32_t idx, struct zbd_zone *out,
			 unsigned *nr)
{
	unsigned want = *nr;
	unsigned n = want;
	uint64_t ofst = zb_zone_start(zd, idx);
	uint64_t end = zb_zone_start(zd, idx + want - 1) +
		       zb_zone_len(zd, idx + want - 1);
	int ret;

	ret = zbd_report_zones(zd->fd, (off_t)ofst, (off_t)(end - ofst),
			       ZBD_RO_ALL, out, &n);
	if (ret)
		/* libzbd returns -errno from the ioctl, -1 for a bad fd. */
		return ret < 0 ? ret : -EIO;
	if (n != want) {
		if (zb_vanished(zd))
			return -ENODEV;
		za_log_err("%s: report of zones %u-%u returned %u zones",
			   zd->dev.path, idx, idx + want - 1, n);
		return -EIO;
	}
	return 0;
}

/* Nothing read from a drive is trusted before it is checked. */
static int zb_zone_validate(const struct zb_dev *zd, uint32_t idx,
			    const struct zbd_zone *z)
{
	uint64_t start = zb_zone_start(zd, idx);
	uint64_t len = zb_zone_len(zd, idx);
	const char *what = NULL;

	if (z->start != start)
		what = "start";
	else if (z->len != len)
		what = "length";
	else if (z->type != ZBD_ZONE_TYPE_CNV && z->type != ZBD_ZONE_TYPE_SWR &&
		 z->type != ZBD_ZONE_TYPE_SWP)
		what = "type";
	else if (z->type != ZBD_ZONE_TYPE_CNV &&
		 (z->capacity == 0 || z->capacity > len ||
		  z->capacity % (1u << ZB_SECTOR_SHIFT)))
		what = "capacity";
	else if (z->type != ZBD_ZONE_TYPE_CNV &&
		 (z->cond == ZBD_ZONE_COND_EMPTY ||
		  z->cond == ZBD_ZONE_COND_IMP_OPEN ||
		  z->cond == ZBD_ZONE_COND_EXP_OPEN ||
		  z->cond == ZBD_ZONE_COND_CLOSED) &&
		 (z->wp < start || z->wp > start + z->capacity ||
		  z->wp % (1u << ZB_SECTOR_SHIFT)))
		what = "write pointer";
	else {
		switch (z->cond) {
		case ZBD_ZONE_COND_NOT_WP:
			if (z->type != ZBD_ZONE_TYPE_CNV)
				what = "condition";
			break;
		case ZBD_ZONE_COND_EMPTY:
		case ZBD_ZONE_COND_IMP_OPEN:
		case ZBD_ZONE_COND_EXP_OPEN:
		case ZBD_ZONE_COND_CLOSED:
		case ZBD_ZONE_COND_FULL:
			if (z->type == ZBD_ZONE_TYPE_CNV)
				what = "condition";
			break;
		case ZBD_ZONE_COND_READONLY:
		case ZBD_ZONE_COND_OFFLINE:
			break;
		default:
			what = "condition";
		}
	}
	if (!what)
		return 0;
	za_log_err("%s: zone %u: drive reports an invalid %s (start %llu "
		   "len %llu cap %llu wp %llu type %u cond 0x%x)",
		   zd->dev.path, idx, what, (unsigned long long)z->start,
		   (unsigned long long)z->len, (unsigned long long)z->capacity,
		   (unsigned long long)z->wp, z->type, z->cond);
	return -EIO;
}

/* A checked drive zone as the upper layers see it. */
static void zb_zone_export(const struct zbd_zone *z, struct za_zone *out)
{
	out->start_bytes = z->start;
	out->len_bytes = z->len;
	out->cap_bytes = z->capacity;
	out->type = z->type;
	out->cond = z->cond;
	switch (z->cond) {
	case ZBD_ZONE_COND_NOT_WP:
		out->cap_bytes = z->len;
		out->wp_bytes = z->start;
		break;
	case ZBD_ZONE_COND_FULL:
		out->wp_bytes = z->start + z->len;
		break;
	case ZBD_ZONE_COND_READONLY:
	case ZBD_ZONE_COND_OFFLINE:
		/* Undefined on the drive: keep it inside the zone. */
		if (z->wp < z->start || z->wp > z->start + z->len)
			out->wp_bytes = z->start;
		else
			out->wp_bytes = z->wp;
		break;
	default:
		out->wp_bytes = z->wp;
	}
}

/* Load a checked drive zone into the software copy. */
static void zb_zs_load(struct zb_dev *zd, uint32_t idx,
		       const struct zbd_zone *z)
{
	struct zb_zs *zs = &zd->zones[idx];
	struct za_zone v;

	zb_zone_export(z, &v);
	zs->type = (uint8_t)v.type;
	zs->cap = (uint32_t)(v.cap_bytes >> ZB_SECTOR_SHIFT);
	zs->wp = (uint32_t)((v.wp_bytes - v.start_bytes) >> ZB_SECTOR_SHIFT);
	zb_zs_set_cond(zd, zs, v.cond);
	zs->flags &= (uint8_t)~ZB_ZS_STALE;
}

/* Re-read one zone from the drive (after an error or a zone op). */
static int zb_resync(struct zb_dev *zd, uint32_t idx)
{
	struct zbd_zone z;
	unsigned n = 1;
	int err;

	if (zd->dead)
		return -ENODEV;
	err = zb_report_raw(zd, idx, &z, &n);
	if (!err)
		err = zb_zone_validate(zd, idx, &z);
	if (err) {
		zd->zones[idx].flags |= ZB_ZS_STALE;
		err = zb_map_err(zd, err);
		if (err != -ENODEV)
			za_log_err("%s: zone %u: cannot re-read the write "
				   "pointer: %s",
				   zd->dev.path, idx, strerror(-err));
		return err;
	}
	zb_zs_load(zd, idx, &z);
	return 0;
}

static int zb_report_op(struct za_dev *dev, uint64_t from_bytes,
			struct za_zone *zones, unsigned *nr)
{
	struct zb_dev *zd = to_zd(dev);
	struct zbd_zone *buf;
	uint32_t idx;
	unsigned want = *nr, done = 0;
	int err = 0;

	if (zd->dead)
		return -ENODEV;
	if (from_bytes >= dev->caps.capacity_bytes || !want) {
		*nr = 0;
		return 0;
	}
	idx = za_dev_zone_idx(dev, from_bytes);
	if (want > zd->nr_zones - idx)
		want = zd->nr_zones - idx;
	buf = malloc((want < ZB_REPORT_CHUNK ? want : ZB_REPORT_CHUNK) *
		     sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	while (done < want) {
		unsigned n = want - done;

		if (n > ZB_REPORT_CHUNK)
			n = ZB_REPORT_CHUNK;
		err = zb_report_raw(zd, idx + done, buf, &n);
		if (err) {
			err = zb_map_err(zd, err);
			break;
		}
		for (unsigned i = 0; i < n && !err; i++) {
			uint32_t zi = idx + done + i;

			err = zb_zone_validate(zd, zi, &buf[i]);
			if (err)
				break;
			zb_zone_export(&buf[i], &zones[done + i]);
			/*
			 * An idle zone's report is the truth (the drive may
			 * have closed an implicitly open zone); a busy one
			 * is caught mid-flight and would mislead.
			 */
			if (!zd->zones[zi].slot)
				zb_zs_load(zd, zi, &buf[i]);
		}
		if (err)
			break;
		done += n;
	}
	free(buf);
	if (err)
		return err;
	*nr = done;
	return 0;
}

/* ---- checks ---- */

/*
 * Open and active zone accounting, as a drive does it: writing an EMPTY
 * zone takes an active and an open resource, writing a CLOSED one an open
 * resource. The drive closes implicitly open zones to make room, so only
 * explicitly open zones can exhaust the open limit; and once they have, a
 * zone we still think implicitly open has been closed by the drive.
 */
static int zb_check_resources(const struct zb_dev *zd, unsigned cond)
{
	const struct za_dev_caps *caps = &zd->dev.caps;
	bool need_active = cond == ZA_ZONE_COND_EMPTY;
	bool need_open = cond == ZA_ZONE_COND_EMPTY ||
			 cond == ZA_ZONE_COND_CLOSED ||
			 cond == ZA_ZONE_COND_IMP_OPEN;

	if (need_active && caps->max_active_zones &&
	    zd->nr_active >= caps->max_active_zones)
		return -EOVERFLOW;
	if (need_open && caps->max_open_zones &&
	    zd->nr_exp_open >= caps->max_open_zones)
		return -ETOOMANYREFS;
	return 0;
}

/* Everything that decides whether @req may run on zone @z now. */
static int zb_check(const struct zb_dev *zd, const struct za_dev_req *req,
		    const struct za_zone *z)
{
	int err = za_dev_check_zone(&zd->dev, z, req);

	if (err)
		return err;
	/* After the zone checks, in the order the emulated drive uses. */
	if (zd->rdonly && req->op != ZA_DEV_OP_READ)
		return -EROFS;
	if (req->op == ZA_DEV_OP_READ || req->op == ZA_DEV_OP_WRITE) {
		if (z->type == ZA_ZONE_TYPE_CNV)
			return 0;
	} else if (z->type == ZA_ZONE_TYPE_CNV ||
		   req->off_bytes != z->start_bytes) {
		/* za_dev_check_zone() says so too; never send it. */
		return -EINVAL;
	}
	switch (req->op) {
	case ZA_DEV_OP_WRITE:
	case ZA_DEV_OP_APPEND:
	case ZA_DEV_OP_OPEN_ZONE:
		return zb_check_resources(zd, z->cond);
	default:
		return 0;
	}
}

/*
 * A request is about to take an open resource at the open limit: close the
 * least recently written idle implicitly open zone first, as the emulated
 * drive does. Drives differ here (null_blk on 6.1 refuses to close one
 * itself once the active limit is reached too, and which zone a drive
 * picks is its own business); doing it here keeps the copy exact and the
 * errors the same everywhere. A busy zone is never picked: if all are busy,
 * the drive decides.
 */
static void zb_make_room(struct zb_dev *zd, uint32_t idx)
{
	uint32_t max = zd->dev.caps.max_open_zones;
	unsigned cond = zd->zones[idx].cond;

	if (!max || zd->nr_imp_open + zd->nr_exp_open < max ||
	    (cond != ZA_ZONE_COND_EMPTY && cond != ZA_ZONE_COND_CLOSED))
		return;
	for (uint32_t i = 0; i < zd->nr_lru; i++) {
		uint32_t v = zd->lru[i];
		struct zb_zs *vs = &zd->zones[v];
		int err;

		if (v == idx || vs->slot)
			continue;
		errno = 0;
		if (zbd_close_zones(zd->fd, (off_t)zb_zone_start(zd, v),
				    (off_t)zb_zone_len(zd, v))) {
			err = zb_map_err(zd, errno ? -errno : -EIO);
			if (err != -ENODEV)
				za_log_warn("%s: zone %u: cannot close it to "
					    "make room: %s",
					    zd->dev.path, v, strerror(-err));
			vs->flags |= ZB_ZS_STALE;
			return;
		}
		zb_zs_set_cond(zd, vs,
			       vs->wp ? ZA_ZONE_COND_CLOSED :
					ZA_ZONE_COND_EMPTY);
		return;
	}
}

/* A write or append is about to reach the drive: the zone opens. */
static void zb_zs_open_implicit(struct zb_dev *zd, struct zb_zs *zs)
{
	if (zs->cond == ZA_ZONE_COND_EMPTY || zs->cond == ZA_ZONE_COND_CLOSED)
		zb_zs_set_cond(zd, zs, ZA_ZONE_COND_IMP_OPEN);
	else if (zs->cond == ZA_ZONE_COND_IMP_OPEN)
		zb_lru_touch(zd, (uint32_t)(zs - zd->zones));
}

/* ---- io_uring ---- */

/* IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0) (linux/ioprio.h; stable ABI). */
#define ZB_IOPRIO_IDLE ((uint16_t)(3u << 13))

static void zb_kick(struct zb_dev *zd, uint32_t idx);
static void zb_cqe_read(struct za_io_cqe_handler *h,
			const struct io_uring_cqe *cqe);
static void zb_cqe_write(struct za_io_cqe_handler *h,
			 const struct io_uring_cqe *cqe);

static int zb_issue_rw(struct zb_dev *zd, struct za_dev_req *req, bool write,
		       uint64_t off)
{
	struct io_uring_sqe *sqe = za_io_get_sqe(zd->dev.io);

	if (!sqe)
		return -ENOMEM;
	if (write) {
		io_uring_prep_write(sqe, zd->fd, req->buf,
				    (unsigned)req->len_bytes, off);
		req->cqe.fn = zb_cqe_write;
	} else {
		io_uring_prep_read(sqe, zd->fd, req->buf,
				   (unsigned)req->len_bytes, off);
		req->cqe.fn = zb_cqe_read;
	}
	/* Background work in the idle class: mq-deadline (the scheduler of
	 * zoned drives) queues it apart and serves it when nothing else
	 * waits, aging it after prio_aging_expire; BE levels it ignores. */
	if (req->prio == ZA_DEV_PRIO_LOW)
		sqe->ioprio = ZB_IOPRIO_IDLE;
	io_uring_sqe_set_data(sqe, &req->cqe);
	return 0;
}

/*
 * -EAGAIN means nothing was transferred (the kernel could not queue the
 * request without blocking): resubmitting is safe, even for a zone write.
 */
static bool zb_retry(struct zb_dev *zd, struct za_dev_req *req, int res,
		     bool write, uint64_t off)
{
	if (res != -EAGAIN || req->flags >= ZB_EAGAIN_MAX)
		return false;
	req->flags++;
	return zb_issue_rw(zd, req, write, off) == 0;
}

static void zb_cqe_read(struct za_io_cqe_handler *h,
			const struct io_uring_cqe *cqe)
{
	struct za_dev_req *req = cqe_to_req(h);
	struct zb_dev *zd = to_zd(req->dev);
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	int err = 0;

	if (zb_retry(zd, req, cqe->res, false, req->off_bytes))
		return;
	if (cqe->res != (int)req->len_bytes) {
		/* Short reads of a block device only happen on errors. */
		err = zb_map_err(zd, cqe->res < 0 ? cqe->res : -EIO);
		zb_log_fail(zd, req, req->off_bytes, err,
			    cqe->res >= 0 ? " (short read)" : NULL);
	}
	za_dev_complete(req, err);
	if (zs->type != ZA_ZONE_TYPE_CNV) {
		zb_slot(zd, zs)->nr_reads--;
		zb_kick(zd, idx);
	}
}

static void zb_cqe_write(struct za_io_cqe_handler *h,
			 const struct io_uring_cqe *cqe)
{
	struct za_dev_req *req = cqe_to_req(h);
	struct zb_dev *zd = to_zd(req->dev);
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	int err = 0;

	if (zb_retry(zd, req, cqe->res, true, req->landed_bytes))
		return;
	if (cqe->res == (int)req->len_bytes) {
		if (zs->type != ZA_ZONE_TYPE_CNV) {
			zs->wp += (uint32_t)(req->len_bytes >> ZB_SECTOR_SHIFT);
			if (zs->wp >= zs->cap)
				zb_zs_set_full(zd, idx);
		}
	} else {
		err = zb_map_err(zd, cqe->res < 0 ? cqe->res : -EIO);
		zb_log_fail(zd, req, req->landed_bytes, err,
			    cqe->res >= 0 ? " (short write)" : NULL);
		/*
		 * Part of the data may have landed and moved the write
		 * pointer: re-read it while the zone is still ours.
		 */
		if (zs->type != ZA_ZONE_TYPE_CNV) {
			zs->flags |= ZB_ZS_STALE;
			zb_resync(zd, idx);
		}
	}
	za_dev_complete(req, err);
	if (zs->type != ZA_ZONE_TYPE_CNV) {
		zb_slot(zd, zs)->excl = false;
		zb_kick(zd, idx);
	}
}

static void zb_cqe_flush(struct za_io_cqe_handler *h,
			 const struct io_uring_cqe *cqe)
{
	struct za_dev_req *req = cqe_to_req(h);
	struct zb_dev *zd = to_zd(req->dev);
	int err = 0;

	if (cqe->res < 0) {
		err = zb_map_err(zd, cqe->res);
		if (!(err == -ENODEV && zd->dead))
			za_log_err("%s: flush failed: %s", zd->dev.path,
				   strerror(-err));
	}
	za_dev_complete(req, err);
}

/* NVMe status of a passthrough command → our error codes. */
static int zb_nvme_err(int status)
{
	if (status < 0)
		return status;
	switch (status & ZB_NVME_SC_MASK) {
	case ZB_NVME_SC_ZONE_BOUNDARY:
	case ZB_NVME_SC_ZONE_FULL:
		return -ENOSPC;
	case ZB_NVME_SC_ZONE_READ_ONLY:
		return -EROFS;
	case ZB_NVME_SC_ZONE_TOO_MANY_ACTIVE:
		return -EOVERFLOW;
	case ZB_NVME_SC_ZONE_TOO_MANY_OPEN:
		return -ETOOMANYREFS;
	case ZB_NVME_SC_ZONE_OFFLINE:
	case ZB_NVME_SC_ZONE_INVALID_WRITE:
	default:
		return -EIO;
	}
}

static void zb_cqe_append(struct za_io_cqe_handler *h,
			  const struct io_uring_cqe *cqe)
{
	struct za_dev_req *req = cqe_to_req(h);
	struct zb_dev *zd = to_zd(req->dev);
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	struct zb_zq *q = zb_slot(zd, zs);
	uint64_t start = zb_zone_start(zd, idx);
	uint64_t cap = (uint64_t)zs->cap << ZB_SECTOR_SHIFT;
	char detail[48] = "";
	int err = 0;

	q->nr_appends--;
	if (cqe->res == 0) {
		uint64_t landed = (uint64_t)cqe->big_cqe[0] << zd->lba_shift;

		if (landed < start || landed - start > cap ||
		    req->len_bytes > cap - (landed - start)) {
			err = -EIO;
			snprintf(detail, sizeof(detail),
				 " (drive says it landed at %llu)",
				 (unsigned long long)landed);
		} else {
			uint32_t end =
				(uint32_t)((landed - start + req->len_bytes) >>
					   ZB_SECTOR_SHIFT);

			/* Appends may complete out of order. */
			if (end > zs->wp)
				zs->wp = end;
			req->landed_bytes = landed;
		}
	} else {
		if (cqe->res > 0)
			snprintf(detail, sizeof(detail), " (NVMe status 0x%x)",
				 (unsigned)cqe->res);
		err = zb_map_err(zd, zb_nvme_err(cqe->res));
	}
	if (err) {
		zb_log_fail(zd, req, start, err, detail);
		zs->flags |= ZB_ZS_STALE;
	}
	if (!q->nr_appends) {
		/*
		 * All landed: the drive's write pointer is where the
		 * reservations said, or something happened we did not see.
		 */
		if ((uint64_t)zs->wp << ZB_SECTOR_SHIFT != q->resv_end)
			zs->flags |= ZB_ZS_STALE;
		if (zs->flags & ZB_ZS_STALE)
			zb_resync(zd, idx);
		else if (zs->wp >= zs->cap)
			zb_zs_set_full(zd, idx);
	}
	za_dev_complete(req, err);
	zb_kick(zd, idx);
}

/* ---- dispatch: a request that reached the head of its zone ---- */

static void zb_dispatch_read(struct zb_dev *zd, struct za_dev_req *req)
{
	uint32_t idx = req->zone_idx;
	struct zb_zq *q;
	struct za_zone z;
	int err;

	zb_zone_view(zd, idx, &z);
	err = zb_check(zd, req, &z);
	if (err)
		goto err_done;
	q = zb_get_slot(zd, idx);
	if (!q) {
		err = -ENOMEM;
		goto err_done;
	}
	err = zb_issue_rw(zd, req, false, req->off_bytes);
	if (err)
		goto err_slot;
	q->nr_reads++;
	return;

err_slot:
	zb_put_slot(zd, idx);
err_done:
	za_dev_complete(req, err);
}

/* WRITE, or APPEND without native append: one at a time, at the wp. */
static void zb_dispatch_write(struct zb_dev *zd, struct zb_zq *q,
			      struct za_dev_req *req)
{
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	struct za_zone z;
	int err;

	zb_zone_view(zd, idx, &z);
	err = zb_check(zd, req, &z);
	if (err)
		goto err_done;
	zb_make_room(zd, idx);
	req->landed_bytes = req->op == ZA_DEV_OP_APPEND ? z.wp_bytes :
							  req->off_bytes;
	err = zb_issue_rw(zd, req, true, req->landed_bytes);
	if (err)
		goto err_done;
	zb_zs_open_implicit(zd, zs);
	q->excl = true;
	return;

err_done:
	za_dev_complete(req, err);
}

/* APPEND with native append: several may be in flight in one zone. */
static void zb_dispatch_append(struct zb_dev *zd, struct zb_zq *q,
			       struct za_dev_req *req)
{
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	struct nvme_uring_cmd *cmd;
	struct io_uring_sqe *sqe;
	struct za_zone z;
	uint64_t zslba;
	int err;

	zb_zone_view(zd, idx, &z);
	if (q->nr_appends)
		z.wp_bytes = z.start_bytes + q->resv_end;
	err = zb_check(zd, req, &z);
	if (err)
		goto err_done;
	zb_make_room(zd, idx);
	sqe = za_io_get_sqe(zd->dev.io);
	if (!sqe) {
		err = -ENOMEM;
		goto err_done;
	}
	/* The ring is big (checked at open): the SQE has 128 bytes. */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = zd->ng_fd;
	sqe->cmd_op = NVME_URING_CMD_IO;
	cmd = (struct nvme_uring_cmd *)sqe->cmd;
	cmd->opcode = ZB_NVME_CMD_ZONE_APPEND;
	cmd->nsid = zd->nsid;
	zslba = z.start_bytes >> zd->lba_shift;
	cmd->cdw10 = (uint32_t)zslba;
	cmd->cdw11 = (uint32_t)(zslba >> 32);
	cmd->cdw12 = (uint32_t)((req->len_bytes >> zd->lba_shift) - 1);
	cmd->addr = (uint64_t)(uintptr_t)req->buf;
	cmd->data_len = (uint32_t)req->len_bytes;
	req->cqe.fn = zb_cqe_append;
	io_uring_sqe_set_data(sqe, &req->cqe);

	if (!q->nr_appends) {
		q->resv_start = (uint64_t)zs->wp << ZB_SECTOR_SHIFT;
		q->resv_end = q->resv_start;
	}
	q->resv_end += req->len_bytes;
	q->nr_appends++;
	zb_zs_open_implicit(zd, zs);
	return;

err_done:
	za_dev_complete(req, err);
}

/*
 * Zone management, synchronously: the 6.1 kernel has no asynchronous zone
 * management for block devices, and these are rare (seal, reclaim).
 */
static void zb_do_zone_op(struct zb_dev *zd, struct za_dev_req *req)
{
	uint32_t idx = req->zone_idx;
	struct zb_zs *zs = &zd->zones[idx];
	uint64_t start = zb_zone_start(zd, idx);
	off_t len = (off_t)zb_zone_len(zd, idx);
	enum za_dev_op op;
	struct za_zone z;
	int err, ret;

	zb_zone_view(zd, idx, &z);
	err = zb_check(zd, req, &z);
	if (err)
		goto out;
	/*
	 * What is a no-op on the emulated drive is one here too: drives
	 * differ (null_blk fails opening a FULL zone, for one).
	 */
	if ((req->op == ZA_DEV_OP_OPEN_ZONE && z.cond == ZA_ZONE_COND_FULL) ||
	    (req->op == ZA_DEV_OP_FINISH && z.cond == ZA_ZONE_COND_FULL) ||
	    (req->op == ZA_DEV_OP_CLOSE_ZONE &&
	     z.cond != ZA_ZONE_COND_IMP_OPEN &&
	     z.cond != ZA_ZONE_COND_EXP_OPEN))
		goto out;
	op = req->op;
	if (op == ZA_DEV_OP_CLOSE_ZONE && !zs->wp) {
		/*
		 * Closing an open zone with nothing written empties it on
		 * null_blk and on the emulated drive, but QEMU's ZNS keeps it
		 * CLOSED, holding an active resource. A reset does what the
		 * contract says everywhere, once the drive confirms that the
		 * zone holds nothing.
		 */
		err = zb_resync(zd, idx);
		if (err)
			goto out;
		if (!zs->wp && (zs->cond == ZA_ZONE_COND_IMP_OPEN ||
				zs->cond == ZA_ZONE_COND_EXP_OPEN))
			op = ZA_DEV_OP_RESET;
	}
	/*
	 * ZBC (and null_blk) also take an open resource to finish an EMPTY
	 * or CLOSED zone, and fail the finish at the limit; ZNS does not.
	 */
	if (op == ZA_DEV_OP_OPEN_ZONE ||
	    (op == ZA_DEV_OP_FINISH &&
	     zd->dev.caps.model == ZA_DEV_MODEL_HM_SMR))
		zb_make_room(zd, idx);
	/* len 0 would mean "to the end of the device": pass the zone. */
	errno = 0;
	switch (op) {
	case ZA_DEV_OP_RESET:
		ret = zbd_reset_zones(zd->fd, (off_t)start, len);
		break;
	case ZA_DEV_OP_FINISH:
		ret = zbd_finish_zones(zd->fd, (off_t)start, len);
		break;
	case ZA_DEV_OP_OPEN_ZONE:
		ret = zbd_open_zones(zd->fd, (off_t)start, len);
		break;
	case ZA_DEV_OP_CLOSE_ZONE:
		ret = zbd_close_zones(zd->fd, (off_t)start, len);
		break;
	default:
		ret = -1;
		errno = EINVAL;
	}
	if (ret) {
		err = zb_map_err(zd, errno ? -errno : -EIO);
		zb_log_fail(zd, req, start, err, NULL);
	} else {
		/* What the drive did; the re-read below confirms it. */
		switch (op) {
		case ZA_DEV_OP_RESET:
			zb_zs_set_cond(zd, zs, ZA_ZONE_COND_EMPTY);
			zs->wp = 0;
			break;
		case ZA_DEV_OP_FINISH:
			zb_zs_set_full(zd, idx);
			break;
		case ZA_DEV_OP_OPEN_ZONE:
			if (zs->cond != ZA_ZONE_COND_FULL)
				zb_zs_set_cond(zd, zs, ZA_ZONE_COND_EXP_OPEN);
			break;
		default:
			if (zs->cond == ZA_ZONE_COND_IMP_OPEN ||
			    zs->cond == ZA_ZONE_COND_EXP_OPEN)
				zb_zs_set_cond(zd, zs,
					       zs->wp ? ZA_ZONE_COND_CLOSED :
							ZA_ZONE_COND_EMPTY);
		}
	}
	/*
	 * A zone op changes what the drive keeps about the zone (and after
	 * an error we do not know what it did): read it back. Cheap, rare.
	 */
	zb_resync(zd, idx);
out:
	za_dev_complete(req, err);
}

/*
 * Run what can run in zone @idx, in submission order: reads once nothing
 * that writes is in flight, native appends alongside each other, anything
 * else alone (a reset also waits for reads). A zone whose copy is stale is
 * re-read before anything runs.
 */
static void zb_kick(struct zb_dev *zd, uint32_t idx)
{
	struct zb_zs *zs = &zd->zones[idx];
	struct zb_zq *q;

	while ((q = zb_slot(zd, zs)) && q->head) {
		struct za_dev_req *req = q->head;
		bool busy = q->excl || q->nr_appends;
		int err;

		if (zd->dead) {
			za_dev_complete(zb_fifo_pop(q), -ENODEV);
			continue;
		}
		if (zs->flags & ZB_ZS_STALE) {
			if (busy)
				break;
			err = zb_resync(zd, idx);
			if (err) {
				za_dev_complete(zb_fifo_pop(q), err);
				continue;
			}
		}
		switch (req->op) {
		case ZA_DEV_OP_READ:
			if (busy)
				goto out;
			zb_dispatch_read(zd, zb_fifo_pop(q));
			break;
		case ZA_DEV_OP_APPEND:
			if (zd->ng_fd >= 0) {
				if (q->excl)
					goto out;
				zb_dispatch_append(zd, q, zb_fifo_pop(q));
				break;
			}
			/* fall through */
		case ZA_DEV_OP_WRITE:
			if (busy)
				goto out;
			zb_dispatch_write(zd, q, zb_fifo_pop(q));
			break;
		case ZA_DEV_OP_RESET:
			/* A read in flight must not see the zone wiped. */
			if (busy || q->nr_reads)
				goto out;
			zb_do_zone_op(zd, zb_fifo_pop(q));
			break;
		default:
			if (busy)
				goto out;
			zb_do_zone_op(zd, zb_fifo_pop(q));
		}
	}
out:
	zb_put_slot(zd, idx);
}

/* ---- ops ---- */

static void zb_submit(struct za_dev *dev, struct za_dev_req *req)
{
	struct zb_dev *zd = to_zd(dev);
	struct zb_zs *zs;
	struct zb_zq *q;
	struct za_zone z;
	uint32_t idx;
	int err;

	/* za_dev_submit() has set dev, next, flags and zone_idx. */
	if (zd->dead) {
		za_dev_complete(req, -ENODEV);
		return;
	}
	if (req->op == ZA_DEV_OP_FLUSH) {
		/*
		 * An fsync of the block device flushes the drive's cache: it
		 * covers every write that completed before it, which is all
		 * the contract asks.
		 */
		struct io_uring_sqe *sqe = za_io_get_sqe(dev->io);

		if (!sqe) {
			za_dev_complete(req, -ENOMEM);
			return;
		}
		io_uring_prep_fsync(sqe, zd->fd, 0);
		req->cqe.fn = zb_cqe_flush;
		io_uring_sqe_set_data(sqe, &req->cqe);
		return;
	}
	idx = req->zone_idx;
	/* za_dev_check_args() has refused offsets past the device. */
	assert(idx < zd->nr_zones);
	zs = &zd->zones[idx];

	if (zs->type == ZA_ZONE_TYPE_CNV) {
		/* No write pointer, no order to keep: straight to the drive. */
		zb_zone_view(zd, idx, &z);
		err = zb_check(zd, req, &z);
		if (!err) {
			req->landed_bytes = req->off_bytes;
			err = zb_issue_rw(zd, req, req->op == ZA_DEV_OP_WRITE,
					  req->off_bytes);
		}
		if (err)
			za_dev_complete(req, err);
		return;
	}

	q = zb_slot(zd, zs);
	if (req->op == ZA_DEV_OP_READ && !(zs->flags & ZB_ZS_STALE) &&
	    (!q || (!q->head && !q->excl &&
		    (!q->nr_appends ||
		     req->off_bytes + req->len_bytes <=
			     zb_zone_start(zd, idx) + q->resv_start)))) {
		/*
		 * Nothing before it can change what it reads: appends in
		 * flight only write above resv_start.
		 */
		zb_dispatch_read(zd, req);
		return;
	}
	q = zb_get_slot(zd, idx);
	if (!q) {
		za_dev_complete(req, -ENOMEM);
		return;
	}
	zb_fifo_push(q, req);
	zb_kick(zd, idx);
}

static void zb_free(struct zb_dev *zd)
{
	for (uint32_t i = 0; i < zd->nr_slots; i++)
		free(zd->slots[i]);
	free(zd->slots);
	free(zd->zones);
	free(zd->lru);
	if (zd->ng_fd >= 0)
		close(zd->ng_fd);
	zbd_close(zd->fd);
	free(zd);
}

static void zb_close_op(struct za_dev *dev)
{
	struct zb_dev *zd = to_zd(dev);

	if (dev->inflight) {
		/*
		 * Their completions would still arrive and touch @zd: leak
		 * it rather than let them use freed memory.
		 */
		za_log_err("%s: closed with %u requests in flight; leaking "
			   "the device state",
			   dev->path, dev->inflight);
		return;
	}
	zb_free(zd);
}

static const struct za_dev_ops zb_ops = {
	.name = "zbd",
	.report_zones = zb_report_op,
	.submit = zb_submit,
	/* A real drive cannot be told to drop its cache: no power_cut. */
	.close = zb_close_op,
};

/* ---- open ---- */

/* Read a sysfs attribute of the device, trailing whitespace stripped. */
static int zb_sysfs_str(const struct zb_dev *zd, const char *attr, char *buf,
			size_t size)
{
	char path[160];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", zd->sysfs, attr);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return 0;
}

static int zb_sysfs_u64(const struct zb_dev *zd, const char *attr,
			uint64_t *val)
{
	char buf[64], *end;
	int err;

	err = zb_sysfs_str(zd, attr, buf, sizeof(buf));
	if (err)
		return err;
	errno = 0;
	*val = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	return 0;
}

static uint64_t zb_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * The largest transfer the kernel passes to the drive as one command: past
 * max_sectors_kb it splits, and a buffer of N pages may need N segments.
 */
static uint64_t zb_io_limit(const struct zb_dev *zd, const char *max_kb)
{
	uint64_t kb, segs, lim = ZB_IO_MAX;

	if (!zb_sysfs_u64(zd, max_kb, &kb) && kb)
		lim = zb_min(lim, kb * 1024);
	if (!zb_sysfs_u64(zd, "queue/max_segments", &segs) && segs)
		lim = zb_min(lim, segs * 4096);
	/* Whole write granules, so that a full-size write keeps alignment. */
	lim -= lim % zd->dev.caps.write_gran_bytes;
	return lim ? lim : zd->dev.caps.write_gran_bytes;
}

/*
 * Check the path before libzbd opens it: it would write past its fd table
 * for fds >= 1024, and say little about why a device is refused.
 */
static int zb_probe(const char *path, struct zb_dev *zd)
{
	char model[32], real[PATH_MAX];
	const char *base;
	struct stat st;
	int fd, err;

	if (stat(path, &st)) {
		err = -errno;
		za_log_err("%s: %s", path, strerror(-err));
		return err;
	}
	if (!S_ISBLK(st.st_mode)) {
		za_log_err("%s: not a zoned block device (not a block device)",
			   path);
		return -EMEDIUMTYPE;
	}
	snprintf(zd->sysfs, sizeof(zd->sysfs), "/sys/dev/block/%u:%u",
		 major(st.st_rdev), minor(st.st_rdev));
	err = zb_sysfs_str(zd, "queue/zoned", model, sizeof(model));
	if (err == -ENOENT) {
		/* Partitions have no queue/ of their own. */
		za_log_err("%s: not a zoned block device (a partition?)", path);
		return -EMEDIUMTYPE;
	}
	if (err) {
		za_log_err("%s: cannot read %s/queue/zoned: %s", path,
			   zd->sysfs, strerror(-err));
		return err;
	}
	if (strcmp(model, "host-managed") && strcmp(model, "host-aware")) {
		za_log_err("%s: not a zoned block device (zoned model: %s)",
			   path, model);
		return -EMEDIUMTYPE;
	}
	if (!realpath(zd->sysfs, real)) {
		err = -errno;
		za_log_err("%s: cannot resolve %s: %s", path, zd->sysfs,
			   strerror(-err));
		return err;
	}
	if (zb_sysfs_str(zd, "diskseq", zd->diskseq, sizeof(zd->diskseq)))
		zd->diskseq[0] = '\0';
	base = strrchr(real, '/');
	snprintf(zd->name, sizeof(zd->name), "%.*s", (int)sizeof(zd->name) - 1,
		 base ? base + 1 : real);

	/* open() returns the lowest free fd; libzbd's will be no higher. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		za_log_err("%s: %s", path, strerror(-err));
		return err;
	}
	close(fd);
	if (fd >= ZB_FD_LIMIT) {
		za_log_err("%s: no file descriptor below %d left (libzbd "
			   "cannot use higher ones): open members first",
			   path, ZB_FD_LIMIT);
		return -EMFILE;
	}
	return 0;
}

/* Load every zone; count conventional zones, resources, smallest cap. */
static int zb_load_zones(struct zb_dev *zd)
{
	struct za_dev_caps *caps = &zd->dev.caps;
	struct zbd_zone *buf;
	uint32_t done = 0;
	int err = 0;

	zd->zones = calloc(zd->nr_zones, sizeof(*zd->zones));
	buf = malloc(ZB_REPORT_CHUNK * sizeof(*buf));
	if (!zd->zones || !buf) {
		err = -ENOMEM;
		goto out;
	}
	caps->zone_cap_bytes = 0;
	while (done < zd->nr_zones) {
		unsigned n = zd->nr_zones - done;

		if (n > ZB_REPORT_CHUNK)
			n = ZB_REPORT_CHUNK;
		err = zb_report_raw(zd, done, buf, &n);
		if (err) {
			za_log_err("%s: zone report failed: %s", zd->dev.path,
				   strerror(-err));
			goto out;
		}
		for (unsigned i = 0; i < n; i++) {
			err = zb_zone_validate(zd, done + i, &buf[i]);
			if (err)
				goto out;
			zb_zs_load(zd, done + i, &buf[i]);
			if (buf[i].type == ZBD_ZONE_TYPE_CNV)
				caps->nr_conv_zones++;
			else if (!caps->zone_cap_bytes ||
				 buf[i].capacity < caps->zone_cap_bytes)
				caps->zone_cap_bytes = buf[i].capacity;
		}
		done += n;
	}
	if (!caps->zone_cap_bytes) {
		za_log_err("%s: no sequential zone", zd->dev.path);
		err = -EMEDIUMTYPE;
	}
out:
	free(buf);
	return err;
}

/*
 * Native zone append needs the namespace's generic char device and a ring
 * with big SQEs/CQEs. Anything missing: emulated append (a write at the wp),
 * which is correct, only serialised.
 */
static void zb_setup_native_append(struct zb_dev *zd, uint64_t append_max)
{
	struct za_dev_caps *caps = &zd->dev.caps;
	unsigned ctrl, ns;
	char ng[64];
	int pos = 0, fd, id, bid, err;

	if (sscanf(zd->name, "nvme%un%u%n", &ctrl, &ns, &pos) != 2 ||
	    zd->name[pos] != '\0' || !append_max)
		return;
	snprintf(ng, sizeof(ng), "/dev/ng%un%u", ctrl, ns);
	fd = open(ng, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		za_log_info("%s: %s: %s; zone append is emulated", zd->dev.path,
			    ng, strerror(errno));
		return;
	}
	/* The char device must be this namespace, not a namesake. */
	id = ioctl(fd, NVME_IOCTL_ID);
	bid = ioctl(zd->fd, NVME_IOCTL_ID);
	if (id <= 0 || id != bid) {
		za_log_info("%s: %s does not match the namespace (nsid %d vs "
			    "%d); zone append is emulated",
			    zd->dev.path, ng, id, bid);
		goto err_close;
	}
	err = za_io_ring_setup(zd->dev.io);
	if (err || !za_io_ring_big(zd->dev.io)) {
		za_log_info("%s: no io_uring for NVMe passthrough (%s); zone "
			    "append is emulated",
			    zd->dev.path,
			    err ? strerror(-err) :
				  "the kernel has no big ring entries");
		goto err_close;
	}
	zd->ng_fd = fd;
	zd->nsid = (uint32_t)id;
	caps->native_append = true;
	/* NLB is a 16-bit field: 65536 blocks at most. */
	caps->max_append_bytes = (uint32_t)zb_min(
		zb_min(append_max, zb_io_limit(zd, "queue/max_hw_sectors_kb")),
		(uint64_t)65536 << zd->lba_shift);
	za_log_info("%s: native zone append through %s (nsid %u)", zd->dev.path,
		    ng, zd->nsid);
	return;

err_close:
	close(fd);
}

int za_dev_zbd_open(struct za_io *io, const char *path, unsigned flags,
		    struct za_dev **out)
{
	struct zb_dev *zd;
	struct za_dev_caps *caps;
	struct zbd_info info;
	uint64_t val, append_max = 0;
	char buf[64];
	int err, oflags;

	zd = calloc(1, sizeof(*zd));
	if (!zd)
		return -ENOMEM;
	zd->fd = -1;
	zd->ng_fd = -1;
	zd->rdonly = flags & ZA_DEV_OPEN_RDONLY;
	zd->dev.ops = &zb_ops;
	zd->dev.io = io;
	caps = &zd->dev.caps;
	if (snprintf(zd->dev.path, sizeof(zd->dev.path), "%s", path) >=
	    (int)sizeof(zd->dev.path)) {
		za_log_err("%.64s...: path too long", path);
		err = -ENAMETOOLONG;
		goto err_free;
	}

	err = zb_probe(path, zd);
	if (err)
		goto err_free;
	oflags = (zd->rdonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC;
	errno = 0;
	zd->fd = zbd_open(path, oflags, &info);
	if (zd->fd < 0) {
		/* libzbd returns -1 (or -errno) and may leave errno at 0. */
		err = errno ? -errno : (zd->fd < -1 ? zd->fd : -EIO);
		za_log_err("%s: cannot open: %s", path, strerror(-err));
		goto err_free;
	}
	if (zd->fd >= ZB_FD_LIMIT) {
		/* Only another thread opening files at once gets us here. */
		za_log_err("%s: fd %d is beyond libzbd's table", path, zd->fd);
		close(zd->fd);
		err = -EMFILE;
		goto err_free;
	}

	caps->model = strncmp(zd->name, "nvme", 4) ? ZA_DEV_MODEL_HM_SMR :
						     ZA_DEV_MODEL_ZNS;
	caps->capacity_bytes = info.nr_sectors << ZB_SECTOR_SHIFT;
	caps->zone_size_bytes = info.zone_size;
	caps->lblock_bytes = info.lblock_size > 4096 ? info.lblock_size : 4096;
	zd->zone_size = info.zone_size;
	zd->nr_zones = info.nr_zones;
	caps->nr_zones = info.nr_zones;
	zd->lba_shift = (unsigned)__builtin_ctz(info.lblock_size);
	if (!info.zone_size || info.zone_size % caps->lblock_bytes ||
	    (info.zone_size >> ZB_SECTOR_SHIFT) > UINT32_MAX ||
	    info.lblock_size & (info.lblock_size - 1) ||
	    caps->capacity_bytes % caps->lblock_bytes ||
	    info.nr_zones != (caps->capacity_bytes + info.zone_size - 1) /
				     info.zone_size) {
		za_log_err("%s: unsupported geometry (zone size %llu, logical "
			   "block %u, capacity %llu, %u zones)",
			   path, info.zone_size, info.lblock_size,
			   (unsigned long long)caps->capacity_bytes,
			   info.nr_zones);
		err = -EMEDIUMTYPE;
		goto err_close;
	}

	/* Writes must keep the write pointer aligned to lblock_bytes. */
	if (zb_sysfs_u64(zd, "queue/zone_write_granularity", &val) || !val)
		val = info.pblock_size;
	caps->write_gran_bytes =
		(uint32_t)(val > caps->lblock_bytes ? val : caps->lblock_bytes);
	/* libzbd says -1 for "unknown": treat it as "no limit". */
	caps->max_open_zones =
		info.max_nr_open_zones == UINT_MAX ? 0 : info.max_nr_open_zones;
	caps->max_active_zones = info.max_nr_active_zones == UINT_MAX ?
					 0 :
					 info.max_nr_active_zones;
	caps->max_io_bytes = (uint32_t)zb_io_limit(zd, "queue/max_sectors_kb");
	if (!zb_sysfs_u64(zd, "queue/zone_append_max_bytes", &val))
		append_max = val - val % caps->lblock_bytes;
	caps->max_append_bytes =
		append_max ? (uint32_t)zb_min(append_max, caps->max_io_bytes) :
			     caps->max_io_bytes;
	caps->volatile_cache =
		!zb_sysfs_str(zd, "queue/write_cache", buf, sizeof(buf)) &&
		!strcmp(buf, "write back");
	snprintf(caps->vendor, sizeof(caps->vendor), "%.*s",
		 (int)sizeof(info.vendor_id), info.vendor_id);
	/* libzbd joins vendor, model and revision with spaces. */
	for (size_t n = strlen(caps->vendor); n && caps->vendor[n - 1] == ' ';)
		caps->vendor[--n] = '\0';

	if (caps->max_open_zones) {
		zd->lru = calloc(caps->max_open_zones, sizeof(*zd->lru));
		if (!zd->lru) {
			err = -ENOMEM;
			goto err_close;
		}
	}
	err = zb_load_zones(zd);
	if (err)
		goto err_close;
	if (!zd->rdonly && caps->model == ZA_DEV_MODEL_ZNS)
		zb_setup_native_append(zd, append_max);

	za_log_debug("%s: %s, %u zones (%u conventional) of %llu MiB, cap "
		     "%llu MiB, lblock %u, gran %u, max open %u active %u, "
		     "io %u, append %u%s%s",
		     path, za_dev_model_str(caps->model), caps->nr_zones,
		     caps->nr_conv_zones,
		     (unsigned long long)(caps->zone_size_bytes >> 20),
		     (unsigned long long)(caps->zone_cap_bytes >> 20),
		     caps->lblock_bytes, caps->write_gran_bytes,
		     caps->max_open_zones, caps->max_active_zones,
		     caps->max_io_bytes, caps->max_append_bytes,
		     caps->native_append ? " native" : "",
		     caps->volatile_cache ? ", volatile cache" : "");
	*out = &zd->dev;
	return 0;

err_close:
	zb_free(zd);
	return err;
err_free:
	free(zd->zones);
	free(zd);
	return err;
}
