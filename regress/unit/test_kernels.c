/*
 * test_kernels.c -- the CPU backend's convolution, pooling, activation and attention kernels against
 * plain reference loops written here, on every ISA the CPU has (nn_set_cpu_isa
 * caps the one the kernels use): each variant must agree with the reference
 * bit for bit, pooling's and col2im's, where the math is exact.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "unit.h"

/* five values, so that windows hold ties, negatives and zeros */
static void
fill(float *x, int64_t n, int seed)
{
	uint32_t	r = 2463534242u + (uint32_t) seed;

	for (int64_t i = 0; i < n; i++)
	{
		r ^= r << 13, r ^= r >> 17, r ^= r << 5;
		x[i] = (float) (r % 5) / 2.0f - 1.0f;
	}
}

/* 2x2/2 max pooling as torch defines it: first maximum wins; relu_before blocks non-positive maxima */
static void
ref_maxpool(const float *x, float *y, int32_t *arg, int64_t planes, int h, int w,
			int oh, int ow, bool relu_before)
{
	for (int64_t p = 0; p < planes; p++)
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++)
			{
				int			at = 2 * oy * w + 2 * ox;
				float		best = x[p * h * w + at];

				for (int ky = 0; ky < 2; ky++)
					for (int kx = 0; kx < 2; kx++)
					{
						int			i = (2 * oy + ky) * w + 2 * ox + kx;

						if (x[p * h * w + i] > best)
							best = x[p * h * w + i], at = i;
					}
				y[p * oh * ow + oy * ow + ox] = best;
				arg[p * oh * ow + oy * ow + ox] = relu_before && !(best > 0.0f) ? -1 : at;
			}
}

static void
check_maxpool(int planes, int h, int w, bool relu_before, NnCpuIsa isa)
{
	const NnBackend *be = nn_backend_cpu();
	int			oh = h / 2,
				ow = w / 2;
	int64_t		nin = (int64_t) planes * h * w,
				nout = (int64_t) planes * oh * ow;
	float	   *x = malloc(sizeof(float) * nin);
	float	   *dx = malloc(sizeof(float) * nin);
	float	   *y = malloc(sizeof(float) * nout);
	float	   *ry = malloc(sizeof(float) * nout);
	float	   *dy = malloc(sizeof(float) * nout);
	int32_t    *arg = malloc(sizeof(int32_t) * nout);
	int32_t    *rarg = malloc(sizeof(int32_t) * nout);
	NnPoolGeom	g = {.h = h, .w = w, .k = 2, .stride = 2, .oh = oh, .ow = ow};

	fill(x, nin, h + w);
	fill(dy, nout, 3);
	nn_set_cpu_isa(isa);
	be->maxpool_forward(x, y, arg, planes, &g, relu_before);
	ref_maxpool(x, ry, rarg, planes, h, w, oh, ow, relu_before);
	CHECK_MSG(memcmp(y, ry, sizeof(float) * nout) == 0, "maxpool values %dx%d isa %s", h, w, nn_cpu_isa_name(isa));
	CHECK_MSG(memcmp(arg, rarg, sizeof(int32_t) * nout) == 0, "maxpool argmax %dx%d isa %s", h, w, nn_cpu_isa_name(isa));
	/* backward into odd-sized planes too: the row and column past the windows get nothing */
	for (int64_t i = 0; i < nin; i++)
		dx[i] = 99.0f;
	be->maxpool_backward(dy, arg, dx, planes, &g);
	for (int64_t p = 0; p < planes; p++)
		for (int i = 0; i < h * w; i++)
		{
			float		want = 0.0f;

			for (int o = 0; o < oh * ow; o++)
				if (rarg[p * oh * ow + o] == i)
					want += dy[p * oh * ow + o];
			CHECK_MSG(dx[p * h * w + i] == want, "maxpool backward %dx%d isa %s: plane %lld element %d is %g, want %g",
					  h, w, nn_cpu_isa_name(isa), (long long) p, i, dx[p * h * w + i], want);
		}
	nn_set_cpu_isa(NN_ISA_AVX512);
	free(x);
	free(dx);
	free(y);
	free(ry);
	free(dy);
	free(arg);
	free(rarg);
}

