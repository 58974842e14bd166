/*
 * cuda_fake.h -- a fake CUDA device for tests on machines without a GPU.
 *
 * A backend named "fake" that runs the CPU kernels on memory that the host
 * cannot touch: every allocation is an mmap region kept PROT_NONE except while
 * one of the table's functions runs, so an engine that reads or writes a
 * device model's memory directly crashes at once.  It is a test device, never
 * a production path.  The build without CUDA answers with it when
 * PGDL_FAKE_CUDA is set (cuda_stub.c); the unit tests also call it directly.
 *
 * config is what PGDL_FAKE_CUDA holds: settings separated by commas,
 *   "1"          one device of 1 GiB
 *   "mem=BYTES"  devices of BYTES: an allocation beyond it fails as cudaMalloc would
 *   "devices=N"  N devices (1 to 16), cuda:0 to cuda:N-1
 *   "busy"       the devices are listed, but creating a context fails, as on a
 *                device in exclusive-process mode that another process holds
 * Creating the "context" (the first nn_fake_cuda_on that succeeds in a
 * process) writes "pgdl: fake CUDA device N initialized in process PID" to
 * stderr; the context belongs to that process, and a process forked from it
 * cannot use it (as with CUDA).
 */
#ifndef PGDL_CUDA_FAKE_H
#define PGDL_CUDA_FAKE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "cuda_backend.h"

extern const NnBackend *nn_fake_cuda_on(const char *config, int ordinal, char *err, size_t errlen);
extern int	nn_fake_cuda_devices(const char *config, NnCudaDevice *out, int max, int *driver_version,
								 char *err, size_t errlen);
/* Bytes the fake device has handed out and not had back. */
extern size_t nn_fake_cuda_used(void);
/* Tests: forget this process's context (false, keeping it, while memory is still allocated). */
extern bool nn_fake_cuda_forget(void);

#endif
