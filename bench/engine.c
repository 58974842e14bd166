/*
 * engine.c -- pgdl's engine alone vs PyTorch: one epoch of Fashion-MNIST.
 *
 * Trains the reference MLP (784-512-256-10, ReLU) and CNN (conv3x3x16 pad 1,
 * relu, maxpool 2, conv3x3x32 pad 1, relu, maxpool 2, dense 10) of
 * docs/benchmarks.md, and a small ResNet (a conv-bn-relu stem, two basic blocks
 * with batchnorm in the graph form; see build_spec), with SGD (momentum 0.9), cross_entropy, batch 128, one
 * BLAS thread, timing the training loop only, then evaluates on the test set.
 * It also measures single-thread sgemm in the same process: the best of several
 * 1024^3 products, and the shapes of the MLP's own products.
 * bench/engine_torch.py does the same with PyTorch, in the same data order;
 * bench/engine.sh runs both and prints the ratios.
 *
 * Output, one line per model (machine-readable, key=value):
 *   pgdl mlp images_per_s=... train_s=... test_acc=... gflops=... peak_fraction=...
 *            core_peak_gflops=... core_peak_fraction=...
 * peak_fraction is over the 1024^3 sgemm rate; core_peak_fraction is the
 * training GFLOP/s in the process's CPU seconds (train_cpu_s: time the
 * scheduler gave to other work does not count, as in the limit) over the
 * core's fp32 FMA limit of the best ISA the CPU has, measured in the same
 * process (see core_peak), and a line before the models says which ISA that
 * is, which ISA each of the kernels the models run on uses, and the limit in
 * theory (FLOPs per cycle of that ISA times the clock measured here).
 *
 * --model gru is a sequence model on synthetic ids instead (no data set):
 * embedding (1000 ids, 32) -> gru (64 units, the last state) -> dense 4,
 * 4096 sequences of 32 steps, Adam (lr 1e-3), batch 64;
 * bench/engine_torch.py --model gru trains the same network:
 *   pgdl gru examples_per_s=... train_s=... params=... flops_train_per_ex=...
 * --model attention likewise: a post-norm transformer encoder block on the same
 * ids (embedding 1000 x 64 with positions, attention of 4 heads, add, layernorm,
 * per-step dense 128, gelu, per-step dense 64, add, layernorm, the mean over the
 * steps, dense 4), as nn.TransformerEncoderLayer (gelu, no dropout).
 *
 * Usage: engine_bench [--model mlp|cnn|resnet|all|gru|attention] [--epochs N] [--limit N]
 *                     [--batch N] [--lr X] [--seed N] [--no-peak] [--precision fp32|bf16]
 * --precision bf16 trains the dense layers' products in bf16 (AVX512_BF16; bench/bf16.sh), the
 * result line then saying precision=bf16.
 */
#include <cblas.h>
#include <errno.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend.h"
#include "nn/nn.h"
#include "fmnist.h"

/* OpenBLAS extras, when the BLAS is OpenBLAS (weak: absent elsewhere). */
extern char *openblas_get_corename(void) __attribute__((weak));
extern int	openblas_get_num_threads(void) __attribute__((weak));

typedef struct Options
{
	const char *model;
	int			epochs;
	int			limit;
	int			batch;
	float		lr;
	float		momentum;
	uint64_t	seed;
	bool		peak;
	bool		bf16;
} Options;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
usage(const char *prog)
{
	fprintf(stderr,
			"usage: %s [--model mlp|cnn|resnet|all|gru|attention] [--epochs N] [--limit N] [--batch N]\n"
			"          [--lr X] [--seed N] [--no-peak] [--precision fp32|bf16]\n", prog);
	exit(2);
}

static long
parse_long(const char *prog, const char *opt, const char *s, long lo, long hi)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
	{
		fprintf(stderr, "%s: %s: bad value \"%s\" (%ld..%ld)\n", prog, opt, s, lo, hi);
		exit(2);
	}
	return v;
}

