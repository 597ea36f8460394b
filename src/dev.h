/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev.h - the zoned device layer: one asynchronous ops table for every kind
 * of member drive.
 *
 * Backends: "zbd" (real zoned block devices through libzbd and io_uring,
 * with native NVMe zone append through io_uring passthrough where the drive
 * is NVMe ZNS), "emu" (a file-backed emulated zoned drive) and "fault" (a
 * wrapper around any backend that injects failures). Upper layers see only
 * struct za_dev, its capabilities and za_dev_submit().
 *
 * The contract (docs/design.md, "The device layer", says it at length):
 *  - Every data operation is asynchronous: za_dev_submit() never calls the
 *    request's done() itself; done() runs exactly once, later, on the loop
 *    thread, with req->result 0 or -errno.
 *  - Sequential zones are written only at the write pointer. WRITE gives the
 *    offset, which must equal the write pointer when the request reaches the
 *    device (requests to one zone are executed in submission order). APPEND
 *    gives the zone start and the device chooses; landed_bytes says where
 *    the data went. Both work on every backend: native_append only says
 *    whether the drive itself does zone append (and so whether appends in
 *    flight together may land in any order).
 *  - Errors are the same on every backend (see ZA_DEV_E* below); a failed
 *    device answers -ENODEV, never crashes the process.
 *  - Buffers and offsets are aligned to lblock_bytes (4096 on every member
 *    we accept); lengths are multiples of write_gran_bytes for writes.
 */
#ifndef ZA_DEV_H
#define ZA_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"

struct za_dev;

enum za_dev_model {
	ZA_DEV_MODEL_HM_SMR = 1, /* host-managed SMR (ZBC/ZAC) */
	ZA_DEV_MODEL_ZNS = 2, /* NVMe zoned namespace */
};
const char *za_dev_model_str(enum za_dev_model m);
/* Parse "hm-smr" / "zns"; returns 0 or -EINVAL. */
int za_dev_model_parse(const char *s, enum za_dev_model *out);

/* Values match ZBC/ZNS and libzbd so they print the same as zbd report. */
enum za_zone_type {
	ZA_ZONE_TYPE_CNV = 1, /* conventional: random writes */
	ZA_ZONE_TYPE_SWR = 2, /* sequential write required */
	ZA_ZONE_TYPE_SWP = 3, /* sequential write preferred (treated as SWR) */
};
const char *za_zone_type_str(enum za_zone_type t);

enum za_zone_cond {
	ZA_ZONE_COND_NOT_WP = 0x0, /* conventional zones */
	ZA_ZONE_COND_EMPTY = 0x1,
	ZA_ZONE_COND_IMP_OPEN = 0x2,
	ZA_ZONE_COND_EXP_OPEN = 0x3,
	ZA_ZONE_COND_CLOSED = 0x4,
	ZA_ZONE_COND_READONLY = 0xd,
	ZA_ZONE_COND_FULL = 0xe,
	ZA_ZONE_COND_OFFLINE = 0xf,
};
const char *za_zone_cond_str(enum za_zone_cond c);

struct za_zone {
	uint64_t start_bytes;
	uint64_t len_bytes; /* zone size */
	uint64_t cap_bytes; /* writable part, <= len_bytes (ZNS: often less) */
	/*
	 * Write pointer. Conventional zones: start_bytes. FULL zones:
	 * start_bytes + len_bytes (as the kernel reports it); how much was
	 * written before a FINISH is not recorded by the drive.
	 */
	uint64_t wp_bytes;
	enum za_zone_type type;
	enum za_zone_cond cond;
};

/* Capabilities are data: upper layers decide from these, not from names. */
struct za_dev_caps {
	enum za_dev_model model;
	uint64_t capacity_bytes;
	uint64_t zone_size_bytes; /* all zones of a drive have one size */
	uint64_t zone_cap_bytes; /* smallest capacity of a sequential zone */
	uint32_t nr_zones;
	uint32_t nr_conv_zones; /* conventional zones (any position) */
	uint32_t lblock_bytes; /* logical block: alignment of everything */
	uint32_t write_gran_bytes; /* minimum write size and alignment */
	uint32_t max_open_zones; /* 0: no limit */
	uint32_t max_active_zones; /* 0: no limit */
	uint32_t max_io_bytes; /* largest single READ or WRITE */
	uint32_t max_append_bytes; /* largest single APPEND */
	bool native_append; /* the drive does zone append itself */
	bool volatile_cache; /* FLUSH is needed for durability */
	char vendor[64]; /* model string, for reports */
};

