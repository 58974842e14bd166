/*
 * test_tpe.c -- the search space's draws and the Tree-structured Parzen
 * Estimator of pgdl.tpe_search (src/hopper/tpe.c).
 *
 * Draws stay in their space and are pure functions of (seed, counter); a
 * proposal is a pure function of (seed, trial, observations), so two models
 * built in different memory from the same observations propose the same
 * bytes; l(x)/g(x) favours where the good observations are (NaN scores count
 * as the worst); proposals avoid points already taken and say when the space
 * has none left; and on a synthetic objective, TPE in batches of 4 finds better
 * points than as many random draws, over most seeds and on average.
 */
#include <stdlib.h>
#include <string.h>

#include "hopper/tpe.h"
#include "unit.h"

#define N_PARAMS 4

/* lr log_uniform [1e-4, 1], x uniform [-1, 1], units int [1, 64], optimizer choice of 4 */
static void
synthetic_space(TpeParam *p)
{
	memset(p, 0, sizeof(TpeParam) * N_PARAMS);
	p[0] = (TpeParam) {TPE_LOG_UNIFORM, 0, 1e-4, 1.0, 11};
	p[1] = (TpeParam) {TPE_UNIFORM, 0, -1.0, 1.0, 12};
	p[2] = (TpeParam) {TPE_INT, 0, 1, 64, 13};
	p[3] = (TpeParam) {TPE_CHOICE, 4, 0, 0, 14};
}

/* Its minimum, 0, at lr = 0.01, x = 0.3, units = 40, optimizer 2. */
static double
synthetic_objective(const double *v)
{
	double		l = log10(v[0]) + 2;

	return l * l + 4 * (v[1] - 0.3) * (v[1] - 0.3) + ((v[2] - 40) / 32) * ((v[2] - 40) / 32) + (v[3] == 2 ? 0 : 0.5);
}

static TpeModel *
build(const TpeParam *params, int n_params, const double *x, const double *y, int n, void **mem)
{
	*mem = malloc(tpe_model_bytes(params, n_params, n));
	return tpe_model_build(*mem, params, n_params, x, y, n);
}

static bool
in_space(const TpeParam *p, double v)
{
	switch (p->kind)
	{
		case TPE_FIXED:
			return v == 0;
		case TPE_CHOICE:
			return v >= 0 && v < p->n_choices && v == floor(v);
		case TPE_INT:
			return v >= p->lo && v <= p->hi && v == floor(v);
		default:
			return v >= p->lo && v <= p->hi;
	}
}

/* A search of `trials` points in batches: the first at random, the others TPE's (tpe: false, all random). */
static void
search(const TpeParam *params, uint64_t seed, int trials, int batch, bool tpe, double *x, double *y)
{
	for (int done = 0; done < trials; done += batch)
	{
		void	   *mem = NULL;
		TpeModel   *m = done > 0 && tpe ? build(params, N_PARAMS, x, y, done, &mem) : NULL;

		for (int j = 0; j < batch && done + j < trials; j++)
		{
			double	   *out = x + (size_t) (done + j) * N_PARAMS;
			bool		ok = m ? tpe_propose(m, seed, done + j, x, done + j, out) :
				tpe_draw_new(params, N_PARAMS, seed, done + j, x, done + j, out);

			CHECK(ok);
		}
		/* scores come in only once the whole batch is proposed */
		for (int j = 0; j < batch && done + j < trials; j++)
			y[done + j] = synthetic_objective(x + (size_t) (done + j) * N_PARAMS);
		free(mem);
	}
}

UNIT_TEST(tpe_prior_draws_stay_in_their_space)
{
	TpeParam	p[N_PARAMS + 2];

	synthetic_space(p);
	p[4] = (TpeParam) {TPE_INT, 0, -9007199254740992.0, 9007199254740992.0, 15};
	p[5] = (TpeParam) {TPE_LOG_UNIFORM, 0, 0.5, 0.5, 16};
	for (int k = 0; k < N_PARAMS + 2; k++)
		for (uint64_t i = 0; i < 2000; i++)
		{
			double		v = tpe_prior_draw(&p[k], 42, i);

			CHECK_MSG(in_space(&p[k], v), "parameter %d sample %d: %.17g", k, (int) i, v);
			CHECK(v == tpe_prior_draw(&p[k], 42, i));
		}
	CHECK(tpe_prior_draw(&p[5], 7, 3) == 0.5);
	/* another seed, other values */
	CHECK(tpe_prior_draw(&p[1], 42, 0) != tpe_prior_draw(&p[1], 43, 0));
}

