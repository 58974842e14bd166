/*
 * pgdl.c -- module entry point: _PG_init, which calls each folder's init,
 * pgdl.version() and pgdl.cpu_info().  Nothing includes it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "backend.h"
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

/* What this session's training would record (pgdl_engine_jsonb's keys), and the best ISA of this CPU. */
PG_FUNCTION_INFO_V1(pgdl_cpu_info);
Datum
pgdl_cpu_info(PG_FUNCTION_ARGS)
{
	PgdlEngine	engine;
	JsonbParseState *state = NULL;

	pgdl_engine_current(&engine);
	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "isa", engine.isa);
	pgdl_jsonb_put_string(&state, "setting", engine.setting);
	pgdl_jsonb_put_string(&state, "blas_core", engine.blas_core);
	pgdl_jsonb_put_string(&state, "cpu", nn_cpu_isa_name(nn_cpu_isa_detected()));
	/* the CPU feature "precision": "bf16" trains with (AVX512_BF16), whatever the setting */
	pgdl_jsonb_put_bool(&state, "bf16", nn_cpu_has_bf16());
	PG_RETURN_JSONB_P(JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL)));
}
