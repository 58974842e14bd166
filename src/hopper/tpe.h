/*
 * hopper/tpe.h -- a search space's parameters as numbers, their draws from
 * the space's own distributions (pgdl.random_search, and the first batch of
 * pgdl.tpe_search), and the Tree-structured Parzen Estimator (Bergstra et al.
 * 2011, as Hyperopt and Optuna do it) that proposes pgdl.tpe_search's later
 * batches (hopper/tpe.c).
 *
 * Private to hopper/ and free of PostgreSQL, so that regress/unit tests it.
 * A point is one double per parameter: a choice's index, an int's value, a
 * uniform or log-uniform value; a fixed parameter is 0.  Every draw is the
 * engine's counter-based generator (nn_rng_u64) at a counter made of the trial
 * number and the candidate, so a proposal is a pure function of (seed, trial
 * number, the points and scores it is given): never of time or of which
 * worker finished first.
 */
#ifndef PGDL_HOPPER_TPE_H
#define PGDL_HOPPER_TPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum TpeKind
{
	TPE_FIXED = 0,				/* one value, not searched (0 in a point) */
	TPE_CHOICE,					/* an index in 0 .. n_choices - 1 */
	TPE_UNIFORM,				/* a value in [lo, hi] */
	TPE_LOG_UNIFORM,			/* a value in [lo, hi], lo > 0, uniform in its logarithm */
	TPE_INT						/* an integer in [lo, hi], |lo|, |hi| <= 2^53 */
} TpeKind;

typedef struct TpeParam
{
	TpeKind		kind;
	int32_t		n_choices;		/* choice: >= 1 */
	double		lo,
				hi;				/* uniform, log_uniform, int: finite, lo <= hi */
	uint64_t	stream;			/* the generator's stream of this parameter's draws */
} TpeParam;

/* The share of the best observations that make the "good" density l(x), and their most (Optuna's defaults). */
#define TPE_GAMMA			0.1
#define TPE_MAX_GOOD		25
/* Points drawn from l(x) for each proposal; the one of highest l(x)/g(x) is proposed. */
#define TPE_CANDIDATES		24
/* Draws from the space tried for a point not seen before, when every candidate was seen. */
#define TPE_RETRIES			64

/*
 * Parameter p's value in sample `counter` of the space's own distribution:
 * pgdl.random_search's sample `counter`, whatever the other parameters.
 */
extern double tpe_prior_draw(const TpeParam *p, uint64_t seed, uint64_t counter);

/*
 * A point for trial `trial` from the space's own distribution that is none of
 * the n_taken points of `taken` (n_params doubles each): its sample `trial`
 * first, then up to TPE_RETRIES other draws; false when all were taken.
 */
extern bool tpe_draw_new(const TpeParam *params, int32_t n_params, uint64_t seed, uint64_t trial,
						 const double *taken, int32_t n_taken, double *out);

/*
 * The densities l(x) (the best observations) and g(x) (the rest) of each
 * parameter, built from n_obs points x (n_params doubles each) and their
 * scores y (lower is better; NaN, as a diverged model's, ranks last).  The
 * model lives in `mem`, of tpe_model_bytes() bytes, and keeps `params`.
 */
typedef struct TpeModel TpeModel;

extern size_t tpe_model_bytes(const TpeParam *params, int32_t n_params, int32_t n_obs);
extern TpeModel *tpe_model_build(void *mem, const TpeParam *params, int32_t n_params, const double *x,
								 const double *y, int32_t n_obs);
/* log l(x) - log g(x) of a point: what a proposal maximizes. */
extern double tpe_log_ratio(const TpeModel *m, const double *point);

/*
 * Trial `trial`'s proposal: of TPE_CANDIDATES points drawn from l(x), the one
 * of highest l(x)/g(x) (the first of equals) that is none of `taken`; when all
 * were taken, tpe_draw_new's.  False when no new point was found.
 */
extern bool tpe_propose(const TpeModel *m, uint64_t seed, uint64_t trial, const double *taken, int32_t n_taken,
						double *out);

#endif							/* PGDL_HOPPER_TPE_H */
