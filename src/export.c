// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * export.c - an array's volume over NBD: the backend ops of the NBD
 * server (nbd.c) implemented over the volume (volume.c), and the server's
 * listeners, URIs and orderly stop.
 *
 * The adapter passes every command straight to the volume call of the
 * same name and the volume's result straight back: the server has already
 * checked ranges, alignment and lengths, and the volume decides what is
 * durable when (a FLUSH covers every write completed before it, on every
 * connection, which is why the server may advertise CAN_MULTI_CONN). The
 * struct za_vol_req of each command lives in the server's per-request
 * area, so the data path allocates nothing. A count of commands at the
 * volume lets a stop wait for them before the server and the volume go.
 *
 * It does not flush on stop (the array's stop does, after this), keep
 * statistics beyond the server's, or know about arrays or the daemon.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "io.h"
#include "log.h"
#include "nbd.h"
#include "payload.h"
#include "volume.h"

#define X_URI_BYTES 1024
/* Payloads from this size on are kept in place rather than copied. */
#define X_KEEP_MIN_BYTES (64u << 10)
/* Polling period while replies drain to clients at stop. */
#define X_DRAIN_POLL_NS (5ull * 1000 * 1000)

struct za_export {
	struct za_io *io;
	struct za_volume *vol;
	struct za_nbd_server *srv;
	char *name;
	unsigned outstanding; /* commands given to the volume, not done */
	bool shut;
	char *uri;
	bool has_tcp;
	char tcp_host[ZA_EXPORT_HOST_BYTES];
	uint16_t tcp_port;
	char tcp_uri[X_URI_BYTES];
	char tcp_spec[ZA_EXPORT_TCP_SPEC_BYTES];
};

/* What the server's per-request area holds for one command. */
struct x_req {
	struct za_vol_req vr;
	struct za_export *x;
	struct za_nbd_req *nr;
};

/* ---- the backend ---- */

static void x_done(struct za_vol_req *vr, int result)
{
	struct x_req *q = vr->priv;
	struct za_nbd_req *nr = q->nr;

	/* The area is the server's again once the command completes. */
	q->x->outstanding--;
	za_nbd_complete(nr, result);
}

static struct za_vol_req *x_start(struct za_export *x, struct za_nbd_req *nr)
{
	struct x_req *q = za_nbd_req_priv(nr);

	memset(q, 0, sizeof(*q));
	q->x = x;
	q->nr = nr;
	q->vr.done = x_done;
	q->vr.priv = q;
	x->outstanding++;
	return &q->vr;
}

static void x_read(void *be, struct za_nbd_req *nr, uint64_t off, uint32_t len,
		   void *buf)
{
	struct za_export *x = be;

	za_volume_read(x->vol, x_start(x, nr), off, len, buf);
}

static void x_write(void *be, struct za_nbd_req *nr, uint64_t off, uint32_t len,
		    const void *buf, bool fua)
{
	struct za_export *x = be;
	/* A large payload in the receive ring stays there for its stripe
	 * (payload.h); small ones are cheaper to copy than to keep. */
	struct za_payload *pl = len >= X_KEEP_MIN_BYTES ? za_nbd_req_keep(nr) :
							  NULL;

	za_volume_write_ref(x->vol, x_start(x, nr), off, len, buf, fua, pl);
	za_payload_put(pl);
}

static void x_flush(void *be, struct za_nbd_req *nr)
{
	struct za_export *x = be;

	za_volume_flush(x->vol, x_start(x, nr));
}

static void x_trim(void *be, struct za_nbd_req *nr, uint64_t off, uint32_t len)
{
	struct za_export *x = be;

	za_volume_trim(x->vol, x_start(x, nr), off, len);
}

static void x_write_zeroes(void *be, struct za_nbd_req *nr, uint64_t off,
			   uint32_t len, bool fua)
{
	struct za_export *x = be;

	za_volume_write_zeroes(x->vol, x_start(x, nr), off, len, fua);
}

static uint64_t x_size(void *be)
{
	struct za_export *x = be;

	return za_volume_size(x->vol);
}

static bool x_write_copies(void *be)
{
	struct za_export *x = be;

	return za_volume_write_copies(x->vol);
}

static void x_let_go(void *be)
{
	struct za_export *x = be;

	za_volume_let_go(x->vol);
}

static const struct za_nbd_backend_ops x_ops = {
	.read = x_read,
	.write = x_write,
	.flush = x_flush,
	.trim = x_trim,
	.write_zeroes = x_write_zeroes,
	.size = x_size,
	.write_copies = x_write_copies,
	.let_go = x_let_go,
};

/* ---- URIs and addresses ---- */

/*
 * @s percent-encoded for a URI query value: RFC 3986 unreserved
 * characters and '/' as they are, everything else as %XX. Returns false
 * if it does not fit.
 */
static bool uri_encode(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~/", ch)) {
			if (o + 1 >= len)
				return false;
			out[o++] = (char)ch;
			continue;
		}
		if (o + 3 >= len)
			return false;
		out[o++] = '%';
		out[o++] = hex[ch >> 4];
		out[o++] = hex[ch & 15];
	}
	out[o] = '\0';
	return true;
}

