/*
 * cuda_stub.c -- the CUDA entry points of a build without CUDA.
 *
 * Linked instead of backend_cuda.cu unless the build says WITH_CUDA=1, so the
 * engine can always ask for the CUDA backend and get a reason when there is none.
 *
 * PGDL_FAKE_CUDA: when this environment variable is set (and not "" or "0"),
 * these functions answer with the fake device of cuda_fake.c instead, whose
 * memory the host cannot touch; its value ("1", "mem=BYTES", "devices=N",
 * "busy", comma-separated) is described in cuda_fake.h.  A test device for
 * machines without a GPU (CI), never a production path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_backend.h"
#include "cuda_fake.h"

static const char *
fake_config(void)
{
	const char *v = getenv("PGDL_FAKE_CUDA");

	return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 ? v : NULL;
}

static const NnBackend *
no_cuda(char *err, size_t errlen)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen,
				 "pgdl was built without CUDA support; rebuild it with make WITH_CUDA=1 to use a GPU");
	return NULL;
}

const NnBackend *
nn_backend_cuda(char *err, size_t errlen)
{
	return nn_backend_cuda_on(0, err, errlen);
}

const char *
nn_cuda_last_error(void)
{
	return NULL;
}

int
nn_cuda_devices(NnCudaDevice *out, int max, int *driver_version, char *err, size_t errlen)
{
	if (fake_config() != NULL)
		return nn_fake_cuda_devices(fake_config(), out, max, driver_version, err, errlen);
	(void) out;
	(void) max;
	if (driver_version != NULL)
		*driver_version = 0;
	no_cuda(err, errlen);
	return -1;
}

const NnBackend *
nn_backend_cuda_on(int ordinal, char *err, size_t errlen)
{
	if (fake_config() != NULL)
		return nn_fake_cuda_on(fake_config(), ordinal, err, errlen);
	return no_cuda(err, errlen);
}
