/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * export.h - an array's volume served over NBD: the NBD server's backend
 * ops (nbd.h) implemented over struct za_volume, and the life of that
 * server (its Unix socket, an optional TCP listener, the URIs clients
 * use, and an orderly stop).
 *
 * The adapter adds no semantics: each NBD command becomes the volume call
 * of the same name with the same offset, length and FUA flag, and the
 * volume's result (0 or -errno) is the reply. Its per-request state lives
 * in the NBD server's per-request area, so nothing is allocated per
 * request. It does not know what an array is; the daemon decides when an
 * export starts and stops, and stops it before the array under it.
 * Everything runs on the loop thread.
 */
#ifndef ZA_EXPORT_H
#define ZA_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct za_io;
struct za_volume;
struct za_export;
struct za_nbd_stats;

/* The longest [HOST:]PORT accepted, and a host in it. */
#define ZA_EXPORT_TCP_SPEC_BYTES 264
#define ZA_EXPORT_HOST_BYTES 256
/* Where TCP listens when no host is given: loopback only. */
#define ZA_EXPORT_DEFAULT_HOST "127.0.0.1"
/* How long a stop waits for replies to reach clients that do not read. */
#define ZA_EXPORT_DRAIN_TIMEOUT_S 5.0

struct za_export_params {
	const char *name; /* export name (the array's); required */
	const char *description; /* optional, for NBD_INFO_DESCRIPTION */
	const char *unix_path; /* the socket; required */
	mode_t unix_mode;
	gid_t unix_gid; /* (gid_t)-1: keep the daemon's group */
	bool rx_thread; /* za_nbd_params.rx_thread */
};

/*
 * Serve @vol as export @p->name on a Unix socket at @p->unix_path (a stale
 * socket there is replaced). @vol must outlive the export. Returns 0 or
 * -errno (logged).
 */
int za_export_new(struct za_io *io, struct za_volume *vol,
		  const struct za_export_params *p, struct za_export **out);

/*
 * Parse "[HOST:]PORT" (HOST may be "[v6-address]"; PORT 0..65535, 0 for
 * any free port) into @host (ZA_EXPORT_HOST_BYTES; ZA_EXPORT_DEFAULT_HOST
 * when absent) and @port. Returns 0 or -EINVAL. Used by the CLI (a usage
 * error) and the daemon (nothing from a socket is trusted).
 */
int za_export_parse_tcp(const char *spec, char *host, char *port);

/*
 * Also listen on TCP @spec ("[HOST:]PORT"). One TCP listener per export:
 * asking again for the same address is a no-op (port 0 matches whatever
 * was bound), another address is -EBUSY. Returns 0 or -errno (logged).
 */
int za_export_listen_tcp(struct za_export *x, const char *spec);

/* nbd+unix:///NAME?socket=PATH (the path percent-encoded as needed). */
const char *za_export_uri(const struct za_export *x);
/* nbd://HOST:PORT/NAME, or NULL without a TCP listener. */
const char *za_export_tcp_uri(const struct za_export *x);
/* "HOST:PORT" as bound (the port resolved), or NULL: for the state file. */
const char *za_export_tcp_spec(const struct za_export *x);

/* The NBD server's counters (nbd.h), as of now. */
void za_export_stats(const struct za_export *x, struct za_nbd_stats *st);

/*
 * Stop accepting connections and commands (new commands get ESHUTDOWN);
 * commands in flight go on. Does not block; idempotent.
 */
void za_export_shutdown(struct za_export *x);

/*
 * Shut down if not done yet, run the loop until the volume has completed
 * every command it was given, then up to ZA_EXPORT_DRAIN_TIMEOUT_S until
 * their replies are written, close every connection, remove the socket
 * and free @x. The volume is untouched (the caller flushes it).
 */
void za_export_free(struct za_export *x);

#endif /* ZA_EXPORT_H */
