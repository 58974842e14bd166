/*
 * fmnist.h -- load Fashion-MNIST from the IDX gzip files of Debian's
 * dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist).
 *
 * Header-only (static inline); link with -lz.  Images come back as float32 in
 * [0, 1], one example after another (28 * 28 floats each, row-major: the
 * engine's [1, 28, 28] NCHW layout or a flat [784] vector alike).  Labels come
 * back as one float per example holding the class index (0..9), which is the
 * engine's cross_entropy target convention.
 *
 *     FmnistSet train;
 *     char err[256];
 *     if (!fmnist_load(NULL, "train", &train, err, sizeof(err))) { fprintf(stderr, "%s\n", err); ... }
 *     ... train.images, train.labels, train.n ...
 *     fmnist_free(&train);
 *
 * The directory is, in order: the dir argument when not NULL, the environment
 * variable FMNIST_DIR when set and not empty, FMNIST_DEFAULT_DIR.
 */
#ifndef PGDL_BENCH_FMNIST_H
#define PGDL_BENCH_FMNIST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define FMNIST_DEFAULT_DIR	"/usr/share/datasets/fashion-mnist"
#define FMNIST_ROWS			28
#define FMNIST_COLS			28
#define FMNIST_PIXELS		(FMNIST_ROWS * FMNIST_COLS)
#define FMNIST_CLASSES		10
#define FMNIST_TRAIN_N		60000
#define FMNIST_TEST_N		10000

#define FMNIST_IMAGES_MAGIC 0x00000803	/* unsigned byte, 3 dimensions */
#define FMNIST_LABELS_MAGIC 0x00000801	/* unsigned byte, 1 dimension */

typedef struct FmnistSet
{
	int32_t		n;				/* examples */
	float	   *images;			/* n * FMNIST_PIXELS, in [0, 1] */
	float	   *labels;			/* n, class index as float */
} FmnistSet;

