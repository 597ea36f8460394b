/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbd.h - an NBD server (fixed newstyle, simple replies) that serves one
 * export over any number of listening sockets, on the libev loop of a
 * struct za_io, over a backend given as an ops table.
 *
 * The server owns the wire: the handshake (OPT_GO, OPT_INFO, OPT_LIST,
 * OPT_ABORT, OPT_EXPORT_NAME; ERR_UNSUP for everything else), every
 * length, range, alignment and flag check, several commands in flight per
 * connection with replies in completion order, per-connection caps on
 * in-flight bytes and commands (the socket is not read while at a cap),
 * a connection cap and a handshake timeout. A backend call is made only
 * for a request that is in range, aligned to the minimum block size,
 * non-empty and within the payload limit.
 *
 * It does not store data, know what an array or a volume is, or decide
 * what "durable" means: the backend does. Everything runs on the loop
 * thread; nothing is thread-safe.
 */
#ifndef ZA_NBD_H
#define ZA_NBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Defaults and hard limits. */
#define ZA_NBD_DEFAULT_MAX_CONNS 64
#define ZA_NBD_DEFAULT_HANDSHAKE_TIMEOUT_S 30.0
#define ZA_NBD_MIN_BLOCK_BYTES 4096u
#define ZA_NBD_DEFAULT_PREF_BLOCK_BYTES 4096u
#define ZA_NBD_MAX_PAYLOAD_BYTES (32u << 20)
/* Per connection: READ/WRITE bytes between header and reply sent. */
#define ZA_NBD_DEFAULT_MAX_INFLIGHT_BYTES (64ull << 20)
#define ZA_NBD_DEFAULT_MAX_INFLIGHT_REQS 256u
/* Longest export name (the protocol's string limit) and option body. */
#define ZA_NBD_MAX_NAME_BYTES 4096u
#define ZA_NBD_MAX_OPT_BYTES (64u << 10)
/* Below this, a receive thread's hand-offs cost more than they give. */
#define ZA_NBD_DEFAULT_RX_MIN_PAYLOAD_BYTES (128u << 10)

struct za_payload;
struct za_io;
struct za_nbd_server;
/* One command in flight; opaque to the backend. */
struct za_nbd_req;

/*
 * The backend. Every data call is asynchronous and runs on the loop
 * thread; each must eventually call za_nbd_complete(@r, 0 or -errno)
 * exactly once, possibly from inside the call. A call is only made with
 * @off and @len multiples of the minimum block size, @len > 0 and
 * @off + @len <= size (as advertised when the client entered
 * transmission). @buf stays valid until the completion; it is aligned to
 * 4096 bytes - except for a write() that write_copies() allowed, whose
 * @buf is valid only during the call and may have any alignment.
 *
 * Durability is the backend's: write() with @fua, write_zeroes() with
 * @fua and flush() must complete only once the data (for flush: every
 * write completed before it was called) is durable. A connection may be
 * gone by the time a completion arrives; the server keeps the request
 * until then, so the backend never needs to know.
 */
struct za_nbd_backend_ops {
	void (*read)(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		     void *buf);
	void (*write)(void *be, struct za_nbd_req *r, uint64_t off,
		      uint32_t len, const void *buf, bool fua);
	void (*flush)(void *be, struct za_nbd_req *r);
	/* A hint: the range may read back as anything until rewritten. */
	void (*trim)(void *be, struct za_nbd_req *r, uint64_t off,
		     uint32_t len);
	/* The range must read back as zeroes. */
	void (*write_zeroes)(void *be, struct za_nbd_req *r, uint64_t off,
			     uint32_t len, bool fua);
	/* Export size in bytes; the server rounds it down to 4096. */
	uint64_t (*size)(void *be);
	/*
	 * Optional; sync, loop thread. True if a write() called now takes
	 * its payload before it returns (copies it, or fails), so that the
	 * buffer may be reused once write() returns: the server then hands
	 * a payload over in place, from a connection's receive ring,
	 * without copying it into a request buffer first.
	 */
	bool (*write_copies)(void *be);
	/*
	 * Optional; sync, loop thread. A receive ring is full of payloads
	 * kept with za_nbd_req_keep(): copy those whose references wait
	 * for more input (more writes, say) and drop them, so that it comes.
	 * References that go away by themselves (their data on its way to
	 * the drives) may stay. A backend that keeps payloads must have it.
	 */
	void (*let_go)(void *be);
};

struct za_nbd_params {
	/* The export's name (the array's); "" also selects it. Required. */
	const char *export_name;
	/* Optional, sent for NBD_INFO_DESCRIPTION and in OPT_LIST. */
	const char *description;
	unsigned max_conns; /* 0: ZA_NBD_DEFAULT_MAX_CONNS */
	/* From accept to the end of option haggling. 0: the default. */
	double handshake_timeout_s;
	/* 0: ZA_NBD_DEFAULT_PREF_BLOCK_BYTES; a power of 2 >= 4096. */
	uint32_t pref_block_bytes;
	/* 0 or above the hard limit: ZA_NBD_MAX_PAYLOAD_BYTES. */
	uint32_t max_payload_bytes;
	/* 0: defaults. At least max_payload_bytes is always allowed. */
	uint64_t max_inflight_bytes;
	unsigned max_inflight_reqs;
	/* Bytes the backend may use per request (za_nbd_req_priv()). */
	size_t req_priv_bytes;
	/* A connection's first WRITE this large gives it a receive ring
	 * (nbd-rx.h). 0: ZA_NBD_DEFAULT_RX_MIN_PAYLOAD_BYTES. */
	uint32_t rx_min_payload_bytes;
	/* The ring filled by a thread of its own, not by the loop. */
	bool rx_thread;
};

