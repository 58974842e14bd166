/*
 * train_ahead.c -- the steps of one buffer in a thread of their own, while the
 * backend reads the next buffer from the packed table.
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
#include "pgdl.h"

#define WAIT_SLICE_NS (10 * 1000 * 1000)	/* interrupts are checked this often while waiting */

struct PgdlTrainAhead
{
	PgdlTrainState *state;
	pthread_t	thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* signalled when `busy` or `quit` changes */
	bool		busy;			/* a buffer is handed over and its steps not done */
	bool		quit;			/* the thread stops, between two steps */
	bool		pending;		/* backend's side: a buffer whose result is not yet read */
	/* the buffer */
	const float *x;
	const float *y;
	int32		n;
	/* what its steps returned */
	int32		trained;		/* examples of the steps applied */
	bool		ok;
	bool		finite;
	NnError		err;
};

/* The steps pgdl_train_buffer runs on a host model, without PostgreSQL. */
static void
ahead_steps(PgdlTrainAhead *a)
{
	NnModel    *m = a->state->model;
	int64		in = nn_model_input_size(m);
	int64		tgt = nn_model_target_size(m);
	int32		batch = a->state->config.batch_size;

	a->ok = a->finite = true;
	a->trained = 0;
	for (int32 s = 0; s < a->n; s += batch)
	{
		int32		c = a->n - s < batch ? a->n - s : batch;

		if (__atomic_load_n(&a->quit, __ATOMIC_RELAXED))
			return;
		a->ok = nn_model_train_step_finite(m, a->x + s * in, a->y + s * tgt, c, &a->state->stats,
										   &a->finite, &a->err);
		if (!a->ok || !a->finite)
			return;
		a->trained = s + c;
	}
}

static void *
ahead_main(void *arg)
{
	PgdlTrainAhead *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;)
	{
		while (!a->busy && !a->quit)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->quit)
			break;
		pthread_mutex_unlock(&a->lock);
		ahead_steps(a);
		pthread_mutex_lock(&a->lock);
		a->busy = false;
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
 * buffer then trains in the backend).  Signals are blocked in it: PostgreSQL's
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

/* The buffer handed over last is trained; its errors and divergence are reported as pgdl_train_buffer's. */
void
pgdl_train_ahead_wait(PgdlTrainState *state)
{
	PgdlTrainAhead *a = state->ahead;

	if (a == NULL || !a->pending)
		return;
	pthread_mutex_lock(&a->lock);
	while (a->busy)
	{
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += WAIT_SLICE_NS;
		if (until.tv_nsec >= 1000000000L)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&a->cond, &a->lock, &until) != 0 && a->busy)
		{
			/* a long buffer: a cancel throws here, and the caller's PG_CATCH ends the thread */
			pthread_mutex_unlock(&a->lock);
			CHECK_FOR_INTERRUPTS();
			pthread_mutex_lock(&a->lock);
		}
	}
	pthread_mutex_unlock(&a->lock);
	a->pending = false;
	if (!a->ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("cannot train on this buffer"),
				 errdetail("%c%s.", pg_toupper((unsigned char) a->err.msg[0]), a->err.msg + 1)));
	if (!a->finite)
	{
		state->diverged = PGDL_DIVERGED_LOSS;
		state->examples += a->trained;
		return;
	}
	state->examples += a->n;
}

/*
 * Trains on the buffer as pgdl_train_buffer does, but returns once the thread
 * has it: x and y must stay as they are until pgdl_train_ahead_wait (or the
 * next call) returns.
 */
void
pgdl_train_ahead(PgdlTrainState *state, const float *x, const float *y, int32 n)
{
	PgdlTrainAhead *a;

	pgdl_train_ahead_wait(state);
	CHECK_FOR_INTERRUPTS();
	if (state->diverged || n <= 0)
		return;
	a = state->ahead ? state->ahead : ahead_start(state);
	if (a == NULL)
	{
		pgdl_train_buffer(state, x, y, n);
		return;
	}
	a->x = x;
	a->y = y;
	a->n = n;
	a->pending = true;
	pthread_mutex_lock(&a->lock);
	a->busy = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}
