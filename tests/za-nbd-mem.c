// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-nbd-mem - the NBD server (src/nbd.c) over a RAM backend, for the
 * integration tests and as a benchmark peer of "nbdkit memory". It is a
 * test program, not the product: the data lives in one anonymous mapping
 * and is gone when the process exits.
 *
 * Every request is carried out when it arrives but completed later,
 * through za_io_defer(), so that the server's asynchronous paths run;
 * every third request waits one extra loop iteration, so replies leave
 * out of order even without latency. --latency-us N completes each
 * request after a random delay between N/2 and 3N/2 microseconds.
 *
 * Prints "ready" (after "tcp-port N" with --tcp) once listening; exits 0
 * on SIGTERM or SIGINT, removing its socket.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <ev.h>

#include "io.h"
#include "log.h"
#include "nbd.h"

struct mem {
	struct za_io *io;
	uint8_t *data;
	uint64_t size;
	uint64_t latency_ns;
	uint64_t seq;
	unsigned outstanding; /* requests not completed yet */
};

struct mem_req {
	struct za_io_defer d;
	struct za_nbd_req *r;
	struct mem *m;
	bool again; /* wait one more iteration first */
};

static void mem_done(struct za_io_defer *d)
{
	struct mem_req *mr = (struct mem_req *)d;

	if (mr->again) {
		mr->again = false;
		za_io_defer(mr->m->io, &mr->d);
		return;
	}
	mr->m->outstanding--;
	za_nbd_complete(mr->r, 0);
}

static void mem_finish(struct mem *m, struct za_nbd_req *r)
{
	struct mem_req *mr = za_nbd_req_priv(r);

	mr->d.fn = mem_done;
	mr->r = r;
	mr->m = m;
	mr->again = ++m->seq % 3 == 0;
	m->outstanding++;
	if (m->latency_ns) {
		uint64_t lat = m->latency_ns / 2 +
			       (uint64_t)random() % (m->latency_ns + 1);

		mr->again = false;
		za_io_defer_at(m->io, &mr->d, za_io_now_ns() + lat);
	} else {
		za_io_defer(m->io, &mr->d);
	}
}

static void mem_read(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		     void *buf)
{
	struct mem *m = be;

	memcpy(buf, m->data + off, len);
	mem_finish(m, r);
}

static void mem_write(void *be, struct za_nbd_req *r, uint64_t off,
		      uint32_t len, const void *buf, bool fua)
{
	struct mem *m = be;

	(void)fua;
	memcpy(m->data + off, buf, len);
	mem_finish(m, r);
}

static void mem_flush(void *be, struct za_nbd_req *r)
{
	mem_finish(be, r);
}

static void mem_zero(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		     bool fua)
{
	struct mem *m = be;

	(void)fua;
	memset(m->data + off, 0, len);
	mem_finish(m, r);
}

static void mem_trim(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len)
{
	/* Trimmed blocks read back as zeroes: simplest for tests. */
	mem_zero(be, r, off, len, false);
}

static uint64_t mem_size(void *be)
{
	return ((struct mem *)be)->size;
}

static const struct za_nbd_backend_ops mem_ops = {
	.read = mem_read,
	.write = mem_write,
	.flush = mem_flush,
	.trim = mem_trim,
	.write_zeroes = mem_zero,
	.size = mem_size,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: za-nbd-mem --size BYTES[K|M|G] --unix PATH "
		   "[--tcp PORT] [--name NAME]\n"
		   "                  [--latency-us N] [--max-conns N] "
		   "[--verbose]\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'G':
		v <<= 10;
		/* fall through */
	case 'M':
		v <<= 10;
		/* fall through */
	case 'K':
		v <<= 10;
		end++;
		break;
	}
	if (*end || !v)
		return -EINVAL;
	*out = v;
	return 0;
}

static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "unix", required_argument, NULL, 'u' },
		{ "tcp", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "latency-us", required_argument, NULL, 'l' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct za_nbd_params p = { .export_name = "mem",
				   .description = "zarray RAM test export",
				   .req_priv_bytes = sizeof(struct mem_req) };
	struct mem m = { 0 };
	const char *unix_path = NULL, *tcp_port = NULL;
	struct za_nbd_server *s;
	struct ev_loop *loop;
	ev_signal sigterm, sigint;
	uint16_t port;
	int opt, ret;

	za_log_set_ident("za-nbd-mem");
	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			if (parse_size(optarg, &m.size) < 0) {
				fprintf(stderr, "za-nbd-mem: bad --size %s\n",
					optarg);
				return 2;
			}
			break;
		case 'u':
			unix_path = optarg;
			break;
		case 't':
			tcp_port = optarg;
			break;
		case 'n':
			p.export_name = optarg;
			break;
		case 'l':
			m.latency_ns = strtoull(optarg, NULL, 10) * 1000ull;
			break;
		case 'c':
			p.max_conns = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'v':
			za_log_set_level(ZA_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!m.size || !unix_path || optind != argc) {
		usage(stderr);
		return 2;
	}
	m.size &= ~(uint64_t)4095;
	/* Anonymous memory reads as zeroes and is only backed once written. */
	m.data = mmap(NULL, m.size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m.data == MAP_FAILED) {
		fprintf(stderr, "za-nbd-mem: cannot map %llu bytes: %s\n",
			(unsigned long long)m.size, strerror(errno));
		return 1;
	}
	loop = ev_default_loop(0);
	ret = za_io_new(loop, &m.io);
	if (ret < 0)
		return 1;
	ret = za_nbd_server_new(m.io, &p, &mem_ops, &m, &s);
	if (ret < 0)
		return 1;
	ret = za_nbd_listen_unix(s, unix_path, 0600);
	if (ret == 0 && tcp_port) {
		ret = za_nbd_listen_tcp(s, NULL, tcp_port, &port);
		if (ret == 0)
			printf("tcp-port %u\n", port);
	}
	if (ret < 0) {
		za_nbd_server_free(s);
		return 1;
	}
	ev_signal_init(&sigterm, stop_cb, SIGTERM);
	ev_signal_start(loop, &sigterm);
	ev_signal_init(&sigint, stop_cb, SIGINT);
	ev_signal_start(loop, &sigint);
	printf("ready\n");
	fflush(stdout);

	ev_run(loop, 0);

	za_nbd_server_free(s);
	/* What the backend still holds completes into the server's remains,
	 * which are freed with the last of them: nothing leaks. */
	while (m.outstanding)
		za_io_run_once(m.io);
	ev_signal_stop(loop, &sigterm);
	ev_signal_stop(loop, &sigint);
	za_io_free(m.io);
	munmap(m.data, m.size);
	return 0;
}