static void
parse_args(int argc, char **argv, Options *o)
{
	o->model = "all";
	o->epochs = 1;
	o->limit = 0;
	o->batch = 128;
	o->lr = 0.01f;
	o->momentum = 0.9f;
	o->seed = 42;
	o->peak = true;
	o->bf16 = false;

	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--no-peak") == 0)
		{
			o->peak = false;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || v == NULL)
			usage(argv[0]);
		if (strcmp(a, "--model") == 0)
		{
			if (strcmp(v, "mlp") != 0 && strcmp(v, "cnn") != 0 && strcmp(v, "resnet") != 0 &&
				strcmp(v, "all") != 0 && strcmp(v, "gru") != 0 && strcmp(v, "attention") != 0)
				usage(argv[0]);
			o->model = v;
		}
		else if (strcmp(a, "--epochs") == 0)
			o->epochs = (int) parse_long(argv[0], a, v, 1, 1000);
		else if (strcmp(a, "--limit") == 0)
			o->limit = (int) parse_long(argv[0], a, v, 0, FMNIST_TRAIN_N);
		else if (strcmp(a, "--precision") == 0)
		{
			if (strcmp(v, "fp32") != 0 && strcmp(v, "bf16") != 0)
				usage(argv[0]);
			o->bf16 = strcmp(v, "bf16") == 0;
		}
		else if (strcmp(a, "--batch") == 0)
			o->batch = (int) parse_long(argv[0], a, v, 1, NN_MAX_BATCH);
		else if (strcmp(a, "--seed") == 0)
			o->seed = (uint64_t) parse_long(argv[0], a, v, 0, 0x7fffffffL);
		else if (strcmp(a, "--lr") == 0)
		{
			char	   *end;

			o->lr = strtof(v, &end);
			if (end == v || *end != '\0' || !(o->lr > 0))
				usage(argv[0]);
		}
		else
			usage(argv[0]);
		i++;
	}
}

