/*
 * federated_privacy.c -- differentially private averaging for
 * pgdl.fit_federated (DP-FedAvg, McMahan et al. 2018) and its accounting in
 * Gaussian differential privacy (Dong, Roth and Su).
 *
 * Each site's update (its parameters and running statistics after the round,
 * minus the global model's) is clipped to L2 norm `clip`; the coordinator sums
 * the clipped updates, adds Gaussian noise of standard deviation
 * noise_multiplier x clip to each coordinate (drawn from the run's seed and the
 * round, so that a resumed run draws the same), and divides by the number of
 * sites that answered.  Adding or removing one site moves the sum by at most
 * clip, so each round is (1 / noise_multiplier)-GDP with respect to one site's
 * participation, and r rounds compose to sqrt(r) / noise_multiplier (every
 * site counted in every round: an upper bound when some were missing).
 *
 * Invariant: the noise depends on the seed, the round and the coordinate only,
 * never on timing or on which site answered first.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "train/train.h"
#include "cluster/cluster.h"

/* The noise's stream of round `round` (0-based): apart from the epoch orders' (nn.h) */
#define PRIVACY_NOISE_STREAM(round) (UINT64_C(0x6470666564) + (uint64_t) (round))

#define EPSILON_BISECTIONS 200

static double
std_normal_cdf(double x)
{
	return 0.5 * erfc(-x / M_SQRT2);
}

/* delta(epsilon) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), the product in logs. */
static double
gdp_delta(double mu, double eps)
{
	double		tail = std_normal_cdf(-eps / mu - mu / 2);

	return std_normal_cdf(-eps / mu + mu / 2) - (tail > 0 ? exp(eps + log(tail)) : 0);
}

double
pgdl_gdp_epsilon(double mu, double delta)
{
	double		lo = 0,
				hi = 1;

	if (gdp_delta(mu, 0) <= delta)
		return 0;
	/* delta(epsilon) falls as epsilon grows: bracket it, then halve */
	while (gdp_delta(mu, hi) > delta && hi < 1e12)
		hi *= 2;
	for (int i = 0; i < EPSILON_BISECTIONS && hi - lo > 1e-12 * hi; i++)
	{
		double		mid = (lo + hi) / 2;

		if (gdp_delta(mu, mid) > delta)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

/* The learned state a site's update is of: parameters, then running statistics. */
static inline float *
state_at(NnModel *m, int64 i)
{
	return i < m->n_params ? &m->params[i] : &m->buffers[i - m->n_params];
}

/* sum += update of `site` from `global`, clipped to L2 norm clip; returns the norm before clipping. */
static double
add_clipped(double *sum, NnModel *site, NnModel *global, double clip)
{
	int64		n = global->n_params + global->n_buffers;
	double		norm = 0;
	double		scale;

	for (int64 i = 0; i < n; i++)
	{
		double		d = (double) *state_at(site, i) - (double) *state_at(global, i);

		norm += d * d;
	}
	norm = sqrt(norm);
	scale = norm > clip ? clip / norm : 1.0;
	for (int64 i = 0; i < n; i++)
		sum[i] += scale * ((double) *state_at(site, i) - (double) *state_at(global, i));
	return norm;
}

void
pgdl_private_average(NnModel *global, NnModel **sites, int n_sites, const PgdlPrivacy *p, uint64 seed,
					 int32 round)
{
	int64		n = global->n_params + global->n_buffers;
	double	   *sum = MemoryContextAllocExtended(CurrentMemoryContext, (Size) n * sizeof(double),
												 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	double		sd = p->noise_multiplier * p->clip;
	int64		step = global->step;

	Assert(n_sites > 0);
	for (int s = 0; s < n_sites; s++)
	{
		CHECK_FOR_INTERRUPTS();
		if (sites[s]->n_params != global->n_params || sites[s]->n_buffers != global->n_buffers)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("cannot average models of different architectures")));
		(void) add_clipped(sum, sites[s], global, p->clip);
		step = Max(step, sites[s]->step);
	}
	for (int64 i = 0; i < n; i++)
	{
		double		noise = sd * (double) nn_rng_normal(seed, PRIVACY_NOISE_STREAM(round), (uint64) i);

		*state_at(global, i) = (float) ((double) *state_at(global, i) + (sum[i] + noise) / n_sites);
	}
	/* the global optimizer state stays the global model's: the sites' would leave unnoised */
	global->step = step;
	pfree(sum);
}

void
pgdl_privacy_spent(const PgdlPrivacy *p, int32 rounds, double *mu, double *epsilon)
{
	*mu = sqrt((double) rounds) / p->noise_multiplier;
	*epsilon = pgdl_gdp_epsilon(*mu, p->delta);
}