UNIT_TEST(tpe_ratio_favours_the_good_observations)
{
	TpeParam	p = {TPE_UNIFORM, 0, 0.0, 1.0, 1};
	double		x[20],
				y[20];
	double		at_good = 0.2,
				at_bad = 0.8,
				at_middle = 0.55;
	void	   *mem;
	TpeModel   *m;

	/* the closer to 0.2 the better */
	for (int i = 0; i < 20; i++)
	{
		x[i] = i / 19.0;
		y[i] = fabs(x[i] - 0.2);
	}
	m = build(&p, 1, x, y, 20, &mem);
	CHECK(tpe_log_ratio(m, &at_good) > 0.5);
	CHECK(tpe_log_ratio(m, &at_good) > tpe_log_ratio(m, &at_bad) + 1.0);
	free(mem);
	/* NaN (a diverged model) is worse than any score: below 0.5 every one diverged */
	for (int i = 0; i < 20; i++)
		y[i] = x[i] < 0.5 ? NAN : y[i];
	m = build(&p, 1, x, y, 20, &mem);
	CHECK(tpe_log_ratio(m, &at_middle) > tpe_log_ratio(m, &at_good) + 1.0);
	free(mem);
}

UNIT_TEST(tpe_proposals_are_a_function_of_seed_trial_and_history)
{
	TpeParam	p[N_PARAMS];
	double		x[16 * N_PARAMS],
				y[16],
				a[N_PARAMS],
				b[N_PARAMS],
				c[N_PARAMS];
	void	   *mem1,
			   *mem2;
	TpeModel   *m1,
			   *m2;

	synthetic_space(p);
	search(p, 5, 16, 4, true, x, y);
	m1 = build(p, N_PARAMS, x, y, 16, &mem1);
	m2 = build(p, N_PARAMS, x, y, 16, &mem2);
	for (int t = 16; t < 24; t++)
	{
		CHECK(tpe_propose(m1, 5, t, x, 16, a));
		CHECK(tpe_propose(m2, 5, t, x, 16, b));
		CHECK(memcmp(a, b, sizeof(a)) == 0);
		CHECK(tpe_propose(m1, 6, t, x, 16, c));
		CHECK(memcmp(a, c, sizeof(a)) != 0);
		for (int k = 0; k < N_PARAMS; k++)
			CHECK_MSG(in_space(&p[k], a[k]), "trial %d parameter %d: %.17g", t, k, a[k]);
	}
	free(mem1);
	free(mem2);
}

UNIT_TEST(tpe_proposes_each_point_once_and_says_when_none_is_left)
{
	/* 3 x 2 configurations and a fixed key */
	TpeParam	p[3] = {{TPE_CHOICE, 3, 0, 0, 1}, {TPE_CHOICE, 2, 0, 0, 2}, {TPE_FIXED, 0, 0, 0, 3}};
	double		x[7 * 3] = {0},
				y[7];
	void	   *mem;
	TpeModel   *m;

	CHECK(tpe_draw_new(p, 3, 9, 0, x, 0, x));
	CHECK(tpe_draw_new(p, 3, 9, 1, x, 1, x + 3));
	y[0] = 1;
	y[1] = 2;
	for (int t = 2; t < 6; t++)
	{
		m = build(p, 3, x, y, t, &mem);
		CHECK(tpe_propose(m, 9, t, x, t, x + 3 * t));
		y[t] = t;
		free(mem);
	}
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < i; j++)
			CHECK(x[3 * i] != x[3 * j] || x[3 * i + 1] != x[3 * j + 1]);
	m = build(p, 3, x, y, 6, &mem);
	CHECK(!tpe_propose(m, 9, 6, x, 6, x + 18));
	CHECK(!tpe_draw_new(p, 3, 9, 6, x, 6, x + 18));
	free(mem);
}

UNIT_TEST(tpe_finds_better_points_than_random_draws)
{
	enum
	{
		TRIALS = 48, SEEDS = 20
	};
	TpeParam	p[N_PARAMS];
	double		x[TRIALS * N_PARAMS],
				y[TRIALS];
	double		sum_tpe = 0,
				sum_random = 0,
				late_tpe = 0,
				late_random = 0;
	int			tpe_wins = 0;

	synthetic_space(p);
	for (uint64_t seed = 1; seed <= SEEDS; seed++)
	{
		double		best[2] = {INFINITY, INFINITY};

		for (int tpe = 0; tpe < 2; tpe++)
		{
			search(p, seed, TRIALS, 4, tpe, x, y);
			for (int i = 0; i < TRIALS; i++)
			{
				best[tpe] = fmin(best[tpe], y[i]);
				/* where the last third of the search looks */
				if (i >= 2 * TRIALS / 3)
					*(tpe ? &late_tpe : &late_random) += y[i];
			}
		}
		sum_random += best[0];
		sum_tpe += best[1];
		tpe_wins += best[1] < best[0];
	}
	printf("    best after %d trials, mean of %d seeds: tpe %.4f, random %.4f; tpe better on %d; "
		   "mean of the last third: tpe %.4f, random %.4f\n", TRIALS, SEEDS, sum_tpe / SEEDS,
		   sum_random / SEEDS, tpe_wins, late_tpe / (SEEDS * TRIALS / 3), late_random / (SEEDS * TRIALS / 3));
	CHECK(sum_tpe < 0.7 * sum_random);
	CHECK(tpe_wins >= 13);
	CHECK(late_tpe < 0.5 * late_random);
}