/* splitmix64 Fisher-Yates; bench/engine_torch.py's splitmix64_perm() is the same. */
static void
shuffle_perm(int32_t *perm, int32_t n, uint64_t seed)
{
	uint64_t	state = seed;

	for (int32_t i = 0; i < n; i++)
		perm[i] = i;
	for (int32_t i = n - 1; i > 0; i--)
	{
		uint64_t	z;
		int32_t		j,
					t;

		state += 0x9E3779B97F4A7C15ULL;
		z = state;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		z ^= z >> 31;
		j = (int32_t) (z % (uint64_t) (i + 1));
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

static void
build_spec(const char *name, NnSpec *spec)
{
	int			l = 0;

	memset(spec, 0, sizeof(*spec));
	spec->loss = NN_LOSS_CROSS_ENTROPY;
	if (strcmp(name, "mlp") == 0)
	{
		spec->input_ndim = 1;
		spec->input[0] = FMNIST_PIXELS;
		nn_layer_defaults(&spec->layers[l], NN_DENSE);
		spec->layers[l++].units = 512;
		nn_layer_defaults(&spec->layers[l++], NN_RELU);
		nn_layer_defaults(&spec->layers[l], NN_DENSE);
		spec->layers[l++].units = 256;
		nn_layer_defaults(&spec->layers[l++], NN_RELU);
		nn_layer_defaults(&spec->layers[l], NN_DENSE);
		spec->layers[l++].units = FMNIST_CLASSES;
	}
	else if (strcmp(name, "resnet") == 0)
	{
		/*
		 * A small ResNet (bench/engine_torch.py's ResNet): a conv-bn-relu stem,
		 * two basic blocks (conv-bn-relu-conv-bn plus the block's input, relu),
		 * a 1x1 convolution widening between them, max pools, a dense head.
		 */
		static const int widths[2] = {8, 16};

		spec->input_ndim = 3;
		spec->input[0] = 1;
		spec->input[1] = FMNIST_ROWS;
		spec->input[2] = FMNIST_COLS;
		for (int b = 0; b < 2; b++)
		{
			int			skip;

			nn_layer_defaults(&spec->layers[l], NN_CONV2D);	/* stem, or 1x1 widening */
			spec->layers[l].filters = widths[b];
			spec->layers[l].kernel = b == 0 ? 3 : 1;
			spec->layers[l++].padding = b == 0 ? 1 : 0;
			nn_layer_defaults(&spec->layers[l++], NN_BATCHNORM);
			nn_layer_defaults(&spec->layers[l++], NN_RELU);
			skip = l - 1;
			for (int c = 0; c < 2; c++)
			{
				nn_layer_defaults(&spec->layers[l], NN_CONV2D);
				spec->layers[l].filters = widths[b];
				spec->layers[l].kernel = 3;
				spec->layers[l++].padding = 1;
				nn_layer_defaults(&spec->layers[l++], NN_BATCHNORM);
				if (c == 0)
					nn_layer_defaults(&spec->layers[l++], NN_RELU);
			}
			nn_layer_defaults(&spec->layers[l], NN_ADD);
			spec->layers[l].n_inputs = 2;
			spec->layers[l].inputs[0] = (int16_t) (l - 1);
			spec->layers[l++].inputs[1] = (int16_t) skip;
			nn_layer_defaults(&spec->layers[l++], NN_RELU);
			nn_layer_defaults(&spec->layers[l], NN_MAXPOOL2D);
			spec->layers[l++].kernel = 2;
		}
		nn_layer_defaults(&spec->layers[l], NN_DENSE);	/* flattens its input */
		spec->layers[l++].units = FMNIST_CLASSES;
	}
	else
	{
		spec->input_ndim = 3;
		spec->input[0] = 1;
		spec->input[1] = FMNIST_ROWS;
		spec->input[2] = FMNIST_COLS;
		nn_layer_defaults(&spec->layers[l], NN_CONV2D);
		spec->layers[l].filters = 16;
		spec->layers[l].kernel = 3;
		spec->layers[l++].padding = 1;
		nn_layer_defaults(&spec->layers[l++], NN_RELU);
		nn_layer_defaults(&spec->layers[l], NN_MAXPOOL2D);
		spec->layers[l++].kernel = 2;
		nn_layer_defaults(&spec->layers[l], NN_CONV2D);
		spec->layers[l].filters = 32;
		spec->layers[l].kernel = 3;
		spec->layers[l++].padding = 1;
		nn_layer_defaults(&spec->layers[l++], NN_RELU);
		nn_layer_defaults(&spec->layers[l], NN_MAXPOOL2D);
		spec->layers[l++].kernel = 2;
		nn_layer_defaults(&spec->layers[l], NN_DENSE);	/* flattens its input */
		spec->layers[l++].units = FMNIST_CLASSES;
	}
	spec->n_layers = l;
}

static float *
alloc_floats(size_t n)
{
	float	   *p = malloc(n * sizeof(float));

	if (p == NULL)
	{
		fprintf(stderr, "out of memory (%zu floats)\n", n);
		exit(1);
	}
	return p;
}

static void
fill_rand(float *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = nn_rng_uniform(seed, 0, i) - 0.5f;
}

/*
 * Best time of reps runs of C = op(A) op(B), row-major, C m x n, inner k.
 * Returns GFLOP/s.
 */
static double
time_sgemm(bool ta, bool tb, int m, int n, int k, int reps)
{
	float	   *a = alloc_floats((size_t) m * k);
	float	   *b = alloc_floats((size_t) k * n);
	float	   *c = alloc_floats((size_t) m * n);
	double		best = 1e30;

	fill_rand(a, (size_t) m * k, 1);
	fill_rand(b, (size_t) k * n, 2);
	for (int r = 0; r < reps; r++)
	{
		double		t = now_s();

		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
					m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
		t = now_s() - t;
		if (t < best)
			best = t;
	}
	free(a);
	free(b);
	free(c);
	return 2.0 * m * n * k / best / 1e9;
}

/*
 * The MLP's own products at batch B, with weights stored [out, in] (as in
 * PyTorch): forward Y = X W^T, input gradient dX = dY W, weight gradient
 * dW = dY^T X.  Prints each and returns the rate of the whole set, weighted
 * by FLOPs (a ceiling for the MLP's training throughput on this BLAS).
 */
static double
mlp_gemm_rates(int batch)
{
	static const int dims[3][2] = {{784, 512}, {512, 256}, {256, 10}};
	double		flops = 0,
				secs = 0;

	printf("pgdl gemm");
	for (int l = 0; l < 3; l++)
	{
		int			in = dims[l][0],
					out = dims[l][1];
		struct
		{
			const char *what;
			bool		ta,
						tb;
			int			m,
						n,
						k;
		}			g[3] = {
			{"fwd", false, true, batch, out, in},
			{"dx", false, false, batch, in, out},
			{"dw", true, false, out, in, batch},
		};

		for (int i = 0; i < 3; i++)
		{
			double		f,
						rate;

			if (l == 0 && i == 1)
				continue;		/* no gradient for the input */
			rate = time_sgemm(g[i].ta, g[i].tb, g[i].m, g[i].n, g[i].k, 20);
			f = 2.0 * g[i].m * g[i].n * g[i].k;
			flops += f;
			secs += f / (rate * 1e9);
			printf(" %s%d_%dx%dx%d=%.1f", g[i].what, l + 1, g[i].m, g[i].n, g[i].k, rate);
		}
	}
	printf(" mlp_set=%.1f\n", flops / secs / 1e9);
	return flops / secs / 1e9;
}

/* the process's CPU seconds: the core's limit is not the scheduler's, on a shared machine */
static double
cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/*
 * The core's fp32 FMA limit: twelve independent chains of fused
 * multiply-adds on full vectors, enough to keep both FMA pipes busy through
 * the FMA's latency (4 cycles x 2 pipes needs 8).  Each function is compiled
 * for its ISA alone and only called where CPUID has it.
 */
#define FMA_CHAINS_STEP(v) v = _mm512_fmadd_ps(v, mul, add)
__attribute__((target("avx512f")))
static double
fma_seconds_avx512(long iters)
{
	__m512		mul = _mm512_set1_ps(0.999999f),
				add = _mm512_set1_ps(1e-6f);
	__m512		a0 = _mm512_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
				a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
	volatile float sink;
	double		t = cpu_s();

	for (long i = 0; i < iters; i++)
	{
		FMA_CHAINS_STEP(a0); FMA_CHAINS_STEP(a1); FMA_CHAINS_STEP(a2); FMA_CHAINS_STEP(a3);
		FMA_CHAINS_STEP(a4); FMA_CHAINS_STEP(a5); FMA_CHAINS_STEP(a6); FMA_CHAINS_STEP(a7);
		FMA_CHAINS_STEP(a8); FMA_CHAINS_STEP(a9); FMA_CHAINS_STEP(a10); FMA_CHAINS_STEP(a11);
		/* keeps the twelve chains in registers and the loop from being folded */
		__asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
						 "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
	}
	t = cpu_s() - t;
	sink = a0[0] + a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0];
	(void) sink;
	return t;
}
#undef FMA_CHAINS_STEP

#define FMA_CHAINS_STEP(v) v = _mm256_fmadd_ps(v, mul, add)
__attribute__((target("avx2,fma")))
static double
fma_seconds_avx2(long iters)
{
	__m256		mul = _mm256_set1_ps(0.999999f),
				add = _mm256_set1_ps(1e-6f);
	__m256		a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
				a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
	volatile float sink;
	double		t = cpu_s();

	for (long i = 0; i < iters; i++)
	{
		FMA_CHAINS_STEP(a0); FMA_CHAINS_STEP(a1); FMA_CHAINS_STEP(a2); FMA_CHAINS_STEP(a3);
		FMA_CHAINS_STEP(a4); FMA_CHAINS_STEP(a5); FMA_CHAINS_STEP(a6); FMA_CHAINS_STEP(a7);
		FMA_CHAINS_STEP(a8); FMA_CHAINS_STEP(a9); FMA_CHAINS_STEP(a10); FMA_CHAINS_STEP(a11);
		__asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5),
						 "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
	}
	t = cpu_s() - t;
	sink = a0[0] + a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + a10[0] + a11[0];
	(void) sink;
	return t;
}
#undef FMA_CHAINS_STEP

