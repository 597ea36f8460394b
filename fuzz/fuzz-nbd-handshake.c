// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-nbd-handshake.c - fuzz target: the NBD server (src/nbd.c) from
 * the first byte a client sends: client flags, option haggling
 * (OPT_GO, OPT_INFO, OPT_LIST, OPT_ABORT, OPT_EXPORT_NAME, unknown
 * options) and, when the stream gets there, the transmission phase.
 *
 * Input: the two harness mode bytes (fuzz/nbd-harness.c), then
 * everything the client sends; the client then closes its write side.
 *
 * Oracles: those of the harness (the backend contract, no hang after
 * EOF, nothing left allocated) and the sanitizers'.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	za_fuzz_init();
	if (size < 2)
		return 0;
	za_fuzz_nbd_run(data[0], data[1], data + 2, size - 2);
	return 0;
}
