// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev-backends.c - the table of device backends that za_dev_open() walks
 * (dev-backends.h): emulated drives are regular files that start with
 * the emulated-drive header, real zoned drives are block devices. Adding
 * a backend is one entry here and one header to include; dev.c does not
 * change. It opens nothing itself and holds no state.
 */
#include <sys/stat.h>

#include "dev-backends.h"
#include "dev-emu.h"
#include "dev-zbd.h"

static const struct za_dev_backend emu_backend = {
	.name = "emu",
	.file_type = S_IFREG,
	.probe = za_dev_emu_probe,
	.refusal = "not an emulated zoned drive (no zarray emulated-drive "
		   "header; create one with 'zarray emu create')",
	.open = za_dev_emu_open,
};

static const struct za_dev_backend zbd_backend = {
	.name = "zbd",
	.file_type = S_IFBLK,
	.open = za_dev_zbd_open,
};

const struct za_dev_backend *const za_dev_backends[] = {
	&emu_backend,
	&zbd_backend,
	NULL,
};
