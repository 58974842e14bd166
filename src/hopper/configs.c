/*
 * configs.c -- configuration sets for model selection.
 *
 * A configuration set is the rows of pgdl.configs that share a set_name: each
 * an architecture and a training configuration, for pgdl.fit_multiple to
 * train side by side.  Rows come from pgdl.grid_search (every combination of
 * the values given), pgdl.random_search (n samples of a search space), or
 * INSERT by hand; a trigger validates each row and stores its configuration
 * in canonical form, so that one configuration written two ways is one row.
 *
 * Grids and spaces commonly mix optimizers, and keys that only some
 * optimizers use (momentum for sgd and rmsprop; nesterov for sgd; beta1 and
 * beta2 for adam and adamw; eps for all but sgd; alpha and centered for
 * rmsprop; lr_decay and initial_accumulator_value for adagrad) are dropped
 * from the configurations of the others rather than rejected (which
 * optimizer uses which key: spec_json.c's pgdl_optimizer_uses_key):
 * {"optimizer": ["sgd", "adam"], "momentum": 0.9} is two configurations, sgd
 * with momentum and plain adam.  Likewise the keys of one
 * learning-rate schedule (step_size and gamma for step, eta_min for cosine) are
 * dropped from the configurations of the other schedules.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "base/base.h"
#include "spec/spec.h"
#include "train/train.h"
#include "hopper/hopper.h"
#include "hopper/tpe.h"

/* Which schedule a key applies to. */
static const struct
{
	const char *key;
	NnSchedule	schedule;
}			schedule_keys[] = {
	{"step_size", NN_SCHED_STEP},
	{"gamma", NN_SCHED_STEP},
	{"eta_min", NN_SCHED_COSINE},
};

/* A key of a grid or search space and what it takes. */
typedef struct SearchKey
{
	char	   *name;
	JsonbValue	fixed;			/* a scalar (or a container, as jbvBinary) used as is */
	JsonbContainer *values;		/* grid: the array of values; a space: the choice array */
	int			n_values;		/* grid: 1 for a fixed value */
	TpeParam	dist;			/* a space: its distribution and generator stream (hopper/tpe.h) */
} SearchKey;

/* A search space read: its keys in name order, then the architecture drawn from the list. */
struct MopSpace
{
	SearchKey  *keys;
	int			n_keys;
	TpeParam   *params;			/* n_keys + 1: the keys' distributions, the architecture's */
	int64	   *arch;
	int			n_arch;
};

/* For the error context of a configuration being validated. */
typedef struct ConfigContext
{
	const char *function;
	int			sample;			/* random search: 1-based; grid: 0 */
	Jsonb	   *config;
} ConfigContext;

static void
config_context_callback(void *arg)
{
	ConfigContext *c = arg;
	const char *json = pgdl_clip_for_error(JsonbToCString(NULL, &c->config->root, VARSIZE(c->config)),
										   PGDL_ECHO_VALUE_BYTES);

	if (c->sample > 0)
		errcontext("%s sample %d: %s", c->function, c->sample, json);
	else
		errcontext("%s configuration %s", c->function, json);
}

/*
 * A configuration validated and in canonical form: the optimizer's keys with
 * defaults filled in, and the transfer keys (base_model, freeze, head) as given,
 * after checking that the base model exists and the head fits it.
 *
 * The base model is not looked up with check_function_bodies off, which is how
 * pg_dump's scripts and pg_restore load a database: pgdl.configs may be restored
 * before pgdl.models, as a function may be before the tables it reads.
 * pgdl.fit_multiple checks the base model when it trains, as it must anyway
 * (it may have been deleted or revoked since).
 */
