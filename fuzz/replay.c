// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay.c - a main() for one fuzz target without libFuzzer: the unit
 * tier's corpus replay (fuzz/replay-<target>), built with the normal
 * compiler and, in the sanitizer tier, with ASan and UBSan.
 *
 * With no argument it replays every file of
 * $top_srcdir/fuzz/corpus/<target>/ (sorted by name), each followed by
 * ZA_FUZZ_MUTATIONS (default 200) deterministic mutations of it: bit
 * flips, byte overwrites with boundary values, insertions, deletions,
 * truncations. The mutations are seeded by the file's contents, so a run
 * is reproducible and a failure names the file and the mutation number.
 * Output is TAP, one line per corpus file.
 *
 * Arguments override that: a directory is replayed like the corpus, a
 * file is run once, as is (to reproduce a crash libFuzzer kept). With
 * ZA_FUZZ_SAVE=FILE each mutation is saved to FILE before it runs, so
 * that a crash leaves its input there.
 *
 * It is not a fuzzer: it finds no new coverage, it only keeps the
 * corpus' inputs (and their neighbourhood) passing as the code changes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz.h"

#ifndef ZA_FUZZ_TARGET
#error "build with -DZA_FUZZ_TARGET=\"name\""
#endif

#define DEFAULT_MUTATIONS 200
/* Mutated inputs may grow: cap them (libFuzzer's -max_len does too). */
#define MAX_INPUT_BYTES (256u << 10)

static uint64_t rng_state;
static unsigned long nr_inputs;

