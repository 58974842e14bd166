/*
 * tpe.c -- draws from a search space and the Tree-structured Parzen
 * Estimator that proposes pgdl.tpe_search's configurations (hopper/tpe.h).
 *
 * The observations are split at the TPE_GAMMA quantile of their scores into
 * the good (at most TPE_MAX_GOOD) and the rest.  Each searched parameter gets
 * two densities, l(x) from the good and g(x) from the rest, each independent
 * of the other parameters' (Bergstra et al. 2011, and Hyperopt's and Optuna's
 * default):
 * - a number: a mixture of Gaussians truncated to its range, in the space its
 *   distribution is uniform in (log_uniform: the logarithm; int: the integers'
 *   range widened by half a step, an integer's mass its step), one at each
 *   observation plus a prior one at the range's middle as wide as the range;
 *   each observation's width is the larger gap to its neighbours, clipped to
 *   [range / min(100, 1 + points), range], as Hyperopt's adaptive Parzen
 *   estimator has it;
 * - a choice: each value's frequency among the observations, smoothed by a
 *   prior weight of 1 spread over the values.
 * A proposal draws TPE_CANDIDATES points from l and keeps the one of highest
 * l(x)/g(x), which is where expected improvement is highest.
 *
 * Every draw is nn_rng_u64 at a counter of (trial, candidate) on the
 * parameter's stream; sorts break ties by position.  So a proposal depends on
 * (seed, trial, the observations in their order) and on nothing else, and the
 * same build on the same machine proposes the same bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "hopper/tpe.h"

typedef struct Mixture
{
	int32_t		n;				/* components (a number), values (a choice) */
	double	   *mu;				/* a number: each component's centre, width and mass in range */
	double	   *sigma;
	double	   *mass;
	double	   *p;				/* a choice: each value's probability */
} Mixture;

struct TpeModel
{
	const TpeParam *params;
	int32_t		n_params;
	Mixture    *mix[2];			/* l(x), then g(x): n_params each */
	double	   *scratch;		/* a candidate being scored: n_params */
};

/* An observation in score order: NaN last, ties by position. */
typedef struct Ranked
{
	double		y;
	int32_t		i;
} Ranked;

#define ALIGNED(bytes) (((bytes) + 7) & ~(size_t) 7)

/* In [0, 1), with 53 bits. */
static double
unit_double(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return (double) (nn_rng_u64(seed, stream, counter) >> 11) * (1.0 / 9007199254740992.0);
}

double
tpe_prior_draw(const TpeParam *p, uint64_t seed, uint64_t counter)
{
	double		u;
	double		x = 0;

	switch (p->kind)
	{
		case TPE_FIXED:
			return 0;
		case TPE_CHOICE:
			return (double) (nn_rng_u64(seed, p->stream, counter) % (uint64_t) p->n_choices);
		case TPE_INT:
			{
				uint64_t	range = (uint64_t) ((int64_t) p->hi - (int64_t) p->lo) + 1;

				return (double) ((int64_t) p->lo + (int64_t) (nn_rng_u64(seed, p->stream, counter) % range));
			}
		case TPE_UNIFORM:
			u = unit_double(seed, p->stream, counter);
			x = p->lo + u * (p->hi - p->lo);
			break;
		case TPE_LOG_UNIFORM:
			u = unit_double(seed, p->stream, counter);
			x = exp(log(p->lo) + u * (log(p->hi) - log(p->lo)));
			break;
	}
	/* rounding may step just past a bound */
	x = x < p->lo ? p->lo : x;
	return x > p->hi ? p->hi : x;
}

static bool
is_taken(const double *point, int32_t n_params, const double *taken, int32_t n_taken)
{
	for (int32_t t = 0; t < n_taken; t++)
	{
		int32_t		k = 0;

		while (k < n_params && taken[(size_t) t * n_params + k] == point[k])
			k++;
		if (k == n_params)
			return true;
	}
	return false;
}

/* The counter of a draw of trial `trial`: candidate c, its part `part` (0 or 1). */
static uint64_t
draw_counter(uint64_t trial, int c, int part)
{
	return ((trial + 1) << 24) | ((uint64_t) c << 2) | (uint64_t) part;
}

