/*
 * schedule.c -- the model hopper's schedule: the partition a model visits
 * next, and the seconds a model and a run have left to train.
 *
 * Workers (worker.c), the leader (its place in the server's queue, jobs.c)
 * and pgdl.progress apply the same arithmetic to the same shared state.
 * Everything here is pure: it reads a MopShared (or a copy of one) and takes
 * no lock, runs no SQL and allocates nothing; a caller that reads the run's
 * own segment holds its mutex.
 *
 * A model's next partition is a function of its seed, epoch and visit alone
 * (the order pgdl.fit draws), never of the worker that trains it: the
 * schedule decides who trains a visit and when, not which visits a model
 * makes or in what order.
 */
#include "postgres.h"

#include <math.h>

#include "base/base.h"
#include "hopper/hopper.h"

int32
mop_next_partition(const MopModel *m, int32 n_partitions)
{
	int32		order[PGDL_MAX_PARTITIONS];

	nn_rng_permutation((uint64) m->config.seed, NN_EPOCH_ORDER_STREAM(m->epoch), n_partitions, order);
	return order[m->visit];
}

/*
 * Visits model m makes to its last epoch, as if promoted at every rung: a
 * model of an aggressive bracket then moves along with the others, and its
 * rungs are decided while there is other work, not left for the end.
 */
static int32
visits_left(const MopShared *shared, const MopModel *m)
{
	return (shared->epochs - m->epoch) * shared->n_partitions - m->visit;
}

double
mop_seconds_left(const MopShared *shared, const MopModel *m)
{
	double		per_visit;

	/* measured on this run when it can be (its own pace, batch size and optimizer included), else predicted */
	if (m->visit > 0 && m->seconds > 0)
		per_visit = m->seconds / m->visit;
	else if (m->epoch > 0 && m->last.seconds > 0)
		per_visit = m->last.seconds / shared->n_partitions;
	else if (m->predicted_seconds > 0 && isfinite(m->predicted_seconds))
		per_visit = m->predicted_seconds / shared->n_partitions;
	else
		per_visit = m->cost * 1e-9;
	return per_visit * visits_left(shared, m);
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
		epochs_left = shared->epochs - m->epoch - (double) m->visit / Max(shared->n_partitions, 1);
		seconds += Max(epochs_left, 0) * m->predicted_seconds;
	}
	return seconds / Max(workers > 0 ? workers : shared->n_workers, 1);
}