static uint64_t rng(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t fnv1a(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (len--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

static int read_file(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *b;

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) < 0 || st.st_size > MAX_INPUT_BYTES) {
		fclose(f);
		return -EFBIG;
	}
	b = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!b) {
		fclose(f);
		return -ENOMEM;
	}
	if (fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(b);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	*buf = b;
	*len = (size_t)st.st_size;
	return 0;
}

/* One mutation of @in into @out (MAX_INPUT_BYTES); returns its length. */
static size_t mutate(const uint8_t *in, size_t len, uint8_t *out)
{
	static const uint8_t vals[] = { 0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff };
	unsigned steps = 1 + (unsigned)(rng() % 4), s;
	size_t n = len, pos, k;

	memcpy(out, in, len);
	for (s = 0; s < steps; s++) {
		pos = n ? (size_t)(rng() % n) : 0;
		switch (rng() % 7) {
		case 0: /* flip a bit */
		case 1:
			if (n)
				out[pos] ^= (uint8_t)(1u << (rng() % 8));
			break;
		case 2: /* a boundary value */
			if (n)
				out[pos] = vals[rng() % sizeof(vals)];
			break;
		case 3: /* a random byte */
			if (n)
				out[pos] = (uint8_t)rng();
			break;
		case 4: /* insert up to 16 random bytes */
			k = 1 + (size_t)(rng() % 16);
			if (n + k > MAX_INPUT_BYTES)
				break;
			memmove(out + pos + k, out + pos, n - pos);
			n += k;
			while (k--)
				out[pos + k] = (uint8_t)rng();
			break;
		case 5: /* delete up to 16 bytes */
			k = 1 + (size_t)(rng() % 16);
			if (k > n - pos)
				k = n - pos;
			memmove(out + pos, out + pos + k, n - pos - k);
			n -= k;
			break;
		case 6: /* truncate */
			n = pos;
			break;
		}
	}
	return n;
}

/*
 * With ZA_FUZZ_SAVE=FILE, each mutation is written to FILE before it
 * runs: after a crash, FILE holds the input (for the libFuzzer build or
 * a debugger). With ZA_FUZZ_VERBOSE, each one is named on stderr.
 */
static void save_input(const char *path, unsigned i, const uint8_t *in,
		       size_t n)
{
	const char *save = getenv("ZA_FUZZ_SAVE");
	FILE *f;

	if (getenv("ZA_FUZZ_VERBOSE"))
		fprintf(stderr, "# %s mutation %u (%zu bytes)\n", path, i, n);
	if (!save)
		return;
	f = fopen(save, "wb");
	if (!f || fwrite(in, 1, n, f) != n || fclose(f))
		fprintf(stderr, "replay: cannot save the input to %s\n", save);
}

/* Replay @path and @nr_mut mutations of it. Returns 0 or -errno. */
static int replay_file(const char *path, unsigned nr_mut, uint8_t *scratch)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	unsigned i;
	int ret;

	ret = read_file(path, &buf, &len);
	if (ret)
		return ret;
	LLVMFuzzerTestOneInput(buf, len);
	nr_inputs++;
	rng_state = fnv1a(buf, len);
	for (i = 0; i < nr_mut; i++) {
		size_t n = mutate(buf, len, scratch);
		/* An exact copy, so that ASan sees reads past the input. */
		uint8_t *in = malloc(n ? n : 1);

		if (!in) {
			free(buf);
			return -ENOMEM;
		}
		memcpy(in, scratch, n);
		save_input(path, i, in, n);
		LLVMFuzzerTestOneInput(in, n);
		nr_inputs++;
		free(in);
	}
	free(buf);
	return 0;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int skip_dot(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Replay a corpus directory as TAP lines from *@test_nr + 1. */
static int replay_dir(const char *dir, unsigned nr_mut, uint8_t *scratch,
		      unsigned *test_nr)
{
	struct dirent **ents;
	int n, i, bad = 0;

	n = scandir(dir, &ents, skip_dot, alphasort);
	if (n <= 0) {
		printf("not ok %u - %s: no corpus files (%s)\n", ++*test_nr,
		       dir, n < 0 ? strerror(errno) : "empty");
		return 1;
	}
	for (i = 0; i < n; i++) {
		char path[4096];
		int ret;

		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		ret = replay_file(path, nr_mut, scratch);
		if (ret) {
			printf("not ok %u - %s: %s\n", ++*test_nr, path,
			       strerror(-ret));
			bad = 1;
		} else {
			printf("ok %u - %s + %u mutations\n", ++*test_nr,
			       ents[i]->d_name, nr_mut);
		}
		fflush(stdout);
		free(ents[i]);
	}
	free(ents);
	return bad;
}

/* Corpus files in @dir, for the TAP plan. */
static int count_dir(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, skip_dot, alphasort), i;

	for (i = 0; i < n; i++)
		free(ents[i]);
	if (n >= 0)
		free(ents);
	return n > 0 ? n : 1;
}

int main(int argc, char **argv)
{
	const char *env = getenv("ZA_FUZZ_MUTATIONS");
	const char *top = getenv("top_srcdir");
	unsigned nr_mut = env ? (unsigned)strtoul(env, NULL, 10) :
				DEFAULT_MUTATIONS;
	unsigned test_nr = 0, plan = 0;
	char corpus[4096];
	struct timespec t0, t1;
	uint8_t *scratch;
	int i, bad = 0;

	scratch = malloc(MAX_INPUT_BYTES + 16);
	if (!scratch)
		return 99;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (argc < 2) {
		snprintf(corpus, sizeof(corpus), "%s/fuzz/corpus/%s",
			 top && *top ? top : ".", ZA_FUZZ_TARGET);
		printf("1..%d\n", count_dir(corpus));
		bad = replay_dir(corpus, nr_mut, scratch, &test_nr);
	} else {
		for (i = 1; i < argc; i++)
			plan += is_dir(argv[i]) ? (unsigned)count_dir(argv[i]) :
						  1;
		printf("1..%u\n", plan);
		for (i = 1; i < argc; i++) {
			int ret;

			if (is_dir(argv[i])) {
				bad |= replay_dir(argv[i], nr_mut, scratch,
						  &test_nr);
				continue;
			}
			ret = replay_file(argv[i], 0, scratch);
			printf("%s %u - %s%s%s\n", ret ? "not ok" : "ok",
			       ++test_nr, argv[i], ret ? ": " : "",
			       ret ? strerror(-ret) : "");
			bad |= ret != 0;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# %s: %lu inputs replayed in %.2f s\n", ZA_FUZZ_TARGET,
	       nr_inputs,
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(scratch);
	return bad;
}
