/*
 * parallel.c -- one training step on several cores: data parallelism inside
 * the step (see nn.h, nn_model_set_threads).
 *
 * The batch splits into contiguous shards, one per thread.  A shard runs the
 * layers through a view of the model: a copy of the NnModel whose activation
 * pointers are the shared buffers at its first example (so the shards write
 * disjoint parts of the same workspace) and whose scratch, convolution
 * weight-gradient accumulator and parameter gradients are its own (shard 0
 * uses the model's).  A shard is a task that any free thread runs (see
 * pool_run), so its bytes do not depend on which.  Batchnorm layers, which need the statistics
 * of the whole batch, run on the caller's thread between the threads' runs;
 * the loss runs there too, over the whole batch, so the reported loss is the
 * one-thread loss of the same outputs.  Then every thread sums its range of
 * the parameter gradients, shard 0 + shard 1 + ... in that order, and applies
 * the optimizer to that range: one optimizer step, the same for any timing.
 *
 * Threads run engine code only (no allocation, no error reporting) and are
 * started once per process, with every signal blocked so that the host's
 * signal handlers stay on its own thread.  They wait on a condition variable
 * between jobs.  BLAS is called from all of them at once: each call is
 * single-threaded (nn_set_blas_threads(1), the default), which OpenBLAS
 * allows.  The x86 floating-point mode (denormals flushed, see model.c) is
 * per thread: each job sets the caller's on the threads it runs on.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

typedef void (*PoolFn) (void *arg, int task);

/*
 * The process's threads: workers 1 .. started - 1 besides the caller.  A job
 * is `tasks` calls fn(arg, task); whichever thread is free claims the next
 * task, the caller too, so that a worker the scheduler does not run soon (on
 * a busy machine) costs time, not a wait: the caller does its task as well.
 * What a task computes depends on its number only (each shard has its own
 * view and area), not on the thread that runs it: the bytes do not depend on
 * who ran what.
 */
static struct
{
	pthread_mutex_t mu;
	pthread_cond_t go;
	pthread_cond_t done;
	int			started;
	uint64_t	gen;			/* jobs posted */
	uint64_t	seen[NN_MAX_THREADS];	/* the job each worker last saw */
	int			tasks;			/* of the job */
	int			next;			/* the next task to claim */
	int			finished;		/* tasks done */
	PoolFn		fn;
	void	   *arg;
	unsigned int csr;
	NnModel    *views[NN_MAX_THREADS];
}			pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER, .started = 1};

static unsigned int
csr_get(void)
{
#if defined(__SSE__)
	return _mm_getcsr();
#else
	return 0;
#endif
}

static void
csr_set(unsigned int csr)
{
#if defined(__SSE__)
	_mm_setcsr(csr);
#else
	(void) csr;
#endif
}

/* Run tasks of job gen until none is left to claim; called and returns with pool.mu held. */
static void
pool_work(uint64_t gen, bool caller)
{
	while (pool.gen == gen && pool.next < pool.tasks)
	{
		int			task = pool.next++;
		PoolFn		fn = pool.fn;
		void	   *arg = pool.arg;

		if (!caller)
			csr_set(pool.csr);
		pthread_mutex_unlock(&pool.mu);
		fn(arg, task);
		pthread_mutex_lock(&pool.mu);
		if (++pool.finished == pool.tasks)
			pthread_cond_signal(&pool.done);
	}
}

static void *
worker_main(void *arg)
{
	int			t = (int) (intptr_t) arg;

	pthread_mutex_lock(&pool.mu);
	for (;;)
	{
		while (pool.gen == pool.seen[t])
			pthread_cond_wait(&pool.go, &pool.mu);
		pool.seen[t] = pool.gen;
		pool_work(pool.gen, false);
	}
	return NULL;
}

