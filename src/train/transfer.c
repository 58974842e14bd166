/*
 * transfer.c -- transfer learning: configurations that start from a stored
 * model's first layers, frozen.
 *
 * A configuration may take its first `freeze` layers, frozen, from a stored
 * base model and train the rest: the base's remaining layers (fine-tuning) or
 * a `head` of its own.  spec_json.c reads the keys (base_model, freeze, head);
 * this file resolves them against the base model, cuts it into the frozen
 * prefix and the trained rest, joins them again when training is done, and
 * computes a prefix's outputs and hash, which feature caches (feature_cache.c)
 * are made of and keyed by.  It is to src/nn/transfer.c what spec_json.c is
 * to src/nn/spec.c.
 *
 * Caches are exact: a cache view's rows are computed by pgdl.cache_features,
 * which runs the prefix in inference mode NN_FROZEN_CHUNK examples at a time,
 * as the recomputing path does, so heads train on the same bytes either way.
 * A view names the hash of the weights it was defined for and refuses to
 * compute with others.
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "train/train.h"

static void transfer_error(const char *key, const char *detail) pg_attribute_noreturn();

static void
transfer_error(const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid training configuration at %s", key),
			 errdetail("%s", detail)));
}

/* ---- prefixes and their hash ---- */

static void
sha256_hex(const uint8 *data, size_t len, char *hex)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	if (pg_cryptohash_init(ctx) < 0 || pg_cryptohash_update(ctx, data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute a SHA-256 hash: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, sizeof(digest), hex);
	hex[2 * sizeof(digest)] = '\0';
}

void
pgdl_prefix_hash(const NnModel *prefix, char *hex)
{
	Size		len = nn_model_serialized_size(prefix);
	uint8	   *blob = palloc(len);

	/* a slice has seed 0, step 0 and no optimizer: its bytes are its spec and weights */
	nn_model_serialize(prefix, blob);
	sha256_hex(blob, len, hex);
	pfree(blob);
}

/* Layers [from, to) of m, freed when `owner` is reset; errors name `what`. */
static NnModel *
model_layers(const NnModel *m, int32 from, int32 to, const char *what, MemoryContext owner)
{
	NnError		err;
	NnModel    *slice = nn_model_slice(m, from, to, 0, &err);

	if (slice == NULL)
		pgdl_report_nn_error(what, &err);
	pgdl_model_free_with(slice, owner);
	return slice;
}

/* ---- configurations with a base model ---- */

/*
 * Layer names for "freeze": a layer's type and its rank among the layers of
 * that type, from 1 ("conv2d_2", "flatten_1"), or the bare type when the
 * network has only one layer of it ("flatten").
 */
static int
layer_by_name(const NnSpec *spec, const char *name)
{
	int			rank[NN_LAYER_TYPE_MAX] = {0};
	int			count[NN_LAYER_TYPE_MAX] = {0};
	int			bare = -1;

	for (int i = 0; i < spec->n_layers; i++)
		count[spec->layers[i].type]++;
	for (int i = 0; i < spec->n_layers; i++)
	{
		NnLayerType t = spec->layers[i].type;
		char		full[64];

		snprintf(full, sizeof(full), "%s_%d", nn_layer_type_name(t), ++rank[t]);
		if (strcmp(full, name) == 0)
			return i;
		if (strcmp(nn_layer_type_name(t), name) == 0 && count[t] == 1)
			bare = i;
	}
	return bare;
}

/* The base model a configuration names, by name or id; t->base_name says it as the configuration does. */
static PgdlModel *
resolve_base(const PgdlTransferKeys *keys, PgdlTransfer *t)
{
	PgdlModel  *base;

	if (keys->base_name != NULL)
	{
		t->base_name = keys->base_name;
		base = pgdl_model_by_name(keys->base_name);
	}
	else
	{
		base = pgdl_model_by_id(keys->base_id);
		t->base_name = psprintf(INT64_FORMAT, keys->base_id);
	}
	t->base_id = base->id;
	return base;
}

