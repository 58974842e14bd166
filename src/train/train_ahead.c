/*
 * train_ahead.c -- the steps of the buffers pgdl.fit reads, in a thread of
 * their own, while the backend reads the next buffers from the packed table.
 *
 * Reading a buffer (its TOAST chunks, the page faults of the memory that keeps
 * it) cost pgdl.fit's first epoch about a third of its time on the reference
 * MLP; run beside the steps, on another core, it costs nearly nothing.  The
 * thread runs the engine only (nn_model_train_step_finite: no PostgreSQL in
 * it, no palloc, no ereport); the backend reports what the steps returned when
 * it waits for them, before it hands over the next buffer.  The steps run in
 * the order and on the bytes they would without the thread: the model is the
 * same bit for bit.  While a buffer trains, the backend does not touch the
 * model or the state's statistics, and the buffer stays where it is.
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "backend.h"
#include "base/base.h"
#include "train/train.h"

#define WAIT_SLICE_NS (10 * 1000 * 1000)	/* interrupts are checked this often while waiting */
#define QUEUE 8					/* buffers handed over and not yet trained, at most */

typedef struct AheadJob
{
	const float *x;
	const float *y;
	const float *w;				/* NULL: unweighted */
	int32		n;
} AheadJob;

/*
 * A queue, not one buffer at a time: with one, the thread waits for the
 * backend to wake up at every buffer, and on a busy machine that wait cost
 * more than reading.
 */
struct PgdlTrainAhead
{
	PgdlTrainState *state;
	pthread_t	thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* signalled when the queue or `stopped`/`quit` changes */
	AheadJob	queue[QUEUE];
	int			head;			/* the next job to train */
	int			count;			/* jobs queued, the one training included */
	int64		pushed;			/* jobs handed over since the start */
	int64		done;			/* jobs trained (or dropped) since the start */
	int64		examples;		/* of the steps applied, not yet added to the state */
	bool		quit;			/* the thread stops, between two steps */
	bool		stopped;		/* a step failed or diverged: the queue is dropped */
	bool		ok;				/* false: err says why */
	NnError		err;
};

/* The steps pgdl_train_buffer runs on a host model, without PostgreSQL; false: stop. */
static bool
ahead_steps(PgdlTrainAhead *a, const AheadJob *job)
{
	NnModel    *m = a->state->model;
	int64		in = nn_model_input_size(m);
	int64		tgt = nn_model_target_size(m);
	int32		batch = a->state->config.batch_size;

	for (int32 s = 0; s < job->n; s += batch)
	{
		int32		c = job->n - s < batch ? job->n - s : batch;
		bool		finite = true;

		if (__atomic_load_n(&a->quit, __ATOMIC_RELAXED))
			return false;
		nn_model_weigh_next(m, job->w != NULL ? job->w + s : NULL);
		if (!nn_model_train_step_finite(m, job->x + s * in, job->y + s * tgt, c, &a->state->stats,
										&finite, &a->err))
		{
			a->ok = false;
			return false;
		}
		if (!finite)
			return false;
		a->examples += c;
	}
	return true;
}

static void *
ahead_main(void *arg)
{
	PgdlTrainAhead *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;)
	{
		AheadJob	job;
		bool		go_on;

		while (a->count == 0 && !a->quit)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->quit)
			break;
		job = a->queue[a->head];
		pthread_mutex_unlock(&a->lock);
		go_on = !a->stopped && ahead_steps(a, &job);
		pthread_mutex_lock(&a->lock);
		if (!go_on)
			a->stopped = true;
		a->head = (a->head + 1) % QUEUE;
		a->count--;
		a->done++;
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* The thread stops and is joined; nothing is reported.  Safe in PG_CATCH and reset callbacks. */
void
pgdl_train_ahead_end(PgdlTrainState *state)
{
	PgdlTrainAhead *a = state->ahead;

	if (a == NULL)
		return;
	pthread_mutex_lock(&a->lock);
	__atomic_store_n(&a->quit, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	state->ahead = NULL;
}

static void
ahead_reset_callback(void *arg)
{
	pgdl_train_ahead_end(arg);
}

/*
 * The thread, started at the state's first buffer; NULL when it cannot be (the
 * buffers then train in the backend).  Signals are blocked in it: PostgreSQL's
 * handlers run in the backend's own thread only.
 */
static PgdlTrainAhead *
ahead_start(PgdlTrainState *state)
{
	PgdlTrainAhead *a = MemoryContextAllocZero(state->cxt, sizeof(PgdlTrainAhead));
	MemoryContextCallback *cb = MemoryContextAlloc(state->cxt, sizeof(MemoryContextCallback));
	sigset_t	all,
				old;
	int			rc;

	a->state = state;
	a->ok = true;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&a->thread, NULL, ahead_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		pfree(a);
		pfree(cb);
		return NULL;
	}
	state->ahead = a;
	/* joined before the model it trains is freed, whatever ends the call */
	cb->func = ahead_reset_callback;
	cb->arg = state;
	MemoryContextRegisterResetCallback(state->cxt, cb);
	return a;
}

