/*
 * fuzz_onnx.c -- libFuzzer target: the ONNX reader of pgdl.import_onnx
 * (pgdl_onnx_read in src/models/onnx_import.c): protobuf-c's unpacking, then the graph
 * walk, attribute and tensor checks, and the weights put into an engine model.
 *
 * onnx_import.c is compiled as it is, with fuzz_pg.c standing in for the
 * backend; its SQL function (SPI, jsonb, the catalog) is never called and the
 * link drops it.  Each input is read twice: without a dataset, and with one of
 * 8 features whose normalization is the one the "normalized" seed (gen_onnx.c)
 * carries.  An ERROR is a refusal, with an SQLSTATE other than XX000; what is
 * accepted must be a model the engine validates, with finite weights, that
 * trains, predicts and serializes (fuzz_use_model) when it is small.
 *
 * The reading runs on a thread of READ_STACK_BYTES of stack: protobuf-c
 * recurses once per nested message, and the 16 KB inputs (run.sh's -max_len)
 * can nest some 5,000 levels, about as much stack as the main thread's 8 MB.
 * Here nesting half again past the depth scan's bound of 100
 * (src/models/onnx_depth.c) overflows, and the seeds "deep_type" and "deep_graph",
 * 100 deep, show that the bound itself fits.
 */
#include "postgres.h"

#include <pthread.h>
#include <semaphore.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "models/models.h"

#include "fuzz_engine.h"
#include "fuzz_pg.h"
#include "gen_onnx.h"

#define FUZZ_MAX_MODEL_BYTES	(64 << 20)

volatile sig_atomic_t InterruptPending = false;
MemoryContext CurrentMemoryContext = NULL;	/* only handed to pgdl_model_free_with below */

void
ProcessInterrupts(void)
{
}

/* The database is UTF-8 here (as fuzz_pg.c's pg_mbcliplen has it). */
bool
pg_verifymbstr(const char *mbstr, int len, bool noError)
{
	return pg_encoding_verifymbstr(PG_UTF8, mbstr, len) == len;
}

/* pgdl.max_model_memory, here a fixed bound, as an ERROR like the real one. */
void
pgdl_check_model_memory(const NnSpec *spec, const NnOptim *optim, int32 batch, const char *what)
{
	NnMemory	mem;
	NnError		err;

	if (!nn_spec_memory(spec, optim, batch, &mem, &err))
		pgdl_report_nn_error("model spec", &err);
	if (mem.total > FUZZ_MAX_MODEL_BYTES)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg("%s is too large", what)));
}

static NnModel *built;			/* the reader's model: freed by the target, past any longjmp */

void
pgdl_model_free_with(NnModel *model, MemoryContext owner)
{
	if (built != NULL)
		fuzz_fail("the reader built two models");
	built = model;
}

static bool
read_onnx(const uint8_t *data, size_t size, const PgdlOnnxArgs *args, PgdlOnnxModel *out)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	pgdl_onnx_read(data, size, args, out);
	fuzz_error_armed = false;
	return true;
}

static void
check_model(const PgdlOnnxModel *out, const PgdlOnnxArgs *args)
{
	NnModel    *m = out->model;

	if (m == NULL || m != built)
		fuzz_fail("the reader returned a model it did not build");
	if (!nn_spec_validate(&m->spec, NULL, NULL))
		fuzz_fail("the reader returned a model of an invalid spec");
	if (!nn_model_params_finite(m))
		fuzz_fail("the reader returned a model with weights that are not finite");
	if (fuzz_spec_small(&m->spec))
		fuzz_use_model(m);
}

/*
 * protobuf-c takes some 1.7 KB of stack a level: the seeds 100 deep need
 * between 160 and 176 KB here.  With 256 KB, about 150 levels overflow.
 */
#define READ_STACK_BYTES	(256 << 10)

/* One reader thread for the whole run (a thread per input cost 9 in 10 of the time under AddressSanitizer). */
typedef struct ReadCall
{
	const uint8_t *data;
	size_t		size;
	const PgdlOnnxArgs *args;
	PgdlOnnxModel *out;
	bool		ok;
} ReadCall;

static ReadCall call;
static sem_t call_ready,
			call_done;

static void *
reader_thread(void *arg)
{
	for (;;)
	{
		while (sem_wait(&call_ready) != 0)
			;
		call.ok = read_onnx(call.data, call.size, call.args, call.out);
		sem_post(&call_done);
	}
	return NULL;
}

/* read_onnx on the reader's small stack (its setjmp and longjmp stay on that thread) */
static bool
read_on_small_stack(const uint8_t *data, size_t size, const PgdlOnnxArgs *args, PgdlOnnxModel *out)
{
	static bool started = false;

	if (!started)
	{
		pthread_attr_t attr;
		pthread_t	thread;

		if (sem_init(&call_ready, 0, 0) != 0 || sem_init(&call_done, 0, 0) != 0 ||
			pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, READ_STACK_BYTES) != 0 ||
			pthread_create(&thread, &attr, reader_thread, NULL) != 0)
			fuzz_fail("could not start the reader's thread");
		pthread_attr_destroy(&attr);
		started = true;
	}
	call = (ReadCall) {data, size, args, out, false};
	sem_post(&call_ready);
	while (sem_wait(&call_done) != 0)
		;
	return call.ok;
}

static void
read_with(const uint8_t *data, size_t size, const PgdlOnnxArgs *args)
{
	PgdlOnnxModel out = {0};

	built = NULL;
	if (read_on_small_stack(data, size, args, &out))
	{
		check_model(&out, args);
		fuzz_note("onnx: accepted, %d layers", out.model->spec.n_layers);
	}
	else if (fuzz_error_code == ERRCODE_INTERNAL_ERROR)
		fuzz_fail("the reader failed with an internal error: %s", fuzz_error_message);
	else
		fuzz_note("onnx: refused (%d): %s", fuzz_error_code, fuzz_error_message);
	if (built != NULL)
		nn_model_free(built);
	built = NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static float mean[8], std[8];
	PgdlDataset ds = {.n_features = 8, .classification = true, .n_classes = 2, .mean = mean, .std = std};
	PgdlOnnxArgs none = {.default_loss = NN_LOSS_CROSS_ENTROPY};
	PgdlOnnxArgs with = {.dataset = &ds, .default_loss = NN_LOSS_CROSS_ENTROPY};

	for (int i = 0; i < 8; i++)
	{
		mean[i] = GEN_ONNX_VALUE(strlen("mean"), i);
		std[i] = GEN_ONNX_VALUE(strlen("std"), i);
	}
	read_with(data, size, &none);
	read_with(data, size, &with);
	fuzz_arena_reset();
	return 0;
}