static bool host_char_ok(char ch)
{
	return ch > 0x20 && ch < 0x7f && !strchr("/?#@[]%\\", ch);
}

int za_export_parse_tcp(const char *spec, char *host, char *port)
{
	const char *p, *colon;
	size_t hlen = 0, i;
	unsigned long v = 0;

	if (!spec || strlen(spec) >= ZA_EXPORT_TCP_SPEC_BYTES)
		return -EINVAL;
	if (spec[0] == '[') {
		/* [v6-address]:PORT */
		const char *end = strchr(spec, ']');

		if (!end || end[1] != ':' || end == spec + 1)
			return -EINVAL;
		hlen = (size_t)(end - spec - 1);
		/* The spec may be longer than a host: bound the copy. */
		if (hlen >= ZA_EXPORT_HOST_BYTES)
			return -EINVAL;
		memcpy(host, spec + 1, hlen);
		host[hlen] = '\0';
		for (i = 0; i < hlen; i++)
			if (!strchr("0123456789abcdefABCDEF:.", host[i]))
				return -EINVAL;
		p = end + 2;
	} else {
		colon = strrchr(spec, ':');
		if (colon && memchr(spec, ':', (size_t)(colon - spec)))
			return -EINVAL; /* a bare v6 address: ambiguous */
		if (colon) {
			hlen = (size_t)(colon - spec);
			if (!hlen || hlen >= ZA_EXPORT_HOST_BYTES)
				return -EINVAL;
			for (i = 0; i < hlen; i++)
				if (!host_char_ok(spec[i]))
					return -EINVAL;
			memcpy(host, spec, hlen);
			host[hlen] = '\0';
			p = colon + 1;
		} else {
			snprintf(host, ZA_EXPORT_HOST_BYTES, "%s",
				 ZA_EXPORT_DEFAULT_HOST);
			p = spec;
		}
	}
	if (!*p || strlen(p) > 5)
		return -EINVAL;
	for (i = 0; p[i]; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (v > 65535)
		return -EINVAL;
	snprintf(port, 8, "%lu", v);
	return 0;
}

/* @host as it goes in a URI or a HOST:PORT: v6 addresses in brackets. */
static void fmt_host_port(const char *host, uint16_t port, char *out,
			  size_t len)
{
	bool v6 = strchr(host, ':') != NULL;

	snprintf(out, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
		 (unsigned)port);
}

const char *za_export_uri(const struct za_export *x)
{
	return x->uri;
}

const char *za_export_tcp_uri(const struct za_export *x)
{
	return x->has_tcp ? x->tcp_uri : NULL;
}

const char *za_export_tcp_spec(const struct za_export *x)
{
	return x->has_tcp ? x->tcp_spec : NULL;
}

void za_export_stats(const struct za_export *x, struct za_nbd_stats *st)
{
	za_nbd_server_stats(x->srv, st);
}

int za_export_listen_tcp(struct za_export *x, const char *spec)
{
	char host[ZA_EXPORT_HOST_BYTES], port[8];
	uint16_t bound = 0;
	int ret;

	if (za_export_parse_tcp(spec, host, port) < 0) {
		za_log_err("export %s: bad TCP address '%.80s': want "
			   "[HOST:]PORT",
			   x->name, spec);
		return -EINVAL;
	}
	if (x->shut) {
		za_log_err("export %s: shutting down; not listening on %s",
			   x->name, spec);
		return -ESHUTDOWN;
	}
	if (x->has_tcp) {
		if (!strcmp(host, x->tcp_host) &&
		    (!strcmp(port, "0") || atoi(port) == x->tcp_port))
			return 0;
		za_log_err("export %s: already on TCP %s; not also on %s",
			   x->name, x->tcp_spec, spec);
		return -EBUSY;
	}
	ret = za_nbd_listen_tcp(x->srv, host, port, &bound);
	if (ret < 0)
		return ret;
	x->has_tcp = true;
	x->tcp_port = bound;
	snprintf(x->tcp_host, sizeof(x->tcp_host), "%s", host);
	fmt_host_port(host, bound, x->tcp_spec, sizeof(x->tcp_spec));
	snprintf(x->tcp_uri, sizeof(x->tcp_uri), "nbd://%s/%s", x->tcp_spec,
		 x->name);
	za_log_info("export %s: listening on TCP %s", x->name, x->tcp_spec);
	return 0;
}

/* ---- life cycle ---- */

int za_export_new(struct za_io *io, struct za_volume *vol,
		  const struct za_export_params *p, struct za_export **out)
{
	struct za_nbd_params np = { 0 };
	char enc[X_URI_BYTES];
	struct za_export *x;
	int ret;

	if (!p->name || !p->unix_path)
		return -EINVAL;
	if (!uri_encode(p->unix_path, enc, sizeof(enc))) {
		za_log_err("export %s: %s: socket path too long for a URI",
			   p->name, p->unix_path);
		return -ENAMETOOLONG;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->io = io;
	x->vol = vol;
	x->name = strdup(p->name);
	if (!x->name) {
		ret = -ENOMEM;
		goto err_free;
	}
	if (asprintf(&x->uri, "nbd+unix:///%s?socket=%s", p->name, enc) < 0) {
		x->uri = NULL;
		ret = -ENOMEM;
		goto err_name;
	}
	np.export_name = p->name;
	np.description = p->description;
	np.req_priv_bytes = sizeof(struct x_req);
	np.rx_thread = p->rx_thread;
	ret = za_nbd_server_new(io, &np, &x_ops, x, &x->srv);
	if (ret < 0)
		goto err_name;
	ret = za_nbd_listen_unix(x->srv, p->unix_path, p->unix_mode);
	if (ret < 0)
		goto err_srv;
	if (p->unix_gid != (gid_t)-1 &&
	    chown(p->unix_path, (uid_t)-1, p->unix_gid))
		za_log_warn("export %s: %s: chgrp to gid %u: %s", p->name,
			    p->unix_path, (unsigned)p->unix_gid,
			    strerror(errno));
	za_log_info("export %s: serving %s", p->name, x->uri);
	*out = x;
	return 0;

err_srv:
	za_nbd_server_free(x->srv);
err_name:
	free(x->uri);
	free(x->name);
err_free:
	free(x);
	return ret;
}

void za_export_shutdown(struct za_export *x)
{
	if (!x || x->shut)
		return;
	x->shut = true;
	za_nbd_server_shutdown(x->srv);
}

void za_export_free(struct za_export *x)
{
	struct za_nbd_stats st;
	uint64_t deadline;
	bool never = false;

	if (!x)
		return;
	za_export_shutdown(x);
	/* The volume completes what it was given: wait for all of it. */
	while (x->outstanding)
		za_io_run_once(x->io);
	/* Replies to clients that do not read are not worth a hang. */
	deadline = za_io_now_ns() + (uint64_t)(ZA_EXPORT_DRAIN_TIMEOUT_S * 1e9);
	for (;;) {
		za_nbd_server_stats(x->srv, &st);
		if (!st.inflight)
			break;
		if (za_io_now_ns() >= deadline) {
			za_log_warn(
				"export %s: %llu replies not taken by their "
				"clients; closing",
				x->name, (unsigned long long)st.inflight);
			break;
		}
		za_io_run_until(x->io, &never, X_DRAIN_POLL_NS);
	}
	za_nbd_server_free(x->srv);
	za_log_info("export %s: stopped", x->name);
	free(x->uri);
	free(x->name);
	free(x);
}
