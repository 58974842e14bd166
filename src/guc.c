/*
 * guc.c -- pgdl.* settings.
 *
 * Settings only record values here; pgdl_engine_prepare() applies them to the
 * engine in the backend that uses it, never in the postmaster.
 */
#include "postgres.h"

#include "utils/guc.h"

#include "pgdl.h"

int			pgdl_blas_threads = 1;

void
pgdl_guc_init(void)
{
	DefineCustomIntVariable("pgdl.blas_threads",
							"Threads each backend's BLAS calls may use.",
							"Takes effect at the next pgdl call in the session. "
							"Parallel workers and pgdl's own workers each use this many.",
							&pgdl_blas_threads,
							1, 1, 64,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("pgdl");
}
