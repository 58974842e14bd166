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

#ifdef __cplusplus
extern "C"
{
#endif

/* The first CUDA error since initialization, as text; NULL when none. */
extern const char *nn_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif							/* PGDL_CUDA_BACKEND_H */
