/*
 * rng.c -- a counter-based random generator.
 *
 * Each value is a pure function of (seed, stream, counter), so initialization
 * and dropout masks never depend on the order in which threads or workers ask
 * for them.  The mixer is SplitMix64's finalizer applied twice with the stream
 * folded in between; it passes the usual avalanche tests and is plenty for
 * initialization and dropout (this is not a cryptographic generator).
 */
#include <math.h>

#include "nn.h"
#include "rng.h"

/* The core lives in kernels/rng.h: dropout kernels draw the same values on every backend. */
uint64_t
nn_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return nn_rng_bits(seed, stream, counter);
}

float
nn_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return nn_rng_unit(seed, stream, counter);
}

float
nn_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
	/* Box-Muller on two values derived from this counter alone */
	uint64_t	r1 = nn_rng_u64(seed, stream, 2 * counter);
	uint64_t	r2 = nn_rng_u64(seed, stream, 2 * counter + 1);
	double		u1 = ((double) (r1 >> 11) + 1.0) * (1.0 / 9007199254740993.0);	/* (0, 1] */
	double		u2 = (double) (r2 >> 11) * (1.0 / 9007199254740992.0);

	return (float) (sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/*
 * A permutation of 0..n-1 fixed by (seed, stream): Fisher-Yates on the
 * counter-based generator.  Used wherever an order must be reproducible, such
 * as the order in which a model visits partitions in an epoch.
 */
void
nn_rng_permutation(uint64_t seed, uint64_t stream, int32_t n, int32_t *out)
{
	for (int32_t i = 0; i < n; i++)
		out[i] = i;
	for (int32_t i = n - 1; i > 0; i--)
	{
		int32_t		j = (int32_t) (nn_rng_u64(seed, stream, (uint64_t) i) % (uint64_t) (i + 1));
		int32_t		t = out[i];

		out[i] = out[j];
		out[j] = t;
	}
}