/* Threads up to `threads` in all and a view for each; false with the reason in err. */
static bool
pool_grow(int threads, NnError *err)
{
	sigset_t	all,
				old;
	pthread_attr_t attr;
	bool		ok = true;

	for (int t = 0; t < threads; t++)
		if (pool.views[t] == NULL && (pool.views[t] = malloc(sizeof(NnModel))) == NULL)
		{
			nn_error_set(err, -1, "threads", "out of memory for %d training threads", threads);
			return false;
		}
	if (pool.started >= threads)
		return true;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	while (pool.started < threads)
	{
		pthread_t	tid;
		int			t = pool.started;

		pool.seen[t] = pool.gen;	/* no job runs now: the worker waits for the next */
		if (pthread_create(&tid, &attr, worker_main, (void *) (intptr_t) t) != 0)
		{
			nn_error_set(err, -1, "threads", "could not start training thread %d of %d", t + 1, threads);
			ok = false;
			break;
		}
		pool.started++;
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/* fn(arg, task) for task < tasks, on the caller's thread and the workers; returns when all are done. */
static void
pool_run(int tasks, PoolFn fn, void *arg)
{
	uint64_t	gen;

	pthread_mutex_lock(&pool.mu);
	pool.fn = fn;
	pool.arg = arg;
	pool.csr = csr_get();
	pool.tasks = tasks;
	pool.next = 0;
	pool.finished = 0;
	gen = ++pool.gen;
	pthread_cond_broadcast(&pool.go);
	pool_work(gen, true);
	while (pool.finished < pool.tasks)
		pthread_cond_wait(&pool.done, &pool.mu);
	pthread_mutex_unlock(&pool.mu);
}

static inline int64_t
round16(int64_t n)
{
	return (n + 15) & ~(int64_t) 15;
}

static inline int
shard_cap(const NnModel *m, int32_t batch)
{
	return (batch + m->threads - 1) / m->threads;
}

/* The largest scratch a layer needs on a shard of a batch of `batch`. */
static int64_t
area_scratch_floats(const NnModel *m, int32_t batch)
{
	int64_t		scratch = 0;

	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		s = nn_layer_scratch_floats(m, i, shard_cap(m, batch));

		if (s > scratch)
			scratch = s;
	}
	return round16(scratch);
}

/* A thread's own: parameter gradients, scratch, and each convolution's weight-gradient accumulator. */
int64_t
nn_parallel_area_floats(const NnModel *m, int32_t batch)
{
	int64_t		aux = 0;

	for (int i = 0; i < m->spec.n_layers; i++)
		if (m->spec.layers[i].type == NN_CONV2D)
			aux += round16(nn_layer_aux_floats(m, i, shard_cap(m, batch)));
	return round16(m->n_params) + area_scratch_floats(m, batch) + aux;
}

bool
nn_spec_thread_memory(const NnSpec *spec, int32_t batch, int threads, int64_t *bytes, NnError *err)
{
	NnModel    *m;

	*bytes = 0;
	if (threads < 1 || threads > NN_MAX_THREADS || batch < 1 || batch > NN_MAX_BATCH)
	{
		nn_error_set(err, -1, "threads", "threads must be between 1 and %d and the batch between 1 and %d",
					 NN_MAX_THREADS, NN_MAX_BATCH);
		return false;
	}
	if (threads == 1)
		return true;
	if ((m = calloc(1, sizeof(NnModel))) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return false;
	}
	if (!nn_model_layout(m, spec, err))
	{
		free(m);
		return false;
	}
	m->threads = (uint8_t) threads;
	*bytes = (int64_t) sizeof(float) * (threads - 1) * nn_parallel_area_floats(m, batch);
	free(m);
	return true;
}

bool
nn_model_set_threads(NnModel *m, int threads, NnError *err)
{
	int			old = m->threads > 1 ? m->threads : 1;
	int32_t		cap = m->batch_cap;

	if (threads < 1 || threads > NN_MAX_THREADS)
	{
		nn_error_set(err, -1, "threads", "threads must be between 1 and %d, got %d", NN_MAX_THREADS, threads);
		return false;
	}
	if (threads > 1 && !m->be->host_memory)
	{
		nn_error_set(err, -1, "threads", "threads apply to training on the CPU; this model is on %s",
					 m->be->name);
		return false;
	}
	if (threads > 1 && !pool_grow(threads, err))
		return false;
	if (old == threads)
		return true;
	/* a workspace of the new layout, or the old one kept */
	m->threads = (uint8_t) threads;
	if (cap > 0)
	{
		m->batch_cap = 0;
		if (!nn_model_reserve(m, cap, err))
		{
			m->threads = (uint8_t) old;
			m->batch_cap = cap;
			return false;
		}
	}
	return true;
}

/* One step's split of the batch and the job the threads run. */
typedef struct Step
{
	NnModel    *m;
	int			shards;
	int32_t		first[NN_MAX_THREADS + 1];	/* shard t: examples [first[t], first[t + 1]) */
	int			from,
				to;				/* the layers of a forward or backward job */
	int64_t		pfirst[NN_MAX_THREADS + 1]; /* update: thread t's parameters */
	bool		sum,
				update;			/* update_job: sum the shards' gradients, apply the update */
	float		lr;
} Step;

/* Thread t's view of the model: its shard of every buffer, its own scratch and gradients. */
static void
view_point(const Step *st, int t)
{
	const NnModel *m = st->m;
	NnModel    *v = pool.views[t];
	int32_t		lo = st->first[t];
	int64_t		in = nn_model_input_size(m);
	float	   *area,
			   *aux;

	memcpy(v, m, sizeof(NnModel));
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		size = NN_SHAPE_SIZE(m->shape[i + 1]);

		v->out[i] = m->out[i] + lo * size;
		v->dout[i] = m->dout[i] + lo * size;
		if (m->spec.layers[i].type == NN_MAXPOOL2D)
			v->aux[i] = m->aux[i] + lo * size;	/* argmax, per output element */
		else if (m->spec.layers[i].type == NN_LAYERNORM)
			v->aux[i] = m->aux[i] + 2 * (int64_t) lo * NN_NORM_ROWS(NN_IN_SHAPE(m->shape, &m->spec, i));	/* per row */
		else if (m->spec.layers[i].type == NN_GRU || m->spec.layers[i].type == NN_ATTENTION)
			v->aux[i] = m->aux[i] + lo * nn_layer_aux_floats(m, i, 1);	/* gates and states, per example */
	}
	v->dinput = m->dinput ? m->dinput + lo * in : NULL;
	v->last_input = m->last_input + lo * in;
	v->last_n = st->first[t + 1] - lo;
	v->batch_cap = v->last_n;
	v->shard_first = lo;
	v->staging = NULL;
	v->weights = NULL;
	if (t == 0)
		return;
	area = nn_model_thread_areas(m) + (t - 1) * nn_parallel_area_floats(m, m->batch_cap);
	v->grads = area;
	v->scratch = area + round16(m->n_params);
	aux = v->scratch + area_scratch_floats(m, m->batch_cap);
	for (int i = 0; i < m->spec.n_layers; i++)
		if (m->spec.layers[i].type == NN_CONV2D)
		{
			int64_t		a = nn_layer_aux_floats(m, i, shard_cap(m, m->batch_cap));

			v->aux[i] = a > 0 ? aux : NULL;
			aux += round16(a);
		}
}

