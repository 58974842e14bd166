/*
 * throughput.h -- predicted training speed from this server's profile
 * (pgdl.calibrate, calibrate.c), or from pgdl.cpu_gflops without one.
 */
#ifndef PGDL_THROUGHPUT_H
#define PGDL_THROUGHPUT_H

#include "nn/nn.h"

#define PGDL_PROFILE_VERSION	1
#define PGDL_PROFILE_MAX_POINTS	512

/* What a profile measured of one layer kind (or update, or step): seconds per unit of size per example. */
typedef struct PgdlProfilePoint
{
	int			kind;
	double		size;
	int32_t		batch;
	int32_t		kernel;			/* a convolution's: its cost per FLOP depends on it; 0: none */
	double		unit;
} PgdlProfilePoint;

typedef struct PgdlProfile
{
	int64_t		id;				/* 0: none; predictions come from pgdl.cpu_gflops */
	int32_t		workers;		/* that ran at once when it measured concurrency */
	double		compute_ratio;	/* a worker's step time with `workers` running vs alone: dense, conv2d */
	double		memory_ratio;	/* the same for everything else */
	int			n;
	PgdlProfilePoint points[PGDL_PROFILE_MAX_POINTS];
} PgdlProfile;

/* One training step of a network, predicted. */
typedef struct PgdlStepPrediction
{
	double		compute;		/* seconds in dense and conv2d layers */
	double		memory;			/* seconds in the rest: memory-bound layers, update, fixed cost */
	double		read;			/* seconds to read the batch from its packed table (first epoch) */
} PgdlStepPrediction;

/* The newest profile of this server (system identifier and host name), or id 0. */
extern void pgdl_profile_load(PgdlProfile *prof);
extern void pgdl_profile_add_point(PgdlProfile *prof, const char *kind, double size, int32_t batch,
								   int32_t kernel, double seconds);
/* Seconds the profile predicts for one kind at a size and batch; -1 when it has no point of it. */
extern double pgdl_profile_kind_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch);
/* The same for a convolution's kind, from the points of the measured kernel nearest to `kernel`. */
extern double pgdl_profile_conv_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch,
										int32_t kernel);
/* A training step of spec at batch with optimizer opt (the spec is valid). */
extern void pgdl_predict_step(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt, int32_t batch,
							  PgdlStepPrediction *out);
/*
 * Seconds per step of one worker while `workers` train at once; reading: with
 * the batch read from its packed table (an epoch that does not find its
 * buffers in memory: pgdl.fit's first), else from memory.
 */
extern double pgdl_predict_step_seconds(const PgdlProfile *prof, const PgdlStepPrediction *p, int workers,
										bool reading);
/* Training images per second of one worker while `workers` train at once. */
extern double pgdl_predict_images_per_second(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt,
											 int32_t batch, int workers, bool reading);
/* Seconds to start that many background workers (0 without a profile). */
extern double pgdl_profile_worker_start_seconds(const PgdlProfile *prof, int workers);
/* Seconds to read `floats` from a packed table (0 without a profile). */
extern double pgdl_profile_read_seconds(const PgdlProfile *prof, double floats);
/* Seconds a process takes to first touch `bytes` of shared memory others wrote (0 without a profile). */
extern double pgdl_profile_fault_seconds(const PgdlProfile *prof, double bytes);
/* pgdl_profile_read_seconds in a process new to the table's shared buffers: a worker. */
extern double pgdl_profile_worker_read_seconds(const PgdlProfile *prof, double floats);
/*
 * A pgdl.fit_multiple model's work besides training, by its parameters (0
 * without a profile, or one that did not measure it): at each visit of a
 * partition (its blob read, first step, written back), and a row of its
 * blob written (a checkpoint at the end of each epoch, or the model stored).
 */
extern double pgdl_profile_visit_seconds(const PgdlProfile *prof, double params);
extern double pgdl_profile_checkpoint_seconds(const PgdlProfile *prof, double params);
/*
 * A pgdl.fit_multiple run's work for one model of `params` parameters besides
 * training: its visits of `partitions` partitions and its checkpoints over
 * `epochs`, shared by `workers` (0 without a profile, or one that did not
 * measure them).
 */
extern double pgdl_profile_model_seconds(const PgdlProfile *prof, double params, int epochs, int partitions,
										 int workers);

#endif							/* PGDL_THROUGHPUT_H */
