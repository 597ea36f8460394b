// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nbd-harness.c - what the two NBD fuzz targets share: an NBD server
 * (src/nbd.c) on a fresh loop, serving a RAM backend, with one or two
 * scripted clients on socketpairs sending the fuzzed stream and then EOF.
 *
 * The backend also checks the server's side of the ops contract (nbd.h):
 * every call is in range, aligned to the minimum block size, non-empty,
 * within the payload limit, with a 4096-aligned buffer of len bytes
 * (ASan sees a short one when the backend touches it all). It completes
 * at once or on a later loop iteration, and fails some calls on request,
 * so that error replies and completions after a close are covered.
 *
 * The input starts with two harness mode bytes. The first:
 *   bits 0-1  export size: 1 MiB, 1 MiB + 100 (rounded down by the
 *             server), 4096, 0
 *   bit 2     complete on a later loop iteration (else inside the call)
 *   bit 3     fail every third backend call (EIO, then ENOSPC, ...)
 *   bits 4-5  limits: defaults with a 1 MiB payload; 64 KiB payload;
 *             2 commands in flight; 64 KiB in flight
 *   bit 6     (the transmission target: OPT_EXPORT_NAME, not OPT_GO)
 *   bit 7     za_nbd_server_shutdown() before the client speaks
 * The second:
 *   bit 0     minimal socket buffers, so that replies are written in
 *             pieces (EAGAIN, the write watcher)
 *   bit 1     two clients at once, each sending the same stream
 *   bit 2     a receive thread from the first WRITE of 4 KiB or more,
 *             and a backend that takes payloads at once (write_copies
 *             says yes every other call), so that ring payloads are
 *             handed over in place: the write after a yes may have any
 *             alignment and is copied inside the call
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io.h"
#include "nbd.h"

#define BE_MAX_BYTES (1u << 20)

struct be {
	struct za_io *io;
	uint8_t *data;
	uint64_t size; /* what size() says */
	uint32_t max_payload;
	uint8_t mode;
	unsigned calls, pending;
	bool copies; /* write_copies said yes: the next write is in place */
};

struct be_req {
	struct za_io_defer d;
	struct be *be;
	struct za_nbd_req *r;
	int err;
};

static uint64_t be_size(void *p)
{
	return ((struct be *)p)->size;
}

static void be_done_cb(struct za_io_defer *d)
{
	struct be_req *q = (struct be_req *)d;

	q->be->pending--;
	za_nbd_complete(q->r, q->err);
}

static void be_finish(struct be *be, struct za_nbd_req *r)
{
	struct be_req *q = za_nbd_req_priv(r);
	int err = 0;

	be->calls++;
	if ((be->mode & 8) && be->calls % 3 == 0)
		err = be->calls % 2 ? -EIO : -ENOSPC;
	if (!(be->mode & 4)) {
		za_nbd_complete(r, err);
		return;
	}
	q->d.fn = be_done_cb;
	q->be = be;
	q->r = r;
	q->err = err;
	be->pending++;
	za_io_defer(be->io, &q->d);
}

static void be_check_range(struct be *be, uint64_t off, uint32_t len)
{
	uint64_t size = be->size & ~(uint64_t)(ZA_NBD_MIN_BLOCK_BYTES - 1);

	ZA_FUZZ_CHECK(len > 0, "backend called with an empty range");
	ZA_FUZZ_CHECK(off % ZA_NBD_MIN_BLOCK_BYTES == 0 &&
			      len % ZA_NBD_MIN_BLOCK_BYTES == 0,
		      "backend called with an unaligned range");
	ZA_FUZZ_CHECK(off <= size && len <= size - off,
		      "backend called beyond the export");
}

static void be_check_buf(struct be *be, const void *buf, uint32_t len)
{
	ZA_FUZZ_CHECK(len <= be->max_payload,
		      "backend called above the payload limit");
	ZA_FUZZ_CHECK(((uintptr_t)buf & 4095) == 0,
		      "backend given an unaligned buffer");
}

static void be_read(void *p, struct za_nbd_req *r, uint64_t off, uint32_t len,
		    void *buf)
{
	struct be *be = p;

	be_check_range(be, off, len);
	be_check_buf(be, buf, len);
	memcpy(buf, be->data + off, len);
	be_finish(be, r);
}