/* How many of the base's layers "freeze" says, and that something is left to train. */
static int32
resolve_freeze(const PgdlTransferKeys *keys, const NnSpec *base)
{
	int32		freeze;

	if (!keys->freeze_given)
		transfer_error("freeze", "A configuration with \"base_model\" says how many of its layers to freeze (\"freeze\": 4), or through which layer (\"freeze\": \"flatten\").");
	if (keys->freeze_layer != NULL)
	{
		int			i = layer_by_name(base, keys->freeze_layer);

		if (i < 0)
			transfer_error("freeze", psprintf("The base model has no layer \"%s\"; layers are named by type and rank, such as \"conv2d_2\", or by type alone when it is unique.", pgdl_echo(keys->freeze_layer)));
		freeze = i + 1;
	}
	else
	{
		if (keys->freeze_count < 0 || keys->freeze_count > base->n_layers)
			transfer_error("freeze", psprintf("\"freeze\" must be a whole number of layers between 0 and %d (the base model's layers).", base->n_layers));
		freeze = keys->freeze_count;
	}
	if (keys->head == NULL && freeze == base->n_layers)
		transfer_error("freeze", "Every layer of the base model is frozen and there is no \"head\": nothing would train.");
	return freeze;
}

/* What trains: a new head on the frozen layers' outputs, or the base's other layers. */
static NnModel *
trained_rest(const NnModel *base, int32 freeze, JsonbContainer *head, uint64 seed)
{
	NnError		err;
	NnModel    *rest;

	if (head != NULL)
	{
		NnSpec	   *spec = palloc(sizeof(NnSpec));

		PG_TRY();
		{
			pgdl_head_spec_from_jsonb(head, &base->shape[freeze], base->spec.loss, base->spec.delta, spec);
		}
		PG_CATCH();
		{
			errcontext("the \"head\" of the configuration, on the output of the base model's first %d layers", freeze);
			PG_RE_THROW();
		}
		PG_END_TRY();
		pgdl_check_model_memory(spec, NULL, 0, "the head");
		rest = nn_model_create(spec, seed, &err);
		if (rest == NULL)
			pgdl_report_nn_error("head", &err);
	}
	else
	{
		rest = nn_model_slice(base, freeze, base->spec.n_layers, seed, &err);
		if (rest == NULL)
			pgdl_report_nn_error("base model", &err);
	}
	pgdl_model_free_with(rest, CurrentMemoryContext);
	return rest;
}

/* The whole network, as it will be stored: the base's first t->freeze layers, then the rest's. */
static NnSpec *
whole_spec(const NnSpec *base, const PgdlTransfer *t)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	NnError		err;

	memcpy(spec, base, sizeof(NnSpec));
	if (t->freeze + t->rest->spec.n_layers > NN_MAX_LAYERS)
		transfer_error("head", psprintf("The network would have more than %d layers.", NN_MAX_LAYERS));
	memcpy(&spec->layers[t->freeze], t->rest->spec.layers, sizeof(NnLayerSpec) * t->rest->spec.n_layers);
	spec->n_layers = t->freeze + t->rest->spec.n_layers;
	if (!nn_spec_validate(spec, NULL, &err))
		pgdl_report_nn_error("model spec", &err);
	return spec;
}

void
pgdl_transfer_prepare(Jsonb *config, uint64 seed, PgdlTransfer *t)
{
	PgdlTransferKeys keys;
	PgdlModel  *base;
	NnModel    *b;

	memset(t, 0, sizeof(*t));
	pgdl_transfer_keys_from_jsonb(config, &keys);
	base = resolve_base(&keys, t);
	b = base->nn;				/* the cache's: copied from below, before any query */
	t->freeze = resolve_freeze(&keys, &b->spec);
	if (t->freeze > 0)
	{
		t->prefix = model_layers(b, 0, t->freeze, "base model", CurrentMemoryContext);
		pgdl_prefix_hash(t->prefix, t->hash);
	}
	t->dataset = base->dataset ? base->dataset->id : 0;
	t->rest = trained_rest(b, t->freeze, keys.head, seed);
	t->spec = whole_spec(&b->spec, t);
}

/*
 * Training on features preprocessed otherwise than the base model's dataset
 * is allowed (the new layers learn from whatever the frozen ones make of
 * them), but seldom meant: a NOTICE names the first difference.  Labels may
 * differ, which is what a new head is for.
 */
