/*
 * halving.c -- pgdl.fit_multiple's strategies: which models go on at a rung.
 *
 * A bracket s has rungs at epochs R / eta^k (k = s..1, integer division, R the
 * run's epochs); its models start together and the best 1/eta of those that
 * reach a rung go on.  'successive_halving' puts every model in the most
 * aggressive bracket (s_max: as many rungs as R allows); 'hyperband' spreads
 * them over brackets s_max..0 in the proportions of Li et al. 2018; 'asha' has
 * one bracket decided asynchronously (Li et al. 2020).
 *
 * Every decision is a function of the models' losses at the rungs, never of
 * the timing, so that it is the same whatever the number of workers:
 * - successive halving and hyperband decide a bracket's rung when every model
 *   of the bracket still running waits there;
 * - asha takes a rung's arrivals in a fixed order (lightest first: training
 *   FLOPs per example, then the set's order) rather than the order they come
 *   in: after the j-th arrival, the best floor(j / eta) of the first j go on
 *   (promotions are never taken back), so that a model waits only for the
 *   models before it in that order, not for the slowest; once every model has
 *   arrived or left, the best ceil(n / eta) go on and the others stop.
 * A model that diverged leaves its bracket: it neither waits nor takes a place.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "nn/nn.h"

#include "catalog/catalog.h"
#include "train/train.h"
#include "hopper/hopper.h"

#define BRACKET_STREAM UINT64_C(0x627261636b6574)	/* "bracket": the seeded assignment */

const char *
mop_strategy_name(MopStrategy s)
{
	switch (s)
	{
		case MOP_SUCCESSIVE_HALVING:
			return "successive_halving";
		case MOP_HYPERBAND:
			return "hyperband";
		case MOP_ASHA:
			return "asha";
		default:
			return "all";
	}
}

int32
mop_s_max(int32 epochs, int32 eta)
{
	int32		s = 0;

	if (eta < 2)
		return 0;
	for (int64 r = epochs / eta; r >= 1 && s < MOP_MAX_RUNGS; r /= eta)
		s++;
	return s;
}

int32
mop_rung_epoch(const MopShared *shared, int32 s, int32 r)
{
	int64		e = shared->epochs;

	for (int32 k = 0; k < s - r; k++)
		e /= shared->eta;
	return (int32) e;
}

int32
mop_rung_of(const MopShared *shared, const MopModel *m, int32 epoch)
{
	for (int32 r = 0; r < m->bracket; r++)
		if (mop_rung_epoch(shared, m->bracket, r) == epoch)
			return r;
	return -1;
}

/* rank_by's value (loss: the validation loss, else the training loss), turned so that lower is better */
double
mop_rank_key(const MopShared *shared, const PgdlEpochMetrics *m)
{
	return pgdl_epoch_rank_key(m, shared->rank_by);
}

const PgdlEpochMetrics *
mop_stored_metrics(const MopModel *m)
{
	if (m->config.restore_best && m->patience.best_epoch > 0 && m->state != MOP_DIVERGED)
		return &m->patience.best_metrics;
	return &m->last;
}

bool
mop_needs_scores(const MopShared *shared, const MopModel *m)
{
	return pgdl_rank_metric_needs_scores(shared->rank_by) ||
		((m->config.patience > 0 || m->config.restore_best) && pgdl_rank_metric_needs_scores(m->config.monitor));
}

/* Lower first; NaN last, so that the order is total. */
int
mop_compare_loss(double a, double b)
{
	if (isnan(a) || isnan(b))
		return (isnan(a) ? 1 : 0) - (isnan(b) ? 1 : 0);
	return a < b ? -1 : (a > b ? 1 : 0);
}

