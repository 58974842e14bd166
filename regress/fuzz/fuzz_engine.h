/*
 * fuzz_engine.h -- what every fuzz target does with a model that passed the
 * checks under test: use it as pgdl would next, and stop (abort) on anything
 * inconsistent.  Engine only, no PostgreSQL header.
 */
#ifndef PGDL_FUZZ_ENGINE_H
#define PGDL_FUZZ_ENGINE_H

#include <stdbool.h>

#include "nn/nn.h"

/*
 * Bounds on what one fuzz iteration builds and runs, so that an iteration takes
 * microseconds and the fuzzer's memory limit is never reached.  Larger specs
 * still go through every check; only their model is not built.
 */
#define FUZZ_MAX_PARAMS		(1 << 16)
#define FUZZ_MAX_FLOATS		(1 << 16)	/* input and activations per example */
#define FUZZ_MAX_FLOPS		(1 << 22)	/* training, per example */
#define FUZZ_BATCH			3

/* Whether a model of this valid spec is within the bounds above. */
extern bool fuzz_spec_small(const NnSpec *spec);

/* FUZZ_VERBOSE=1 in the environment: say what happened to each input (for corpus work). */
extern bool fuzz_verbose(void);
extern void fuzz_note(const char *fmt,...) __attribute__((format(printf, 1, 2)));

/* Abort with a message: the fuzzer reports it as a crash, with the input. */
extern void fuzz_fail(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));

/*
 * A training step (the model's own optimizer, else SGD), inference, the cut
 * and join of transfer learning, and a serialize/deserialize round trip that
 * must give the same bytes.  The model is small (fuzz_spec_small).
 */
extern void fuzz_use_model(NnModel *m);

/* n examples of deterministic input and valid targets for m (malloc'd). */
extern float *fuzz_inputs(const NnModel *m, int n);
extern float *fuzz_targets(const NnModel *m, int n);

#endif
