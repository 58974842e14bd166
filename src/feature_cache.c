/*
 * feature_cache.c -- transfer learning and materialized feature layers.
 *
 * A configuration may take its first `freeze` layers, frozen, from a stored
 * base model and train the rest: the base's remaining layers (fine-tuning) or
 * a `head` of its own.  Configurations that share (the frozen prefix's spec and
 * weights, the packed source) share the prefix's outputs.  The planner below
 * decides per group whether to recompute them for every configuration and
 * epoch or to keep them in a materialized view in schema pgdl_cache,
 * registered in pgdl.feature_cache, with the packed table's columns and
 * partition numbers, so that training reads it as it reads the packed table.
 *
 * Caches are exact: a view's rows are computed by pgdl.cache_features, which
 * runs the prefix in inference mode NN_FROZEN_CHUNK examples at a time, as the
 * recomputing path does, so heads train on the same bytes either way.  A view
 * names the hash of the weights it was defined for and refuses to compute with
 * others; triggers mark a cache stale when its packed table or base model
 * changes, and a stale cache is refreshed or rebuilt before use, never read.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "pgdl.h"

/* What the planner assumes of this machine, besides pgdl.cpu_gflops. */
#define CACHE_WRITE_BYTES_PER_SECOND	(150.0 * 1024 * 1024)	/* materialized view, TOAST and WAL */
#define CACHE_READ_BYTES_PER_SECOND		(400.0 * 1024 * 1024)

#define PGDL_ADVISORY_LOCK_SPACE		0x7067646c	/* "pgdl" */

/* ---- configurations with a base model ---- */

static void
transfer_error(const char *key, const char *detail) pg_attribute_noreturn();

static void
transfer_error(const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid training configuration at %s", key),
			 errdetail("%s", detail)));
}

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

/* Keys of transfer learning, which only pgdl.fit_multiple's configurations take. */
static const char *const transfer_keys[] = {"base_model", "freeze", "head"};

bool
pgdl_config_has_transfer(Jsonb *config)
{
	if (!JsonContainerIsObject(&config->root))
		return false;
	for (int i = 0; i < lengthof(transfer_keys); i++)
		if (pgdl_jsonb_key(&config->root, transfer_keys[i]) != NULL)
			return true;
	return false;
}

Jsonb *
pgdl_transfer_keys(Jsonb *config)
{
	StringInfoData buf;
	bool		any = false;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < lengthof(transfer_keys); i++)
	{
		JsonbValue *v = pgdl_jsonb_key(&config->root, transfer_keys[i]);
		char	   *text;

		if (v == NULL)
			continue;
		if (v->type == jbvBinary)
			text = JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
		else
		{
			Jsonb	   *scalar = JsonbValueToJsonb(v);

			text = JsonbToCString(NULL, &scalar->root, VARSIZE(scalar));
		}
		appendStringInfo(&buf, "%s\"%s\": %s", any ? ", " : "", transfer_keys[i], text);
		any = true;
	}
	appendStringInfoChar(&buf, '}');
	if (!any)
		return NULL;
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* The base model a configuration names, by name (a string) or id (an integer). */
static PgdlModel *
transfer_base(Jsonb *config, int64 *id_out, char **name_out)
{
	JsonbValue *v = pgdl_jsonb_key(&config->root, "base_model");
	PgdlModel  *base;

	if (v == NULL)
		transfer_error("freeze", "\"freeze\" and \"head\" need \"base_model\", the stored model to start from.");
	if (v->type == jbvString)
	{
		*name_out = pnstrdup(v->val.string.val, v->val.string.len);
		base = pgdl_model_by_name(*name_out);
	}
	else if (v->type == jbvNumeric)
	{
		int64		id = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));

		base = pgdl_model_by_id(id);
		*name_out = psprintf(INT64_FORMAT, id);
	}
	else
		transfer_error("base_model", "Expected the name (a string) or id (an integer) of a model in pgdl.models.");
	*id_out = base->id;
	return base;
}

