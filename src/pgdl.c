/*
 * pgdl.c -- module entry point: _PG_init, which calls each folder's init, and
 * pgdl.version().  Nothing includes it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "base/base.h"
#include "catalog/catalog.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

/*
 * Only each module's init: no engine or BLAS call here, since this may run in
 * the postmaster.
 */
void
_PG_init(void)
{
	pgdl_lifecycle_init();
	pgdl_devices_init();
	pgdl_guc_init();			/* last of those that define settings: it reserves the prefix */
	pgdl_model_io_init();
	pgdl_call_progress_init();
}

PG_FUNCTION_INFO_V1(pgdl_version);
Datum
pgdl_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(pgdl_build_description()));
}