/*
 * The clock: a chain of dependent 64-bit multiplies retires one every 3
 * cycles on the x86 cores of the last decade.  A chain of adds of constants
 * does not measure it: newer Intel cores fold such adds at rename, and it read
 * 11.7 GHz there.
 */
static double
clock_ghz(void)
{
	long		iters = 30000000,
				x = 3;
	double		t = cpu_s();

	for (long i = 0; i < iters; i++)
		__asm__ volatile("imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0" : "+r"(x));
	return 12.0 * iters / (cpu_s() - t) / 1e9;
}

typedef struct CorePeak
{
	const char *isa;			/* avx512, avx2 or none */
	double		gflops;			/* measured, the best of five */
	double		avx2_gflops;	/* the AVX2 loop's, for comparison (0 without AVX2) */
	double		ghz;
	double		theory;			/* FLOPs per cycle of isa x ghz */
} CorePeak;

static CorePeak
core_peak(void)
{
	CorePeak	cp = {"none", 0, 0, 0, 0};
	long		iters = 40000000;
	bool		avx512 = __builtin_cpu_supports("avx512f");
	bool		avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

	for (int r = 0; r < 5; r++)
	{
		double		ghz = clock_ghz();

		cp.ghz = ghz > cp.ghz ? ghz : cp.ghz;
		if (avx512)
		{
			double		g = 12.0 * 16 * 2 * iters / fma_seconds_avx512(iters) / 1e9;

			cp.gflops = g > cp.gflops ? g : cp.gflops;
		}
		if (avx2)
		{
			double		g = 12.0 * 8 * 2 * iters / fma_seconds_avx2(iters) / 1e9;

			cp.avx2_gflops = g > cp.avx2_gflops ? g : cp.avx2_gflops;
		}
	}
	/* two FMA pipes, each a vector of 16 (or 8) lanes, two FLOPs a lane */
	if (avx512)
		cp.isa = "avx512", cp.theory = 2 * 16 * 2 * cp.ghz;
	else if (avx2)
		cp.isa = "avx2", cp.theory = 2 * 8 * 2 * cp.ghz, cp.gflops = cp.avx2_gflops;
	return cp;
}