/* Indexes of za_nbd_stats.cmds: the NBD command numbers, then the rest. */
enum za_nbd_cmd {
	ZA_NBD_CMD_READ = 0,
	ZA_NBD_CMD_WRITE = 1,
	ZA_NBD_CMD_DISC = 2,
	ZA_NBD_CMD_FLUSH = 3,
	ZA_NBD_CMD_TRIM = 4,
	ZA_NBD_CMD_WRITE_ZEROES = 6,
	ZA_NBD_CMD_OTHER = 7, /* unknown or unsupported commands */
	ZA_NBD_CMD__NR = 8,
};

struct za_nbd_stats {
	uint64_t conns_accepted; /* including refused ones */
	uint64_t conns_refused; /* over the connection cap */
	uint64_t conns_open; /* sockets open now */
	uint64_t handshakes; /* connections that reached transmission */
	uint64_t handshake_timeouts;
	uint64_t protocol_errors; /* connections closed for a violation */
	uint64_t cmds[ZA_NBD_CMD__NR]; /* commands received, by type */
	uint64_t errors; /* replies with a nonzero error */
	uint64_t read_bytes, write_bytes, trim_bytes, zero_bytes; /* done */
	uint64_t inflight; /* commands between header and reply, now */
	uint64_t rx_rings; /* receive rings started (nbd-rx.h), filled by
				the loop or by a thread of their own */
	uint64_t rx_rings_reused; /* of those, with a ring kept from before */
	uint64_t rx_in_place; /* WRITE payloads handed over in the ring */
	uint64_t rx_kept; /* of those, kept there by the backend */
	uint64_t ibuf_in_place; /* WRITE payloads handed over in the input
				   buffer (no receive ring) */
};

/*
 * Create a server for one export on @io's loop, without listeners.
 * @p->export_name must be at most ZA_NBD_MAX_NAME_BYTES. Returns 0 or
 * -errno (-EINVAL for bad parameters, logged).
 */
int za_nbd_server_new(struct za_io *io, const struct za_nbd_params *p,
		      const struct za_nbd_backend_ops *ops, void *be,
		      struct za_nbd_server **out);

/*
 * Listen on a Unix stream socket at @path with mode @mode. A socket
 * already at @path is replaced (the caller knows it is stale); anything
 * else there is refused with -EEXIST. The server unlinks @path when
 * freed. Returns 0 or -errno (logged).
 */
int za_nbd_listen_unix(struct za_nbd_server *s, const char *path, mode_t mode);
/*
 * Listen on TCP @host (NULL: 127.0.0.1, loopback only) port @port ("0":
 * any free port). *@bound_port (may be NULL) receives the port. Returns 0
 * or -errno (logged).
 */
int za_nbd_listen_tcp(struct za_nbd_server *s, const char *host,
		      const char *port, uint16_t *bound_port);
/*
 * Serve an already connected stream socket (tests: a socketpair). The
 * server owns @fd from now on, and closes it on failure: -EBUSY at the
 * connection cap, -ENOMEM.
 */
int za_nbd_server_adopt(struct za_nbd_server *s, int fd);

void za_nbd_server_stats(const struct za_nbd_server *s,
			 struct za_nbd_stats *st);

/*
 * Stop accepting; options get ERR_SHUTDOWN and new commands ESHUTDOWN,
 * while commands in flight finish. Poll za_nbd_server_stats().inflight
 * for 0, then free.
 */
void za_nbd_server_shutdown(struct za_nbd_server *s);

/*
 * Close every listener and connection and free @s. Requests still at the
 * backend keep what they need allocated until they complete, so the
 * backend must stay usable (and complete them) until then.
 */
void za_nbd_server_free(struct za_nbd_server *s);

/* Finish @r: 0 or -errno (mapped to the NBD error values). */
void za_nbd_complete(struct za_nbd_req *r, int err);
/*
 * Sync, loop thread, only from inside a write() that write_copies()
 * allowed: keep @buf where it is, valid and unchanged after write()
 * returns, until the reference returned (count 1) is dropped with
 * za_payload_put() - so that the backend may refer to the payload
 * instead of copying it. NULL when the payload cannot be kept (it is not
 * in a receive ring, or the ring needs the room): the backend copies it
 * as before. A reference may outlive the connection.
 */
struct za_payload *za_nbd_req_keep(struct za_nbd_req *r);
/* The backend's per-request area (params.req_priv_bytes, 16-aligned). */
void *za_nbd_req_priv(struct za_nbd_req *r);

/* The NBD error value for a -errno (EIO for anything unlisted). */
uint32_t za_nbd_errno_to_wire(int err);

#endif /* ZA_NBD_H */
