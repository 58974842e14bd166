/*
 * engine_bridge.c -- the engine bridge: the engine brought in line with this session's
 * settings before a SQL function uses it, and the description of the build
 * that nodes of one cluster compare.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "backend.h"
#include "base/base.h"

/*
 * OpenBLAS's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), present when
 * the BLAS we are linked against is OpenBLAS.  Weak, so that pgdl still loads
 * with another BLAS.
 */
extern char *openblas_get_config(void) __attribute__((weak));

/* The pgdl.blas_threads value the engine runs with; 0: not applied yet. */
static int	applied_blas_threads = 0;

/* The cap pgdl.cpu_isa puts on the kernels: none for auto. */
static NnCpuIsa
isa_cap(void)
{
	return pgdl_cpu_isa == PGDL_CPU_ISA_AUTO ? NN_ISA_AVX512 : (NnCpuIsa) pgdl_cpu_isa;
}

void
pgdl_engine_prepare(void)
{
	if (pgdl_blas_threads != applied_blas_threads)
	{
		nn_set_blas_threads(pgdl_blas_threads);
		applied_blas_threads = pgdl_blas_threads;
	}
	nn_set_cpu_isa(isa_cap());
}

void
pgdl_check_precision(const NnOptim *optim, int32 device)
{
	if (!optim->bf16)
		return;
	if (device != PGDL_DEVICE_CPU && device != PGDL_DEVICE_UNSET)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bf16 training is not supported on device \"%s\"", pgdl_device_name(device)),
				 errdetail("pgdl's bf16 products run on the CPU only, with its AVX512_BF16 instructions."),
				 errhint("Train with \"precision\": \"fp32\" on the device, or with \"device\": \"cpu\".")));
	pgdl_engine_prepare();
	if (!nn_cpu_has_bf16())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bf16 training is not supported on this CPU"),
				 errdetail("bf16 products need the CPU feature AVX512_BF16, which this CPU lacks."),
				 errhint("Train with \"precision\": \"fp32\" (the default); a model trained in bf16 elsewhere predicts here in fp32.")));
	if (!nn_cpu_bf16())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bf16 training is not supported under pgdl.cpu_isa = %s", pgdl_cpu_isa_setting_name()),
				 errdetail("bf16 products need the CPU feature AVX512_BF16 and avx512 kernels; this CPU has AVX512_BF16, but the setting caps the kernels at %s.",
						   nn_cpu_isa_name(nn_cpu_isa())),
				 errhint("SET pgdl.cpu_isa = auto, or train with \"precision\": \"fp32\".")));
}

const char *
pgdl_cpu_isa_setting_name(void)
{
	return pgdl_cpu_isa == PGDL_CPU_ISA_AUTO ? "auto" : nn_cpu_isa_name((NnCpuIsa) pgdl_cpu_isa);
}

void
pgdl_engine_current(PgdlEngine *out)
{
	NnCpuIsa	best = nn_cpu_isa_detected();

	memset(out, 0, sizeof(*out));
	strlcpy(out->isa, nn_cpu_isa_name(isa_cap() < best ? isa_cap() : best), sizeof(out->isa));
	strlcpy(out->setting, pgdl_cpu_isa_setting_name(), sizeof(out->setting));
	strlcpy(out->blas_core, nn_blas_core(), sizeof(out->blas_core));
}

Jsonb *
pgdl_engine_jsonb(const PgdlEngine *engine)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "isa", engine->isa);
	pgdl_jsonb_put_string(&state, "setting", engine->setting);
	pgdl_jsonb_put_string(&state, "blas_core", engine->blas_core);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
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