UNIT_TEST(kernels_maxpool_2x2_matches_the_reference_on_every_isa)
{
	/* widths around the 16-output vector, odd sizes (a row and column left over) */
	static const int sizes[][2] = {{28, 28}, {14, 14}, {2, 2}, {4, 34}, {6, 32}, {8, 66}, {7, 9}, {3, 31}};

	for (int s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
		for (int relu = 0; relu < 2; relu++)
			for (int isa = NN_ISA_BASELINE; isa <= (int) nn_cpu_isa_detected(); isa++)
				check_maxpool(3, sizes[s][0], sizes[s][1], relu, (NnCpuIsa) isa);
}

/* im2col by its definition: column row (ci, ki, kj), column img * oh * ow + oy * ow + ox */
static float
ref_col(const float *x, int n, const NnConvGeom *g, int ci, int ki, int kj, int img, int oy, int ox)
{
	int			iy = oy * g->stride - g->pad + ki,
				ix = ox * g->stride - g->pad + kj;

	(void) n;
	if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
		return 0.0f;
	return x[(((int64_t) img * g->c + ci) * g->h + iy) * g->w + ix];
}

static void
check_im2col(int c, int h, int w, int k, int stride, int pad, int n)
{
	const NnBackend *be = nn_backend_cpu();
	NnConvGeom	g = {c, h, w, k, stride, pad, (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1};
	int64_t		plane_out = (int64_t) g.oh * g.ow,
				nin = (int64_t) n * c * h * w,
				ncol = (int64_t) c * k * k * n * plane_out;
	float	   *x = malloc(sizeof(float) * nin);
	float	   *col = malloc(sizeof(float) * ncol);
	float	   *dx = malloc(sizeof(float) * nin);
	float	   *want = malloc(sizeof(float) * nin);
	int			bad = 0;

	fill(x, nin, c + h);
	for (int64_t i = 0; i < ncol; i++)
		col[i] = -7.0f;			/* every element must be written */
	be->im2col(x, n, &g, col);
	for (int ci = 0; ci < c; ci++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++)
				for (int img = 0; img < n; img++)
					for (int oy = 0; oy < g.oh; oy++)
						for (int ox = 0; ox < g.ow; ox++)
						{
							int64_t		at = ((int64_t) (ci * k + ki) * k + kj) * n * plane_out +
								img * plane_out + oy * g.ow + ox;

							bad += col[at] != ref_col(x, n, &g, ci, ki, kj, img, oy, ox);
						}
	CHECK_MSG(bad == 0, "im2col c%d %dx%d k%d s%d p%d n%d: %d wrong", c, h, w, k, stride, pad, n, bad);

	/* col2im adds the columns into dx: start from values already there */
	fill(col, ncol, 5);
	fill(dx, nin, 9);
	memcpy(want, dx, sizeof(float) * nin);
	for (int ci = 0; ci < c; ci++)
		for (int ki = 0; ki < k; ki++)
			for (int kj = 0; kj < k; kj++)
				for (int img = 0; img < n; img++)
					for (int oy = 0; oy < g.oh; oy++)
						for (int ox = 0; ox < g.ow; ox++)
						{
							int			iy = oy * stride - pad + ki,
										ix = ox * stride - pad + kj;

							if (iy >= 0 && iy < h && ix >= 0 && ix < w)
								want[(((int64_t) img * c + ci) * h + iy) * w + ix] +=
									col[((int64_t) (ci * k + ki) * k + kj) * n * plane_out +
										img * plane_out + oy * g.ow + ox];
						}
	be->col2im(col, n, &g, dx);
	bad = 0;
	for (int64_t i = 0; i < nin; i++)
		bad += dx[i] != want[i];
	CHECK_MSG(bad == 0, "col2im c%d %dx%d k%d s%d p%d n%d: %d wrong", c, h, w, k, stride, pad, n, bad);
	free(x);
	free(col);
	free(dx);
	free(want);
}

UNIT_TEST(kernels_im2col_and_col2im_match_their_definition)
{
	/* "same" stride-1 geometries (the flat-shift path) and others (the row-by-row loops) */
	static const int geoms[][6] = {
		{1, 28, 28, 3, 1, 1}, {16, 14, 14, 3, 1, 1}, {2, 5, 9, 3, 1, 1}, {3, 7, 6, 5, 1, 2},
		{2, 4, 4, 1, 1, 0}, {1, 1, 1, 3, 1, 1}, {2, 3, 2, 7, 1, 3},
		{2, 9, 8, 3, 1, 0}, {2, 9, 8, 3, 2, 1}, {1, 6, 7, 3, 1, 2}, {2, 8, 8, 4, 1, 1},
	};

	for (int i = 0; i < (int) (sizeof(geoms) / sizeof(geoms[0])); i++)
		for (int n = 1; n <= 3; n += 2)
			check_im2col(geoms[i][0], geoms[i][1], geoms[i][2], geoms[i][3], geoms[i][4], geoms[i][5], n);
}

/* xorshift values in [-1, 1) with full mantissas, so that sums taken in another order round differently */
static void
fill_fine(float *x, int64_t n, uint32_t seed)
{
	uint32_t	r = 2463534242u ^ seed;

	for (int64_t i = 0; i < n; i++)
	{
		r ^= r << 13, r ^= r >> 17, r ^= r << 5;
		x[i] = (float) (r >> 8) / 8388608.0f - 1.0f;
	}
}

/*
 * col2im of "same" stride-1 convolutions runs one variant per ISA
 * (kernels/cpu/conv.c): every one the CPU has must give the reference's sums,
 * each element's terms added in the order of the window offsets, to the bit.
 */
UNIT_TEST(kernels_col2im_is_the_same_on_every_isa)
{
	const NnBackend *be = nn_backend_cpu();
	static const int geoms[][3] = {{16, 14, 14}, {3, 28, 28}, {2, 5, 37}, {4, 7, 7}};

	for (int i = 0; i < (int) (sizeof(geoms) / sizeof(geoms[0])); i++)
	{
		NnConvGeom	g = {geoms[i][0], geoms[i][1], geoms[i][2], 3, 1, 1, geoms[i][1], geoms[i][2]};
		int			n = 2,
					plane = g.h * g.w;
		int64_t		nin = (int64_t) n * g.c * plane,
					ncol = (int64_t) g.c * 9 * n * plane;
		float	   *col = malloc(sizeof(float) * ncol);
		float	   *start = malloc(sizeof(float) * nin);
		float	   *want = malloc(sizeof(float) * nin);
		float	   *dx = malloc(sizeof(float) * nin);

		fill_fine(col, ncol, 11 + i);
		fill_fine(start, nin, 23 + i);
		memcpy(want, start, sizeof(float) * nin);
		for (int ci = 0; ci < g.c; ci++)
			for (int ki = 0; ki < 3; ki++)
				for (int kj = 0; kj < 3; kj++)
					for (int img = 0; img < n; img++)
						for (int oy = 0; oy < g.h; oy++)
							for (int ox = 0; ox < g.w; ox++)
							{
								int			iy = oy - 1 + ki,
											ix = ox - 1 + kj;

								if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
									want[((int64_t) img * g.c + ci) * plane + iy * g.w + ix] +=
										col[((int64_t) (ci * 3 + ki) * 3 + kj) * n * plane + img * plane + oy * g.w + ox];
							}
		for (int isa = NN_ISA_BASELINE; isa <= (int) nn_cpu_isa_detected(); isa++)
		{
			nn_set_cpu_isa((NnCpuIsa) isa);
			CHECK(nn_cpu_isa() == (NnCpuIsa) isa);
			memcpy(dx, start, sizeof(float) * nin);
			be->col2im(col, n, &g, dx);
			CHECK_MSG(memcmp(dx, want, sizeof(float) * nin) == 0, "col2im c%d %dx%d isa %s differs from the reference",
					  g.c, g.h, g.w, nn_cpu_isa_name((NnCpuIsa) isa));
		}
		nn_set_cpu_isa(NN_ISA_AVX512);
		free(col);
		free(start);
		free(want);
		free(dx);
	}
}

/* The cap: never above the CPU's best, and each ISA's name for the settings and the run record. */
UNIT_TEST(kernels_isa_cap_stays_within_the_cpu)
{
	NnCpuIsa	best = nn_cpu_isa_detected();

	nn_set_cpu_isa(NN_ISA_AVX512);
	CHECK(nn_cpu_isa() == best);
	nn_set_cpu_isa(NN_ISA_BASELINE);
	CHECK(nn_cpu_isa() == NN_ISA_BASELINE);
	nn_set_cpu_isa((NnCpuIsa) 7);
	CHECK(nn_cpu_isa() == best);
	CHECK(strcmp(nn_cpu_isa_name(NN_ISA_BASELINE), "baseline") == 0);
	CHECK(strcmp(nn_cpu_isa_name(NN_ISA_AVX2), "avx2") == 0);
	CHECK(strcmp(nn_cpu_isa_name(NN_ISA_AVX512), "avx512") == 0);
	CHECK(strcmp(nn_cpu_isa_name((NnCpuIsa) 3), "unknown") == 0);
	CHECK(nn_blas_core()[0] != '\0');
}

/* GELU's per-ISA loops (backend_cpu.c) give the baseline's values, bit for bit, at every ISA the CPU has. */
UNIT_TEST(kernels_gelu_is_the_same_on_every_isa)
{
	const NnBackend *be = nn_backend_cpu();
	int			n = 20011;			/* not a multiple of any vector width */
	float	   *x = malloc(sizeof(float) * n);
	float	   *dy = malloc(sizeof(float) * n);
	float	   *y[2],
			   *dx[2];

	for (int k = 0; k < 2; k++)
		y[k] = malloc(sizeof(float) * n), dx[k] = malloc(sizeof(float) * n);
	fill_fine(x, n, 41);
	fill_fine(dy, n, 43);
	for (int i = 0; i < n; i++)
		x[i] *= 12.0f;
	x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -87.5f, x[4] = 0.0f, x[5] = -0.0f, x[6] = 1e-30f;
	nn_set_cpu_isa(NN_ISA_BASELINE);
	be->gelu_forward(x, y[0], n);
	be->gelu_backward(x, dy, dx[0], n);
	for (int isa = NN_ISA_AVX2; isa <= (int) nn_cpu_isa_detected(); isa++)
	{
		nn_set_cpu_isa((NnCpuIsa) isa);
		be->gelu_forward(x, y[1], n);
		be->gelu_backward(x, dy, dx[1], n);
		CHECK_MSG(memcmp(y[0], y[1], sizeof(float) * n) == 0, "gelu forward on %s differs from baseline",
				  nn_cpu_isa_name((NnCpuIsa) isa));
		CHECK_MSG(memcmp(dx[0], dx[1], sizeof(float) * n) == 0, "gelu backward on %s differs from baseline",
				  nn_cpu_isa_name((NnCpuIsa) isa));
	}
	nn_set_cpu_isa(NN_ISA_AVX512);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]);
	free(x);
	free(dy);
}