void
pgdl_transfer_note_preprocessing(const PgdlTransfer *t, const PgdlDataset *ds)
{
	PgdlDataset *base;
	char	   *difference;
	char	   *base_table;

	if (t->dataset == 0 || t->dataset == ds->id)
		return;
	base = pgdl_dataset_by_id(t->dataset);
	difference = pgdl_dataset_features_difference(base, ds);
	if (difference == NULL)
		return;
	base_table = get_rel_name(base->packed);
	ereport(NOTICE,
			(errmsg("base model \"%s\" was trained on features preprocessed otherwise than \"%s\"",
					pgdl_echo(t->base_name), get_rel_name(ds->packed)),
			 errdetail("%s", difference),
			 base_table ?
			 errhint("Its frozen layers take these features as they are. To give them what they were trained on, "
					 "pack the training set like %s (with reference => it when the labels are the same).",
					 DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(base->packed)))) : 0));
}

bytea *
pgdl_transfer_join(const PgdlTransfer *t, const uint8 *rest_blob, Size rest_len)
{
	NnError		err;
	NnModel    *rest = nn_model_deserialize(rest_blob, rest_len, &err);
	NnModel    *joined;

	if (rest == NULL)
		elog(ERROR, "trained model is corrupt: %s", err.msg);
	pgdl_model_free_with(rest, CurrentMemoryContext);
	if (t->prefix == NULL)
		return pgdl_model_serialize(rest);
	joined = nn_model_join(t->prefix, rest, &err);
	if (joined == NULL)
		pgdl_report_nn_error("model", &err);
	pgdl_model_free_with(joined, CurrentMemoryContext);
	return pgdl_model_serialize(joined);
}

/* ---- pgdl.cache_features: the rows of a cache view ---- */

typedef struct CacheFeaturesState
{
	int64		base_id;
	int32		from,
				to;
	char		hash[65];
	NnModel    *layers;			/* base layers [from, to), freed when cxt is reset */
	MemoryContext cxt;
} CacheFeaturesState;

/* Layers [from, to) of base model base_id, whose first `to` must hash to `hash`, kept in flinfo's state. */
static CacheFeaturesState *
cache_features_layers(FmgrInfo *flinfo, int64 base_id, int32 from, int32 to, const char *hash)
{
	CacheFeaturesState *st = flinfo->fn_extra;
	PgdlModel  *base = pgdl_model_by_id(base_id);
	NnModel    *whole;
	char		now[65];
	MemoryContext old;

	if (from < 0 || to <= from || to > base->nn->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layers %d to %d are not a range of the base model's %d layers",
						from, to, base->nn->spec.n_layers)));
	whole = model_layers(base->nn, 0, to, "base model", CurrentMemoryContext);
	pgdl_prefix_hash(whole, now);
	if (strcmp(now, hash) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the first %d layers of model " INT64_FORMAT " changed since this feature cache was defined", to, base_id),
				 errdetail("The cache holds features of weights with hash %s; the model's now hash to %s.", hash, now),
				 errhint("Drop the cache with pgdl.drop_feature_cache(); pgdl.fit_multiple builds a new one when it needs it.")));
	old = MemoryContextSwitchTo(flinfo->fn_mcxt);
	if (st == NULL)
	{
		st = palloc0(sizeof(CacheFeaturesState));
		st->cxt = AllocSetContextCreate(flinfo->fn_mcxt, "pgdl cache_features", ALLOCSET_SMALL_SIZES);
	}
	MemoryContextReset(st->cxt);	/* frees the layers of another base or range */
	st->layers = NULL;
	st->base_id = 0;			/* no key until the layers are there */
	flinfo->fn_extra = st;
	MemoryContextSwitchTo(old);
	st->layers = model_layers(whole, from, to, "base model", st->cxt);
	/* a cache build runs on the device of the worker or backend that builds (no key set if it fails) */
	pgdl_device_move(st->layers, pgdl_device_for(NULL), NULL, NN_FROZEN_CHUNK);
	st->base_id = base_id;
	st->from = from;
	st->to = to;
	strlcpy(st->hash, hash, sizeof(st->hash));
	return st;
}

/*
 * A feature cache build (a REFRESH of its view) in pgdl.progress, one buffer
 * at a time.  It has no end of its own: its transaction's end ends it.  The
 * work on a cache that feature_cache.c writes names the view and its buffers
 * in the setting pgdl_cache.build ("oid buffers"); a REFRESH by hand shows
 * no total.  Within another call of pgdl (a pack of a query on a cache view)
 * it shows nothing.
 */
