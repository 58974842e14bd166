/*
 * cuda_stub.c -- the CUDA entry points of a build without CUDA.
 *
 * Linked instead of backend_cuda.cu unless the build says WITH_CUDA=1, so the
 * engine can always ask for the CUDA backend and get a reason when there is none.
 */
#include <stdio.h>

#include "backend.h"
#include "cuda_backend.h"

const NnBackend *
nn_backend_cuda(char *err, size_t errlen)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen,
				 "pgdl was built without CUDA support; rebuild it with make WITH_CUDA=1 to use a GPU");
	return NULL;
}

const char *
nn_cuda_last_error(void)
{
	return NULL;
}

int
nn_cuda_devices(NnCudaDevice *out, int max, int *driver_version, char *err, size_t errlen)
{
	(void) out;
	(void) max;
	if (driver_version != NULL)
		*driver_version = 0;
	nn_backend_cuda(err, errlen);
	return -1;
}

const NnBackend *
nn_backend_cuda_on(int ordinal, char *err, size_t errlen)
{
	(void) ordinal;
	return nn_backend_cuda(err, errlen);
}
