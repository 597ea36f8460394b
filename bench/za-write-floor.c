// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-write-floor - the CPU time per GiB of user data that a k+p array on
 * memory-backed emulated drives cannot avoid when it takes writes over a
 * Unix socket, measured on this machine, one step at a time, each on one
 * thread (CLOCK_THREAD_CPUTIME_ID, so a busy machine slows the steps but
 * does not inflate them):
 *
 *   recv    the payload out of a Unix stream socket (a second thread sends
 *           it; its time is the client's, not counted)
 *   crc     a CRC32C per 4 KiB block of the data and parity chunks
 *   encode  the p parity chunks of every k data chunks
 *   copy    the k+p chunks into a populated shared mapping of a file in
 *           --dir, with the emulated drive's own copy (streaming stores,
 *           za_emu_copy_to_drive()): what an emulated drive's write is (a
 *           real drive's DMA costs the host nothing; this copy does)
 *
 * Their sum is the floor: no server of this design can spend less CPU per
 * GiB on this machine, whatever its threads, copies or buffers. bench/p1.sh
 * runs it beside the NBD servers to turn the floor into a ceiling on P1's
 * ratio (docs/design.md 8.6). It does not model headers, the map or the
 * protocol, which only add to the floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "crc.h"
#include "dev-emu.h"
#include "ec.h"

#define MSG_BYTES (1u << 20) /* the client's write size in P1 */
#define POOL_STRIPES 4 /* stripe buffers reused, as a server would */
#define DRIVE_BYTES (256ull << 20) /* the mapping the copies cycle over */

struct opts {
	unsigned k, p;
	size_t chunk_bytes;
	unsigned gib;
	const char *dir;
	int json;
};

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill_random(uint8_t *p, size_t len)
{
	uint64_t x = 0x2545f4914f6cdd1dull, *w = (uint64_t *)(void *)p;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
}

struct sender {
	int fd;
	uint64_t bytes;
};

static void *send_main(void *arg)
{
	struct sender *s = arg;
	uint8_t *buf = malloc(MSG_BYTES);
	uint64_t left = s->bytes;

	if (!buf)
		return (void *)(intptr_t)-ENOMEM;
	fill_random(buf, MSG_BYTES);
	while (left) {
		size_t len = left < MSG_BYTES ? (size_t)left : MSG_BYTES;
		ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return (void *)(intptr_t)-errno;
		}
		left -= (uint64_t)n;
	}
	free(buf);
	return NULL;
}

/* A file of DRIVE_BYTES in @dir, written once and mapped shared. */
static int map_drive(const char *dir, uint8_t **out)
{
	char path[4096];
	uint8_t *m;
	int fd, ret = 0;

	if (snprintf(path, sizeof(path), "%s/za-write-floor.XXXXXX", dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (ftruncate(fd, (off_t)DRIVE_BYTES)) {
		ret = -errno;
		goto out;
	}
	m = mmap(NULL, DRIVE_BYTES, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, fd, 0);
	if (m == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	/* Every page touched before timing, as a preallocated drive's. */
	memset(m, 0, DRIVE_BYTES);
	*out = m;
out:
	close(fd);
	return ret;
}

struct floor {
	double recv_s, crc_s, encode_s, copy_s;
};

/* recvmsg() exactly the bytes of @iov[0..@n); 0 or -errno (-EPIPE at end). */
static int recv_all(int fd, struct iovec *iov, size_t n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };

	while (msg.msg_iovlen) {
		ssize_t got = recvmsg(fd, &msg, MSG_WAITALL);
		size_t left;

		if (got <= 0) {
			if (got < 0 && errno == EINTR)
				continue;
			return got < 0 ? -errno : -EPIPE;
		}
		for (left = (size_t)got; left && msg.msg_iovlen;) {
			size_t t = left < msg.msg_iov->iov_len ?
					   left :
					   msg.msg_iov->iov_len;

			msg.msg_iov->iov_base =
				(uint8_t *)msg.msg_iov->iov_base + t;
			msg.msg_iov->iov_len -= t;
			left -= t;
			if (!msg.msg_iov->iov_len) {
				msg.msg_iov++;
				msg.msg_iovlen--;
			}
		}
	}
	return 0;
}

/*
 * Stripe after stripe, as a write flows through a server that wastes
 * nothing: the payload lands straight in the stripe's data chunks, parity
 * is encoded, every 4 KiB block of the k+p chunks gets its CRC, and the
 * chunks are copied to the drive. A few stripe buffers are reused, so the
 * data is as warm in the caches between steps as it can be.
 */
static int measure(const struct opts *o, struct floor *f)
{
	uint64_t user, i, nwrites;
	size_t stripe = (size_t)(o->k + o->p) * o->chunk_bytes, si, c, b;
	uint8_t *pool, *drive = NULL, *ptrs[ZA_EC_MAX_WIDTH];
	struct iovec iov[ZA_EC_MAX_WIDTH];
	uint64_t dpos = 0;
	volatile uint32_t sink = 0;
	struct sender snd;
	struct za_ec *ec;
	pthread_t t;
	void *tret;
	int sv[2], ret;
	double t0, t1;

	nwrites = ((uint64_t)o->gib << 30) / (o->k * o->chunk_bytes);
	user = nwrites * o->k * o->chunk_bytes;
	memset(f, 0, sizeof(*f));
	ret = za_ec_new(o->k, o->p, &ec);
	if (ret)
		return ret;
	if (posix_memalign((void **)&pool, 4096, POOL_STRIPES * stripe)) {
		ret = -ENOMEM;
		goto err_ec;
	}
	memset(pool, 0, POOL_STRIPES * stripe);
	ret = map_drive(o->dir, &drive);
	if (ret)
		goto err_pool;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
		goto err_drive;
	}
	snd = (struct sender){ .fd = sv[1], .bytes = user };
	ret = -pthread_create(&t, NULL, send_main, &snd);
	if (ret)
		goto err_sock;

	for (i = 0, si = 0; i < nwrites && !ret;
	     i++, si = (si + 1) % POOL_STRIPES) {
		uint8_t *sp = pool + si * stripe;

		for (c = 0; c < o->k + o->p; c++)
			ptrs[c] = sp + c * o->chunk_bytes;
		/* The payload lands in the data chunks, one syscall. */
		for (c = 0; c < o->k; c++)
			iov[c] = (struct iovec){ ptrs[c], o->chunk_bytes };
		t0 = cpu_s();
		ret = recv_all(sv[0], iov, o->k);
		t1 = cpu_s();
		f->recv_s += t1 - t0;
		za_ec_encode(ec, o->chunk_bytes, ptrs);
		t0 = cpu_s();
		f->encode_s += t0 - t1;
		for (b = 0; b < stripe; b += 4096)
			sink ^= za_crc32c(sp + b, 4096);
		t1 = cpu_s();
		f->crc_s += t1 - t0;
		for (c = 0; c < o->k + o->p; c++) {
			za_emu_copy_to_drive(drive + dpos, ptrs[c],
					     o->chunk_bytes);
			dpos += o->chunk_bytes;
			if (dpos + o->chunk_bytes > DRIVE_BYTES)
				dpos = 0;
		}
		f->copy_s += cpu_s() - t1;
	}
	(void)sink;
	if (ret)
		shutdown(sv[0], SHUT_RDWR);
	pthread_join(t, &tret);
	if (!ret && tret)
		ret = (int)(intptr_t)tret;
	/* Per GiB of user data. */
	f->recv_s *= (double)(1ull << 30) / (double)user;
	f->encode_s *= (double)(1ull << 30) / (double)user;
	f->crc_s *= (double)(1ull << 30) / (double)user;
	f->copy_s *= (double)(1ull << 30) / (double)user;
err_sock:
	close(sv[0]);
	close(sv[1]);
err_drive:
	munmap(drive, DRIVE_BYTES);
err_pool:
	free(pool);
err_ec:
	za_ec_free(ec);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: za-write-floor [-k K] [-p P] [--chunk BYTES] [--gib N]\n"
		"                      [--dir DIR] [--json]\n"
		"  CPU seconds per GiB of user data that a K+P array on\n"
		"  memory-backed drives cannot avoid (recv, crc, encode, copy).\n"
		"  Defaults: 10+2, 64 KiB chunks, 2 GiB, /dev/shm.\n");
}

