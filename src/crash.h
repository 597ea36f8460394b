/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crash.h - named crash points: places in the code paths that matter for
 * crash safety where a test can make the process die on the spot, as if
 * it had been SIGKILLed exactly there, to check what recovery makes of
 * the state left on the drives.
 *
 * A point is armed through the environment, read once on the first call:
 * ZA_CRASH_POINT=NAME dies the first time NAME is reached, NAME:N the Nth
 * time. Reaching an armed point logs one line and calls _exit() with
 * ZA_CRASH_EXIT: no flush, no atexit handlers, no cleanup; what the
 * drives hold (files of emulated drives included) stays as it is. When
 * nothing is armed a point costs one comparison. It does not simulate a
 * power cut: the drives' volatile caches survive the process, as they do
 * a real SIGKILL (tests power-cut emulated drives afterwards if they want).
 *
 * The points, where they sit, and what dying there leaves behind:
 *  - "journal-append"  src/volume.c: a journal block is complete on every
 *                      column, before the map points at it and before the
 *                      flush waiting for it has flushed the drives.
 *  - "stripe-complete" src/engine-write.c: every column of a stripe (any
 *                      stream) is written, before its owner is told.
 *  - "gc-move"         src/gc.c: garbage collection's moved data is
 *                      flushed, before the victim group is released.
 *  - "zone-reset"      src/engine-space.c: one zone of a released group is
 *                      reset, the others may not be yet.
 *  - "sb-write"        src/sb.c: one member's superblock update is written
 *                      and flushed, the other members' may not be yet.
 *  - "checkpoint"      src/volume-checkpoint.c: one part of a checkpoint
 *                      is complete on every column; the other parts and
 *                      the flush that makes it live may not be. Recovery
 *                      then uses the previous checkpoint.
 *  - "rebuild-step"    src/engine-rebuild.c: one slot of a rebuilt column is
 *                      written; the copy is not complete. Recovery drops
 *                      it and the rebuild starts that column again.
 * Arming a name not in this list is refused (logged, nothing armed), so a
 * typo in a test cannot pass silently.
 */
#ifndef ZA_CRASH_H
#define ZA_CRASH_H

#include <stdbool.h>

/* The exit status of a process that died at a crash point. */
#define ZA_CRASH_EXIT 86

/* The environment variable read on the first za_crash_point() call. */
#define ZA_CRASH_ENV "ZA_CRASH_POINT"

/* Is @name one of the points listed above? */
bool za_crash_known(const char *name);

/*
 * Arm a point from a spec "NAME" or "NAME:N" (N >= 1; the Nth time it is
 * reached); NULL or "" disarms. Replaces what the environment said.
 * Returns 0, or -EINVAL (unknown name, bad count; nothing armed then).
 */
int za_crash_arm(const char *spec);

/*
 * Reached point @name (one of the list): dies there if it is armed and
 * this is the Nth time. Loop thread only.
 */
void za_crash_point(const char *name);

#endif /* ZA_CRASH_H */