enum za_dev_op {
	ZA_DEV_OP_READ = 1,
	ZA_DEV_OP_WRITE, /* at off_bytes, which must be the wp */
	ZA_DEV_OP_APPEND, /* off_bytes = zone start; see landed_bytes */
	ZA_DEV_OP_RESET, /* off_bytes = zone start */
	ZA_DEV_OP_FINISH, /* off_bytes = zone start */
	ZA_DEV_OP_OPEN_ZONE, /* explicit open; off_bytes = zone start */
	ZA_DEV_OP_CLOSE_ZONE, /* off_bytes = zone start */
	ZA_DEV_OP_FLUSH, /* whole device; off/len/buf ignored */
};
const char *za_dev_op_str(enum za_dev_op op);

/*
 * Error codes (negative in req->result), identical on every backend:
 *  -EINVAL       misaligned offset, length or buffer; zero or too large
 *                length; range past the device or across a zone boundary;
 *                a zone operation on a conventional zone or not at a zone
 *                start.
 *  -ESPIPE       WRITE not at the write pointer of a sequential zone.
 *  -ENOSPC       write past the zone capacity, or to a FULL zone.
 *  -ENODATA      READ past the write pointer of a sequential zone.
 *  -EROFS        write, reset or finish of a READONLY zone.
 *  -EIO          the medium failed, or the zone is OFFLINE.
 *  -ETOOMANYREFS the open-zone limit is reached by explicitly open zones
 *                (implicitly open ones are closed to make room, as drives do).
 *  -EOVERFLOW    the active-zone limit is reached.
 *  -ENODEV       the device failed or vanished.
 */

/*
 * Priority of a request in the drive's queue. Background work (rebuild,
 * drain, scrub) submits LOW so that user I/O queued behind it on the same
 * drive goes first: a drive serves one request at a time, and a FUA write
 * queued behind a dozen rebuild reads would wait for all of them. LOW
 * requests are served when no NORMAL one waits, or once they have waited
 * long enough (the backend's aging: they are delayed, never starved).
 * What a backend does with it: emu, its performance model (two queues,
 * see dev-emu.c); zbd, the kernel's I/O priority (IOPRIO_CLASS_IDLE,
 * which mq-deadline, the scheduler zoned drives use, queues apart and
 * ages); fault passes it on. Writes to one zone keep their submission
 * order whatever their priority; give all writes of a zone one priority.
 */
enum za_dev_prio {
	ZA_DEV_PRIO_NORMAL = 0,
	ZA_DEV_PRIO_LOW = 1,
};
#define ZA_DEV_NR_PRIO 2

struct za_dev_req {
	/* Set by the caller. */
	enum za_dev_op op;
	uint64_t off_bytes;
	uint64_t len_bytes;
	void *buf; /* aligned to lblock_bytes */
	void (*done)(struct za_dev_req *req);
	void *priv;
	enum za_dev_prio prio; /* 0 (NORMAL) unless set */
	/* WRITE: the data is in place already (za_dev_stage() of the same
	 * range returned 0); buf is not read. false unless set. */
	bool staged;

	/* Set before done() runs. */
	int result; /* 0 or -errno */
	uint64_t landed_bytes; /* WRITE/APPEND: device offset the data took */

	/* Private to the device layer. */
	struct za_dev *dev;
	struct za_io_defer defer;
	struct za_io_cqe_handler cqe;
	struct za_dev_req *next;
	uint64_t submit_ns;
	uint32_t zone_idx;
	uint32_t flags;
};

struct za_dev_stats {
	uint64_t reads, writes, appends, resets, finishes, flushes;
	uint64_t read_bytes, write_bytes; /* writes + appends */
	uint64_t errors;
};

struct za_dev_ops {
	const char *name;
	/*
	 * Synchronous, loop thread. Fill up to *nr zones starting with the
	 * zone that contains @from_bytes; set *nr to the number filled.
	 * Returns 0 or -errno.
	 */
	int (*report_zones)(struct za_dev *dev, uint64_t from_bytes,
			    struct za_zone *zones, unsigned *nr);
	/*
	 * Asynchronous, loop thread. The request has passed the common
	 * argument checks (za_dev_submit()). The backend must eventually call
	 * za_dev_complete() exactly once, never from inside submit(). It
	 * serves req->prio as far as the device allows (enum za_dev_prio);
	 * a wrapper passes it on to the device it wraps.
	 */
	void (*submit)(struct za_dev *dev, struct za_dev_req *req);
	/*
	 * Optional, synchronous. Simulate a power cut: drop what the volatile
	 * cache holds, close open zones. Returns 0 or -EOPNOTSUPP.
	 */
	int (*power_cut)(struct za_dev *dev);
	/*
	 * Optional, synchronous, any thread. Put @len_bytes from @buf where
	 * a later WRITE of that range will put them, ahead of the write: a
	 * drive with memory the host can write into (the emulated drive's
	 * mapping; a controller memory buffer). The caller guarantees the
	 * range is past the zone's write pointer and that no reset, finish
	 * or write of it runs meanwhile; nothing there is readable until
	 * the WRITE with req->staged moves the write pointer over it. The
	 * stores may be weakly ordered (streaming stores): the caller calls
	 * za_dev_stage_fence() once after the last stage of a stripe and
	 * before the WRITE is handed to another thread. Returns 0,
	 * or -EOPNOTSUPP where the drive cannot (conventional zones too):
	 * the caller then writes the usual way. A wrapper passes it on.
	 */
	int (*stage)(struct za_dev *dev, uint64_t off_bytes, const void *buf,
		     uint64_t len_bytes);
	/* Synchronous. No request may be in flight. Frees @dev. */
	void (*close)(struct za_dev *dev);
};