/* Hyperband's bracket sizes, n_s = ceil((s_max + 1) / (s + 1) * eta^s), scaled to n models (largest remainder). */
static void
bracket_counts(int32 n, int32 s_max, int32 eta, int32 *count)
{
	int64		weight[MOP_MAX_RUNGS + 1];
	int64		rem[MOP_MAX_RUNGS + 1];
	int64		total = 0,
				pow = 1;
	int32		left = n;

	for (int32 s = 0; s <= s_max; s++)
	{
		weight[s] = ((int64) (s_max + 1) * pow + s) / (s + 1);
		total += weight[s];
		pow *= eta;
	}
	for (int32 s = 0; s <= s_max; s++)
	{
		count[s] = (int32) (n * weight[s] / total);
		rem[s] = n * weight[s] % total;
		left -= count[s];
	}
	while (left-- > 0)
	{
		int32		best = s_max;

		for (int32 s = s_max; s >= 0; s--)
			if (rem[s] > rem[best])
				best = s;
		count[best]++;
		rem[best] = -1;
	}
}

/* asha's order: lightest first (training FLOPs per example), then the set's order. */
static void
arrival_order(MopShared *shared, const double *cost)
{
	int32		n = shared->n_models;
	int32	   *order = palloc(sizeof(int32) * n);

	for (int32 i = 0; i < n; i++)
	{
		int32		j = i;

		while (j > 0 && cost[order[j - 1]] > cost[i])
		{
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	shared->first_arrival = n > 0 ? order[0] : -1;
	for (int32 j = 0; j < n; j++)
		shared->models[order[j]].next_arrival = j + 1 < n ? order[j + 1] : -1;
	pfree(order);
}

void
mop_assign_brackets(MopShared *shared, uint64 seed, const double *cost)
{
	int32		n = shared->n_models;

	shared->s_max = shared->strategy == MOP_ALL ? 0 : mop_s_max(shared->epochs, shared->eta);
	for (int32 i = 0; i < n; i++)
		shared->models[i].bracket = shared->s_max;
	arrival_order(shared, cost);
	if (shared->strategy == MOP_HYPERBAND && n > 0)
	{
		int32		count[MOP_MAX_RUNGS + 1];
		int32	   *perm = palloc(sizeof(int32) * n);
		int32		j = 0;

		/* configurations go to brackets in a seeded order, the most aggressive bracket first */
		bracket_counts(n, shared->s_max, shared->eta, count);
		nn_rng_permutation(seed, BRACKET_STREAM, n, perm);
		for (int32 s = shared->s_max; s >= 0; s--)
			for (int32 c = 0; c < count[s]; c++)
				shared->models[perm[j++]].bracket = s;
		pfree(perm);
	}
}

MopDecisions *
mop_decisions_alloc(int32 n_models)
{
	MopDecisions *d = palloc(sizeof(MopDecisions));

	d->epoch = palloc0(sizeof(int32) * Max(n_models, 1));
	d->stopped = palloc0(sizeof(bool) * Max(n_models, 1));
	d->scratch = palloc0(sizeof(int32) * Max(n_models, 1));
	d->promote = palloc0(sizeof(bool) * Max(n_models, 1));
	return d;
}

static void
decide(MopShared *shared, MopDecisions *d, int32 i, bool stop)
{
	MopModel   *m = &shared->models[i];

	d->epoch[i] = m->epoch;
	d->stopped[i] = stop;
	m->state = stop ? MOP_STOPPED : MOP_IDLE;
}

/* Bracket b's rung, once every model of it still running waits there: the best ceil(n / eta) go on. */
static bool
decide_bracket(MopShared *shared, int32 b, MopDecisions *d)
{
	int32		waiting = 0,
				epoch = -1,
				keep;

	for (int32 i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];

		if (m->bracket != b || mop_finished(m->state))
			continue;
		if (m->state != MOP_RUNG || (epoch >= 0 && m->epoch != epoch))
			return false;
		epoch = m->epoch;
		waiting++;
	}
	if (waiting == 0)
		return false;
	keep = (waiting + shared->eta - 1) / shared->eta;
	for (int32 i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];
		int32		better = 0;

		d->promote[i] = false;
		if (m->bracket != b || m->state != MOP_RUNG)
			continue;
		/* by rank_by, ties by position in the set */
		for (int32 j = 0; j < shared->n_models; j++)
		{
			MopModel   *o = &shared->models[j];
			int			c = mop_compare_loss(mop_rank_key(shared, &o->last), mop_rank_key(shared, &m->last));

			if (o->bracket == b && o->state == MOP_RUNG && (c < 0 || (c == 0 && j < i)))
				better++;
		}
		d->promote[i] = better < keep;
	}
	for (int32 i = 0; i < shared->n_models; i++)
		if (shared->models[i].bracket == b && shared->models[i].state == MOP_RUNG)
			decide(shared, d, i, !d->promote[i]);
	return true;
}