static Jsonb *
canonical_form(Jsonb *config, PgdlTrainConfig *parsed)
{
	Jsonb	   *canonical;
	Jsonb	   *transfer;

	pgdl_config_from_jsonb_transfer(config, parsed);
	canonical = pgdl_config_with_warm_start(pgdl_config_to_jsonb(parsed), config);
	transfer = pgdl_transfer_keys(config);
	if (transfer == NULL)
		return canonical;
	if (check_function_bodies)
	{
		PgdlTransfer t;

		pgdl_transfer_prepare(config, (uint64) parsed->seed, &t);
	}
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(canonical), JsonbPGetDatum(transfer)));
}

/* An architecture and a base model are two ways to give the network: a configuration uses one. */
static void
check_network_given_once(bool has_architecture, Jsonb *config)
{
	bool		transfer = pgdl_config_has_transfer(config);

	if (has_architecture && transfer)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a configuration with a base model takes no architecture"),
				 errdetail("Its network is the base model's first layers (\"freeze\") and its \"head\" or remaining layers."),
				 errhint("Leave architecture NULL (pgdl.grid_search and pgdl.random_search: architectures => '{}').")));
	if (!has_architecture && !transfer)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a configuration needs an architecture or a base model"),
				 errhint("Name an architecture, or give \"base_model\" and \"freeze\" in the configuration.")));
}

/* The canonical form of a configuration, or an error naming the key (and, in context, the configuration). */
static Jsonb *
canonical_config(Jsonb *config, const char *function, int sample)
{
	ErrorContextCallback callback;
	ConfigContext ctx = {function, sample, config};
	PgdlTrainConfig parsed;

	callback.callback = config_context_callback;
	callback.arg = &ctx;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	config = canonical_form(config, &parsed);
	error_context_stack = callback.previous;
	return config;
}

void
mop_check_set_name(text *set_name)
{
	if (VARSIZE_ANY_EXHDR(set_name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a configuration set needs a non-empty name")));
}

/*
 * BEFORE INSERT OR UPDATE trigger on pgdl.configs: the set has a name, and
 * the configuration is valid and stored in canonical form (defaults filled
 * in, numbers as the engine reads them), so that the UNIQUE constraint
 * catches one configuration written two ways.
 */
PG_FUNCTION_INFO_V1(pgdl_configs_validate);
Datum
pgdl_configs_validate(PG_FUNCTION_ARGS)
{
	static const char *const served[] = {"configs", NULL};
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	tuple;
	int			set_col;
	int			config_col;
	int			arch_col;
	Datum		d;
	bool		isnull;

	pgdl_check_trigger_table(fcinfo, "pgdl.configs_validate()", served);
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) || TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgdl.configs_validate() may only be called as a trigger BEFORE INSERT OR UPDATE FOR EACH ROW")));

	desc = trigdata->tg_relation->rd_att;
	tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	set_col = SPI_fnumber(desc, "set_name");
	config_col = SPI_fnumber(desc, "config");
	arch_col = SPI_fnumber(desc, "architecture");
	if (set_col <= 0 || config_col <= 0 || arch_col <= 0 || SPI_gettypeid(desc, set_col) != TEXTOID ||
		SPI_gettypeid(desc, config_col) != JSONBOID || SPI_gettypeid(desc, arch_col) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgdl.configs_validate() may only be fired by pgdl.configs"),
				 errdetail("It needs columns set_name text, architecture bigint and config jsonb.")));

	/* NULLs are left to the NOT NULL constraints, which come after BEFORE triggers */
	d = heap_getattr(tuple, set_col, desc, &isnull);
	if (!isnull)
		mop_check_set_name(DatumGetTextPP(d));
	d = heap_getattr(tuple, config_col, desc, &isnull);
	if (!isnull)
	{
		PgdlTrainConfig parsed;
		Datum		canonical;
		bool		arch_null;

		(void) heap_getattr(tuple, arch_col, desc, &arch_null);
		check_network_given_once(!arch_null, DatumGetJsonbP(d));
		canonical = JsonbPGetDatum(canonical_form(DatumGetJsonbP(d), &parsed));
		tuple = heap_modify_tuple_by_cols(tuple, desc, 1, &config_col, &canonical, &isnull);
	}
	return PointerGetDatum(tuple);
}

