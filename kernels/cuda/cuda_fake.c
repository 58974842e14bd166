/*
 * cuda_fake.c -- a fake CUDA device: the CPU kernels on memory the host may
 * not touch (see cuda_fake.h, which also says what PGDL_FAKE_CUDA holds).
 *
 * Every allocation is its own mmap region, PROT_NONE except while one of the
 * table's functions runs: all regions are opened on entry and closed again on
 * return, so the kernels see host memory and anything else sees a fault.
 * Slow (two mprotect calls per region per primitive), and only for tests.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_fake.h"

#define FAKE_MAX_DEVICES	16
#define FAKE_DEFAULT_MEM	((size_t) 1 << 30)

typedef struct FakeConfig
{
	int			devices;
	size_t		mem;
	bool		busy;
} FakeConfig;

typedef struct Region
{
	void	   *base;
	size_t		bytes;			/* asked for */
	size_t		len;			/* mapped: whole pages */
	struct Region *next;
} Region;

static Region *regions;
static size_t used;
static size_t limit = FAKE_DEFAULT_MEM;
static pid_t context_pid;		/* the process that created the context; 0: none */
static int	context_ordinal = -1;
static const NnBackend *cpu;
static int	open_depth;			/* > 0 inside a table function: memory open to the host */

static void
fake_fail(const char *what)
{
	fprintf(stderr, "pgdl: fake CUDA device: %s\n", what);
	abort();
}

static void
protect_all(int prot)
{
	for (Region *r = regions; r != NULL; r = r->next)
		if (mprotect(r->base, r->len, prot) != 0)
			fake_fail("mprotect failed");
}

static void
fake_open(void)
{
	if (open_depth++ == 0)
		protect_all(PROT_READ | PROT_WRITE);
}

static void
fake_close(void)
{
	if (--open_depth == 0)
		protect_all(PROT_NONE);
}