/*
 * Batch normalization's statistics in AVX-512 lanes (norm.c) give the SSE2
 * lanes' bytes: forward in training (outputs, saved statistics, running
 * statistics) and backward (dgamma, dbeta, dx), on planes with and without a
 * tail past a multiple of 8, and with values far from zero.
 */
UNIT_TEST(kernels_batchnorm_is_the_same_on_every_isa)
{
	const NnBackend *be = nn_backend_cpu();
	static const int shapes[][3] = {{4, 3, 49}, {3, 2, 784}, {5, 4, 5}, {2, 3, 64}};

	for (int s = 0; s < (int) (sizeof(shapes) / sizeof(shapes[0])); s++)
	{
		int			n = shapes[s][0],
					ch = shapes[s][1],
					plane = shapes[s][2],
					size = n * ch * plane;
		float	   *x = malloc(sizeof(float) * size),
				   *dy = malloc(sizeof(float) * size),
				   *gamma = malloc(sizeof(float) * ch),
				   *beta = malloc(sizeof(float) * ch);
		float	   *out[2][6];		/* y, saved, running mean, running var, dx, dgamma+dbeta */

		fill_fine(x, size, 51 + s);
		fill_fine(dy, size, 53 + s);
		fill_fine(gamma, ch, 57);
		fill_fine(beta, ch, 59);
		for (int i = 0; i < size; i++)
			x[i] = x[i] * 3.0f + 100.0f * (i % 3);
		for (int k = 0; k < 2; k++)
		{
			out[k][0] = malloc(sizeof(float) * size);
			out[k][1] = malloc(sizeof(float) * 2 * ch);
			out[k][2] = calloc(ch, sizeof(float));
			out[k][3] = malloc(sizeof(float) * ch);
			out[k][4] = malloc(sizeof(float) * size);
			out[k][5] = malloc(sizeof(float) * 2 * ch);
			for (int c = 0; c < ch; c++)
				out[k][3][c] = 1.0f;
			nn_set_cpu_isa(k == 0 ? NN_ISA_BASELINE : nn_cpu_isa_detected());
			be->batchnorm_forward(x, out[k][0], n, ch, plane, gamma, beta, out[k][2], out[k][3], 1e-5f, 0.1f,
								  true, out[k][1]);
			be->batchnorm_backward(x, dy, out[k][4], n, ch, plane, gamma, out[k][5], out[k][5] + ch, out[k][1]);
		}
		CHECK_MSG(memcmp(out[0][0], out[1][0], sizeof(float) * size) == 0, "batchnorm y differs, shape %d", s);
		CHECK_MSG(memcmp(out[0][1], out[1][1], sizeof(float) * 2 * ch) == 0, "saved statistics differ, shape %d", s);
		CHECK_MSG(memcmp(out[0][2], out[1][2], sizeof(float) * ch) == 0 &&
				  memcmp(out[0][3], out[1][3], sizeof(float) * ch) == 0, "running statistics differ, shape %d", s);
		CHECK_MSG(memcmp(out[0][4], out[1][4], sizeof(float) * size) == 0, "batchnorm dx differs, shape %d", s);
		CHECK_MSG(memcmp(out[0][5], out[1][5], sizeof(float) * 2 * ch) == 0, "dgamma or dbeta differ, shape %d", s);
		for (int k = 0; k < 2; k++)
			for (int a = 0; a < 6; a++)
				free(out[k][a]);
		free(x), free(dy), free(gamma), free(beta);
	}
	nn_set_cpu_isa(NN_ISA_AVX512);
}