static void
cache_build_progress(int32 n)
{
	static char build[64];
	static int64 done;
	static int64 examples;
	static int64 total;
	const char *now = GetConfigOption("pgdl_cache.build", true, false);

	now = now ? now : "";
	if (pgdl_call_progress_kind() == PGDL_CALL_FEATURE_CACHE && strcmp(now, build) != 0)
		pgdl_call_progress_end();
	if (pgdl_call_progress_kind() == 0)
	{
		unsigned int view = 0;
		long long	buffers = -1;

		if (sscanf(now, "%u %lld", &view, &buffers) != 2 || buffers < 1)
			view = 0, buffers = -1;
		strlcpy(build, now, sizeof(build));
		done = examples = 0;
		total = buffers;
		pgdl_call_progress_begin(PGDL_CALL_FEATURE_CACHE, (Oid) view);
		pgdl_call_progress_phase(PGDL_PHASE_COMPUTING, 0, total, false);
	}
	if (pgdl_call_progress_kind() != PGDL_CALL_FEATURE_CACHE)
		return;
	done++;
	examples += n;
	pgdl_call_progress_update(done, examples, total > 0 ? (double) done / total : 0);
}

/*
 * cache_features(base, from, to, base_hash, x, n): layers [from, to) of the
 * base model on a buffer of n examples whose x are the outputs of its first
 * `from` layers, or an error if its first `to` layers no longer hash to
 * base_hash.  Internal: the definition of every cache view.
 */
PG_FUNCTION_INFO_V1(pgdl_cache_features);
Datum
pgdl_cache_features(PG_FUNCTION_ARGS)
{
	int64		base_id = PG_GETARG_INT64(0);
	int32		from = PG_GETARG_INT32(1);
	int32		to = PG_GETARG_INT32(2);
	char	   *hash = text_to_cstring(PG_GETARG_TEXT_PP(3));
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(4);
	int32		n = PG_GETARG_INT32(5);
	CacheFeaturesState *st = fcinfo->flinfo->fn_extra;
	int64		length;
	const float *x = pgdl_float4_array(xa, "x", &length);
	ArrayType  *result;

	/* checked before the model is looked up, and never echoed: it may be anything */
	if (strlen(hash) != 64 || strspn(hash, "0123456789abcdef") != 64)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("base_hash is not a prefix hash"),
				 errdetail("A prefix hash is 64 lower-case hexadecimal digits, as pgdl.prefix_hash() gives.")));
	pgdl_engine_prepare();
	if (st == NULL || st->layers == NULL || st->base_id != base_id || st->from != from || st->to != to ||
		strcmp(st->hash, hash) != 0)
		st = cache_features_layers(fcinfo->flinfo, base_id, from, to, hash);
	if (n < 1 || n > NN_MAX_BATCH || length != (int64) n * nn_model_input_size(st->layers))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("buffer of %d examples has %lld values of x; the frozen layers take " INT64_FORMAT " per example",
						n, (long long) length, nn_model_input_size(st->layers))));
	result = pgdl_float4_array_new((int64) n * nn_model_output_size(st->layers));
	pgdl_prefix_forward(st->layers, x, n, (float *) ARR_DATA_PTR(result));
	cache_build_progress(n);
	PG_RETURN_ARRAYTYPE_P(result);
}

