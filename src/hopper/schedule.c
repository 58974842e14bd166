/*
 * schedule.c -- the model hopper's schedule: which model a worker takes
 * next, the partition a model visits next, and the seconds a model and a run
 * have left to train.
 *
 * There is one rule for taking a model, mop_pick_model: the workers apply it
 * to the run's shared state (worker.c) and pgdl.explain_fit_multiple to its
 * simulation of them (explain.c), so that the prediction schedules as a run
 * does.  The leader (its place in the server's queue, crew.c) and
 * pgdl.progress share the arithmetic of what is left.  Everything here is
 * pure: it reads a MopShared (or a copy of one) or a plain struct, and takes
 * no lock, runs no SQL and allocates nothing; a caller that reads the run's
 * own segment holds its mutex.
 *
 * Invariants:
 * - a model's next partition is a function of its seed, epoch and visit alone
 *   (the order pgdl.fit draws), never of the worker that trains it;
 * - the rule decides only who trains a visit (or evaluates an epoch's end)
 *   and when, never which visits a model makes or in what order, so the
 *   models' bytes do not depend on it;
 * - the rule depends on nothing but its candidates, in their order: the same
 *   situation picks the same model, in a worker and in the simulation.
 */
#include "postgres.h"

#include <math.h>

#include "base/base.h"
#include "train/train.h"
#include "hopper/hopper.h"

int32
mop_visit_partition(uint64 seed, int32 epoch, int32 visit, int32 n_partitions, int32 holdout)
{
	int32		order[PGDL_MAX_PARTITIONS];

	/* pgdl.fit's rule: a fold model visits the others as pgdl.fit(..., holdout => p) does */
	pgdl_epoch_order(seed, epoch, n_partitions, holdout, order);
	return order[visit];
}

int32
mop_next_partition(const MopModel *m, int32 n_partitions)
{
	return mop_visit_partition((uint64) m->config.seed, m->epoch, m->visit, n_partitions, m->holdout);
}

int32
mop_epoch_visits(const MopShared *shared, const MopModel *m)
{
	return m->holdout >= 0 ? shared->n_partitions - 1 : shared->n_partitions;
}

/*
 * Visits model m makes to its last epoch, as if promoted at every rung: a
 * model of an aggressive bracket then moves along with the others, and its
 * rungs are decided while there is other work, not left for the end.
 */
static int32
visits_left(const MopShared *shared, const MopModel *m)
{
	return (shared->epochs - m->epoch) * mop_epoch_visits(shared, m) - m->visit;
}

double
mop_seconds_left(const MopShared *shared, const MopModel *m)
{
	double		per_visit;

	/* measured on this run when it can be (its own pace, batch size and optimizer included), else predicted */
	if (m->visit > 0 && m->seconds > 0)
		per_visit = m->seconds / m->visit;
	else if (m->epoch > 0 && m->last.seconds > 0)
		per_visit = m->last.seconds / mop_epoch_visits(shared, m);
	else if (m->predicted_seconds > 0 && isfinite(m->predicted_seconds))
		per_visit = m->predicted_seconds / shared->n_partitions;
	else
		per_visit = m->cost * 1e-9;
	return per_visit * visits_left(shared, m);
}

/*
 * The deadline of model m's visit on a node (by worker m->worker): the shared
 * multiple of the longer of its predicted visit (an epoch's calibrated
 * prediction over the partitions, times the node's pace when it predicts
 * itself slower) and the mean of its visits measured so far (the node's pace
 * and the network), never below the floor; 0: none.  Generous on purpose: a node
 * that is only slow, a loaded machine, must never be taken for a hung one.
 */
#define MOP_MAX_DEADLINE_S	1e7		/* about 4 months */

double
mop_visit_deadline(const MopShared *shared, const MopModel *m)
{
	double		per_visit = 0;
	double		deadline;

	if (shared->deadline_multiple <= 0)
		return 0;
	if (m->predicted_seconds > 0 && isfinite(m->predicted_seconds))
		per_visit = m->predicted_seconds / mop_epoch_visits(shared, m);
	/* on a node that predicts itself slower, longer; never shorter than this server's prediction */
	if (m->worker >= 0 && m->worker < shared->n_workers && shared->workers[m->worker].pace > 1)
		per_visit *= shared->workers[m->worker].pace;
	if (m->visit > 0 && m->seconds > 0)
		per_visit = Max(per_visit, m->seconds / m->visit);
	else if (m->epoch > 0 && m->last.seconds > 0)
		per_visit = Max(per_visit, m->last.seconds / mop_epoch_visits(shared, m));
	deadline = shared->deadline_multiple * per_visit;
	/* a node's absurd prediction (it is the node's word) must not overflow a timestamp */
	if (!isfinite(deadline) || deadline > MOP_MAX_DEADLINE_S)
		deadline = MOP_MAX_DEADLINE_S;
	return Max(deadline, shared->deadline_floor);
}

/*
 * The seconds a run has left as the calibrated estimate predicts them: each
 * unfinished model's epochs left, less the part of the current one it has
 * visited, times its predicted seconds per epoch, shared by `workers` (0: the
 * run's own count); negative when a model has no prediction.
 */
double
mop_predicted_seconds_left(const MopShared *shared, int workers)
{
	double		seconds = 0;

	for (int i = 0; i < shared->n_models; i++)
	{
		const MopModel *m = &shared->models[i];
		double		epochs_left;

		if (mop_finished(m->state))
			continue;
		if (!(m->predicted_seconds > 0 && isfinite(m->predicted_seconds)))
			return -1;
		epochs_left = shared->epochs - m->epoch - (double) m->visit / Max(mop_epoch_visits(shared, m), 1);
		seconds += Max(epochs_left, 0) * m->predicted_seconds;
	}
	return seconds / Max(workers > 0 ? workers : shared->n_workers, 1);
}

/*
 * The rank of candidate c for `worker`, higher first; -1: not for it.  A visit
 * of its own partitions first; then an evaluation, which needs no partition,
 * so that a worker whose partitions have no model waiting validates the models
 * another's partitions finished rather than leave every validation to the
 * owner of the partition that ends the epochs (configurations of one seed all
 * end an epoch on the same partition); last a model of another's partition,
 * taken only while that owner is busy (it would take the model itself
 * otherwise), and on a node only when the worker's node holds a replica of
 * that partition (pgdl.distribute's replicas): other buffers there only their
 * owner reaches.
 */
static int
pick_rank(const MopCandidate *c, int32 worker, const bool *busy, bool distributed)
{
	if (!c->takeable)
		return -1;
	if (c->evaluate)
		return 1;
	if (c->owner == worker)
		return 2;
	return !busy[c->owner] || (distributed && !c->replica_here) ? -1 : 0;
}

/*
 * Longest first: of the candidates a worker may take, of the best rank
 * (pick_rank), the one with the most seconds left, so that the heaviest models
 * do not finish last, one at a time.  Of equals, the first in the set's order.
 */
int32
mop_pick_model(const MopCandidate *candidates, int32 n, int32 worker, const bool *busy, bool distributed)
{
	int32		best = -1;
	int			best_rank = -1;
	double		best_left = 0;

	for (int32 i = 0; i < n; i++)
	{
		const MopCandidate *c = &candidates[i];
		int			rank = pick_rank(c, worker, busy, distributed);

		if (rank < 0)
			continue;
		if (best < 0 || rank > best_rank || (rank == best_rank && c->left > best_left))
		{
			best = i;
			best_rank = rank;
			best_left = c->left;
		}
	}
	return best;
}