static void
step_split(Step *st, NnModel *m, int32_t n)
{
	st->m = m;
	st->shards = n < m->threads ? n : m->threads;
	for (int t = 0; t <= st->shards; t++)
		st->first[t] = (int32_t) ((int64_t) n * t / st->shards);
	for (int t = 0; t < st->shards; t++)
		view_point(st, t);
}

static void
forward_job(void *arg, int t)
{
	Step	   *st = arg;
	NnModel    *v = pool.views[t];

	nn_forward_layers(v, v->last_input, v->last_n, st->from, st->to, true);
}

static void
backward_job(void *arg, int t)
{
	Step	   *st = arg;

	nn_backward_layers(pool.views[t], st->from, st->to);
}

/* The next batchnorm layer at or after i, or the end. */
static int
next_batchnorm(const NnModel *m, int i)
{
	while (i < m->spec.n_layers && m->spec.layers[i].type != NN_BATCHNORM)
		i++;
	return i;
}

void
nn_parallel_forward(NnModel *m, const float *x, int32_t n)
{
	Step		st;

	m->last_input = x;
	m->last_n = n;
	step_split(&st, m, n);
	for (int i = 0; i < m->spec.n_layers;)
	{
		int			j = next_batchnorm(m, i);

		if (j > i)
		{
			st.from = i;
			st.to = j;
			pool_run(st.shards, forward_job, &st);
		}
		if (j < m->spec.n_layers)
			nn_layer_forward(m, j, nn_layer_input(m, j), 0, n, true);
		i = j + 1;
	}
	m->last_input = x;
	m->last_n = n;
}

/*
 * Thread t's range of parameters: the shards' gradients summed in shard order
 * (batchnorm's are the caller's alone), then the update, a piece at a time so
 * that the sum is still in cache when the update reads it.
 */
#define UPDATE_PIECE	4096

static void
update_job(void *arg, int t)
{
	Step	   *st = arg;
	NnModel    *m = st->m;

	for (int64_t a = st->pfirst[t]; a < st->pfirst[t + 1]; a += UPDATE_PIECE)
	{
		int64_t		b = a + UPDATE_PIECE < st->pfirst[t + 1] ? a + UPDATE_PIECE : st->pfirst[t + 1];

		for (int i = 0; i < m->spec.n_layers && st->sum; i++)
		{
			int64_t		lo = a > m->param_off[i] ? a : m->param_off[i],
						hi = b < m->param_off[i] + m->param_len[i] ? b : m->param_off[i] + m->param_len[i];

			if (lo >= hi || m->spec.layers[i].type == NN_BATCHNORM)
				continue;
			for (int s = 1; s < st->shards; s++)
			{
				const float *g = pool.views[s]->grads;

				for (int64_t k = lo; k < hi; k++)
					m->grads[k] += g[k];
			}
		}
		if (st->update)
			nn_update_range(m, a, b, st->lr);
	}
}

void
nn_parallel_backward_update(NnModel *m)
{
	Step		st;
	int			L = m->spec.n_layers;

	step_split(&st, m, m->last_n);
	for (int i = L; i > 0;)
	{
		int			j = i - 1;

		/* j: the last batchnorm before i, or -1 */
		while (j >= 0 && m->spec.layers[j].type != NN_BATCHNORM)
			j--;
		if (j + 1 < i)
		{
			st.from = j + 1;
			st.to = i;
			pool_run(st.shards, backward_job, &st);
		}
		if (j >= 0)
			nn_layer_backward_whole(m, j, m->last_n);
		i = j;
	}
	/* the update's ranges: whole cache lines */
	m->step++;
	for (int t = 0; t <= st.shards; t++)
		st.pfirst[t] = t == st.shards ? m->n_params : (m->n_params * t / st.shards) & ~(int64_t) 15;
	st.lr = (float) nn_optim_lr(&m->optim, m->step);
	st.sum = true;
	/* clipping needs the norm of the whole summed gradient before any update */
	st.update = m->optim.clip_norm <= 0.0f;
	pool_run(st.shards, update_job, &st);
	if (!st.update)
	{
		nn_clip_grads(m);
		st.sum = false;
		st.update = true;
		pool_run(st.shards, update_job, &st);
	}
}