/*
 * GELU's vectorized erf and exp (kernels/cpu/cpu.h) against double precision
 * over [-12, 12] in steps fine enough to cross every branch of glibc's, and
 * at the edges: within a few 1e-7 of the exact values (PyTorch's own CPU erf
 * is the same formula), NaN in NaN out, infinity as the formula gives.
 */
UNIT_TEST(kernels_gelu_matches_double_precision)
{
	const NnBackend *be = nn_backend_cpu();
	int			n = unit_fast ? 24001 : 240001;
	float	   *x = malloc(sizeof(float) * (n + 4));
	float	   *y = malloc(sizeof(float) * (n + 4));
	float	   *dy = malloc(sizeof(float) * (n + 4));
	float	   *dx = malloc(sizeof(float) * (n + 4));
	double		worst_y = 0.0,
				worst_dx = 0.0;

	for (int i = 0; i < n; i++)
	{
		x[i] = -12.0f + 24.0f * (float) i / (float) (n - 1);
		dy[i] = 1.0f;
	}
	x[n] = NAN, x[n + 1] = INFINITY, x[n + 2] = -87.5f, x[n + 3] = 0.0f;
	for (int i = n; i < n + 4; i++)
		dy[i] = 1.0f;
	be->gelu_forward(x, y, n + 4);
	be->gelu_backward(x, dy, dx, n + 4);
	for (int i = 0; i < n; i++)
	{
		double		v = x[i],
					cdf = 0.5 * (1.0 + erf(v / sqrt(2.0))),
					pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI),
					ey = fabs(y[i] - v * cdf) / (1e-6 + fabs(v)),
					edx = fabs(dx[i] - (cdf + v * pdf));

		worst_y = ey > worst_y ? ey : worst_y;
		worst_dx = edx > worst_dx ? edx : worst_dx;
	}
	CHECK_MSG(worst_y < 6e-7, "gelu: worst error %g of |x|", worst_y);
	CHECK_MSG(worst_dx < 1e-6, "gelu backward: worst error %g", worst_dx);
	CHECK_MSG(isnan(y[n]) && isnan(dx[n]), "gelu of NaN: %g, %g", y[n], dx[n]);
	/* x phi(x) is infinity times 0 there, as in the formula (and glibc's expf) */
	CHECK_MSG(y[n + 1] == INFINITY && isnan(dx[n + 1]), "gelu of infinity: %g, %g", y[n + 1], dx[n + 1]);
	CHECK_MSG(y[n + 2] == -0.0f && dx[n + 2] == 0.0f, "gelu of -87.5: %g, %g", y[n + 2], dx[n + 2]);
	CHECK_MSG(y[n + 3] == 0.0f && dx[n + 3] == 0.5f, "gelu of 0: %g, %g", y[n + 3], dx[n + 3]);
	free(x);
	free(y);
	free(dy);
	free(dx);
}