bool
pgdl_train_ahead_possible(const PgdlTrainState *state)
{
	return state->model->be->host_memory;
}

/* Waits, with a->lock held, until job `seq` (1-based) is trained; interrupts are checked meanwhile. */
static void
wait_done(PgdlTrainAhead *a, int64 seq)
{
	while (a->done < seq)
	{
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += WAIT_SLICE_NS;
		if (until.tv_nsec >= 1000000000L)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&a->cond, &a->lock, &until) != 0 && a->done < seq)
		{
			/* a long buffer: a cancel throws here, and the caller's PG_CATCH ends the thread */
			pthread_mutex_unlock(&a->lock);
			CHECK_FOR_INTERRUPTS();
			pthread_mutex_lock(&a->lock);
		}
	}
}

/*
 * Every buffer handed over is trained; errors and divergence are reported as
 * pgdl_train_buffer's, and the examples trained added to the state.
 */
void
pgdl_train_ahead_wait(PgdlTrainState *state)
{
	PgdlTrainAhead *a = state->ahead;

	if (a == NULL)
		return;
	pthread_mutex_lock(&a->lock);
	wait_done(a, a->pushed);
	pthread_mutex_unlock(&a->lock);
	state->examples += a->examples;
	a->examples = 0;
	if (!a->ok)
		ereport(ERROR,
				(errcode(pgdl_nn_data_errcode(&a->err)),
				 errmsg("cannot train on this buffer"),
				 errdetail("%c%s.", pg_toupper((unsigned char) a->err.msg[0]), a->err.msg + 1)));
	if (a->stopped)
		state->diverged = PGDL_DIVERGED_LOSS;
}

/* Job `seq` (as pgdl_train_ahead returned it) is trained: its buffer may be overwritten. */
void
pgdl_train_ahead_wait_job(PgdlTrainState *state, int64 seq)
{
	PgdlTrainAhead *a = state->ahead;

	if (a == NULL || seq <= 0)
		return;
	pthread_mutex_lock(&a->lock);
	wait_done(a, seq);
	pthread_mutex_unlock(&a->lock);
}

/*
 * Trains on the buffer as pgdl_train_buffer does, in the order of the calls,
 * but returns once the thread has it queued: x, y and w must stay as they are
 * until the job whose number this returns is done (pgdl_train_ahead_wait_job,
 * or pgdl_train_ahead_wait).  0: the buffer was trained here, or not at all.
 */
int64
pgdl_train_ahead(PgdlTrainState *state, const float *x, const float *y, const float *w, int32 n)
{
	PgdlTrainAhead *a = state->ahead;
	bool		stopped;
	int64		seq;

	CHECK_FOR_INTERRUPTS();
	if (state->diverged || n <= 0)
		return 0;
	if (a == NULL && (a = ahead_start(state)) == NULL)
	{
		pgdl_train_buffer(state, x, y, w, n);
		return 0;
	}
	pthread_mutex_lock(&a->lock);
	/* room in the queue: the job QUEUE places before this one is done */
	wait_done(a, a->pushed + 1 - QUEUE);
	stopped = a->stopped;
	if (!stopped)
	{
		AheadJob   *job = &a->queue[(a->head + a->count) % QUEUE];

		job->x = x;
		job->y = y;
		job->w = w;
		job->n = n;
		a->count++;
		a->pushed++;
		pthread_cond_broadcast(&a->cond);
	}
	seq = a->pushed;
	pthread_mutex_unlock(&a->lock);
	if (stopped)
	{
		pgdl_train_ahead_wait(state);	/* reports it */
		return 0;
	}
	return seq;
}
