/*
 * fuzz_spec.c -- libFuzzer target: the jsonb spec and configuration parser
 * (src/spec/spec_json.c) and the engine's validator behind it.
 *
 * spec_json.c is compiled as it is, against PostgreSQL's headers, with
 * fuzz_pg.c and fuzz_json.c standing in for the backend (jsonb, ereport,
 * palloc).  Each input is JSON text, parsed as a model spec, as a training
 * configuration and as a configuration-set entry (transfer keys allowed).
 * What is accepted must:
 *   - print (pgdl_spec_to_jsonb, pgdl_config_to_jsonb) to jsonb that parses
 *     back to the same spec or configuration;
 *   - for a spec within fuzz_engine.h's bounds, build a model that trains,
 *     predicts, cuts and serializes;
 *   - for a configuration, be taken by the engine's optimizer and train;
 *   - for a configuration-set entry, have transfer keys (pgdl_transfer_keys,
 *     which copies them into jsonb of their own) that read as the entry's do.
 * A spec may ask for any size: nothing is allocated before nn_spec_validate has
 * passed it, and models above the bounds are validated but not built.
 */
#include "postgres.h"

#include "backend.h"
#include "spec/spec.h"

#include "fuzz_engine.h"
#include "fuzz_pg.h"

static Jsonb *printed;			/* out of the guarded calls, past longjmp */

static bool
parse_spec(Jsonb *jb, NnSpec *spec)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	pgdl_spec_from_jsonb(jb, spec);
	fuzz_error_armed = false;
	return true;
}

static bool
parse_config(Jsonb *jb, PgdlTrainConfig *cfg, bool transfer)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	if (transfer)
		pgdl_config_from_jsonb_transfer(jb, cfg);
	else
		pgdl_config_from_jsonb(jb, cfg);
	fuzz_error_armed = false;
	return true;
}

static bool
print_spec(const NnSpec *spec)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	printed = pgdl_spec_to_jsonb(spec);
	fuzz_error_armed = false;
	return true;
}

static bool
print_config(const PgdlTrainConfig *cfg)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	printed = pgdl_config_to_jsonb(cfg);
	fuzz_error_armed = false;
	return true;
}

static bool
take_transfer_keys(Jsonb *jb)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	printed = pgdl_transfer_keys(jb);
	fuzz_error_armed = false;
	return true;
}

static bool
read_transfer_keys(Jsonb *jb, PgdlTransferKeys *keys)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	pgdl_transfer_keys_from_jsonb(jb, keys);
	fuzz_error_armed = false;
	return true;
}

static bool
same_scalar(const JsonbValue *a, const JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvString:
			return a->val.string.len == b->val.string.len &&
				memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
		case jbvNumeric:
			return strcmp(fuzz_numeric_text(a->val.numeric), fuzz_numeric_text(b->val.numeric)) == 0;
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		default:
			return true;
	}
}

/* The same JSON: every token and scalar alike, walked in step. */
static bool
same_container(JsonbContainer *a, JsonbContainer *b)
{
	JsonbIterator *ia = JsonbIteratorInit(a),
			   *ib = JsonbIteratorInit(b);
	JsonbValue	va,
				vb;
	JsonbIteratorToken ta,
				tb;

	do
	{
		ta = JsonbIteratorNext(&ia, &va, false);
		tb = JsonbIteratorNext(&ib, &vb, false);
		if (ta != tb)
			return false;
		if ((ta == WJB_KEY || ta == WJB_VALUE || ta == WJB_ELEM) && !same_scalar(&va, &vb))
			return false;
	} while (ta != WJB_DONE);
	return true;
}

static bool
same_transfer_keys(const PgdlTransferKeys *a, const PgdlTransferKeys *b)
{
	if ((a->base_name == NULL) != (b->base_name == NULL) ||
		(a->base_name != NULL && strcmp(a->base_name, b->base_name) != 0) ||
		(a->base_name == NULL && a->base_id != b->base_id))
		return false;
	if (a->freeze_given != b->freeze_given || a->freeze_count != b->freeze_count ||
		(a->freeze_layer == NULL) != (b->freeze_layer == NULL) ||
		(a->freeze_layer != NULL && strcmp(a->freeze_layer, b->freeze_layer) != 0))
		return false;
	if ((a->head == NULL) != (b->head == NULL))
		return false;
	return a->head == NULL || same_container(a->head, b->head);
}

/*
 * A configuration set stores an entry as its canonical configuration and its
 * transfer keys as pgdl_transfer_keys takes them: they must read as the
 * entry's own, or fail in the same way.
 */
static void
check_transfer_keys(Jsonb *jb)
{
	bool		has = pgdl_config_has_transfer(jb);
	Jsonb	   *taken;
	PgdlTransferKeys given,
				kept;
	bool		given_ok;
	char		given_error[sizeof(fuzz_error_message)];

	if (!take_transfer_keys(jb))
		fuzz_fail("the transfer keys of an accepted entry cannot be taken: %s", fuzz_error_message);
	taken = printed;
	if ((taken != NULL) != has)
		fuzz_fail("pgdl_transfer_keys and pgdl_config_has_transfer disagree");
	if (taken == NULL)
		return;
	given_ok = read_transfer_keys(jb, &given);
	memcpy(given_error, fuzz_error_message, sizeof(given_error));
	if (read_transfer_keys(taken, &kept) != given_ok ||
		(!given_ok && strcmp(given_error, fuzz_error_message) != 0))
		fuzz_fail("transfer keys read differently once taken: \"%s\" and \"%s\"",
				  given_ok ? "" : given_error, fuzz_error_message);
	if (given_ok && !same_transfer_keys(&given, &kept))
		fuzz_fail("transfer keys change once taken");
	if (given_ok)
		fuzz_note("transfer keys read");
	else
		fuzz_note("transfer keys refused: %s", given_error);
}

