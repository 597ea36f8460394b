// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-ec-rate - the raw encode (and optionally decode) rate of one k+p
 * geometry through za_ec_encode()/za_ec_reconstruct() on one core, over
 * enough stripes (64 MiB or more) that the buffers are not cache-resident.
 * The segment-engine benchmark runs it in the same session and compares its
 * write throughput with this rate: the ratio shows how far the engine is
 * from the coding bound. It measures coding only: no I/O, no checksums, no
 * copies; its rate is data bytes coded per second.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ec.h"

#define MIN_FOOTPRINT_BYTES (64ull << 20)

struct opts {
	unsigned k, p, decode_lost;
	size_t chunk_bytes;
	unsigned stripes; /* 0: enough for MIN_FOOTPRINT_BYTES */
	double seconds;
	int json;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: za-ec-rate -k K -p P [--chunk BYTES] [--seconds S]\n"
		   "                  [--stripes N] [--decode N] [--json]\n"
		   "  Encode rate of a K+P code on one core (data bytes/s);\n"
		   "  --decode N also times rebuilding N lost data chunks.\n");
}

static int parse_uint(const char *s, unsigned long long max,
		      unsigned long long *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "chunk", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "stripes", required_argument, NULL, 'n' },
		{ "decode", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, have_k = 0, have_p = 0;
	unsigned long long v;
	char *end;

	memset(o, 0, sizeof(*o));
	o->chunk_bytes = 65536;
	o->seconds = 1.0;
	while ((c = getopt_long(argc, argv, "k:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'k':
		case 'p':
		case 'n':
		case 'd':
			if (parse_uint(optarg, ZA_EC_MAX_WIDTH * 1000ull, &v)) {
				fprintf(stderr, "za-ec-rate: bad number '%s'\n",
					optarg);
				return -EINVAL;
			}
			if (c == 'k') {
				o->k = (unsigned)v;
				have_k = 1;
			} else if (c == 'p') {
				o->p = (unsigned)v;
				have_p = 1;
			} else if (c == 'n') {
				o->stripes = (unsigned)v;
			} else {
				o->decode_lost = (unsigned)v;
			}
			break;
		case 'c':
			if (parse_uint(optarg, 1ull << 30, &v) || !v) {
				fprintf(stderr,
					"za-ec-rate: bad chunk size '%s' (1 B to 1 GiB)\n",
					optarg);
				return -EINVAL;
			}
			o->chunk_bytes = (size_t)v;
			break;
		case 's':
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(o->seconds > 0 && o->seconds <= 3600)) {
				fprintf(stderr,
					"za-ec-rate: bad seconds '%s'\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'j':
			o->json = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "za-ec-rate: unexpected argument '%s'\n",
			argv[optind]);
		return -EINVAL;
	}
	if (!have_k || !have_p) {
		fprintf(stderr, "za-ec-rate: -k and -p are required\n");
		return -EINVAL;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct bench {
	struct za_ec *ec;
	unsigned n, stripes;
	size_t chunk_bytes;
	uint8_t **ptrs; /* stripes * n chunk pointers */
	uint8_t *mem;
};

static int bench_alloc(struct bench *b, const struct opts *o)
{
	unsigned long long stripe_bytes, total, i;
	uint64_t x = 0x2545f4914f6cdd1dull;
	uint64_t *w;

	b->n = o->k + o->p;
	b->chunk_bytes = o->chunk_bytes;
	stripe_bytes = (unsigned long long)b->n * o->chunk_bytes;
	b->stripes = o->stripes;
	if (!b->stripes) {
		b->stripes =
			(unsigned)((MIN_FOOTPRINT_BYTES + stripe_bytes - 1) /
				   stripe_bytes);
		if (b->stripes < 2)
			b->stripes = 2;
	}
	total = stripe_bytes * b->stripes;
	/* 4 KiB-aligned chunks when the chunk size allows, as I/O uses. */
	if (posix_memalign((void **)&b->mem, 4096, (size_t)total)) {
		fprintf(stderr, "za-ec-rate: cannot allocate %llu bytes\n",
			total);
		return -ENOMEM;
	}
	b->ptrs = calloc((size_t)b->stripes * b->n, sizeof(*b->ptrs));
	if (!b->ptrs) {
		free(b->mem);
		return -ENOMEM;
	}
	for (i = 0; i < (unsigned long long)b->stripes * b->n; i++)
		b->ptrs[i] = b->mem + i * o->chunk_bytes;
	/* Random contents, and every page touched before timing starts. */
	w = (uint64_t *)(void *)b->mem;
	for (i = 0; i < total / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	return 0;
}

/* Returns bytes of data coded per second (k chunks per stripe). */
static double time_encode(struct bench *b, unsigned k, double seconds)
{
	unsigned long long done = 0;
	double t0 = now_s(), t;

	do {
		za_ec_encode(b->ec, b->chunk_bytes,
			     &b->ptrs[(size_t)(done % b->stripes) * b->n]);
		done++;
		t = now_s();
	} while (t - t0 < seconds);
	return (double)done * k * b->chunk_bytes / (t - t0);
}

/*
 * Rebuild data chunks 0..lost-1 of every stripe from the others, in place.
 * Returns source bytes read per second (k chunks per stripe), or < 0.
 */
static double time_decode(struct bench *b, unsigned k, unsigned lost,
			  double seconds)
{
	uint64_t want = ((uint64_t)1 << lost) - 1;
	uint64_t avail =
		(b->n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << b->n) - 1) & ~want;
	unsigned long long done = 0;
	double t0, t;
	uint8_t *save;
	int ret;

	/* Check once that it rebuilds what encode wrote, then time it. */
	save = malloc((size_t)lost * b->chunk_bytes);
	if (!save)
		return -ENOMEM;
	za_ec_encode(b->ec, b->chunk_bytes, b->ptrs);
	memcpy(save, b->ptrs[0], (size_t)lost * b->chunk_bytes);
	memset(b->ptrs[0], 0, (size_t)lost * b->chunk_bytes);
	ret = za_ec_reconstruct(b->ec, b->chunk_bytes, b->ptrs, avail, want);
	if (ret || memcmp(save, b->ptrs[0], (size_t)lost * b->chunk_bytes)) {
		fprintf(stderr, "za-ec-rate: decode check failed (%d)\n", ret);
		free(save);
		return ret ? ret : -EIO;
	}
	free(save);

	t0 = now_s();
	do {
		ret = za_ec_reconstruct(
			b->ec, b->chunk_bytes,
			&b->ptrs[(size_t)(done % b->stripes) * b->n], avail,
			want);
		if (ret) {
			fprintf(stderr, "za-ec-rate: decode failed: %s\n",
				strerror(-ret));
			return ret;
		}
		done++;
		t = now_s();
	} while (t - t0 < seconds);
	return (double)done * k * b->chunk_bytes / (t - t0);
}

int main(int argc, char **argv)
{
	struct bench b = { 0 };
	double enc, dec = 0;
	struct opts o;
	int ret;

	if (parse_opts(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	ret = za_ec_new(o.k, o.p, &b.ec);
	if (ret) {
		fprintf(stderr, "za-ec-rate: %u+%u: %s\n", o.k, o.p,
			ret == -EINVAL ?
				"unsupported geometry (k >= 1, 1 <= p <= 6, k + p <= 64)" :
				strerror(-ret));
		return ret == -EINVAL ? 2 : 1;
	}
	if (o.decode_lost > o.p || o.decode_lost > o.k) {
		fprintf(stderr,
			"za-ec-rate: --decode %u: at most min(k, p) data chunks can be rebuilt\n",
			o.decode_lost);
		usage(stderr);
		za_ec_free(b.ec);
		return 2;
	}
	if (bench_alloc(&b, &o))
		goto err_alloc;

	enc = time_encode(&b, o.k, o.seconds);
	if (o.decode_lost) {
		dec = time_decode(&b, o.k, o.decode_lost, o.seconds);
		if (dec < 0)
			goto err_decode;
	}

	if (o.json) {
		printf("{\"k\":%u,\"p\":%u,\"chunk_bytes\":%zu,\"stripes\":%u,"
		       "\"encode_bytes_per_s\":%.0f",
		       o.k, o.p, o.chunk_bytes, b.stripes, enc);
		if (o.decode_lost)
			printf(",\"decode_lost\":%u,\"decode_bytes_per_s\":%.0f,"
			       "\"rebuilt_bytes_per_s\":%.0f",
			       o.decode_lost, dec, dec * o.decode_lost / o.k);
		printf("}\n");
	} else {
		printf("%u+%u, %zu-byte chunks, %u stripes (%.0f MiB):\n", o.k,
		       o.p, o.chunk_bytes, b.stripes,
		       (double)b.stripes * b.n * o.chunk_bytes / (1 << 20));
		printf("  encode: %.2f GB/s of data\n", enc / 1e9);
		if (o.decode_lost)
			printf("  decode %u lost: %.2f GB/s of sources read, "
			       "%.2f GB/s rebuilt\n",
			       o.decode_lost, dec / 1e9,
			       dec * o.decode_lost / o.k / 1e9);
	}
	free(b.ptrs);
	free(b.mem);
	za_ec_free(b.ec);
	return 0;

err_decode:
	free(b.ptrs);
	free(b.mem);
err_alloc:
	za_ec_free(b.ec);
	return 1;
}