/* The ISA of OpenBLAS's kernels, from the core it chose (its name, from CPUID or OPENBLAS_CORETYPE). */
static const char *
blas_isa(const char *core)
{
	static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
	static const char *const avx2[] = {"Haswell", "Zen", "Zen2", "Zen3", "Zen4", "Excavator"};

	for (size_t i = 0; i < sizeof(avx512) / sizeof(avx512[0]); i++)
		if (strcasecmp(core, avx512[i]) == 0)
			return "avx512";
	for (size_t i = 0; i < sizeof(avx2) / sizeof(avx2[0]); i++)
		if (strcasecmp(core, avx2[i]) == 0)
			return "avx2";
	return "unknown";
}

static void
die_err(const char *what, const NnError *err)
{
	fprintf(stderr, "engine_bench: %s: layer %d, %s: %s\n", what, err->layer, err->field, err->msg);
	exit(1);
}

static void
run_model(const char *name, const Options *o, const FmnistSet *train, int32_t n_train,
		  const FmnistSet *test, double peak, double core)
{
	NnSpec		spec;
	NnCost		cost;
	NnError		err;
	NnOptim		opt;
	NnModel    *m;
	NnBatchStats st = {0},		/* the engine adds to these */
				ts = {0};
	int32_t    *perm;
	float	   *xs,
			   *ys;
	double		c0,
				train_cpu_s;
	double		t0,
				train_s,
				ips,
				gflops;
	int64_t		seen,
				test_n;

	memset(&err, 0, sizeof(err));
	build_spec(name, &spec);
	if (!nn_spec_cost(&spec, NULL, &cost, &err))
		die_err("nn_spec_cost", &err);
	m = nn_model_create(&spec, o->seed, &err);
	if (m == NULL)
		die_err("nn_model_create", &err);
	if (!nn_model_reserve(m, o->batch, &err))
		die_err("nn_model_reserve", &err);
	nn_optim_defaults(&opt, NN_OPT_SGD);
	opt.lr = o->lr;
	opt.momentum = o->momentum;
	opt.bf16 = o->bf16;
	if (!nn_model_set_optim(m, &opt, &err))
		die_err("nn_model_set_optim", &err);

	/* The training set in one fixed shuffled order, prepared before timing. */
	perm = malloc(sizeof(int32_t) * n_train);
	xs = alloc_floats((size_t) n_train * FMNIST_PIXELS);
	ys = alloc_floats((size_t) n_train);
	if (perm == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	shuffle_perm(perm, n_train, o->seed);
	for (int32_t i = 0; i < n_train; i++)
	{
		memcpy(xs + (size_t) i * FMNIST_PIXELS, train->images + (size_t) perm[i] * FMNIST_PIXELS,
			   sizeof(float) * FMNIST_PIXELS);
		ys[i] = train->labels[perm[i]];
	}

	t0 = now_s();
	c0 = cpu_s();
	for (int e = 0; e < o->epochs; e++)
	{
		for (int32_t i = 0; i < n_train; i += o->batch)
		{
			int32_t		n = n_train - i < o->batch ? n_train - i : o->batch;

			if (!nn_model_train_step(m, xs + (size_t) i * FMNIST_PIXELS, ys + i, n, &st, &err))
				die_err("nn_model_train_step", &err);
		}
	}
	train_s = now_s() - t0;
	train_cpu_s = cpu_s() - c0;
	seen = st.n;

	for (int32_t i = 0; i < test->n; i += o->batch)
	{
		int32_t		n = test->n - i < o->batch ? test->n - i : o->batch;

		if (!nn_model_evaluate(m, test->images + (size_t) i * FMNIST_PIXELS, test->labels + i, n,
							   &ts, &err))
			die_err("nn_model_evaluate", &err);
	}
	test_n = ts.n;

	if (seen != (int64_t) n_train * o->epochs || test_n != test->n)
	{
		fprintf(stderr, "engine_bench: stats count %lld/%lld examples (expected %lld/%d)\n",
				(long long) seen, (long long) test_n, (long long) n_train * o->epochs, test->n);
		exit(1);
	}

	ips = (double) seen / train_s;
	gflops = ips * (double) cost.flops_train / 1e9;
	printf("pgdl %s images_per_s=%.1f train_s=%.3f epochs=%d n_train=%d batch=%d lr=%g "
		   "train_loss=%.4f train_acc=%.4f test_acc=%.4f params=%lld flops_train_per_ex=%lld "
		   "gflops=%.2f peak_gflops=%.2f peak_fraction=%.3f train_cpu_s=%.3f core_peak_gflops=%.2f "
		   "core_peak_fraction=%.3f precision=%s\n",
		   name, ips, train_s, o->epochs, n_train, o->batch, (double) o->lr,
		   st.loss_sum / (double) seen, (double) st.correct / (double) seen,
		   (double) ts.correct / (double) test_n, (long long) cost.params,
		   (long long) cost.flops_train, gflops, peak, peak > 0 ? gflops / peak : 0.0,
		   train_cpu_s, core, core > 0 ? (double) seen * cost.flops_train / train_cpu_s / 1e9 / core : 0.0,
		   o->bf16 ? "bf16" : "fp32");
	fflush(stdout);

	free(perm);
	free(xs);
	free(ys);
	nn_model_free(m);
}

#define GRU_VOCAB	1000
#define GRU_STEPS	32
#define GRU_DIM		32
#define GRU_UNITS	64
#define GRU_CLASSES	4
#define GRU_N		4096
#define GRU_BATCH	64
#define ATT_DIM		64
#define ATT_HEADS	4
#define ATT_HIDDEN	128

/* an encoder block's layers after the embedding (layer 0), in the graph form */
static void
encoder_spec(NnSpec *spec)
{
	NnLayerSpec *l = spec->layers;

	spec->layers[0].positions = true;
	nn_layer_defaults(&l[1], NN_ATTENTION);
	l[1].heads = ATT_HEADS;
	nn_layer_defaults(&l[2], NN_ADD);
	l[2].n_inputs = 2;
	l[2].inputs[0] = 0;
	l[2].inputs[1] = 1;
	nn_layer_defaults(&l[3], NN_LAYERNORM);
	nn_layer_defaults(&l[4], NN_DENSE);
	l[4].units = ATT_HIDDEN;
	l[4].per_step = true;
	nn_layer_defaults(&l[5], NN_GELU);
	nn_layer_defaults(&l[6], NN_DENSE);
	l[6].units = ATT_DIM;
	l[6].per_step = true;
	nn_layer_defaults(&l[7], NN_ADD);
	l[7].n_inputs = 2;
	l[7].inputs[0] = 3;
	l[7].inputs[1] = 6;
	nn_layer_defaults(&l[8], NN_LAYERNORM);
	nn_layer_defaults(&l[9], NN_GLOBAL_AVGPOOL);
	nn_layer_defaults(&l[10], NN_DENSE);
	l[10].units = GRU_CLASSES;
	spec->n_layers = 11;
}

/* --model gru or attention: an epoch of Adam over GRU_N synthetic sequences */
static void
run_seq(const Options *o)
{
	NnSpec		spec;
	NnCost		cost;
	NnError		err;
	NnOptim		opt;
	NnModel    *m;
	NnBatchStats st = {0};
	float	   *xs = alloc_floats((size_t) GRU_N * GRU_STEPS),
			   *ys = alloc_floats(GRU_N);
	double		t0,
				train_s;
	bool		attention = strcmp(o->model, "attention") == 0;

	memset(&err, 0, sizeof(err));
	memset(&spec, 0, sizeof(spec));
	spec.loss = NN_LOSS_CROSS_ENTROPY;
	spec.input_ndim = 1;
	spec.input[0] = GRU_STEPS;
	nn_layer_defaults(&spec.layers[0], NN_EMBEDDING);
	spec.layers[0].vocab = GRU_VOCAB;
	spec.layers[0].units = attention ? ATT_DIM : GRU_DIM;
	if (attention)
		encoder_spec(&spec);
	else
	{
		nn_layer_defaults(&spec.layers[1], NN_GRU);
		spec.layers[1].units = GRU_UNITS;
		nn_layer_defaults(&spec.layers[2], NN_DENSE);
		spec.layers[2].units = GRU_CLASSES;
		spec.n_layers = 3;
	}
	if (!nn_spec_cost(&spec, NULL, &cost, &err))
		die_err("nn_spec_cost", &err);
	if ((m = nn_model_create(&spec, o->seed, &err)) == NULL)
		die_err("nn_model_create", &err);
	nn_optim_defaults(&opt, NN_OPT_ADAM);
	if (!nn_model_reserve(m, GRU_BATCH, &err) || !nn_model_set_optim(m, &opt, &err))
		die_err("nn_model_reserve", &err);
	for (size_t i = 0; i < (size_t) GRU_N * GRU_STEPS; i++)
		xs[i] = (float) (int) (nn_rng_uniform(o->seed, 1, i) * GRU_VOCAB);
	for (int i = 0; i < GRU_N; i++)
		ys[i] = (float) (int) (nn_rng_uniform(o->seed, 2, i) * GRU_CLASSES);

	t0 = now_s();
	for (int e = 0; e < o->epochs; e++)
		for (int32_t i = 0; i < GRU_N; i += GRU_BATCH)
			if (!nn_model_train_step(m, xs + (size_t) i * GRU_STEPS, ys + i, GRU_BATCH, &st, &err))
				die_err("nn_model_train_step", &err);
	train_s = now_s() - t0;
	printf("pgdl %s examples_per_s=%.1f train_s=%.3f epochs=%d n_train=%d batch=%d train_loss=%.4f "
		   "params=%lld flops_train_per_ex=%lld\n", o->model,
		   (double) st.n / train_s, train_s, o->epochs, GRU_N, GRU_BATCH, st.loss_sum / (double) st.n,
		   (long long) cost.params, (long long) cost.flops_train);
	fflush(stdout);
	free(xs);
	free(ys);
	nn_model_free(m);
}

int
main(int argc, char **argv)
{
	Options		o;
	FmnistSet	train,
				test;
	char		errbuf[512];
	int32_t		n_train;
	double		peak = 0;
	CorePeak	cp = {"none", 0, 0, 0, 0};
	const char *core_name;
	const char *ct = getenv("OPENBLAS_CORETYPE");
	const char *l2 = getenv("OPENBLAS_L2_SIZE");

	parse_args(argc, argv, &o);
	nn_set_blas_threads(1);
	if (strcmp(o.model, "gru") == 0 || strcmp(o.model, "attention") == 0)
	{
		run_seq(&o);
		return 0;
	}

	if (!fmnist_load(NULL, "train", &train, errbuf, sizeof(errbuf)) ||
		!fmnist_load(NULL, "test", &test, errbuf, sizeof(errbuf)))
	{
		fprintf(stderr, "engine_bench: %s\n", errbuf);
		return 1;
	}
	n_train = o.limit > 0 && o.limit < train.n ? o.limit : train.n;

	if (o.peak)
	{
		/* warm up, then the best of several runs */
		(void) time_sgemm(false, false, 1024, 1024, 1024, 2);
		peak = time_sgemm(false, false, 1024, 1024, 1024, 8);
		cp = core_peak();
	}
	core_name = openblas_get_corename ? openblas_get_corename() : "unknown";
	printf("pgdl info blas_core=%s blas_threads=%d OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s "
		   "sgemm_1024_gflops=%.2f\n",
		   core_name,
		   openblas_get_num_threads ? openblas_get_num_threads() : -1,
		   ct ? ct : "unset", l2 ? l2 : "unset", peak);
	/*
	 * pgdl's own vector paths (nn_cpu_isa): 2x2 max pooling (avx512 or the baseline), col2im and GELU (each
	 * ISA); the baseline and the other loops as compiled for x86-64, SSE2
	 */
	printf("pgdl info core_isa=%s clock_ghz=%.2f core_peak_gflops=%.2f avx2_fma_gflops=%.2f "
		   "theoretical_gflops=%.2f gemm_isa=%s(openblas:%s) maxpool_isa=%s col2im_isa=%s gelu_isa=%s loops_isa=sse2\n",
		   cp.isa, cp.ghz, cp.gflops, cp.avx2_gflops, cp.theory, blas_isa(core_name), core_name,
		   nn_cpu_isa() >= NN_ISA_AVX512 ? "avx512" : "sse2",
		   nn_cpu_isa() > NN_ISA_BASELINE ? nn_cpu_isa_name(nn_cpu_isa()) : "sse2",
		   nn_cpu_isa() > NN_ISA_BASELINE ? nn_cpu_isa_name(nn_cpu_isa()) : "sse2");
	if (o.peak && strcmp(o.model, "cnn") != 0)
		(void) mlp_gemm_rates(o.batch);
	fflush(stdout);

	if (strcmp(o.model, "mlp") == 0 || strcmp(o.model, "all") == 0)
		run_model("mlp", &o, &train, n_train, &test, peak, cp.gflops);
	if (strcmp(o.model, "cnn") == 0 || strcmp(o.model, "all") == 0)
		run_model("cnn", &o, &train, n_train, &test, peak, cp.gflops);
	if (strcmp(o.model, "resnet") == 0 || strcmp(o.model, "all") == 0)
		run_model("resnet", &o, &train, n_train, &test, peak, cp.gflops);

	fmnist_free(&train);
	fmnist_free(&test);
	return 0;
}
