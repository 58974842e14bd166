/*
 * rng.h -- the counter-based generator's core, shared by the engine
 * (src/nn/rng.c) and the kernels that draw from it (dropout masks on every
 * backend), so that a mask is the same bits wherever it is computed.
 *
 * Each value is a pure function of (seed, stream, counter).  The mixer is
 * SplitMix64's finalizer applied twice with the stream folded in between.
 * Plain integer arithmetic: a CUDA thread computes exactly what the CPU does.
 */
#ifndef PGDL_KERNELS_RNG_H
#define PGDL_KERNELS_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define NN_RNG_FN static inline __host__ __device__
#else
#define NN_RNG_FN static inline
#endif

NN_RNG_FN uint64_t
nn_rng_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

NN_RNG_FN uint64_t
nn_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
	uint64_t	key = nn_rng_mix64(seed + UINT64_C(0x9e3779b97f4a7c15) * (stream + 1));

	return nn_rng_mix64(key ^ (counter * UINT64_C(0xd1b54a32d192ed03) + UINT64_C(0x632be59bd9b4e019)));
}

/* [0, 1): the top 24 bits, exactly representable, strictly below 1 */
NN_RNG_FN float
nn_rng_unit(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return (float) (nn_rng_bits(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

#endif
