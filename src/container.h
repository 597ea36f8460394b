/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * container.h - container_of(): the object a member is embedded in.
 *
 * Callbacks (za_io_defer() items, timers, io_uring completion handlers,
 * worker items) get back the pointer to the member they were registered
 * with; this finds the object around it. One definition for the tree,
 * with the cast through void * that keeps -Wcast-align quiet.
 */
#ifndef ZA_CONTAINER_H
#define ZA_CONTAINER_H

#include <stddef.h>

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif /* ZA_CONTAINER_H */
