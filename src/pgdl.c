/*
 * pgdl.c -- module entry point and the functions that describe the build.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "backend.h"
#include "nn/nn.h"
#include "pgdl.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

/*
 * OpenBLAS's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), present when
 * the BLAS we are linked against is OpenBLAS.  Weak, so that pgdl still loads
 * with another BLAS.
 */
extern char *openblas_get_config(void) __attribute__((weak));

/* The pgdl.blas_threads value the engine runs with; 0: not applied yet. */
static int	applied_blas_threads = 0;

/*
 * Only each module's init: no engine or BLAS call here, since this may run in
 * the postmaster.
 */
void
_PG_init(void)
{
	pgdl_lifecycle_init();
	pgdl_guc_init();
	pgdl_model_io_init();
	pgdl_call_progress_init();
}

void
pgdl_engine_prepare(void)
{
	if (pgdl_blas_threads != applied_blas_threads)
	{
		nn_set_blas_threads(pgdl_blas_threads);
		applied_blas_threads = pgdl_blas_threads;
	}
}

/* "OpenBLAS 0.3.21" from OpenBLAS's description, or "unknown". */
static void
BlasDescribe(StringInfo buf)
{
	const char *config = openblas_get_config ? openblas_get_config() : NULL;
	const char *end;

	if (config == NULL)
	{
		appendStringInfoString(buf, "unknown");
		return;
	}

	/* The name and the version are the first two words. */
	end = strchr(config, ' ');
	if (end != NULL)
		end = strchr(end + 1, ' ');
	if (end == NULL)
		end = config + strlen(config);
	appendBinaryStringInfo(buf, config, (int) (end - config));
}

/* pgdl.version(): what a coordinator compares with its nodes' before it trains there. */
char *
pgdl_build_description(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "pgdl %s (engine format %d, blas: ", PGDL_VERSION, NN_FORMAT_VERSION);
	BlasDescribe(&buf);
#ifdef PGDL_WITH_CUDA
	appendStringInfoString(&buf, ", cuda: yes)");
#else
	appendStringInfoString(&buf, ", cuda: no)");
#endif
	return buf.data;
}

PG_FUNCTION_INFO_V1(pgdl_version);
Datum
pgdl_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(pgdl_build_description()));
}