/* The ids of the named architectures, in the order given; an error for an unknown name. */
static int64 *
architecture_ids(ArrayType *names, int *n, Jsonb *params)
{
	bool		transfer = pgdl_config_has_transfer(params);
	Datum	   *elems;
	bool	   *nulls;
	int64	   *ids;
	Oid			types[1] = {TEXTOID};

	if (ARR_NDIM(names) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("architectures must be a one-dimensional array")));
	deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
	{
		/* configurations with a base model: one "architecture", NULL */
		if (transfer)
		{
			*n = 1;
			return palloc0(sizeof(int64));
		}
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("architectures must name at least one architecture"),
				 errhint("Pass an empty array only for configurations with a \"base_model\".")));
	}
	if (transfer)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("configurations with a base model take no architecture"),
				 errdetail("Their network is the base model's first layers (\"freeze\") and a \"head\" or its remaining layers."),
				 errhint("Pass architectures => '{}'.")));
	ids = palloc(sizeof(int64) * *n);
	SPI_connect();
	for (int i = 0; i < *n; i++)
	{
		bool		isnull;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("architectures must not contain NULL")));
		if (SPI_execute_with_args("SELECT id FROM pgdl.architectures WHERE id = (SELECT pgdl.architecture_id($1))", 1, types, &elems[i],
								  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("architecture \"%s\" does not exist", pgdl_echo(TextDatumGetCString(elems[i]))),
					 errhint("Store one with pgdl.add_architecture(name, spec).")));
		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	return ids;
}

static int
key_cmp(const void *a, const void *b)
{
	return strcmp(((const SearchKey *) a)->name, ((const SearchKey *) b)->name);
}

/* The keys of a grid or space object, in name order; values are left to the caller. */
static SearchKey *
search_keys(Jsonb *obj, const char *what, int *n)
{
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	v;
	SearchKey  *keys;
	int			i = 0;

	if (!JB_ROOT_IS_OBJECT(obj))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s at top level", what),
				 errdetail("Expected an object mapping configuration keys to values.")));
	*n = JB_ROOT_COUNT(obj);
	keys = palloc0(sizeof(SearchKey) * Max(*n, 1));
	it = JsonbIteratorInit(&obj->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			keys[i].name = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			keys[i++].fixed = v;
	}
	Assert(i == *n);
	qsort(keys, *n, sizeof(SearchKey), key_cmp);
	return keys;
}

/* The optimizer a configuration names (sgd when it names none), or 0 when it names no known one. */
static NnOptType
optimizer_of(const SearchKey *keys, const JsonbValue *const *values, int n)
{
	for (int k = 0; k < n; k++)
	{
		if (strcmp(keys[k].name, "optimizer") != 0)
			continue;
		if (values[k]->type != jbvString)
			return 0;
		return nn_optim_from_name(pnstrdup(values[k]->val.string.val, values[k]->val.string.len));
	}
	return NN_OPT_SGD;
}

/* The schedule a combination names: none by default, -1 when it is not a known one. */
static int
schedule_of(const SearchKey *keys, const JsonbValue *const *values, int n)
{
	for (int k = 0; k < n; k++)
	{
		if (strcmp(keys[k].name, "schedule") != 0)
			continue;
		if (values[k]->type != jbvString)
			return -1;
		return (int) nn_schedule_from_name(pnstrdup(values[k]->val.string.val, values[k]->val.string.len));
	}
	return NN_SCHED_NONE;
}

/* Whether a key is one of a schedule other than `schedule` (a known one, else -1). */
static bool
schedule_key_dropped(const char *key, int schedule)
{
	if (schedule < 0)
		return false;			/* the validator will complain about the schedule */
	for (int i = 0; i < lengthof(schedule_keys); i++)
		if (strcmp(key, schedule_keys[i].key) == 0)
			return schedule_keys[i].schedule != (NnSchedule) schedule;
	return false;
}

