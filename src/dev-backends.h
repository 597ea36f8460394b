/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev-backends.h - the device backends za_dev_open() chooses from, as a
 * table: each says which kind of file it opens, how it recognises one of
 * its own, and how to open it. dev.c walks the table and names no
 * backend; dev-backends.c fills it, and only it knows them all. It does
 * not list the fault wrapper (dev-fault.h), which wraps an open device
 * instead of opening a path.
 */
#ifndef ZA_DEV_BACKENDS_H
#define ZA_DEV_BACKENDS_H

#include <stdbool.h>
#include <sys/types.h>

struct za_dev;
struct za_io;

struct za_dev_backend {
	const char *name;
	/* The file type it opens, as in stat's st_mode: S_IFREG, S_IFBLK. */
	mode_t file_type;
	/* Is @path one of its devices? NULL: every file of that type is. */
	bool (*probe)(const char *path);
	/* What za_dev_open() says of a file probe() turned down. */
	const char *refusal;
	int (*open)(struct za_io *io, const char *path, unsigned flags,
		    struct za_dev **out);
};

/* The backends, in the order they are asked; NULL-terminated. */
extern const struct za_dev_backend *const za_dev_backends[];

#endif /* ZA_DEV_BACKENDS_H */