struct za_dev {
	const struct za_dev_ops *ops;
	struct za_io *io;
	struct za_dev_caps caps;
	struct za_dev_stats stats;
	unsigned inflight;
	char path[256];
};

/* Flags for za_dev_open(). */
#define ZA_DEV_OPEN_RDONLY (1u << 0) /* reports and reads only */

/*
 * Open a member by path: a file holding an emulated drive, or a zoned
 * block device (/dev/sdX, /dev/nullbX, /dev/nvmeXnY). Synchronous.
 * Returns 0 or -errno; -EMEDIUMTYPE for a device or file that is not zoned
 * (with a message logged saying why).
 */
int za_dev_open(struct za_io *io, const char *path, unsigned flags,
		struct za_dev **out);
/*
 * za_dev_open() of each of @paths[0..@n), side by side: a zoned drive's
 * open reports every zone (~75,000 on a 20 TB SMR drive), and one after
 * the other an assembly of hundreds of drives waited for the sum. Up to
 * ZA_DEV_OPEN_THREADS threads, each opening the next path not taken; the
 * calling thread waits for them all (synchronous, like za_dev_open()).
 * @devs[i] and @rcs[i] get each one's result, in the order of @paths.
 * Without threads (none could start, or the loop's ring could not be set
 * up first: see dev.c) it opens them one after the other.
 */
#define ZA_DEV_OPEN_THREADS 32u
void za_dev_open_many(struct za_io *io, const char *const *paths, unsigned n,
		      unsigned flags, struct za_dev **devs, int *rcs);
void za_dev_close(struct za_dev *dev);

/* Queue a request (see the contract above). */
void za_dev_submit(struct za_dev *dev, struct za_dev_req *req);

int za_dev_report_zones(struct za_dev *dev, uint64_t from_bytes,
			struct za_zone *zones, unsigned *nr);
/* Report every zone into a new array (free() it). */
int za_dev_report_all(struct za_dev *dev, struct za_zone **zones, unsigned *nr);
int za_dev_power_cut(struct za_dev *dev);
/*
 * Stage a WRITE's data ahead of it (see za_dev_ops.stage): any thread.
 * Returns 0, or -EOPNOTSUPP when the backend cannot (write normally).
 */
int za_dev_stage(struct za_dev *dev, uint64_t off_bytes, const void *buf,
		 uint64_t len_bytes);
/*
 * Order what za_dev_stage() stored on this thread before anything it
 * stores next (the hand-off of the WRITE to the loop). One per stripe,
 * not one per stage: with streaming stores each fence waits for the
 * stores before it to reach memory, and one per 4 KiB block cost
 * sequential writes a tenth of their rate (bench/results/notes.md, P1).
 */
void za_dev_stage_fence(void);

/* Synchronous helpers (run the loop until done) for tools and tests. */
int za_dev_io_sync(struct za_dev *dev, enum za_dev_op op, uint64_t off_bytes,
		   void *buf, uint64_t len_bytes, uint64_t *landed_bytes);

/* Zone index of a byte offset. */
static inline uint32_t za_dev_zone_idx(const struct za_dev *dev,
				       uint64_t off_bytes)
{
	return (uint32_t)(off_bytes / dev->caps.zone_size_bytes);
}

/* ---- for backends only ---- */

/* Complete @req with @result on a later loop iteration (or now + delay). */
void za_dev_complete(struct za_dev_req *req, int result);
void za_dev_complete_at(struct za_dev_req *req, int result, uint64_t when_ns);
/*
 * The argument checks that need no zone state: alignment, length, range,
 * zone boundary. Returns 0 or -EINVAL.
 */
int za_dev_check_args(const struct za_dev *dev, const struct za_dev_req *req);
/*
 * The checks against a zone's state, shared by every backend that tracks
 * zones, so that all of them answer alike. @z is the zone the request
 * falls in. Returns 0 or a negative code from the list above.
 */
int za_dev_check_zone(const struct za_dev *dev, const struct za_zone *z,
		      const struct za_dev_req *req);

#endif /* ZA_DEV_H */
