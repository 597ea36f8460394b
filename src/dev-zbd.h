/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev-zbd.h - the "zbd" backend's constructor: a real zoned block device
 * (dev-zbd.c says how it is driven). Opened through za_dev_open(), which
 * finds it in the backend table (dev-backends.c); nothing else needs it.
 */
#ifndef ZA_DEV_ZBD_H
#define ZA_DEV_ZBD_H

#include "dev.h"

int za_dev_zbd_open(struct za_io *io, const char *path, unsigned flags,
		    struct za_dev **out);

#endif /* ZA_DEV_ZBD_H */