/* asha: insert model i into the sorted arrivals s[0..n) (by loss at rung r; ties: earlier arrival first). */
static void
insert_arrival(const MopShared *shared, int32 *s, int32 n, int32 i, int32 r)
{
	double		key = shared->models[i].rung_key[r];
	int32		j = n;

	while (j > 0 && mop_compare_loss(shared->models[s[j - 1]].rung_key[r], key) > 0)
	{
		s[j] = s[j - 1];
		j--;
	}
	s[j] = i;
}

/* asha's rung r: promote whom the known prefix of its arrivals allows; stop the rest once all are in. */
static bool
decide_asha_rung(MopShared *shared, int32 r, MopDecisions *d)
{
	int32		epoch = mop_rung_epoch(shared, shared->s_max, r);
	int32		n = 0;
	bool		complete = true,
				any = false;

	for (int32 i = 0; i < shared->n_models; i++)
	{
		d->promote[i] = false;
		if (shared->models[i].state == MOP_RUNG && shared->models[i].epoch == epoch)
			any = true;
	}
	if (!any)
		return false;
	for (int32 i = shared->first_arrival; i >= 0; i = shared->models[i].next_arrival)
	{
		MopModel   *m = &shared->models[i];

		if (m->rung_known & (1u << r))
		{
			insert_arrival(shared, d->scratch, n++, i, r);
			for (int32 k = 0; k < n / shared->eta; k++)
				d->promote[d->scratch[k]] = true;
			continue;
		}
		if (mop_finished(m->state))
			continue;			/* stopped below, or diverged: it never arrives */
		complete = false;		/* the next arrival is not known yet: nothing after it is decided */
		break;
	}
	if (complete)
		for (int32 k = 0; k < (n + shared->eta - 1) / shared->eta; k++)
			d->promote[d->scratch[k]] = true;
	any = false;
	for (int32 i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];

		if (m->state != MOP_RUNG || m->epoch != epoch || (!d->promote[i] && !complete))
			continue;
		decide(shared, d, i, !d->promote[i]);
		any = true;
	}
	return any;
}

bool
mop_decide(MopShared *shared, MopDecisions *d)
{
	bool		any = false;

	for (int32 i = 0; i < shared->n_models; i++)
	{
		d->epoch[i] = 0;
		d->stopped[i] = false;
	}
	if (shared->strategy == MOP_ASHA)
	{
		/* bottom up: a model stopped at a rung leaves the ones above */
		for (int32 r = 0; r < shared->s_max; r++)
			any |= decide_asha_rung(shared, r, d);
	}
	else if (shared->strategy != MOP_ALL)
	{
		for (int32 b = 0; b <= shared->s_max; b++)
			any |= decide_bracket(shared, b, d);
	}
	return any;
}

void
mop_record_decisions(const MopShared *shared, const MopDecisions *d)
{
	for (int32 i = 0; i < shared->n_models; i++)
		if (d->epoch[i] > 0)
			pgdl_run_record_decision(shared->run_id, shared->models[i].config_id, d->epoch[i], d->stopped[i],
									 shared->models[i].bracket);
}