/* Whether a key is one that `type`, a known optimizer, does not use (0: the validator will complain). */
static bool
key_dropped(const char *key, NnOptType type)
{
	return type != 0 && !pgdl_optimizer_uses_key(type, key);
}

/* A configuration object from keys and their chosen values, less the keys its optimizer does not use. */
static Jsonb *
build_config(const SearchKey *keys, const JsonbValue *const *values, int n)
{
	JsonbParseState *state = NULL;
	NnOptType	type = optimizer_of(keys, values, n);
	int			schedule = schedule_of(keys, values, n);
	JsonbValue *res;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int k = 0; k < n; k++)
	{
		if (key_dropped(keys[k].name, type) || schedule_key_dropped(keys[k].name, schedule))
			continue;
		pgdl_jsonb_put_key(&state, keys[k].name);
		pushJsonbValue(&state, WJB_VALUE, (JsonbValue *) values[k]);
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * Adds (architecture, config) rows to the set, architectures outermost, in
 * order; returns how many were new.  Rows already in the set are skipped
 * (ON CONFLICT DO NOTHING), so reruns and duplicates add nothing.  Without
 * cross, ids (when not NULL) gets each row's id, 0 for one skipped.
 */
static int32
insert_configs(text *set_name, const int64 *arch, int n_arch, Jsonb *const *configs, int n_configs,
			   bool cross, int64 *ids)
{
	Oid			types[3] = {TEXTOID, INT8OID, JSONBOID};
	SPIPlanPtr	plan;
	int32		added = 0;

	SPI_connect();
	plan = SPI_prepare("INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ($1, $2, $3) "
					   "ON CONFLICT (owner, set_name, architecture, config) DO NOTHING RETURNING id", 3, types);
	if (plan == NULL)
		elog(ERROR, "could not prepare insert into pgdl.configs: %s", SPI_result_code_string(SPI_result));
	for (int a = 0; a < (cross ? n_arch : 1); a++)
	{
		for (int c = 0; c < n_configs; c++)
		{
			Datum		values[3];
			int64		id = cross ? arch[a] : arch[c];
			char		nulls[3] = {' ', id ? ' ' : 'n', ' '};
			bool		isnull;

			CHECK_FOR_INTERRUPTS();
			values[0] = PointerGetDatum(set_name);
			values[1] = Int64GetDatum(id);
			values[2] = JsonbPGetDatum(configs[c]);
			if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
				elog(ERROR, "could not insert into pgdl.configs");
			added += SPI_processed;
			if (ids && !cross)
				ids[c] = SPI_processed == 1 ?
					DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) : 0;
		}
	}
	SPI_finish();
	return added;
}

int32
mop_configs_insert(text *set_name, const int64 *arch, Jsonb *const *configs, int n, int64 *ids)
{
	return insert_configs(set_name, arch, n, configs, n, false, ids);
}

/*
 * The number of combinations of the grid's values, each key's n_values set;
 * counted in double so that no product overflows, and at most the limit
 * together with the architectures.
 */
static int
grid_size(SearchKey *keys, int n_keys, int n_arch)
{
	double		total = n_arch;

	for (int k = 0; k < n_keys; k++)
	{
		SearchKey  *key = &keys[k];

		key->n_values = 1;
		if (key->fixed.type == jbvBinary && JsonContainerIsArray(key->fixed.val.binary.data))
		{
			key->values = key->fixed.val.binary.data;
			key->n_values = JsonContainerSize(key->values);
			if (key->n_values == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid parameter grid at %s", pgdl_echo(key->name)),
						 errdetail("An array of values to try must not be empty.")));
		}
		total *= key->n_values;
	}
	if (total > PGDL_MAX_CONFIGS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the parameter grid has %.0f configurations, more than the limit of %d", total,
						PGDL_MAX_CONFIGS),
				 errhint("Try fewer values, or sample the space with pgdl.random_search.")));
	return (int) (total / n_arch);
}