void
pgdl_transfer_prepare(Jsonb *config, uint64 seed, PgdlTransfer *t)
{
	PgdlModel  *base;
	NnModel    *b;
	JsonbValue *v;
	JsonbValue *head;
	NnError		err;
	int32		n_layers;

	memset(t, 0, sizeof(*t));
	base = transfer_base(config, &t->base_id, &t->base_name);
	b = base->nn;				/* the cache's: copied from below, before any query */
	n_layers = b->spec.n_layers;

	v = pgdl_jsonb_key(&config->root, "freeze");
	if (v == NULL)
		transfer_error("freeze", "A configuration with \"base_model\" says how many of its layers to freeze (\"freeze\": 4), or through which layer (\"freeze\": \"flatten\").");
	if (v->type == jbvNumeric)
	{
		double		k = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));

		if (k != floor(k) || k < 0 || k > n_layers)
			transfer_error("freeze", psprintf("\"freeze\" must be a whole number of layers between 0 and %d (the base model's layers).", n_layers));
		t->freeze = (int32) k;
	}
	else if (v->type == jbvString)
	{
		char	   *name = pnstrdup(v->val.string.val, v->val.string.len);
		int			i = layer_by_name(&b->spec, name);

		if (i < 0)
			transfer_error("freeze", psprintf("The base model has no layer \"%s\"; layers are named by type and rank, such as \"conv2d_2\", or by type alone when it is unique.", name));
		t->freeze = i + 1;
	}
	else
		transfer_error("freeze", "Expected a number of layers or a layer name.");

	head = pgdl_jsonb_key(&config->root, "head");
	if (head != NULL && !(head->type == jbvBinary && JsonContainerIsArray(head->val.binary.data)))
		transfer_error("head", "Expected an array of layers, as in a model spec's \"layers\".");
	if (head == NULL && t->freeze == n_layers)
		transfer_error("freeze", "Every layer of the base model is frozen and there is no \"head\": nothing would train.");

	t->prefix = t->freeze > 0 ? nn_model_slice(b, 0, t->freeze, 0, &err) : NULL;
	if (t->freeze > 0 && t->prefix == NULL)
		pgdl_report_nn_error("base model", &err);
	if (t->prefix)
	{
		pgdl_model_free_with(t->prefix, CurrentMemoryContext);
		pgdl_prefix_hash(t->prefix, t->hash);
	}
	t->dataset = base->dataset ? base->dataset->id : 0;

	if (head != NULL)
	{
		const NnShape *in = &b->shape[t->freeze];
		char	   *layers = JsonbToCString(NULL, head->val.binary.data, head->val.binary.len);
		char	   *json;
		NnSpec	   *spec = palloc(sizeof(NnSpec));

		json = in->ndim == 3 ?
			psprintf("{\"input\": [%d, %d, %d], \"layers\": %s, \"loss\": \"%s\"}", in->c, in->h, in->w, layers,
					 nn_loss_name(b->spec.loss)) :
			psprintf("{\"input\": [%d], \"layers\": %s, \"loss\": \"%s\"}", in->c, layers, nn_loss_name(b->spec.loss));
		PG_TRY();
		{
			pgdl_spec_from_jsonb(DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json))), spec);
		}
		PG_CATCH();
		{
			errcontext("the \"head\" of the configuration, on the output of the base model's first %d layers", t->freeze);
			PG_RE_THROW();
		}
		PG_END_TRY();
		t->rest = nn_model_create(spec, seed, &err);
		if (t->rest == NULL)
			pgdl_report_nn_error("head", &err);
	}
	else
	{
		t->rest = nn_model_slice(b, t->freeze, n_layers, seed, &err);
		if (t->rest == NULL)
			pgdl_report_nn_error("base model", &err);
	}
	pgdl_model_free_with(t->rest, CurrentMemoryContext);

	/* the whole network, as it will be stored */
	t->spec = palloc(sizeof(NnSpec));
	memcpy(t->spec, &b->spec, sizeof(NnSpec));
	if (t->freeze + t->rest->spec.n_layers > NN_MAX_LAYERS)
		transfer_error("head", psprintf("The network would have more than %d layers.", NN_MAX_LAYERS));
	memcpy(&t->spec->layers[t->freeze], t->rest->spec.layers, sizeof(NnLayerSpec) * t->rest->spec.n_layers);
	t->spec->n_layers = t->freeze + t->rest->spec.n_layers;
	if (!nn_spec_validate(t->spec, NULL, &err))
		pgdl_report_nn_error("model spec", &err);
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
	int64		out_size;
	ArrayType  *result;
	NnError		err;

	pgdl_engine_prepare();
	if (st == NULL || st->layers == NULL || st->base_id != base_id || st->from != from || st->to != to ||
		strcmp(st->hash, hash) != 0)
	{
		PgdlModel  *base = pgdl_model_by_id(base_id);
		NnModel    *whole;
		char		now[65];
		MemoryContext old;

		if (from < 0 || to <= from || to > base->nn->spec.n_layers)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("layers %d to %d are not a range of the base model's %d layers",
							from, to, base->nn->spec.n_layers)));
		whole = nn_model_slice(base->nn, 0, to, 0, &err);
		if (whole == NULL)
			pgdl_report_nn_error("base model", &err);
		pgdl_model_free_with(whole, CurrentMemoryContext);
		pgdl_prefix_hash(whole, now);
		if (strcmp(now, hash) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the first %d layers of model " INT64_FORMAT " changed since this feature cache was defined", to, base_id),
					 errdetail("The cache holds features of weights with hash %s; the model's now hash to %s.", hash, now),
					 errhint("Drop the cache with pgdl.drop_feature_cache(); pgdl.fit_multiple builds a new one when it needs it.")));
		old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		if (st == NULL)
		{
			st = palloc0(sizeof(CacheFeaturesState));
			st->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "pgdl cache_features", ALLOCSET_SMALL_SIZES);
		}
		MemoryContextReset(st->cxt);	/* frees the layers of another base or range */
		st->layers = NULL;
		st->base_id = 0;		/* no key until the layers are there */
		fcinfo->flinfo->fn_extra = st;
		MemoryContextSwitchTo(old);
		st->layers = nn_model_slice(whole, from, to, 0, &err);
		if (st->layers == NULL)
			pgdl_report_nn_error("base model", &err);
		pgdl_model_free_with(st->layers, st->cxt);
		st->base_id = base_id;
		st->from = from;
		st->to = to;
		strlcpy(st->hash, hash, sizeof(st->hash));
	}
	if (n < 1 || n > NN_MAX_BATCH || length != (int64) n * nn_model_input_size(st->layers))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("buffer of %d examples has %lld values of x; the frozen layers take " INT64_FORMAT " per example",
						n, (long long) length, nn_model_input_size(st->layers))));
	out_size = nn_model_output_size(st->layers);
	result = pgdl_float4_array_new((int64) n * out_size);
	if (!nn_model_forward_frozen(st->layers, x, n, (float *) ARR_DATA_PTR(result), &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%s.", err.msg)));
	PG_RETURN_ARRAYTYPE_P(result);
}

/* ---- the planner ---- */

static const char *const action_names[] = {
	[PGDL_CACHE_RECOMPUTE] = "recompute",
	[PGDL_CACHE_REUSE] = "reuse",
	[PGDL_CACHE_BUILD] = "materialize",
	[PGDL_CACHE_REFRESH] = "refresh",
	[PGDL_CACHE_REBUILD] = "rebuild",
};

const char *
pgdl_cache_action_name(PgdlCacheAction action)
{
	return action_names[action];
}

static int64
spi_int8(const char *sql, int nargs, Oid *types, Datum *values)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute_with_args(sql, nargs, types, values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/* A free name in pgdl_cache for the cache of `ds` at `depth`. */
static char *
cache_view_name(const PgdlDataset *ds, int32 depth, const char *hash, List *taken)
{
	char	   *rel = get_rel_name(ds->packed);
	char		base[NAMEDATALEN];

	snprintf(base, sizeof(base), "%.32s_k%d_%.8s", rel ? rel : "dataset", depth, hash);
	/* a plain name whatever the table's: lower-case letters, digits and underscores */
	for (char *c = base; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			*c = (*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : '_';
	for (int i = 0;; i++)
	{
		char	   *name = i == 0 ? pstrdup(base) : psprintf("%s_%d", base, i);
		char	   *qualified = quote_qualified_identifier("pgdl_cache", name);
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(qualified)};
		ListCell   *lc;
		bool		used = false;

		foreach(lc, taken)
			used |= strcmp(lfirst(lc), qualified) == 0;
		if (!used && spi_int8("SELECT to_regclass($1)::oid::int8", 1, types, values) == 0)
			return qualified;
	}
}

/* Look up a cache of (ds, depth) for the group: reuse, refresh or rebuild it, or build one. */
static void
plan_side(PgdlCacheGroup *g, int side, const PgdlDataset *ds, List **taken)
{
	Oid			types[4] = {INT8OID, INT4OID, TEXTOID, INT8OID};
	Datum		values[4];
	PgdlCacheSide *s = &g->side[side];
	Oid			vtypes[1] = {OIDOID};
	Datum		vvalues[1] = {ObjectIdGetDatum(ds->packed)};

	s->ds = ds;
	if (SPI_execute_with_args("SELECT pgdl.packed_version($1)", 1, vtypes, vvalues, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the version of packed table %u", ds->packed);
	s->version = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	values[0] = Int64GetDatum(ds->id);
	values[1] = Int32GetDatum(g->depth);
	values[2] = CStringGetTextDatum(g->hash);
	values[3] = Int64GetDatum(g->base_id);
	/* the caller's own caches only: nobody reads another user's features */
	/*
	 * The catalog is writable by all: trust only rows whose view is a
	 * materialized view in pgdl_cache that the caller owns.
	 */
	if (SPI_execute_with_args("SELECT f.id, f.view::text, f.base_hash = $3, f.valid, f.bytes, f.source_version, "
							  "f.staged_from IS NOT NULL "
							  "FROM pgdl.feature_cache f JOIN pg_catalog.pg_class c ON c.oid = f.view "
							  "WHERE f.dataset = $1 AND f.depth = $2 AND f.owner = quote_ident(current_user)::regrole "
							  "AND c.relkind = 'm' AND c.relnamespace = 'pgdl_cache'::regnamespace "
							  "AND c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) "
							  "AND (f.base_hash = $3 OR f.base_model = $4) "
							  "ORDER BY f.base_hash = $3 DESC, f.valid DESC, f.id DESC LIMIT 1",
							  4, types, values, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		same = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		bool		valid = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		char	   *version = SPI_getvalue(tup, desc, 6);
		bool		staged = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));

		/* the packed table changed since: stale */
		valid &= strcmp(version, s->version) == 0;

		s->cache_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		s->old_view = SPI_getvalue(tup, desc, 2);
		s->existing_bytes = (double) DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));

		/*
		 * A stale cache computed from a shallower one is built again rather
		 * than refreshed: a refresh would read the shallower cache, which may be
		 * stale too.
		 */
		s->action = !same ? PGDL_CACHE_REBUILD : valid ? PGDL_CACHE_REUSE :
			staged ? PGDL_CACHE_REBUILD : PGDL_CACHE_REFRESH;
		/* rebuilt with other weights, it gets a name with their hash; else it keeps its own */
		s->view = s->action == PGDL_CACHE_REBUILD && !same ? NULL : s->old_view;
	}
	else
		s->action = PGDL_CACHE_BUILD;
	if (s->view == NULL)
	{
		s->view = cache_view_name(ds, g->depth, g->hash, *taken);
		*taken = lappend(*taken, s->view);
	}
	s->bytes = (double) ds->n_rows_hint * (g->feature_floats + ds->n_targets) * sizeof(float);
}

static int
compare_groups(const void *a, const void *b)
{
	const PgdlCacheGroup *x = a;
	const PgdlCacheGroup *y = b;

	if (x->base_id != y->base_id)
		return x->base_id < y->base_id ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

static void
append_build(StringInfo sql, const PgdlCacheGroup *g, const PgdlCacheSide *s, const PgdlCacheGroup *from,
			 int side)
{
	const char *source = from ? from->side[side].view :
		quote_qualified_identifier(get_namespace_name(get_rel_namespace(s->ds->packed)), get_rel_name(s->ds->packed));
	int32		first = from ? from->depth : 0;
	char	   *view_literal = quote_literal_cstr(s->view);

	if (s->action == PGDL_CACHE_REBUILD)
		appendStringInfo(sql, "DROP MATERIALIZED VIEW IF EXISTS %s CASCADE;\n", s->old_view);
	/* a run that built the same cache meanwhile (same name) is waited for and its cache refreshed */
	appendStringInfo(sql,
					 "CREATE MATERIALIZED VIEW IF NOT EXISTS %s AS SELECT part, buffer_id, n,"
					 " pgdl.cache_features(" INT64_FORMAT ", %d, %d, '%s', x, n) AS x, y FROM %s WITH NO DATA;\n",
					 s->view, g->base_id, first, g->depth, g->hash, source);
	appendStringInfo(sql, "ALTER MATERIALIZED VIEW %s ALTER COLUMN x SET STORAGE EXTERNAL,"
					 " ALTER COLUMN y SET STORAGE EXTERNAL;\n", s->view);
	appendStringInfo(sql, "REFRESH MATERIALIZED VIEW %s;\n", s->view);
	appendStringInfo(sql,
					 "INSERT INTO pgdl.feature_cache (dataset, source, base_model, base_hash, depth, staged_from, view,"
					 " source_version, rows, bytes)"
					 " SELECT " INT64_FORMAT ", %u, " INT64_FORMAT ", '%s', %d, %s, %s::regclass, %s, count(*),"
					 " pg_total_relation_size(%s) FROM %s ON CONFLICT (view) DO NOTHING;\n",
					 s->ds->id, s->ds->packed, g->base_id, g->hash, g->depth,
					 from ? psprintf("(SELECT id FROM pgdl.feature_cache WHERE view = %s::regclass)",
									 quote_literal_cstr(from->side[side].view)) : "NULL",
					 view_literal, quote_literal_cstr(s->version), view_literal, s->view);
}

/*
 * The work on one cache, in a transaction of its own: builds and refreshes of a
 * view wait for any other run's on the same view (it then finds it built).
 */
static char *
side_task_sql(const PgdlCacheGroup *g, const PgdlCacheGroup *from, int side)
{
	const PgdlCacheSide *s = &g->side[side];
	StringInfoData buf;
	StringInfo	sql = &buf;

	initStringInfo(sql);
	if (s->action != PGDL_CACHE_REUSE)
		appendStringInfo(sql, "SELECT pg_advisory_xact_lock(%d, hashtext(%s));\n", PGDL_ADVISORY_LOCK_SPACE,
						 quote_literal_cstr(s->view));
	switch (s->action)
	{
		case PGDL_CACHE_REUSE:
			appendStringInfo(sql, "UPDATE pgdl.feature_cache SET last_used = now() WHERE id = " INT64_FORMAT ";\n",
							 s->cache_id);
			break;
		case PGDL_CACHE_REFRESH:
			appendStringInfo(sql, "REFRESH MATERIALIZED VIEW %s;\n", s->view);
			appendStringInfo(sql,
							 "UPDATE pgdl.feature_cache SET valid = true, last_used = now(), refreshed = now(), source_version = %s,"
							 " rows = (SELECT count(*) FROM %s), bytes = pg_total_relation_size(%s) WHERE id = " INT64_FORMAT ";\n",
							 quote_literal_cstr(s->version), s->view, quote_literal_cstr(s->view), s->cache_id);
			break;
		case PGDL_CACHE_BUILD:
		case PGDL_CACHE_REBUILD:
			append_build(sql, g, s, from, side);
			break;
		case PGDL_CACHE_RECOMPUTE:
			break;
	}
	return sql->data;
}

/* The group of frozen layers of this depth and hash, or plan->n_groups if there is none yet. */
static int
find_group(const PgdlCachePlan *plan, const PgdlTransfer *t)
{
	int			g;

	for (g = 0; g < plan->n_groups; g++)
		if (plan->groups[g].depth == t->freeze && strcmp(plan->groups[g].hash, t->hash) == 0)
			break;
	return g;
}

PgdlCachePlan *
pgdl_cache_plan(const PgdlDataset *train, const PgdlDataset *valid, PgdlTransfer **transfers, int n,
				int32 epochs, int32 workers, const char *mode, int *group_of)
{
	PgdlCachePlan *plan = palloc0(sizeof(PgdlCachePlan));
	double		rate = pgdl_cpu_gflops * 1e9;
	List	   *taken = NIL;
	double		used = 0;

	plan->groups = palloc0(sizeof(PgdlCacheGroup) * Max(n, 1));
	plan->budget_bytes = (double) pgdl_feature_cache_budget * 1024.0;
	plan->tasks = NIL;

	/* group by the prefix's hash and depth (the source is the run's) */
	for (int i = 0; i < n; i++)
	{
		PgdlTransfer *t = transfers[i];
		int			g;

		if (t == NULL || t->prefix == NULL)
			continue;
		g = find_group(plan, t);
		if (g == plan->n_groups)
		{
			PgdlCacheGroup *grp = &plan->groups[plan->n_groups++];
			NnCost		cost;
			NnError		err;

			grp->base_id = t->base_id;
			grp->base_name = t->base_name;
			grp->depth = t->freeze;
			strlcpy(grp->hash, t->hash, sizeof(grp->hash));
			grp->prefix = t->prefix;
			grp->feature_floats = nn_model_output_size(t->prefix);
			if (!nn_spec_cost(&t->prefix->spec, NULL, &cost, &err))
				pgdl_report_nn_error("base model", &err);
			grp->prefix_flops = (double) cost.flops_forward;
			grp->staged_from = -1;
		}
		plan->groups[g].n_configs++;
	}

	/* shallower first: a deeper cache may be computed from one of them */
	qsort(plan->groups, plan->n_groups, sizeof(PgdlCacheGroup), compare_groups);
	for (int i = 0; i < n; i++)
		group_of[i] = transfers[i] && transfers[i]->prefix ? find_group(plan, transfers[i]) : -1;
	if (plan->n_groups == 0)
		return plan;

	/* the plan outlives SPI: allocate in the caller's context */
	{
		MemoryContext caller = CurrentMemoryContext;

		SPI_connect();
		MemoryContextSwitchTo(caller);
	}
	used = (double) spi_int8("SELECT pgdl.feature_cache_bytes()", 0, NULL, NULL);
	plan->used_bytes = used;
	for (int g = 0; g < plan->n_groups; g++)
	{
		PgdlCacheGroup *grp = &plan->groups[g];
		double		examples = (double) train->n_rows_hint + (valid ? valid->n_rows_hint : 0);
		double		uses = (double) grp->n_configs * epochs;
		double		build_flops = grp->prefix_flops;
		double		new_bytes = 0,
					freed = 0,
					write = 0,
					compute = 0,
					all_bytes = 0;
		bool		any_work = false;

		plan_side(grp, 0, train, &taken);
		if (valid)
			plan_side(grp, 1, valid, &taken);

		/* stage from the deepest shallower group of the same base that will be materialized */
		for (int h = g - 1; h >= 0; h--)
		{
			PgdlCacheGroup *o = &plan->groups[h];

			if (o->base_id == grp->base_id && o->depth < grp->depth && o->action != PGDL_CACHE_RECOMPUTE)
			{
				grp->staged_from = h;
				build_flops = grp->prefix_flops - o->prefix_flops;
				break;
			}
		}

		for (int s = 0; s < (valid ? 2 : 1); s++)
		{
			PgdlCacheSide *side = &grp->side[s];

			all_bytes += side->bytes;
			if (side->action == PGDL_CACHE_REUSE)
				continue;
			any_work = true;
			compute += build_flops * side->ds->n_rows_hint;
			write += side->bytes;
			if (side->action == PGDL_CACHE_BUILD)
				new_bytes += side->bytes;
			else
				freed += side->existing_bytes, new_bytes += side->bytes;
		}
		/* the workers share recomputing; a build runs in parallel on their cores */
		grp->recompute_seconds = grp->prefix_flops * examples * uses / rate / workers;
		grp->materialize_seconds = compute / rate / workers + write / CACHE_WRITE_BYTES_PER_SECOND +
			all_bytes / CACHE_READ_BYTES_PER_SECOND;
		grp->bytes = all_bytes;

		if (strcmp(mode, "off") == 0)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = "feature caching is off for this run";
		}
		else if (!any_work)
		{
			grp->action = PGDL_CACHE_REUSE;
			grp->reason = "a valid cache exists";
		}
		else if (used - freed + new_bytes > plan->budget_bytes)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = psprintf("the cache would need %.1f MB and pgdl.feature_cache_budget leaves %.1f MB",
								   new_bytes / 1048576.0, Max(plan->budget_bytes - used + freed, 0) / 1048576.0);
		}
		else if (strcmp(mode, "on") != 0 && grp->materialize_seconds >= grp->recompute_seconds)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = psprintf("recomputing (%.2f s) is cheaper than materializing (%.2f s) for %d configuration(s) x %d epoch(s)",
								   grp->recompute_seconds, grp->materialize_seconds, grp->n_configs, epochs);
		}
		else
		{
			/* the group's action is its training side's; the validation side follows */
			grp->action = grp->side[0].action;
			used += new_bytes - freed;
			grp->reason = strcmp(mode, "on") == 0 ? "feature caching is on for this run" :
				psprintf("materializing (%.2f s) is cheaper than recomputing (%.2f s) for %d configuration(s) x %d epoch(s)",
						 grp->materialize_seconds, grp->recompute_seconds, grp->n_configs, epochs);
		}
		if (grp->action == PGDL_CACHE_RECOMPUTE)
		{
			grp->staged_from = -1;
			grp->seconds = grp->recompute_seconds;
			grp->compute_flops = grp->prefix_flops * examples * uses;
			for (int s = 0; s < 2; s++)
				grp->side[s].action = PGDL_CACHE_RECOMPUTE;
		}
		else
		{
			PgdlCacheGroup *from = grp->staged_from >= 0 ? &plan->groups[grp->staged_from] : NULL;

			grp->seconds = grp->materialize_seconds;
			grp->compute_flops = compute;
			for (int s = 0; s < (valid ? 2 : 1); s++)
			{
				PgdlCacheTask *task = palloc0(sizeof(PgdlCacheTask));

				task->sql = side_task_sql(grp, from, s);
				/* a staged cache is computed once the one it reads is there */
				task->depends = from ? from->side[s].task : -1;
				grp->side[s].task = list_length(plan->tasks);
				plan->tasks = lappend(plan->tasks, task);
			}
		}
	}
	SPI_finish();
	return plan;
}

/* ---- the hash of a prefix, in SQL ---- */

/* prefix_hash(model, layers): what a cache of the model's first `layers` layers is keyed by. */
PG_FUNCTION_INFO_V1(pgdl_prefix_hash_sql);
Datum
pgdl_prefix_hash_sql(PG_FUNCTION_ARGS)
{
	PgdlModel  *model = pgdl_model_by_id(PG_GETARG_INT64(0));
	int32		layers = PG_GETARG_INT32(1);
	NnModel    *prefix;
	NnError		err;
	char		hex[65];

	if (layers < 1 || layers > model->nn->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layer must be between 1 and %d, got %d", model->nn->spec.n_layers, layers),
				 errdetail("A prefix of a model is its first 1 to %d layers.", model->nn->spec.n_layers)));
	prefix = nn_model_slice(model->nn, 0, layers, 0, &err);
	if (prefix == NULL)
		pgdl_report_nn_error("model", &err);
	pgdl_model_free_with(prefix, CurrentMemoryContext);
	pgdl_prefix_hash(prefix, hex);
	PG_RETURN_TEXT_P(cstring_to_text(hex));
}