static int parse_u(const char *s, unsigned long max, unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(s, &end, 10);
	return errno || end == s || *end || s[0] == '-' || *v == 0 || *v > max ?
		       -EINVAL :
		       0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "chunk", required_argument, NULL, 'c' },
		{ "gib", required_argument, NULL, 'g' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .k = 10,
			  .p = 2,
			  .chunk_bytes = 65536,
			  .gib = 2,
			  .dir = "/dev/shm" };
	struct floor f;
	unsigned long v;
	double g, sum;
	int c, ret;

	while ((c = getopt_long(argc, argv, "k:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'k':
		case 'p':
		case 'c':
		case 'g':
			if (parse_u(optarg,
				    c == 'c' ? 16ul << 20 : ZA_EC_MAX_WIDTH,
				    &v) ||
			    (c == 'c' && v % 4096)) {
				fprintf(stderr,
					"za-write-floor: bad value '%s'\n",
					optarg);
				return 2;
			}
			if (c == 'k')
				o.k = (unsigned)v;
			else if (c == 'p')
				o.p = (unsigned)v;
			else if (c == 'c')
				o.chunk_bytes = v;
			else
				o.gib = (unsigned)v;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || o.k + o.p > ZA_EC_MAX_WIDTH ||
	    o.p > ZA_EC_MAX_PARITY) {
		usage(stderr);
		return 2;
	}
	ret = measure(&o, &f);
	if (ret) {
		fprintf(stderr, "za-write-floor: %s\n", strerror(-ret));
		return 1;
	}
	g = 1;
	sum = f.recv_s + f.crc_s + f.encode_s + f.copy_s;
	if (o.json)
		printf("{\"k\": %u, \"p\": %u, \"chunk_bytes\": %zu, "
		       "\"gib\": %u, \"recv_s_per_gib\": %.4f, "
		       "\"crc_s_per_gib\": %.4f, \"encode_s_per_gib\": %.4f, "
		       "\"copy_s_per_gib\": %.4f, \"floor_s_per_gib\": %.4f}\n",
		       o.k, o.p, o.chunk_bytes, o.gib, f.recv_s / g,
		       f.crc_s / g, f.encode_s / g, f.copy_s / g, sum);
	else
		printf("%u+%u, CPU s per GiB of user data: recv %.3f, crc %.3f, "
		       "encode %.3f, copy %.3f; floor %.3f\n",
		       o.k, o.p, f.recv_s / g, f.crc_s / g, f.encode_s / g,
		       f.copy_s / g, sum);
	return 0;
}