static inline void
fmnist_errf(char *err, size_t errlen, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static inline const char *
fmnist_dir(const char *dir)
{
	const char *env;

	if (dir != NULL && dir[0] != '\0')
		return dir;
	env = getenv("FMNIST_DIR");
	if (env != NULL && env[0] != '\0')
		return env;
	return FMNIST_DEFAULT_DIR;
}

/* Read exactly len bytes; false (with err set) on a short read or zlib error. */
static inline bool
fmnist_gzread_all(gzFile f, const char *path, void *buf, size_t len,
				  char *err, size_t errlen)
{
	uint8_t    *p = (uint8_t *) buf;

	while (len > 0)
	{
		unsigned	chunk = len > (1u << 30) ? (1u << 30) : (unsigned) len;
		int			got = gzread(f, p, chunk);

		if (got < 0)
		{
			int			zerr;
			const char *msg = gzerror(f, &zerr);

			fmnist_errf(err, errlen, "%s: read error: %s", path, msg);
			return false;
		}
		if (got == 0)
		{
			fmnist_errf(err, errlen, "%s: file is truncated", path);
			return false;
		}
		p += got;
		len -= (size_t) got;
	}
	return true;
}

static inline uint32_t
fmnist_be32(const uint8_t *b)
{
	return ((uint32_t) b[0] << 24) | ((uint32_t) b[1] << 16) |
		((uint32_t) b[2] << 8) | (uint32_t) b[3];
}

/*
 * Read one IDX gzip file: check the magic number and the dimensions (every
 * dims[i] must match; expect_n < 0 accepts any count, else the count must
 * equal it), then return the payload (count * item bytes) in a new malloc'd
 * buffer.  *count_out receives the first dimension.
 */
static inline uint8_t *
fmnist_read_idx(const char *path, uint32_t magic, int ndim, const uint32_t *dims,
				int64_t expect_n, int32_t *count_out, char *err, size_t errlen)
{
	gzFile		f;
	uint8_t		hdr[4 * 4];
	uint32_t	got_magic;
	uint32_t	count;
	size_t		item = 1;
	size_t		total;
	uint8_t    *data;
	uint8_t		extra;

	f = gzopen(path, "rb");
	if (f == NULL)
	{
		fmnist_errf(err, errlen, "%s: cannot open (is dataset-fashion-mnist installed? "
					"FMNIST_DIR overrides the directory)", path);
		return NULL;
	}
	gzbuffer(f, 1 << 17);

	if (!fmnist_gzread_all(f, path, hdr, 4 * (size_t) (1 + ndim), err, errlen))
		goto fail;
	got_magic = fmnist_be32(hdr);
	if (got_magic != magic)
	{
		fmnist_errf(err, errlen, "%s: bad magic number 0x%08x (expected 0x%08x)",
					path, got_magic, magic);
		goto fail;
	}
	count = fmnist_be32(hdr + 4);
	if (count == 0 || count > (uint32_t) INT32_MAX ||
		(expect_n >= 0 && (int64_t) count != expect_n))
	{
		fmnist_errf(err, errlen, "%s: %u items (expected %lld)", path, count,
					(long long) expect_n);
		goto fail;
	}
	for (int i = 1; i < ndim; i++)
	{
		uint32_t	d = fmnist_be32(hdr + 4 * (1 + i));

		if (d != dims[i - 1])
		{
			fmnist_errf(err, errlen, "%s: dimension %d is %u (expected %u)",
						path, i, d, dims[i - 1]);
			goto fail;
		}
		item *= d;
	}

	total = (size_t) count * item;
	data = (uint8_t *) malloc(total);
	if (data == NULL)
	{
		fmnist_errf(err, errlen, "%s: out of memory (%zu bytes)", path, total);
		goto fail;
	}
	if (!fmnist_gzread_all(f, path, data, total, err, errlen))
	{
		free(data);
		goto fail;
	}
	/* Nothing may follow the payload. */
	if (gzread(f, &extra, 1) != 0)
	{
		fmnist_errf(err, errlen, "%s: trailing data after %zu bytes of payload", path, total);
		free(data);
		goto fail;
	}
	gzclose(f);
	*count_out = (int32_t) count;
	return data;

fail:
	gzclose(f);
	return NULL;
}

static inline void
fmnist_free(FmnistSet *set)
{
	if (set == NULL)
		return;
	free(set->images);
	free(set->labels);
	set->images = NULL;
	set->labels = NULL;
	set->n = 0;
}

/*
 * Load split "train" (60,000 examples) or "t10k"/"test" (10,000 examples).
 * Returns false with a message in err on any error; set is then empty.
 */
static inline bool
fmnist_load(const char *dir, const char *split, FmnistSet *set, char *err, size_t errlen)
{
	const char *d = fmnist_dir(dir);
	const char *prefix;
	int64_t		expect;
	char		path[4096];
	const uint32_t img_dims[2] = {FMNIST_ROWS, FMNIST_COLS};
	uint8_t    *img = NULL;
	uint8_t    *lab = NULL;
	int32_t		n_img = 0,
				n_lab = 0;

	memset(set, 0, sizeof(*set));
	if (split != NULL && strcmp(split, "train") == 0)
	{
		prefix = "train";
		expect = FMNIST_TRAIN_N;
	}
	else if (split != NULL && (strcmp(split, "t10k") == 0 || strcmp(split, "test") == 0))
	{
		prefix = "t10k";
		expect = FMNIST_TEST_N;
	}
	else
	{
		fmnist_errf(err, errlen, "unknown split \"%s\" (train, test)", split ? split : "(null)");
		return false;
	}

	snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte.gz", d, prefix);
	img = fmnist_read_idx(path, FMNIST_IMAGES_MAGIC, 3, img_dims, expect, &n_img, err, errlen);
	if (img == NULL)
		return false;
	snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte.gz", d, prefix);
	lab = fmnist_read_idx(path, FMNIST_LABELS_MAGIC, 1, NULL, n_img, &n_lab, err, errlen);
	if (lab == NULL)
	{
		free(img);
		return false;
	}

	set->n = n_img;
	set->images = (float *) malloc((size_t) n_img * FMNIST_PIXELS * sizeof(float));
	set->labels = (float *) malloc((size_t) n_img * sizeof(float));
	if (set->images == NULL || set->labels == NULL)
	{
		fmnist_errf(err, errlen, "out of memory for %d examples", n_img);
		free(img);
		free(lab);
		fmnist_free(set);
		return false;
	}
	for (size_t i = 0; i < (size_t) n_img * FMNIST_PIXELS; i++)
		set->images[i] = (float) img[i] / 255.0f;
	for (int32_t i = 0; i < n_img; i++)
	{
		if (lab[i] >= FMNIST_CLASSES)
		{
			fmnist_errf(err, errlen, "%s: label %d of example %d is out of range",
						path, lab[i], i);
			free(img);
			free(lab);
			fmnist_free(set);
			return false;
		}
		set->labels[i] = (float) lab[i];
	}
	free(img);
	free(lab);
	return true;
}

#endif							/* PGDL_BENCH_FMNIST_H */