bool
tpe_draw_new(const TpeParam *params, int32_t n_params, uint64_t seed, uint64_t trial,
			 const double *taken, int32_t n_taken, double *out)
{
	for (int r = 0; r <= TPE_RETRIES; r++)
	{
		uint64_t	counter = r == 0 ? trial : draw_counter(trial, TPE_CANDIDATES + r, 0);

		for (int32_t k = 0; k < n_params; k++)
			out[k] = tpe_prior_draw(&params[k], seed, counter);
		if (!is_taken(out, n_params, taken, n_taken))
			return true;
	}
	return false;
}

/* ---- the standard normal ---- */

static double
normal_cdf(double z)
{
	return 0.5 * erfc(-z * M_SQRT1_2);
}

/* Its mass between zl and zh, from the nearer tail so that a far interval keeps its digits. */
static double
normal_mass(double zl, double zh)
{
	if (zl > 0)
		return 0.5 * (erfc(zl * M_SQRT1_2) - erfc(zh * M_SQRT1_2));
	return 0.5 * (erfc(-zh * M_SQRT1_2) - erfc(-zl * M_SQRT1_2));
}

static double
normal_pdf(double z)
{
	return exp(-0.5 * z * z) * (1.0 / sqrt(2.0 * M_PI));
}

/* Acklam's rational approximation of the inverse, and one Halley step: about 1e-15 relative. */
static double
normal_quantile(double p)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
	1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
	6.680131188771972e+01, -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
	-2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
	3.754408661907416e+00};
	double		q,
				r,
				x,
				e,
				u;

	if (p <= 0)
		return -INFINITY;
	if (p >= 1)
		return INFINITY;
	if (p < 0.02425 || p > 1 - 0.02425)
	{
		q = sqrt(-2 * log(p < 0.5 ? p : 1 - p));
		x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
			((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
		x = p < 0.5 ? x : -x;
	}
	else
	{
		q = p - 0.5;
		r = q * q;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
			(((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
	}
	e = normal_cdf(x) - p;
	u = e * sqrt(2 * M_PI) * exp(x * x / 2);
	return x - u / (1 + x * u / 2);
}

/* ---- a parameter's space ---- */

static bool
is_number(const TpeParam *p)
{
	return p->kind == TPE_UNIFORM || p->kind == TPE_LOG_UNIFORM || p->kind == TPE_INT;
}

/* Whether l(x)/g(x) can tell its values apart: more than one of them. */
static bool
is_searched(const TpeParam *p)
{
	return p->kind == TPE_CHOICE ? p->n_choices > 1 : is_number(p) && p->lo < p->hi;
}

/* A number's range in the space its densities live in. */
static void
density_range(const TpeParam *p, double *a, double *b)
{
	if (p->kind == TPE_LOG_UNIFORM)
	{
		*a = log(p->lo);
		*b = log(p->hi);
	}
	else if (p->kind == TPE_INT)
	{
		*a = p->lo - 0.5;
		*b = p->hi + 0.5;
	}
	else
	{
		*a = p->lo;
		*b = p->hi;
	}
}

static double
to_density_space(const TpeParam *p, double v)
{
	return p->kind == TPE_LOG_UNIFORM ? log(v) : v;
}

static double
from_density_space(const TpeParam *p, double t)
{
	double		v = p->kind == TPE_LOG_UNIFORM ? exp(t) : p->kind == TPE_INT ? round(t) : t;

	v = v < p->lo ? p->lo : v;
	return v > p->hi ? p->hi : v;
}

/* ---- the model's memory: one block, laid out in this order ---- */

static void *
take(char **next, size_t bytes)
{
	void	   *p = *next;

	*next += ALIGNED(bytes);
	return p;
}

size_t
tpe_model_bytes(const TpeParam *params, int32_t n_params, int32_t n_obs)
{
	size_t		bytes = ALIGNED(sizeof(TpeModel)) + 2 * ALIGNED(sizeof(Mixture) * n_params) +
		ALIGNED(sizeof(double) * n_params) + ALIGNED(sizeof(Ranked) * n_obs) + ALIGNED(sizeof(double) * n_obs);

	for (int32_t k = 0; k < n_params; k++)
	{
		if (!is_searched(&params[k]))
			continue;
		if (params[k].kind == TPE_CHOICE)
			bytes += 2 * ALIGNED(sizeof(double) * params[k].n_choices);
		else
			bytes += 3 * sizeof(double) * ((size_t) n_obs + 2);	/* centres, widths, masses of both */
	}
	return bytes;
}

static int
compare_ranked(const void *a, const void *b)
{
	const Ranked *x = a;
	const Ranked *y = b;

	if (isnan(x->y) != isnan(y->y))
		return isnan(x->y) ? 1 : -1;
	if (!isnan(x->y) && x->y != y->y)
		return x->y < y->y ? -1 : 1;
	return x->i < y->i ? -1 : (x->i > y->i ? 1 : 0);
}

static int
compare_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/* A choice's smoothed frequencies among the n observations `members`. */
static void
build_choice(Mixture *mx, const TpeParam *p, int32_t k, int32_t n_params, const double *x,
			 const Ranked *members, int32_t n, char **next)
{
	mx->n = p->n_choices;
	mx->p = take(next, sizeof(double) * p->n_choices);
	for (int32_t c = 0; c < p->n_choices; c++)
		mx->p[c] = 1.0 / p->n_choices;
	for (int32_t j = 0; j < n; j++)
		mx->p[(int32_t) x[(size_t) members[j].i * n_params + k]] += 1.0;
	for (int32_t c = 0; c < p->n_choices; c++)
		mx->p[c] /= 1.0 + n;
}

/* A number's mixture of truncated Gaussians: the n values t (in density space) and the prior. */
static void
build_number(Mixture *mx, const TpeParam *p, double *t, int32_t n, char **next)
{
	double		a,
				b,
				span,
				min_sigma,
				prior;
	int32_t		prior_at = 0;

	density_range(p, &a, &b);
	span = b - a;
	prior = 0.5 * (a + b);
	mx->n = n + 1;
	mx->mu = take(next, sizeof(double) * (n + 1));
	mx->sigma = take(next, sizeof(double) * (n + 1));
	mx->mass = take(next, sizeof(double) * (n + 1));
	memcpy(mx->mu, t, sizeof(double) * n);
	mx->mu[n] = prior;
	qsort(mx->mu, n + 1, sizeof(double), compare_double);
	while (mx->mu[prior_at] != prior)
		prior_at++;
	min_sigma = span / fmin(100.0, 2.0 + n);
	for (int32_t j = 0; j <= n; j++)
	{
		double		left = j > 0 ? mx->mu[j] - mx->mu[j - 1] : 0;
		double		right = j < n ? mx->mu[j + 1] - mx->mu[j] : 0;
		double		s = n == 0 ? span : fmax(left, right);

		s = j == prior_at ? span : fmin(fmax(s, min_sigma), span);
		mx->sigma[j] = s;
		mx->mass[j] = normal_mass((a - mx->mu[j]) / s, (b - mx->mu[j]) / s);
	}
}

TpeModel *
tpe_model_build(void *mem, const TpeParam *params, int32_t n_params, const double *x, const double *y,
				int32_t n_obs)
{
	char	   *next = mem;
	TpeModel   *m = take(&next, sizeof(TpeModel));
	Ranked	   *ranked;
	double	   *values;
	int32_t		n_good;

	m->params = params;
	m->n_params = n_params;
	m->mix[0] = take(&next, sizeof(Mixture) * n_params);
	m->mix[1] = take(&next, sizeof(Mixture) * n_params);
	m->scratch = take(&next, sizeof(double) * n_params);
	ranked = take(&next, sizeof(Ranked) * n_obs);
	values = take(&next, sizeof(double) * n_obs);
	for (int32_t i = 0; i < n_obs; i++)
	{
		ranked[i].y = y[i];
		ranked[i].i = i;
	}
	qsort(ranked, n_obs, sizeof(Ranked), compare_ranked);
	n_good = (int32_t) ceil(TPE_GAMMA * n_obs);
	n_good = n_good > TPE_MAX_GOOD ? TPE_MAX_GOOD : n_good;
	for (int32_t k = 0; k < n_params; k++)
	{
		const TpeParam *p = &params[k];

		if (!is_searched(p))
			continue;
		for (int g = 0; g < 2; g++)
		{
			const Ranked *members = g == 0 ? ranked : ranked + n_good;
			int32_t		n = g == 0 ? n_good : n_obs - n_good;

			if (p->kind == TPE_CHOICE)
			{
				build_choice(&m->mix[g][k], p, k, n_params, x, members, n, &next);
				continue;
			}
			for (int32_t j = 0; j < n; j++)
				values[j] = to_density_space(p, x[(size_t) members[j].i * n_params + k]);
			build_number(&m->mix[g][k], p, values, n, &next);
		}
	}
	return m;
}

/* log of a number's density (an integer's: its step's mass) under mixture mx, at value v. */
static double
number_log_density(const Mixture *mx, const TpeParam *p, double v)
{
	double		a,
				b,
				t = to_density_space(p, v),
				sum = 0;

	density_range(p, &a, &b);
	for (int32_t j = 0; j < mx->n; j++)
	{
		double		s = mx->sigma[j];
		double		w = 0;

		/* a wide component's step is its density (the step is 1): its mass would lose every digit */
		if (p->kind == TPE_INT && s < 1e6)
			w = normal_mass((fmax(t - 0.5, a) - mx->mu[j]) / s, (fmin(t + 0.5, b) - mx->mu[j]) / s);
		if (w <= 0)
			w = normal_pdf((t - mx->mu[j]) / s) / s;
		sum += w / mx->mass[j];
	}
	return log(sum / mx->n);
}

double
tpe_log_ratio(const TpeModel *m, const double *point)
{
	double		r = 0;

	for (int32_t k = 0; k < m->n_params; k++)
	{
		const TpeParam *p = &m->params[k];

		if (!is_searched(p))
			continue;
		if (p->kind == TPE_CHOICE)
			r += log(m->mix[0][k].p[(int32_t) point[k]]) - log(m->mix[1][k].p[(int32_t) point[k]]);
		else
			r += number_log_density(&m->mix[0][k], p, point[k]) - number_log_density(&m->mix[1][k], p, point[k]);
	}
	return r;
}

/* A value of parameter p drawn from mixture mx, from two uniform draws. */
static double
draw_from(const Mixture *mx, const TpeParam *p, double u0, double u1)
{
	double		a,
				b,
				pa,
				pb,
				t;
	int32_t		j;

	if (p->kind == TPE_CHOICE)
	{
		double		acc = 0;

		for (j = 0; j < mx->n - 1; j++)
		{
			acc += mx->p[j];
			if (u0 < acc)
				break;
		}
		return j;
	}
	density_range(p, &a, &b);
	j = (int32_t) (u0 * mx->n);
	j = j < mx->n ? j : mx->n - 1;
	pa = normal_cdf((a - mx->mu[j]) / mx->sigma[j]);
	pb = normal_cdf((b - mx->mu[j]) / mx->sigma[j]);
	t = mx->mu[j] + mx->sigma[j] * normal_quantile(pa + u1 * (pb - pa));
	/* (written so that a NaN lands on a bound) */
	t = t >= a ? t : a;
	t = t <= b ? t : b;
	return from_density_space(p, t);
}

bool
tpe_propose(const TpeModel *m, uint64_t seed, uint64_t trial, const double *taken, int32_t n_taken, double *out)
{
	double	   *cand = m->scratch;
	double		best = 0;
	bool		found = false;

	for (int c = 0; c < TPE_CANDIDATES; c++)
	{
		double		r;

		for (int32_t k = 0; k < m->n_params; k++)
		{
			const TpeParam *p = &m->params[k];

			if (!is_searched(p))
				cand[k] = tpe_prior_draw(p, seed, 0);	/* its one value */
			else
				cand[k] = draw_from(&m->mix[0][k], p, unit_double(seed, p->stream, draw_counter(trial, c, 0)),
									unit_double(seed, p->stream, draw_counter(trial, c, 1)));
		}
		if (is_taken(cand, m->n_params, taken, n_taken))
			continue;
		r = tpe_log_ratio(m, cand);
		if (!found || r > best)
		{
			found = true;
			best = r;
			memcpy(out, cand, sizeof(double) * m->n_params);
		}
	}
	return found || tpe_draw_new(m->params, m->n_params, seed, trial, taken, n_taken, out);
}