/*
 * pgdl.grid_search(set_name, architectures, params): every combination of
 * the values in params' arrays (scalars are fixed), for each architecture.
 * Keys vary in name order, the first slowest, values in the order given.
 */
PG_FUNCTION_INFO_V1(pgdl_grid_search);
Datum
pgdl_grid_search(PG_FUNCTION_ARGS)
{
	text	   *set_name = PG_GETARG_TEXT_PP(0);
	Jsonb	   *params = PG_GETARG_JSONB_P(2);
	int64	   *arch;
	int			n_arch;
	SearchKey  *keys;
	int			n_keys;
	int			n_combos;
	int		   *idx;
	const JsonbValue **chosen;
	Jsonb	  **configs;

	mop_check_set_name(set_name);
	arch = architecture_ids(PG_GETARG_ARRAYTYPE_P(1), &n_arch, params);
	keys = search_keys(params, "parameter grid", &n_keys);
	n_combos = grid_size(keys, n_keys, n_arch);

	/* every combination, validated before anything is stored */
	idx = palloc0(sizeof(int) * Max(n_keys, 1));
	chosen = palloc(sizeof(JsonbValue *) * Max(n_keys, 1));
	configs = palloc(sizeof(Jsonb *) * n_combos);
	for (int c = 0; c < n_combos; c++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int k = 0; k < n_keys; k++)
			chosen[k] = keys[k].values ? getIthJsonbValueFromContainer(keys[k].values, idx[k]) : &keys[k].fixed;
		configs[c] = canonical_config(build_config(keys, chosen, n_keys), "pgdl.grid_search", 0);
		/* the last key varies fastest */
		for (int k = n_keys - 1; k >= 0; k--)
		{
			if (++idx[k] < keys[k].n_values)
				break;
			idx[k] = 0;
		}
	}
	PG_RETURN_INT32(insert_configs(set_name, arch, n_arch, configs, n_combos, true, NULL));
}

static double
get_bound(JsonbContainer *arr, int i, const char *key)
{
	JsonbValue *v = getIthJsonbValueFromContainer(arr, i);

	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key)),
				 errdetail("Bounds must be numbers.")));
	/* beyond a double: infinite, which the range's check refuses with the key's name */
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(v->val.numeric)));
}

/* The one key of a space's distribution object, and its argument in *arg. */
static char *
distribution_name(const SearchKey *key, JsonbValue *arg)
{
	JsonbContainer *obj = key->fixed.val.binary.data;
	JsonbIterator *it;
	JsonbValue	v;
	char	   *name = NULL;
	JsonbIteratorToken tok;

	if (JsonContainerIsArray(obj))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("Expected a distribution or a fixed value, found an array."),
				 errhint("To draw from a list of values, write {\"choice\": [...]}.")));
	if (JsonContainerSize(obj) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("A distribution is an object with one key: choice, uniform, log_uniform or int.")));
	it = JsonbIteratorInit(obj);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			name = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			*arg = v;
	}
	return name;
}

static void
parse_choice(SearchKey *key, const JsonbValue *arg)
{
	if (arg->type != jbvBinary || !JsonContainerIsArray(arg->val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("\"choice\" takes an array of values.")));
	key->values = arg->val.binary.data;
	key->n_values = JsonContainerSize(key->values);
	key->dist.n_choices = key->n_values;
	if (key->n_values == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("\"choice\" needs at least one value.")));
}