/* What the printed form keeps: a pool's stride is written out when it is the default. */
static bool
same_layer(const NnLayerSpec *a, const NnLayerSpec *b)
{
	int32		stride_a = a->stride,
				stride_b = b->stride;

	if (a->type == NN_MAXPOOL2D || a->type == NN_AVGPOOL2D)
	{
		stride_a = stride_a ? stride_a : a->kernel;
		stride_b = stride_b ? stride_b : b->kernel;
	}
	return a->type == b->type && a->units == b->units && a->filters == b->filters &&
		a->kernel == b->kernel && stride_a == stride_b && a->padding == b->padding &&
		a->init == b->init && a->alpha == b->alpha && a->rate == b->rate &&
		a->eps == b->eps && a->momentum == b->momentum;
}

static void
check_spec_round_trip(const NnSpec *spec)
{
	NnSpec	   *back = palloc(sizeof(NnSpec));

	if (!print_spec(spec))
		fuzz_fail("a valid spec does not print: %s", fuzz_error_message);
	if (!parse_spec(printed, back))
		fuzz_fail("a printed spec does not parse back: %s", fuzz_error_message);
	if (back->input_ndim != spec->input_ndim || back->n_layers != spec->n_layers ||
		back->loss != spec->loss || memcmp(back->input, spec->input, sizeof(spec->input)) != 0)
		fuzz_fail("a spec changes through printing and parsing");
	for (int i = 0; i < spec->n_layers; i++)
		if (!same_layer(&spec->layers[i], &back->layers[i]))
			fuzz_fail("layer %d of a spec changes through printing and parsing", i);
}

/* Only the fields of the chosen optimizer are printed. */
static bool
same_config(const PgdlTrainConfig *a, const PgdlTrainConfig *b)
{
	const NnOptim *x = &a->optim,
			   *y = &b->optim;
	bool		same = x->type == y->type && x->lr == y->lr && x->weight_decay == y->weight_decay &&
		a->batch_size == b->batch_size && a->seed == b->seed && x->bf16 == y->bf16;

	if (x->type == NN_OPT_SGD)
		return same && x->momentum == y->momentum && x->nesterov == y->nesterov;
	return same && x->beta1 == y->beta1 && x->beta2 == y->beta2 && x->eps == y->eps;
}

static void
use_config(const PgdlTrainConfig *cfg)
{
	PgdlTrainConfig back;
	NnSpec		spec;
	NnModel    *m;
	NnError		err;
	float	   *x,
			   *y;

	if (!print_config(cfg))
		fuzz_fail("a valid configuration does not print: %s", fuzz_error_message);
	if (!parse_config(printed, &back, false))
		fuzz_fail("a printed configuration does not parse back: %s", fuzz_error_message);
	if (!same_config(cfg, &back))
		fuzz_fail("a configuration changes through printing and parsing");

	memset(&spec, 0, sizeof(spec));
	spec.input_ndim = 1;
	spec.input[0] = 4;
	spec.n_layers = 1;
	spec.loss = NN_LOSS_CROSS_ENTROPY;
	nn_layer_defaults(&spec.layers[0], NN_DENSE);
	spec.layers[0].units = 3;
	m = nn_model_create(&spec, (uint64_t) cfg->seed, &err);
	/* "precision": "bf16" where the CPU has no bf16 products: the engine refuses it too, naming the key */
	if (m != NULL && cfg->optim.bf16 && !nn_cpu_bf16())
	{
		if (nn_model_set_optim(m, &cfg->optim, &err) || strcmp(err.field, "precision") != 0)
			fuzz_fail("bf16 on a CPU without it is not refused by the engine");
		nn_model_free(m);
		return;
	}
	if (m == NULL || !nn_model_set_optim(m, &cfg->optim, &err) ||
		!nn_model_reserve(m, cfg->batch_size, &err))
		fuzz_fail("a valid configuration is refused by the engine: %s", err.msg);
	x = fuzz_inputs(m, FUZZ_BATCH);
	y = fuzz_targets(m, FUZZ_BATCH);
	if (!nn_model_train_step(m, x, y, FUZZ_BATCH, NULL, &err))
		fuzz_fail("a valid configuration does not train: %s", err.msg);
	free(x);
	free(y);
	nn_model_free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Jsonb	   *jb = fuzz_jsonb_parse((const char *) data, size);

	if (jb != NULL)
	{
		NnSpec	   *spec = palloc(sizeof(NnSpec));
		PgdlTrainConfig cfg;

		if (!parse_spec(jb, spec))
			fuzz_note("spec refused: %s", fuzz_error_message);
		else
		{
			check_spec_round_trip(spec);
			if (fuzz_spec_small(spec))
			{
				NnError		err;
				NnModel    *m = nn_model_create(spec, 42, &err);

				if (m == NULL)
					fuzz_fail("a small valid spec builds no model: %s", err.msg);
				fuzz_use_model(m);
				nn_model_free(m);
			}
			fuzz_note("spec passed");
		}
		if (parse_config(jb, &cfg, false))
			use_config(&cfg);
		else
			fuzz_note("configuration refused: %s", fuzz_error_message);
		if (parse_config(jb, &cfg, true))
		{
			use_config(&cfg);
			check_transfer_keys(jb);
		}
		else
			fuzz_note("configuration-set entry refused: %s", fuzz_error_message);
	}
	else
		fuzz_note("not JSON that jsonb takes");
	fuzz_jsonb_reset();
	fuzz_arena_reset();
	return 0;
}