static void be_write(void *p, struct za_nbd_req *r, uint64_t off, uint32_t len,
		     const void *buf, bool fua)
{
	struct be *be = p;

	(void)fua;
	be_check_range(be, off, len);
	if (be->copies)
		ZA_FUZZ_CHECK(len <= be->max_payload,
			      "backend called above the payload limit");
	else
		be_check_buf(be, buf, len);
	be->copies = false;
	memcpy(be->data + off, buf, len);
	be_finish(be, r);
}

static bool be_write_copies(void *p)
{
	struct be *be = p;

	be->copies = (be->calls + be->pending) % 2 == 0;
	return be->copies;
}

static void be_flush(void *p, struct za_nbd_req *r)
{
	be_finish(p, r);
}

static void be_trim(void *p, struct za_nbd_req *r, uint64_t off, uint32_t len)
{
	struct be *be = p;

	be_check_range(be, off, len);
	memset(be->data + off, 0xa5, len);
	be_finish(be, r);
}

static void be_zeroes(void *p, struct za_nbd_req *r, uint64_t off, uint32_t len,
		      bool fua)
{
	struct be *be = p;

	(void)fua;
	be_check_range(be, off, len);
	memset(be->data + off, 0, len);
	be_finish(be, r);
}

static const struct za_nbd_backend_ops be_ops = {
	.read = be_read,
	.write = be_write,
	.flush = be_flush,
	.trim = be_trim,
	.write_zeroes = be_zeroes,
	.size = be_size,
};

void za_fuzz_nbd_run(uint8_t mode, uint8_t mode2, const uint8_t *in, size_t len)
{
	static const uint64_t sizes[4] = { BE_MAX_BYTES, BE_MAX_BYTES + 100,
					   4096, 0 };
	struct za_nbd_params p = {
		.export_name = "fuzz",
		.description = "fuzz export",
		.handshake_timeout_s = ZA_FUZZ_HANG_S * 2,
		.req_priv_bytes = sizeof(struct be_req),
	};
	unsigned nr_peers = mode2 & 2 ? 2 : 1, i;
	struct za_nbd_server *srv;
	struct za_fuzz_peer peers[2];
	struct za_nbd_backend_ops ops; /* outlives the server */
	struct za_nbd_stats st;
	struct be be = { 0 };
	int fd;

	if (mode2 & 4)
		p.rx_min_payload_bytes = 4096;
	be.mode = mode;
	be.size = sizes[mode & 3];
	be.data = calloc(1, BE_MAX_BYTES + 4096);
	if (!be.data)
		abort();
	switch ((mode >> 4) & 3) {
	case 0:
		p.max_payload_bytes = 1u << 20;
		break;
	case 1:
		p.max_payload_bytes = 64u << 10;
		break;
	case 2:
		p.max_payload_bytes = 64u << 10;
		p.max_inflight_reqs = 2;
		break;
	case 3:
		p.max_payload_bytes = 64u << 10;
		p.max_inflight_bytes = 64u << 10;
		break;
	}
	be.max_payload = p.max_payload_bytes;
	if (za_io_new(NULL, &be.io))
		abort();
	ops = be_ops;
	if (mode2 & 4)
		ops.write_copies = be_write_copies;
	if (za_nbd_server_new(be.io, &p, &ops, &be, &srv))
		abort();
	if (mode & 0x80)
		za_nbd_server_shutdown(srv);
	for (i = 0; i < nr_peers; i++) {
		if (za_fuzz_peer_start(&peers[i], be.io, in, len, &fd))
			abort();
		if (mode2 & 1) {
			za_fuzz_small_bufs(fd);
			za_fuzz_small_bufs(peers[i].fd);
		}
		ZA_FUZZ_CHECK(za_nbd_server_adopt(srv, fd) == 0,
			      "the server refused a connection below its cap");
	}
	for (i = 0; i < nr_peers; i++)
		za_fuzz_peer_run(&peers[i], be.io);
	/* Completions still queued land on a closed connection. */
	while (be.pending)
		za_io_run_once(be.io);
	za_nbd_server_stats(srv, &st);
	ZA_FUZZ_CHECK(st.conns_open == 0 && st.inflight == 0,
		      "a connection or command left after the peer's EOF");
	for (i = 0; i < nr_peers; i++)
		za_fuzz_peer_stop(&peers[i]);
	za_nbd_server_free(srv);
	za_io_free(be.io);
	free(be.data);
}