/*
 * The CPU's tanh (the tanh layer, a GRU's candidate) and a GRU's gate sigmoid
 * (read back from the saved gates of a one-unit GRU step with gh = 0),
 * vectorized in kernels/cpu/cpu.h, against double precision: within 3 ulp
 * of the value over [-20, 20], exact at 0, the limits at infinity, NaN at NaN.
 */
UNIT_TEST(kernels_tanh_and_gru_sigmoid_match_double_precision)
{
	const NnBackend *be = nn_backend_cpu();
	int			n = unit_fast ? 40001 : 400001;
	int			m = n + 4;
	float	   *x = malloc(sizeof(float) * m);
	float	   *y = malloc(sizeof(float) * m);
	float	   *gi = calloc((size_t) m * 3, sizeof(float));
	float	   *gh = calloc((size_t) m * 3, sizeof(float));
	float	   *h = malloc(sizeof(float) * m);
	float	   *sv = malloc(sizeof(float) * m * 4);
	double		worst_t = 0.0,
				worst_s = 0.0;

	for (int i = 0; i < n; i++)
		x[i] = -20.0f + 40.0f * (float) i / (float) (n - 1);
	x[n] = NAN, x[n + 1] = INFINITY, x[n + 2] = -INFINITY, x[n + 3] = 0.0f;
	for (int i = 0; i < m; i++)
		gi[i * 3] = x[i];
	be->tanh_forward(x, y, m);
	be->gru_gates_forward(gi, 3, gh, NULL, 0, h, 1, sv, 4, NULL, 0, m, 1);
	for (int i = 0; i < n; i++)
	{
		double		t = tanh((double) x[i]),
					s = 1.0 / (1.0 + exp(-(double) x[i])),
					et = fabs(y[i] - t) / fmax(fabs(t), 1e-30),
					es = fabs(sv[i * 4] - s) / s;

		worst_t = et > worst_t ? et : worst_t;
		worst_s = es > worst_s ? es : worst_s;
	}
	CHECK_MSG(worst_t < 3 * 0x1p-23, "tanh: worst relative error %g", worst_t);
	CHECK_MSG(worst_s < 3 * 0x1p-23, "gru sigmoid: worst relative error %g", worst_s);
	CHECK_MSG(isnan(y[n]) && isnan(sv[n * 4]), "tanh and sigmoid of NaN: %g, %g", y[n], sv[n * 4]);
	CHECK_MSG(y[n + 1] == 1.0f && sv[(n + 1) * 4] == 1.0f, "at infinity: %g, %g", y[n + 1], sv[(n + 1) * 4]);
	CHECK_MSG(y[n + 2] == -1.0f && sv[(n + 2) * 4] == 0.0f, "at -infinity: %g, %g", y[n + 2], sv[(n + 2) * 4]);
	CHECK_MSG(y[n + 3] == 0.0f && sv[(n + 3) * 4] == 0.5f, "at 0: %g, %g", y[n + 3], sv[(n + 3) * 4]);
	free(x);
	free(y);
	free(gi);
	free(gh);
	free(h);
	free(sv);
}