static void *
fake_alloc(size_t bytes)
{
	size_t		page = (size_t) sysconf(_SC_PAGESIZE);
	size_t		len;
	Region	   *r;
	void	   *p;

	if (bytes > limit || used > limit - bytes)
		return NULL;			/* out of device memory, as cudaMalloc */
	len = bytes == 0 ? page : (bytes + page - 1) / page * page;
	r = malloc(sizeof(Region));
	if (r == NULL)
		return NULL;
	p = mmap(NULL, len, open_depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
	{
		free(r);
		return NULL;
	}
	r->base = p;
	r->bytes = bytes;
	r->len = len;
	r->next = regions;
	regions = r;
	used += bytes;
	return p;
}

static void
fake_release(void *ptr)
{
	Region	  **at = &regions;
	Region	   *r;

	if (ptr == NULL)
		return;
	while (*at != NULL && (*at)->base != ptr)
		at = &(*at)->next;
	if (*at == NULL)
		fake_fail("release of memory it did not allocate");
	r = *at;
	*at = r->next;
	used -= r->bytes;
	munmap(r->base, r->len);
	free(r);
}

static void
fake_upload(void *dst, const void *host_src, size_t bytes)
{
	fake_open();
	memcpy(dst, host_src, bytes);
	fake_close();
}

static void
fake_download(void *host_dst, const void *src, size_t bytes)
{
	fake_open();
	memcpy(host_dst, src, bytes);
	fake_close();
}

static void
fake_synchronize(void)
{
}

/* host memory: no region, the host may touch it */
static void *
fake_host_alloc(size_t bytes)
{
	return malloc(bytes > 0 ? bytes : 1);
}

static void
fake_host_release(void *ptr)
{
	free(ptr);
}

static void
fake_wait_uploads(void)
{
}

static bool
fake_all_finite(const float *x, int64_t n)
{
	bool		ok;

	fake_open();
	ok = cpu->all_finite(x, n);
	fake_close();
	return ok;
}

static double
fake_sum_squares(const float *x, int64_t n)
{
	double		s;

	fake_open();
	s = cpu->sum_squares(x, n);
	fake_close();
	return s;
}

/* Every other primitive: the CPU kernel, with the memory open while it runs. */
#define FAKE(name, params, args) \
	static void fake_##name params { fake_open(); cpu->name args; fake_close(); }

FAKE(copy, (void *dst, const void *src, size_t bytes), (dst, src, bytes))
FAKE(fill, (float *x, float value, int64_t n), (x, value, n))
FAKE(gemm, (bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
			const float *b, int ldb, float beta, float *c, int ldc),
	 (ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
FAKE(bias_add_rows, (float *y, const float *bias, int rows, int cols), (y, bias, rows, cols))
FAKE(bias_add_planes, (float *y, const float *bias, int n, int ch, int plane), (y, bias, n, ch, plane))
FAKE(bias_relu_planes, (float *y, const float *bias, int n, int ch, int plane), (y, bias, n, ch, plane))
FAKE(col_sum, (const float *dy, float *db, int rows, int cols), (dy, db, rows, cols))
FAKE(plane_sum, (const float *dy, float *db, int n, int ch, int plane), (dy, db, n, ch, plane))
FAKE(im2col, (const float *x, int n, const NnConvGeom *g, float *col), (x, n, g, col))
FAKE(col2im, (const float *col, int n, const NnConvGeom *g, float *dx), (col, n, g, dx))
FAKE(nchw_to_cnhw, (const float *src, float *dst, int n, int ch, int plane), (src, dst, n, ch, plane))
FAKE(maxpool_forward, (const float *x, float *y, int32_t *argmax, int64_t planes, const NnPoolGeom *g,
					   bool relu_before), (x, y, argmax, planes, g, relu_before))
FAKE(maxpool_backward, (const float *dy, const int32_t *argmax, float *dx, int64_t planes,
						const NnPoolGeom *g), (dy, argmax, dx, planes, g))
FAKE(avgpool_forward, (const float *x, float *y, int64_t planes, const NnPoolGeom *g), (x, y, planes, g))
FAKE(avgpool_backward, (const float *dy, float *dx, int64_t planes, const NnPoolGeom *g), (dy, dx, planes, g))
FAKE(global_avgpool_forward, (const float *x, float *y, int64_t planes, int plane), (x, y, planes, plane))
FAKE(global_avgpool_backward, (const float *dy, float *dx, int64_t planes, int plane), (dy, dx, planes, plane))
FAKE(batchnorm_forward, (const float *x, float *y, int n, int ch, int plane, const float *gamma,
						 const float *beta, float *rmean, float *rvar, float eps, float momentum,
						 bool training, float *saved),
	 (x, y, n, ch, plane, gamma, beta, rmean, rvar, eps, momentum, training, saved))
FAKE(batchnorm_backward, (const float *x, const float *dy, float *dx, int n, int ch, int plane,
						  const float *gamma, float *dgamma, float *dbeta, const float *saved),
	 (x, dy, dx, n, ch, plane, gamma, dgamma, dbeta, saved))
FAKE(relu_forward, (const float *x, float *y, int64_t n), (x, y, n))
FAKE(relu_backward, (const float *y, const float *dy, float *dx, int64_t n), (y, dy, dx, n))
FAKE(leaky_relu_forward, (const float *x, float *y, int64_t n, float a), (x, y, n, a))
FAKE(leaky_relu_backward, (const float *y, const float *dy, float *dx, int64_t n, float a), (y, dy, dx, n, a))
FAKE(sigmoid_forward, (const float *x, float *y, int64_t n), (x, y, n))
FAKE(sigmoid_backward, (const float *y, const float *dy, float *dx, int64_t n), (y, dy, dx, n))
FAKE(tanh_forward, (const float *x, float *y, int64_t n), (x, y, n))
FAKE(tanh_backward, (const float *y, const float *dy, float *dx, int64_t n), (y, dy, dx, n))
FAKE(gelu_forward, (const float *x, float *y, int64_t n), (x, y, n))
FAKE(gelu_backward, (const float *x, const float *dy, float *dx, int64_t n), (x, dy, dx, n))
FAKE(layernorm_forward, (const float *x, float *y, int rows, int cols, const float *gamma,
						 const float *beta, float eps, float *saved), (x, y, rows, cols, gamma, beta, eps, saved))
FAKE(layernorm_backward, (const float *x, const float *dy, float *dx, int rows, int cols,
						  const float *gamma, float *dgamma, float *dbeta, const float *saved),
	 (x, dy, dx, rows, cols, gamma, dgamma, dbeta, saved))
FAKE(softmax_xent, (const float *z, const float *labels, const float *w, float *dz, float *loss, int rows,
					int classes, float scale), (z, labels, w, dz, loss, rows, classes, scale))
FAKE(xent_metrics, (const float *z, const float *labels, const float *loss, int rows, int classes,
					double *sums), (z, labels, loss, rows, classes, sums))
FAKE(mse_loss, (const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
				double *sums), (z, y, w, dz, rows, k, scale, sums))
FAKE(bce_loss, (const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
				double *sums), (z, y, w, dz, rows, k, scale, sums))
FAKE(huber_loss, (const float *z, const float *y, const float *w, float *dz, int rows, int k, float delta,
				  float scale, double *sums), (z, y, w, dz, rows, k, delta, scale, sums))
FAKE(dropout_forward, (const float *x, float *y, int64_t n, float rate, uint64_t seed, uint64_t stream,
					   uint64_t counter), (x, y, n, rate, seed, stream, counter))
FAKE(dropout_backward, (const float *dy, float *dx, int64_t n, float rate, uint64_t seed, uint64_t stream,
						uint64_t counter), (dy, dx, n, rate, seed, stream, counter))
FAKE(sgd_update, (float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
				  float weight_decay, bool nesterov), (p, g, buf, n, lr, momentum, weight_decay, nesterov))
FAKE(adam_update, (float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
				   float beta2, float eps, float weight_decay, bool decoupled, int64_t step),
	 (p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, step))
FAKE(rmsprop_update, (float *p, const float *g, float *sq, float *buf, float *gavg, int64_t n, float lr,
					  float alpha, float eps, float weight_decay, float momentum),
	 (p, g, sq, buf, gavg, n, lr, alpha, eps, weight_decay, momentum))
FAKE(adagrad_update, (float *p, const float *g, float *sum, int64_t n, float lr, float lr_decay, float eps,
					  float weight_decay, int64_t step), (p, g, sum, n, lr, lr_decay, eps, weight_decay, step))
FAKE(embedding_forward, (const float *ids, const float *table, float *y, int64_t n, int vocab, int dim),
	 (ids, table, y, n, vocab, dim))
FAKE(embedding_backward, (const float *ids, const float *dy, float *dtable, int64_t n, int vocab, int dim),
	 (ids, dy, dtable, n, vocab, dim))
FAKE(softmax_forward, (const float *x, float *y, int64_t rows, int cols), (x, y, rows, cols))
FAKE(softmax_backward, (const float *y, const float *dy, float *dx, int64_t rows, int cols), (y, dy, dx, rows, cols))
FAKE(log_softmax_forward, (const float *x, float *y, int64_t rows, int cols), (x, y, rows, cols))
FAKE(log_softmax_backward, (const float *y, const float *dy, float *dx, int64_t rows, int cols), (y, dy, dx, rows, cols))
FAKE(attention_forward, (const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work),
	 (qkv, p, o, g, work))
FAKE(attention_backward, (const float *qkv, const float *p, const float *d_o, float *dqkv, const NnAttnGeom *g,
						  float *work), (qkv, p, d_o, dqkv, g, work))
FAKE(seq_avgpool_forward, (const float *x, float *y, int n, int steps, int dim), (x, y, n, steps, dim))
FAKE(seq_avgpool_backward, (const float *dy, float *dx, int n, int steps, int dim), (dy, dx, n, steps, dim))
FAKE(gru_gates_forward, (const float *gi, int gs, const float *gh, const float *hp, int hps, float *h, int hs,
						 float *sv, int ss, float *out, int os, int n, int units),
	 (gi, gs, gh, hp, hps, h, hs, sv, ss, out, os, n, units))
FAKE(gru_gates_backward, (float *dh, const float *dout, int ds, const float *hp, int hps, const float *sv, int ss,
						  float *dgi, int gs, float *dgh, int n, int units),
	 (dh, dout, ds, hp, hps, sv, ss, dgi, gs, dgh, n, units))
FAKE(seq_unfold, (const float *x, int n, const NnConvGeom *g, float *cols), (x, n, g, cols))
FAKE(seq_fold, (const float *cols, int n, const NnConvGeom *g, float *dx), (cols, n, g, dx))

FAKE(copy_rows, (float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t cols, bool add),
	 (dst, ds, src, ss, rows, cols, add))

FAKE(softmax_xent_smooth, (const float *z, const float *labels, const float *w, float *dz, float *loss,
						   int rows, int classes, float scale, float smoothing),
	 (z, labels, w, dz, loss, rows, classes, scale, smoothing))
FAKE(scale, (float *x, float a, int64_t n), (x, a, n))

#define ENTRY(name) .name = fake_##name

static const NnBackend fake_backend = {
	.name = "fake",
	.host_memory = false,
	ENTRY(alloc), ENTRY(release), ENTRY(upload), ENTRY(download), ENTRY(synchronize),
	ENTRY(copy), ENTRY(fill), ENTRY(all_finite),
	ENTRY(host_alloc), ENTRY(host_release), .upload_async = fake_upload, ENTRY(wait_uploads),
	ENTRY(gemm), ENTRY(bias_add_rows), ENTRY(bias_add_planes), ENTRY(bias_relu_planes),
	ENTRY(col_sum), ENTRY(plane_sum), ENTRY(im2col), ENTRY(col2im), ENTRY(nchw_to_cnhw),
	ENTRY(maxpool_forward), ENTRY(maxpool_backward), ENTRY(avgpool_forward), ENTRY(avgpool_backward),
	ENTRY(global_avgpool_forward), ENTRY(global_avgpool_backward),
	ENTRY(batchnorm_forward), ENTRY(batchnorm_backward),
	ENTRY(relu_forward), ENTRY(relu_backward), ENTRY(leaky_relu_forward), ENTRY(leaky_relu_backward),
	ENTRY(sigmoid_forward), ENTRY(sigmoid_backward), ENTRY(tanh_forward), ENTRY(tanh_backward),
	ENTRY(gelu_forward), ENTRY(gelu_backward), ENTRY(layernorm_forward), ENTRY(layernorm_backward),
	ENTRY(softmax_xent), ENTRY(xent_metrics), ENTRY(mse_loss), ENTRY(bce_loss), ENTRY(huber_loss),
	ENTRY(dropout_forward), ENTRY(dropout_backward), ENTRY(sgd_update), ENTRY(adam_update),
	ENTRY(rmsprop_update), ENTRY(adagrad_update),
	ENTRY(copy_rows),
	ENTRY(embedding_forward), ENTRY(embedding_backward), ENTRY(softmax_forward), ENTRY(softmax_backward),
	ENTRY(log_softmax_forward), ENTRY(log_softmax_backward), ENTRY(attention_forward), ENTRY(attention_backward),
	ENTRY(seq_avgpool_forward), ENTRY(seq_avgpool_backward),
	ENTRY(gru_gates_forward), ENTRY(gru_gates_backward),
	ENTRY(softmax_xent_smooth), ENTRY(sum_squares), ENTRY(scale),
	ENTRY(seq_unfold), ENTRY(seq_fold),
	/* no gemm_bf16, as on the CUDA backend: a bf16 model is refused on the device */
};

/* PGDL_FAKE_CUDA's settings; false with a reason in err when one is not understood. */
static bool
parse_config(const char *config, FakeConfig *cfg, char *err, size_t errlen)
{
	const char *p = config != NULL ? config : "1";

	cfg->devices = 1;
	cfg->mem = FAKE_DEFAULT_MEM;
	cfg->busy = false;
	while (*p != '\0')
	{
		size_t		len = strcspn(p, ",");
		char	   *end;

		if (len == 1 && p[0] == '1')
			;
		else if (len == 4 && strncmp(p, "busy", 4) == 0)
			cfg->busy = true;
		else if (strncmp(p, "mem=", 4) == 0 && len > 4 && isdigit((unsigned char) p[4]) &&
				 (cfg->mem = strtoull(p + 4, &end, 10), end == p + len))
			;
		else if (strncmp(p, "devices=", 8) == 0 && len > 8 && isdigit((unsigned char) p[8]) &&
				 (cfg->devices = (int) strtol(p + 8, &end, 10), end == p + len) &&
				 cfg->devices >= 1 && cfg->devices <= FAKE_MAX_DEVICES)
			;
		else
		{
			snprintf(err, errlen, "PGDL_FAKE_CUDA has an unknown setting \"%.*s\" "
					 "(expected 1, mem=BYTES, devices=1 to %d or busy)",
					 (int) (len < 64 ? len : 64), p, FAKE_MAX_DEVICES);
			return false;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return true;
}

const NnBackend *
nn_fake_cuda_on(const char *config, int ordinal, char *err, size_t errlen)
{
	FakeConfig	cfg;
	char		dummy[1];

	if (err == NULL || errlen == 0)
	{
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!parse_config(config, &cfg, err, errlen))
		return NULL;
	if (ordinal < 0 || ordinal >= cfg.devices)
	{
		snprintf(err, errlen, "no device: CUDA device %d does not exist (the fake has %d)",
				 ordinal, cfg.devices);
		return NULL;
	}
	if (context_pid != 0 && context_pid != getpid())
	{
		snprintf(err, errlen, "no device: the fake CUDA context was created in process %d, "
				 "which this process %d was forked from; a context does not survive fork",
				 (int) context_pid, (int) getpid());
		return NULL;
	}
	if (context_pid != 0 && ordinal != context_ordinal)
	{
		snprintf(err, errlen, "CUDA device %d is in use by this process, which cannot use device %d too",
				 context_ordinal, ordinal);
		return NULL;
	}
	if (context_pid == 0)
	{
		if (cfg.busy)
		{
			snprintf(err, errlen, "no device: cannot initialize CUDA device %d: CUDA-capable device(s) "
					 "is/are busy or unavailable (the fake device is in exclusive-process mode "
					 "and another process holds it)", ordinal);
			return NULL;
		}
		context_pid = getpid();
		context_ordinal = ordinal;
		fprintf(stderr, "pgdl: fake CUDA device %d initialized in process %d\n", ordinal, (int) context_pid);
	}
	cpu = nn_backend_cpu();
	limit = cfg.mem;
	return &fake_backend;
}

int
nn_fake_cuda_devices(const char *config, NnCudaDevice *out, int max, int *driver_version,
					 char *err, size_t errlen)
{
	FakeConfig	cfg;
	char		dummy[1];
	int			n = 0;

	if (err == NULL || errlen == 0)
	{
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (driver_version != NULL)
		*driver_version = 0;
	if (!parse_config(config, &cfg, err, errlen))
		return -1;
	if (driver_version != NULL)
		*driver_version = 13000;
	for (int i = 0; i < cfg.devices && i < max && out != NULL; i++, n++)
	{
		bool		mine = context_pid == getpid() && context_ordinal == i;

		memset(&out[i], 0, sizeof(NnCudaDevice));
		out[i].ordinal = i;
		snprintf(out[i].name, sizeof(out[i].name), "pgdl fake CUDA device (PGDL_FAKE_CUDA)");
		out[i].major = 9;
		out[i].minor = 0;
		out[i].total_bytes = cfg.mem;
		out[i].free_bytes = mine ? (used < cfg.mem ? cfg.mem - used : 0) : cfg.mem;
	}
	return n;
}

size_t
nn_fake_cuda_used(void)
{
	return used;
}

bool
nn_fake_cuda_forget(void)
{
	if (regions != NULL)
		return false;
	context_pid = 0;
	context_ordinal = -1;
	return true;
}
