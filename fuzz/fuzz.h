/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz.h - what the fuzz targets (fuzz/fuzz-*.c) share: the libFuzzer
 * entry point, quiet logging, the oracle check, and a scripted peer that
 * feeds bytes into one end of a socketpair whose other end a server
 * (NBD, control socket) serves on a struct za_io loop.
 *
 * Every target is built twice: with clang and libFuzzer (tools/fuzz), and
 * with the normal compiler against fuzz/replay.c, a main() that replays
 * the committed corpus in the unit tier. Nothing here depends on which.
 *
 * A target treats its input as hostile bytes from a drive or a socket
 * (invariant 6). Most inputs start with one harness byte (modes: which
 * CRCs to fix up, which server limits to use, ...) so that the fuzzer
 * gets past checksums and reaches the checks behind them; each target
 * documents its input layout at its top.
 */
#ifndef ZA_FUZZ_H
#define ZA_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

struct za_io;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* How long a server may take to close a connection after the peer's EOF:
 * longer is a hang, reported as a crash so the input is kept. */
#define ZA_FUZZ_HANG_S 10.0

/*
 * Silence zarray's log (the targets make it complain on every input),
 * unless ZA_FUZZ_LOG is set in the environment (when reproducing a
 * crash). Idempotent; every target calls it first.
 */
void za_fuzz_init(void);

/*
 * An oracle: @cond is a property the code under test promises. If it
 * does not hold, print @what and abort, so that libFuzzer keeps the input
 * (and the replay test fails). Not assert(): it must check with NDEBUG
 * too.
 */
#define ZA_FUZZ_CHECK(cond, what)                               \
	do {                                                    \
		if (!(cond))                                    \
			za_fuzz_fail(__FILE__, __LINE__, what); \
	} while (0)
void za_fuzz_fail(const char *file, int line, const char *what)
	__attribute__((noreturn));

/* ---- member superblocks (docs/format.md, "Member superblock") ---- */

/* Header bytes that carry fields; the rest of the block is reserved. */
#define ZA_FUZZ_SB_HDR_USED 424u

/* Store the header and member-table CRCs of a whole record. */
void za_fuzz_sb_fix_crcs(uint8_t *rec);

/* ---- a scripted peer on a socketpair ---- */

struct za_fuzz_peer {
	/* private */
	struct ev_loop *loop;
	int fd;
	const uint8_t *in;
	size_t in_len, in_off;
	bool shut; /* everything sent (or the server stopped reading) */
	bool eof; /* the server closed its end */
	uint64_t out_bytes; /* what the server sent */
	ev_io rw, ww;
};

/*
 * Create a socketpair: *@server_fd is for the server to adopt, the other
 * end becomes @p's, which sends @in (then shuts down its write side) and
 * reads and drops whatever comes back, from @io's loop. @in must stay
 * valid until za_fuzz_peer_stop(). Returns 0 or -errno.
 */
int za_fuzz_peer_start(struct za_fuzz_peer *p, struct za_io *io,
		       const uint8_t *in, size_t len, int *server_fd);
/*
 * Run @io's loop until the server closes the connection; aborts (a
 * hang) if that takes ZA_FUZZ_HANG_S.
 */
void za_fuzz_peer_run(struct za_fuzz_peer *p, struct za_io *io);
/* Stop the watchers and close the peer's end. */
void za_fuzz_peer_stop(struct za_fuzz_peer *p);
/*
 * Shrink @fd's socket buffers to the kernel's minimum, so that a server's
 * writes return EAGAIN and its partial-write paths run.
 */
void za_fuzz_small_bufs(int fd);

/* ---- NBD (fuzz/nbd-harness.c) ---- */

/*
 * Serve one client (or two) that sends @in then EOF, on a fresh NBD
 * server over a RAM backend set up as harness bytes @mode and @mode2 say
 * (nbd-harness.c), and check that everything ends and is freed.
 */
void za_fuzz_nbd_run(uint8_t mode, uint8_t mode2, const uint8_t *in,
		     size_t len);

#endif /* ZA_FUZZ_H */