/* Attention's heads in double (backend.h's formulas): P and O, then dQ, dK, dV from dO. */
static void
ref_attention(const float *qkv, const float *d_o, const NnAttnGeom *g, double *p, double *o, double *dqkv)
{
	int			t = g->t,
				d = g->d,
				dh = d / g->heads,
				ld = 3 * d;
	double	   *ds = malloc(sizeof(double) * t * t);

	for (int e = 0; e < g->n; e++)
		for (int h = 0; h < g->heads; h++)
		{
			const float *q = qkv + (int64_t) e * t * ld + h * dh,
					   *k = q + d,
					   *v = q + 2 * d,
					   *go = d_o + (int64_t) e * t * d + h * dh;
			double	   *ph = p + ((int64_t) e * g->heads + h) * t * t,
					   *dq = dqkv + (int64_t) e * t * ld + h * dh;

			for (int i = 0; i < t; i++)
			{
				double		mx = -INFINITY,
							sum = 0.0,
							dot = 0.0;

				for (int j = 0; j < t; j++)
				{
					double		s = 0.0;

					for (int c = 0; c < dh; c++)
						s += (double) q[i * ld + c] * k[j * ld + c];
					ph[i * t + j] = g->causal && j > i ? -INFINITY : s * g->scale;
					mx = fmax(mx, ph[i * t + j]);
				}
				for (int j = 0; j < t; j++)
					sum += ph[i * t + j] = exp(ph[i * t + j] - mx);
				for (int j = 0; j < t; j++)
				{
					double		dp = 0.0;

					ph[i * t + j] /= sum;
					for (int c = 0; c < dh; c++)
						dp += (double) go[i * d + c] * v[j * ld + c];
					ds[i * t + j] = dp;
					dot += dp * ph[i * t + j];
				}
				for (int j = 0; j < t; j++)
					ds[i * t + j] = ph[i * t + j] * (ds[i * t + j] - dot);
			}
			for (int i = 0; i < t; i++)
				for (int c = 0; c < dh; c++)
				{
					double		ov = 0.0,
								gq = 0.0,
								gk = 0.0,
								gv = 0.0;

					for (int j = 0; j < t; j++)
					{
						ov += ph[i * t + j] * v[j * ld + c];
						gq += ds[i * t + j] * k[j * ld + c];
						gk += ds[j * t + i] * q[j * ld + c];
						gv += ph[j * t + i] * go[j * d + c];
					}
					o[((int64_t) e * t + i) * d + h * dh + c] = ov;
					dq[i * ld + c] = gq * g->scale;
					dq[i * ld + d + c] = gk * g->scale;
					dq[i * ld + 2 * d + c] = gv;
				}
		}
	free(ds);
}