/* uniform, log_uniform and int: [low, high] */
static void
parse_bounds(SearchKey *key, const char *name, const JsonbValue *arg)
{
	TpeParam   *d = &key->dist;

	if (arg->type != jbvBinary || !JsonContainerIsArray(arg->val.binary.data) ||
		JsonContainerSize(arg->val.binary.data) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("\"%s\" takes an array [low, high].", name)));
	d->lo = get_bound(arg->val.binary.data, 0, key->name);
	d->hi = get_bound(arg->val.binary.data, 1, key->name);
	if (d->lo > d->hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("The low bound %g is above the high bound %g.", d->lo, d->hi)));
	/* draws and densities live in the range's width */
	if (!isfinite(d->hi - d->lo))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("The range from %g to %g is wider than a double holds.", d->lo, d->hi)));
	if (d->kind == TPE_LOG_UNIFORM && d->lo <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("\"log_uniform\" needs a positive low bound, got %g.", d->lo)));
	if (d->kind == TPE_INT &&
		(d->lo != floor(d->lo) || d->hi != floor(d->hi) ||
		 fabs(d->lo) > 9007199254740992.0 || fabs(d->hi) > 9007199254740992.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("\"int\" takes integer bounds of at most 2^53 in magnitude.")));
}

/* A stream of the generator per key, from its name alone (FNV-1a), so keys draw independently. */
static uint64
key_stream(const char *name)
{
	uint64		h = UINT64CONST(0xcbf29ce484222325);

	for (const unsigned char *p = (const unsigned char *) name; *p; p++)
		h = (h ^ *p) * UINT64CONST(0x100000001b3);
	return h;
}

/* Reads a space's value for one key: a distribution object, or a scalar used as is. */
static void
parse_distribution(SearchKey *key)
{
	JsonbValue	arg = {0};
	char	   *name;

	key->dist.stream = key_stream(key->name);
	if (key->fixed.type != jbvBinary)
	{
		key->dist.kind = TPE_FIXED;
		return;
	}
	name = distribution_name(key, &arg);
	if (strcmp(name, "choice") == 0)
		key->dist.kind = TPE_CHOICE;
	else if (strcmp(name, "uniform") == 0)
		key->dist.kind = TPE_UNIFORM;
	else if (strcmp(name, "log_uniform") == 0)
		key->dist.kind = TPE_LOG_UNIFORM;
	else if (strcmp(name, "int") == 0)
		key->dist.kind = TPE_INT;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space at %s", pgdl_echo(key->name)),
				 errdetail("Unknown distribution \"%s\"; known: choice, uniform, log_uniform, int.", pgdl_echo(name))));
	if (key->dist.kind == TPE_CHOICE)
		parse_choice(key, &arg);
	else
		parse_bounds(key, name, &arg);
}

MopSpace *
mop_space_parse(ArrayType *architectures, Jsonb *space)
{
	MopSpace   *s = palloc0(sizeof(MopSpace));

	s->arch = architecture_ids(architectures, &s->n_arch, space);
	s->keys = search_keys(space, "search space", &s->n_keys);
	s->params = palloc0(sizeof(TpeParam) * (s->n_keys + 1));
	for (int k = 0; k < s->n_keys; k++)
	{
		parse_distribution(&s->keys[k]);
		s->params[k] = s->keys[k].dist;
	}
	s->params[s->n_keys].kind = TPE_CHOICE;
	s->params[s->n_keys].n_choices = s->n_arch;
	s->params[s->n_keys].stream = key_stream("architecture");
	return s;
}

const TpeParam *
mop_space_params(const MopSpace *space, int32 *n_params)
{
	*n_params = space->n_keys + 1;
	return space->params;
}

/* A key's value at a point's coordinate: a choice's value, the number drawn, or the fixed value. */
static void
key_value(const SearchKey *key, double v, JsonbValue *out)
{
	switch (key->dist.kind)
	{
		case TPE_FIXED:
			*out = key->fixed;
			return;
		case TPE_CHOICE:
			*out = *getIthJsonbValueFromContainer(key->values, (uint32) v);
			return;
		case TPE_INT:
			out->type = jbvNumeric;
			out->val.numeric = int64_to_numeric((int64) v);
			return;
		case TPE_UNIFORM:
		case TPE_LOG_UNIFORM:
			out->type = jbvNumeric;
			out->val.numeric = DatumGetNumeric(DirectFunctionCall1(float8_numeric, Float8GetDatum(v)));
			return;
	}
}

