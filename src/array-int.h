/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * array-int.h - what the array's files share and nobody else sees: the
 * array itself and the helpers that cross array.c (lifecycle),
 * array-members.c (membership changes), array-jobs.c (background jobs)
 * and array-status.c (status). Loop thread only.
 */
#ifndef ZA_ARRAY_INT_H
#define ZA_ARRAY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "array.h"
#include "rebuild.h"
#include "scrub.h"
#include "engine.h"
#include "volume.h"

struct za_array {
	struct za_io *io;
	struct za_array_policy pol; /* given at create or assemble */
	struct za_sb *sb; /* the current record (member fields: member 0) */
	unsigned nr_members;
	struct za_dev **devs; /* per member; NULL when missing */
	char (*paths)[256];
	uint8_t *states;
	struct za_engine *eng;
	struct za_volume *vol;
	struct za_rebuild *rb;
	struct za_scrub *scrub;
	struct za_io_defer rb_defer; /* start the rebuild on the loop */
	bool rb_defer_pending;
	struct za_engine_flush rb_flush; /* moved columns made durable */
	bool rb_flushing;
	struct za_io_defer rel_defer; /* release removed members' devices */
	bool rel_pending;
	/* Superblock updates: one round at a time, coalesced. */
	struct za_sb_write_op *sb_ops;
	unsigned sb_pending;
	uint64_t sb_written; /* superblock writes that completed */
	bool sb_dirty;
	/* The volume's checkpoint anchor waits for a round (anchor_wait),
	 * or rides in the one in flight (anchor_in_round). */
	bool anchor_wait, anchor_in_round;
	bool stopping;
	/* The scrub's state, for its owner to keep across restarts. */
	void (*scrub_save)(void *priv, const struct za_array_scrub_save *s);
	void *scrub_save_priv;
	bool scrub_stop_asked; /* by request: not to resume after a restart */
};

/* Format a message into @err (which may be NULL). */
void arr_seterr(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Shared among the array files (each defined in one of them). */
int arr_member_find(const struct za_array *a, const char *path);
int arr_member_open(struct za_io *io, const char *path, bool fault,
		    struct za_dev **out);
bool arr_members_to_retire(const struct za_array *a);
void arr_rb_flushed(struct za_engine_flush *f, int result);
void arr_rebuild_kick(struct za_array *a);
int arr_rebuild_new(struct za_array *a);
void arr_rebuild_now(struct za_array *a);
void arr_rebuild_quiesce(struct za_array *a);
int arr_replacement_of(const struct za_array *a, unsigned i);
bool arr_replaces_abandon(struct za_array *a);
bool arr_same_file(const struct stat *x, const struct stat *y);
void arr_sb_round(struct za_array *a);
void arr_anchor(void *priv, const uint8_t *rec);

#endif /* ZA_ARRAY_INT_H */