void
pgdl_prefix_forward(NnModel *prefix, const float *x, int32 n, float *out)
{
	NnError		err;

	pgdl_check_model_batch(prefix, Min(n, NN_FROZEN_CHUNK), "the frozen layers");
	if (!nn_model_forward_frozen(prefix, x, n, out, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%s.", err.msg)));
}

const float *
pgdl_prefix_run(PgdlPrefixRun *run, const float *x, int32 n)
{
	if (run->prefix == NULL)
		return x;
	if (n > run->out_examples)
	{
		Size		size = mul_size((Size) n, mul_size(nn_model_output_size(run->prefix), sizeof(float)));

		run->out = run->out ? repalloc_huge(run->out, size) : MemoryContextAllocHuge(run->cxt, size);
		run->out_examples = n;
	}
	pgdl_prefix_forward(run->prefix, x, n, run->out);
	return run->out;
}

/* ---- the hash of a prefix, in SQL ---- */

/* prefix_hash(model, layers): what a cache of the model's first `layers` layers is keyed by. */
PG_FUNCTION_INFO_V1(pgdl_prefix_hash_sql);
Datum
pgdl_prefix_hash_sql(PG_FUNCTION_ARGS)
{
	PgdlModel  *model = pgdl_model_by_id(PG_GETARG_INT64(0));
	int32		layers = PG_GETARG_INT32(1);
	char		hex[65];

	if (layers < 1 || layers > model->nn->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layer must be between 1 and %d, got %d", model->nn->spec.n_layers, layers),
				 errdetail("A prefix of a model is its first 1 to %d layers.", model->nn->spec.n_layers)));
	pgdl_prefix_hash(model_layers(model->nn, 0, layers, "model", CurrentMemoryContext), hex);
	PG_RETURN_TEXT_P(cstring_to_text(hex));
}

/* ---- warm starts: a new model with a stored model's layers where the shapes fit ---- */

/* Layer i of a and of b: the same type and parameter tensors of the same shapes (running statistics too). */
static bool
layers_fit(const NnModel *a, const NnModel *b, int i)
{
	PgdlTensor	ta[PGDL_LAYER_MAX_TENSORS],
				tb[PGDL_LAYER_MAX_TENSORS];
	int			n;

	if (i >= a->spec.n_layers || i >= b->spec.n_layers || a->spec.layers[i].type != b->spec.layers[i].type)
		return false;
	n = pgdl_layer_tensors(a, i, ta);
	if (n == 0 || n != pgdl_layer_tensors(b, i, tb))
		return false;
	for (int t = 0; t < n; t++)
		if (ta[t].ndim != tb[t].ndim || memcmp(ta[t].shape, tb[t].shape, sizeof(int) * ta[t].ndim) != 0)
			return false;
	return true;
}

/* Copies into m the layers of the stored model (name, or id) that fit; *origin: the lineage (may be NULL). */
static void
warm_start(NnModel *m, const char *name, int64 id, Jsonb **origin)
{
	PgdlModel  *from = name ? pgdl_model_by_name(name) : pgdl_model_by_id(id);
	JsonbParseState *state = NULL;
	NnError		err;
	int			copied = 0;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "warm_start", from->id);
	pgdl_jsonb_put_key(&state, "layers_copied");
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		if (!layers_fit(m, from->nn, i))
			continue;
		if (!nn_model_copy_layers(m, i, from->nn, i, 1, &err))
			pgdl_report_nn_error("model spec", &err);
		pgdl_jsonb_put_int(&state, NULL, i);
		copied++;
	}
	pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	if (copied == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid training configuration at warm_start"),
				 errdetail("No layer of the network has the type and parameter shapes of the same layer of model %s.",
						   name ? psprintf("\"%s\"", pgdl_echo(name)) : psprintf(INT64_FORMAT, id)),
				 errhint("A warm start copies layer i of the stored model where its type and parameter shapes equal layer i's; pgdl.zoo shows each model's layers.")));
	if (origin)
		*origin = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/*
 * The model a configuration starts from: spec initialized from seed, as always; with "warm_start", every
 * layer i whose type and parameter shapes equal those of the stored model's layer i is then copied from
 * it (parameters and running statistics), by position.  The stored model is read as the caller, so
 * another role's is one that does not exist.  *origin (when origin is not NULL): NULL, or the lineage
 * pgdl.models.origin records, {"warm_start": id, "layers_copied": [0, 2]}.  pgdl.fit, pgdl.fit_multiple,
 * pgdl.fit_federated and pgdl.init_model all start here, so that they start alike, bit for bit.
 * The engine model is malloc'd: the caller frees it or hands it to a context.
 */
NnModel *
pgdl_model_start(const NnSpec *spec, uint64 seed, Jsonb *config, Jsonb **origin)
{
	NnError		err;
	NnModel    *m;
	char	   *name;
	int64		id;

	if (origin)
		*origin = NULL;
	m = nn_model_create(spec, seed, &err);
	if (m == NULL)
		pgdl_report_nn_error("model spec", &err);
	if (config == NULL || !pgdl_warm_start_key(config, &name, &id))
		return m;
	PG_TRY();
	{
		warm_start(m, name, id, origin);
	}
	PG_CATCH();
	{
		nn_model_free(m);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return m;
}