Jsonb *
mop_space_config(const MopSpace *space, const double *point, const char *function, int sample, int64 *arch)
{
	JsonbValue *values = palloc(sizeof(JsonbValue) * Max(space->n_keys, 1));
	const JsonbValue **chosen = palloc(sizeof(JsonbValue *) * Max(space->n_keys, 1));

	for (int k = 0; k < space->n_keys; k++)
	{
		key_value(&space->keys[k], point[k], &values[k]);
		chosen[k] = &values[k];
	}
	*arch = space->arch[(int) point[space->n_keys]];
	return canonical_config(build_config(space->keys, chosen, space->n_keys), function, sample);
}

/*
 * Every value a searched key may take, its bounds included, is a valid
 * configuration with the others as the first sample has them: checked before
 * a search trains anything, rather than when a later batch proposes it.
 */
void
mop_space_check(const MopSpace *space, uint64 seed, const char *function)
{
	int			n = space->n_keys + 1;
	double	   *base = palloc(sizeof(double) * n);
	double	   *point = palloc(sizeof(double) * n);
	int64		arch;

	for (int k = 0; k < n; k++)
		base[k] = tpe_prior_draw(&space->params[k], seed, 0);
	(void) mop_space_config(space, base, function, 1, &arch);
	for (int k = 0; k < space->n_keys; k++)
	{
		const TpeParam *d = &space->params[k];
		int			n_values = d->kind == TPE_CHOICE ? d->n_choices : d->kind == TPE_FIXED ? 0 : 2;

		for (int i = 0; i < n_values; i++)
		{
			CHECK_FOR_INTERRUPTS();
			memcpy(point, base, sizeof(double) * n);
			point[k] = d->kind == TPE_CHOICE ? i : i == 0 ? d->lo : d->hi;
			(void) mop_space_config(space, point, function, 0, &arch);
		}
	}
}

/*
 * pgdl.random_search(set_name, architectures, space, n, seed): n samples of
 * a search space, each with an architecture drawn uniformly from the list.
 * Sample i's values depend on (seed, key, i) only (tpe_prior_draw): adding a
 * key or samples leaves the other draws as they were.
 */
PG_FUNCTION_INFO_V1(pgdl_random_search);
Datum
pgdl_random_search(PG_FUNCTION_ARGS)
{
	text	   *set_name = PG_GETARG_TEXT_PP(0);
	Jsonb	   *space_arg = PG_GETARG_JSONB_P(2);
	int32		n = PG_GETARG_INT32(3);
	uint64		seed = (uint64) PG_GETARG_INT64(4);
	MopSpace   *space;
	int32		n_params;
	const TpeParam *params;
	double	   *point;
	Jsonb	  **configs;
	int64	   *sample_arch;

	mop_check_set_name(set_name);
	space = mop_space_parse(PG_GETARG_ARRAYTYPE_P(1), space_arg);
	params = mop_space_params(space, &n_params);
	if (n < 1 || n > PGDL_MAX_CONFIGS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d, got %d", PGDL_MAX_CONFIGS, n)));

	point = palloc(sizeof(double) * n_params);
	configs = palloc(sizeof(Jsonb *) * n);
	sample_arch = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int k = 0; k < n_params; k++)
			point[k] = tpe_prior_draw(&params[k], seed, i);
		configs[i] = mop_space_config(space, point, "pgdl.random_search", i + 1, &sample_arch[i]);
	}
	PG_RETURN_INT32(mop_configs_insert(set_name, sample_arch, configs, n, NULL));
}