/* The largest |got - want| over n values, relative to the largest |want| (at least 1) */
static double
worst_error(const float *got, const double *want, int64_t n)
{
	double		worst = 0.0,
				big = 1.0;

	for (int64_t i = 0; i < n; i++)
		big = fmax(big, fabs(want[i]));
	for (int64_t i = 0; i < n; i++)
		worst = fmax(worst, fabs(got[i] - want[i]));
	return isnan(worst) ? INFINITY : worst / big;
}

/* One geometry: each ISA's kernels against the double reference, and against the baseline's bits */
static void
check_attention(int t, int dh, int heads, bool causal)
{
	const NnBackend *be = nn_backend_cpu();
	NnAttnGeom	g = {2, t, dh * heads, heads, 1.0f / sqrtf((float) dh), causal};
	int64_t		nq = (int64_t) g.n * t * 3 * g.d,
				np = (int64_t) g.n * heads * t * t,
				no = (int64_t) g.n * t * g.d;
	float	   *qkv = malloc(sizeof(float) * nq),
			   *d_o = malloc(sizeof(float) * no),
			   *work = malloc(sizeof(float) * 2 * t * t),	/* exactly what backend.h promises */
			   *got[2][3];
	double	   *p = malloc(sizeof(double) * np),
			   *o = malloc(sizeof(double) * no),
			   *dqkv = malloc(sizeof(double) * nq);

	for (int k = 0; k < 2; k++)
		got[k][0] = malloc(sizeof(float) * np), got[k][1] = malloc(sizeof(float) * no),
			got[k][2] = malloc(sizeof(float) * nq);
	fill_fine(qkv, nq, 61 + t);
	fill_fine(d_o, no, 67 + dh);
	for (int64_t i = 0; i < nq; i++)
		qkv[i] *= 3.0f;			/* scores of a few units: a softmax far from uniform */
	ref_attention(qkv, d_o, &g, p, o, dqkv);
	for (int isa = NN_ISA_BASELINE; isa <= (int) nn_cpu_isa_detected(); isa++)
	{
		float	  **r = got[isa > NN_ISA_BASELINE];

		nn_set_cpu_isa((NnCpuIsa) isa);
		be->attention_forward(qkv, r[0], r[1], &g, work);
		be->attention_backward(qkv, r[0], d_o, r[2], &g, work);
		CHECK_MSG(worst_error(r[0], p, np) < 1e-6 && worst_error(r[1], o, no) < 1e-6 &&
				  worst_error(r[2], dqkv, nq) < 1e-5,
				  "attention t %d dh %d heads %d causal %d on %s: P %g, O %g, dQKV %g from double", t, dh, heads,
				  causal, nn_cpu_isa_name((NnCpuIsa) isa), worst_error(r[0], p, np), worst_error(r[1], o, no),
				  worst_error(r[2], dqkv, nq));
		for (int a = 0; a < 3 && isa > NN_ISA_BASELINE; a++)
			CHECK_MSG(memcmp(got[0][a], got[1][a], sizeof(float) * (a == 0 ? np : a == 1 ? no : nq)) == 0,
					  "attention t %d dh %d causal %d: output %d on %s differs from baseline", t, dh, causal, a,
					  nn_cpu_isa_name((NnCpuIsa) isa));
	}
	nn_set_cpu_isa(NN_ISA_AVX512);
	for (int k = 0; k < 2; k++)
		for (int a = 0; a < 3; a++)
			free(got[k][a]);
	free(qkv), free(d_o), free(work), free(p), free(o), free(dqkv);
}

/*
 * Attention's heads (kernels/cpu/attn.c) on odd sizes, with and without the
 * causal mask: with dh = 5, t = 1 reads K and V where they are (no room to
 * pack them) and t = 3 reads V so; t = 17 packs both; the benchmark's 32 x 16 too;
 * dh 12 and 24 end on part of a vector of every width (16, 8 and 4 columns).
 */
UNIT_TEST(kernels_attention_matches_double_on_every_isa)
{
	const int	ts[] = {1, 3, 17},
				dhs[] = {1, 5};

	for (int c = 0; c < 2; c++)
	{
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 2; j++)
				check_attention(ts[i], dhs[j], 1 + j, c == 1);
		check_attention(32, 16, 4, c == 1);
		check_attention(13, 12, 2, c == 1);
		check_attention(40, 24, 2, c == 1);
	}
}
