// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-nbd-transmission.c - fuzz target: the NBD server's transmission
 * phase (src/nbd.c): request headers, write payloads, flags, ranges,
 * in-flight caps, replies in completion order, disconnects.
 *
 * The target does the handshake itself (fixed newstyle, no zeroes, then
 * OPT_GO with the default export and no info requests, or
 * OPT_EXPORT_NAME if mode bit 6 is set), so that every fuzzed byte is a
 * transmission-phase byte.
 *
 * Input: the two harness mode bytes (fuzz/nbd-harness.c), then the client's
 * requests (28-byte headers, big-endian, each WRITE followed by its
 * payload); the client then closes its write side.
 *
 * Oracles: those of the harness (the backend contract, no hang after
 * EOF, nothing left allocated) and the sanitizers'.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Client flags FIXED_NEWSTYLE | NO_ZEROES, then one option. */
static const uint8_t hs_go[] = {
	0,   0,	  0,   3, /* client flags */
	'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', /* option magic */
	0,   0,	  0,   7, /* NBD_OPT_GO */
	0,   0,	  0,   6, /* length */
	0,   0,	  0,   0, /* name length: "" is the default export */
	0,   0, /* no information requests */
};
static const uint8_t hs_export_name[] = {
	0,   0,	  0,   3, /* client flags */
	'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', /* option magic */
	0,   0,	  0,   1, /* NBD_OPT_EXPORT_NAME */
	0,   0,	  0,   0, /* length: "" is the default export */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *hs;
	size_t hs_len;
	uint8_t *in;

	za_fuzz_init();
	if (size < 2)
		return 0;
	if (data[0] & 0x40) {
		hs = hs_export_name;
		hs_len = sizeof(hs_export_name);
	} else {
		hs = hs_go;
		hs_len = sizeof(hs_go);
	}
	in = malloc(hs_len + size - 2);
	if (!in)
		abort();
	memcpy(in, hs, hs_len);
	memcpy(in + hs_len, data + 2, size - 2);
	za_fuzz_nbd_run(data[0], data[1], in, hs_len + size - 2);
	free(in);
	return 0;
}
