/*
 * cuda_backend.h -- what the CUDA backend offers beyond the NnBackend table.
 *
 * nn_backend_cuda() itself is declared in backend.h.  Once it has returned a
 * backend, the table's functions return void, so a CUDA or cuBLAS failure
 * (a kernel that did not launch, a copy that failed, a device that fell off
 * the bus) is recorded here instead: the first one wins, later ones are
 * usually its consequences.  Callers check it after synchronize() or a
 * download.  Plain C; the build without CUDA (cuda_stub.c) always returns NULL.
 */
#ifndef PGDL_CUDA_BACKEND_H
#define PGDL_CUDA_BACKEND_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

/* The first CUDA error since initialization, as text; NULL when none. */
extern const char *nn_cuda_last_error(void);

/* A visible device, as pgdl.cuda_status() reports it. */
typedef struct NnCudaDevice
{
	int			ordinal;		/* N of "cuda:N" */
	char		name[256];
	int			major,			/* compute capability */
				minor;
	size_t		total_bytes,
				free_bytes;		/* 0 unless this process uses the device: knowing needs a context */
} NnCudaDevice;

/*
 * The devices this process sees, at most max of them into out (the number
 * written is returned), and the driver's version (CUDA's encoding, 13000 for
 * 13.0); -1 with a reason in err when there are none or no CUDA.  Creates no
 * context, but does initialize the CUDA driver in the calling process, which
 * then must not fork children that use CUDA (so: never in the postmaster).
 */
extern int	nn_cuda_devices(NnCudaDevice *out, int max, int *driver_version, char *err, size_t errlen);

/*
 * The CUDA backend on device ordinal (nn_backend_cuda is device 0), its
 * context created on first use in this process; NULL with a reason in err.
 * A process uses one device: asking for another once one is in use fails.
 */
extern const NnBackend *nn_backend_cuda_on(int ordinal, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif							/* PGDL_CUDA_BACKEND_H */
