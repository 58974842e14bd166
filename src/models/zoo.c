/*
 * zoo.c -- the model zoo: what a stored model is (pgdl.spec_summary, behind the view pgdl.zoo) and which
 * stored models are like another (pgdl.similar_models).
 *
 * Architecture distance: a weighted edit distance between the two layer sequences, a layer a token of its
 * type and hyperparameters (units, filters, kernel, stride, padding, alpha, rate).  Inserting or deleting
 * a layer costs 1; substituting a layer of another type costs 1, of the same type 0 when every
 * hyperparameter is equal, else 0.25 + 0.25 * the largest relative difference |a - b| / max(|a|, |b|).
 * The sum is divided by the longer sequence's length: 0 for the same layers, 1 for nothing in common.
 *
 * Data distance: what a model was trained on, from its dataset (task, features, classes or targets,
 * normalization), or, without one, from its spec (task from the loss, input and output sizes).  The same
 * dataset is 0; another task is 1; else the mean of g(features ratio), g(classes ratio) and, when both
 * datasets have one, the normalization's distance, where g(r) = |ln r| / (1 + |ln r|).  Normalizations
 * of two kinds are 0.5 apart; two scales s are g(s_a / s_b) apart; two mean/std ones are
 * 0.5 * min(1, |mu_a - mu_b| / (sigma_a + sigma_b)) + 0.5 * g(sigma_a / sigma_b) apart, mu and sigma the
 * averages of their "mean" and "std" vectors.  'both' is the mean of the two distances.
 *
 * Every row is read as the caller (row-level security): other roles' models are not candidates, and a
 * query model the caller cannot see does not exist.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"

#define ZOO_MAX_K			10000
#define ZOO_FETCH_ROWS		1000
#define ZOO_HYPER			7

/* ---- a layer as text and as a token ---- */

static void
append_layer(StringInfo s, const NnLayerSpec *l)
{
	const char *name = nn_layer_type_name(l->type);
	int			pool_stride = l->stride > 0 ? l->stride : l->kernel;

	switch (l->type)
	{
		case NN_DENSE:
			appendStringInfo(s, l->per_step ? "%s(%d,per_step)" : "%s(%d)", name, l->units);
			break;
		case NN_CONV2D:
			appendStringInfo(s, "%s(%d,%dx%d", name, l->filters, l->kernel, l->kernel);
			if (l->stride != 1)
				appendStringInfo(s, ",stride %d", l->stride);
			if (l->padding != 0)
				appendStringInfo(s, ",pad %d", l->padding);
			appendStringInfoChar(s, ')');
			break;
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			appendStringInfo(s, "%s(%d", name, l->kernel);
			if (pool_stride != l->kernel)
				appendStringInfo(s, ",stride %d", pool_stride);
			appendStringInfoChar(s, ')');
			break;
		case NN_LEAKY_RELU:
			appendStringInfo(s, "%s(%g)", name, l->alpha);
			break;
		case NN_DROPOUT:
			appendStringInfo(s, "%s(%g)", name, l->rate);
			break;
		case NN_FLATTEN:
			appendStringInfoString(s, name);
			if (l->steps > 0)
				appendStringInfo(s, "(%d steps)", l->steps);
			break;
		case NN_SOFTMAX:
			appendStringInfoString(s, name);
			if (l->log)
				appendStringInfoString(s, "(log)");
			if (l->over_steps)
				appendStringInfoString(s, "(over steps)");
			break;
		default:
			appendStringInfoString(s, name);
			break;
	}
}

/* 'conv2d(8,3x3) relu maxpool2d(2) flatten dense(10)' */
static char *
layers_text(const NnSpec *spec)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < spec->n_layers; i++)
	{
		if (i > 0)
			appendStringInfoChar(&s, ' ');
		append_layer(&s, &spec->layers[i]);
	}
	return s.data;
}

typedef struct Token
{
	NnLayerType type;
	double		h[ZOO_HYPER];
} Token;

static int
spec_tokens(const NnSpec *spec, Token *t)
{
	for (int i = 0; i < spec->n_layers; i++)
	{
		const NnLayerSpec *l = &spec->layers[i];
		bool		pool = l->type == NN_MAXPOOL2D || l->type == NN_AVGPOOL2D;

		t[i].type = l->type;
		t[i].h[0] = l->units;
		t[i].h[1] = l->filters;
		t[i].h[2] = l->kernel;
		t[i].h[3] = pool && l->stride == 0 ? l->kernel : l->stride;
		t[i].h[4] = l->padding;
		t[i].h[5] = l->alpha;
		t[i].h[6] = l->rate;
	}
	return spec->n_layers;
}

static double
substitution(const Token *a, const Token *b)
{
	double		most = 0;

	if (a->type != b->type)
		return 1;
	for (int j = 0; j < ZOO_HYPER; j++)
	{
		double		big = Max(fabs(a->h[j]), fabs(b->h[j]));

		if (a->h[j] != b->h[j] && big > 0)
			most = Max(most, fabs(a->h[j] - b->h[j]) / big);
	}
	return most == 0 ? 0 : 0.25 + 0.25 * most;
}

/*
 * The normalized edit distance of a and b; with d (na + 1) x (nb + 1) doubles it keeps the table for
 * arch_reason's walk back, else it uses two rows of `row` (2 * (nb + 1)).
 */
static double
arch_distance(const Token *a, int na, const Token *b, int nb, double *d, double *row)
{
	double	   *prev = d ? d : row,
			   *cur = d ? d + nb + 1 : row + nb + 1;

	if (na == 0 && nb == 0)
		return 0;
	for (int j = 0; j <= nb; j++)
		prev[j] = j;
	for (int i = 1; i <= na; i++)
	{
		cur[0] = i;
		for (int j = 1; j <= nb; j++)
		{
			double		best = prev[j - 1] + substitution(&a[i - 1], &b[j - 1]);

			best = Min(best, prev[j] + 1);
			best = Min(best, cur[j - 1] + 1);
			cur[j] = best;
		}
		if (d)
		{
			prev = cur;
			cur = d + (int64) (i + 1) * (nb + 1);
		}
		else
		{
			double	   *t = prev;

			prev = cur;
			cur = t;
		}
	}
	return prev[nb] / Max(na, nb);
}

/* The differences along the cheapest alignment, the first three named: "dense(128) vs dense(256)". */
static char *
arch_reason(const NnSpec *qa, const NnSpec *sb)
{
	int			na = qa->n_layers,
				nb = sb->n_layers;
	Token	   *a = palloc(sizeof(Token) * Max(na, 1));
	Token	   *b = palloc(sizeof(Token) * Max(nb, 1));
	double	   *d = palloc(sizeof(double) * (na + 2) * (nb + 1));
	char	  **notes = palloc(sizeof(char *) * (na + nb + 1));
	int			n_notes = 0,
				i = na,
				j = nb;
	StringInfoData s;

	spec_tokens(qa, a);
	spec_tokens(sb, b);
	if (arch_distance(a, na, b, nb, d, NULL) == 0)
		return pstrdup("same layers");
#define D(x, y) d[(int64) (x) * (nb + 1) + (y)]
	/* walked back from the end: the notes come last first */
	while (i > 0 || j > 0)
	{
		StringInfoData one;

		initStringInfo(&one);
		if (i > 0 && j > 0 && D(i, j) == D(i - 1, j - 1) + substitution(&a[i - 1], &b[j - 1]))
		{
			if (substitution(&a[i - 1], &b[j - 1]) > 0)
			{
				append_layer(&one, &qa->layers[i - 1]);
				appendStringInfoString(&one, " vs ");
				append_layer(&one, &sb->layers[j - 1]);
			}
			i--, j--;
		}
		else if (i > 0 && D(i, j) == D(i - 1, j) + 1)
		{
			appendStringInfoString(&one, "no ");
			append_layer(&one, &qa->layers[--i]);
		}
		else
		{
			appendStringInfoString(&one, "extra ");
			append_layer(&one, &sb->layers[--j]);
		}
		if (one.len > 0)
			notes[n_notes++] = one.data;
	}
#undef D
	initStringInfo(&s);
	for (int t = n_notes - 1; t >= 0 && t >= n_notes - 3; t--)
		appendStringInfo(&s, "%s%s", t == n_notes - 1 ? "" : ", ", notes[t]);
	if (n_notes > 3)
		appendStringInfo(&s, " and %d more", n_notes - 3);
	return s.data;
}

/* ---- what a model was trained on ---- */

typedef struct DataDesc
{
	int64		dataset;		/* 0: from the spec */
	bool		regression;
	double		features;
	double		outputs;		/* classes, or targets */
	int			norm;			/* 0 none, 1 scale, 2 mean/std */
	double		mu,
				sigma;			/* scale: sigma = the scale */
} DataDesc;

static void
data_from_spec(const NnSpec *spec, DataDesc *d)
{
	NnShape		shapes[NN_MAX_LAYERS + 1];
	NnError		err;

	memset(d, 0, sizeof(*d));
	d->regression = nn_loss_is_regression(spec->loss);
	d->features = (double) spec->input[0] * (spec->input_ndim == 3 ? (double) spec->input[1] * spec->input[2] : 1);
	d->outputs = nn_spec_validate(spec, shapes, &err) ? (double) NN_SHAPE_SIZE(shapes[spec->n_layers]) : 1;
}

/* The average of a jsonb array's numbers; false when it is not an array of finite numbers. */
static bool
array_mean(JsonbValue *v, double *mean)
{
	JsonbContainer *arr;
	int			n;
	double		sum = 0;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return false;
	arr = v->val.binary.data;
	n = JsonContainerSize(arr);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		if (e->type != jbvNumeric || numeric_is_nan(e->val.numeric) || numeric_is_inf(e->val.numeric))
			return false;
		sum += DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(e->val.numeric)));
	}
	*mean = n > 0 ? sum / n : 0;
	return n > 0 && isfinite(*mean);
}

/* A normalization as pgdl.pack writes it; anything else (a row written by hand) counts as none. */
static void
read_normalization(Jsonb *jb, DataDesc *d)
{
	JsonbValue *v;

	d->norm = 0;
	if (jb == NULL || !JsonContainerIsObject(&jb->root))
		return;
	if ((v = pgdl_jsonb_key(&jb->root, "scale")) != NULL)
	{
		if (v->type == jbvNumeric && !numeric_is_nan(v->val.numeric) && !numeric_is_inf(v->val.numeric))
		{
			d->sigma = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(v->val.numeric)));
			d->norm = isfinite(d->sigma) && d->sigma > 0 ? 1 : 0;
		}
		return;
	}
	if (array_mean(pgdl_jsonb_key(&jb->root, "mean"), &d->mu) &&
		array_mean(pgdl_jsonb_key(&jb->root, "std"), &d->sigma) && d->sigma > 0)
		d->norm = 2;
}

/* Dataset id's row as the caller sees it; false when there is none to see. */
static bool
data_from_dataset(int64 id, DataDesc *d)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	TupleDesc	desc;
	HeapTuple	tup;
	bool		isnull[5];
	Datum		v[5];

	if (SPI_execute_with_args("SELECT task, n_features, n_targets, cardinality(classes), normalization "
							  "FROM pgdl.datasets WHERE id = $1", 1, types, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		return false;
	desc = SPI_tuptable->tupdesc;
	tup = SPI_tuptable->vals[0];
	for (int c = 0; c < 5; c++)
		v[c] = SPI_getbinval(tup, desc, c + 1, &isnull[c]);
	memset(d, 0, sizeof(*d));
	d->dataset = id;
	d->regression = strcmp(TextDatumGetCString(v[0]), "regression") == 0;
	d->features = Max(DatumGetInt32(v[1]), 1);
	d->outputs = d->regression || isnull[3] ? Max(DatumGetInt32(v[2]), 1) : Max(DatumGetInt32(v[3]), 1);
	read_normalization(isnull[4] ? NULL : DatumGetJsonbP(v[4]), d);
	return true;
}

/* Datasets met in a scan: a few, so a short list, each read once. */
typedef struct DataCache
{
	int			n,
				cap;
	DataDesc   *d;
	bool	   *found;
} DataCache;

static bool
data_cached(DataCache *c, int64 id, DataDesc *out)
{
	for (int i = 0; i < c->n; i++)
		if (c->d[i].dataset == id)
		{
			*out = c->d[i];
			return c->found[i];
		}
	if (c->n == c->cap)
	{
		c->cap = c->cap ? 2 * c->cap : 16;
		c->d = c->d ? repalloc(c->d, sizeof(DataDesc) * c->cap) : palloc(sizeof(DataDesc) * c->cap);
		c->found = c->found ? repalloc(c->found, sizeof(bool) * c->cap) : palloc(sizeof(bool) * c->cap);
	}
	c->found[c->n] = data_from_dataset(id, &c->d[c->n]);
	c->d[c->n].dataset = id;
	*out = c->d[c->n];
	return c->found[c->n++];
}

static double
ratio_distance(double a, double b)
{
	double		l = fabs(log(Max(a, 1e-30) / Max(b, 1e-30)));

	return l / (1 + l);
}

static double
data_distance(const DataDesc *a, const DataDesc *b)
{
	double		sum,
				parts = 2;

	if (a->dataset != 0 && a->dataset == b->dataset)
		return 0;
	if (a->regression != b->regression)
		return 1;
	sum = ratio_distance(a->features, b->features) + ratio_distance(a->outputs, b->outputs);
	if (a->norm != 0 && b->norm != 0)
	{
		parts = 3;
		if (a->norm != b->norm)
			sum += 0.5;
		else if (a->norm == 1)
			sum += ratio_distance(a->sigma, b->sigma);
		else
			sum += 0.5 * Min(1.0, fabs(a->mu - b->mu) / (a->sigma + b->sigma)) + 0.5 * ratio_distance(a->sigma, b->sigma);
	}
	return sum / parts;
}

static char *
data_reason(const DataDesc *a, const DataDesc *b)
{
	const char *what = a->regression ? "targets" : "classes";

	if (a->dataset != 0 && a->dataset == b->dataset)
		return pstrdup("same dataset");
	if (a->regression != b->regression)
		return psprintf("%s vs %s", a->regression ? "regression" : "classification",
						b->regression ? "regression" : "classification");
	return psprintf("%s%.0f vs %.0f features, %.0f vs %.0f %s%s",
					a->dataset == 0 || b->dataset == 0 ? "no dataset, by the spec: " : "",
					a->features, b->features, a->outputs, b->outputs, what,
					a->norm != 0 && b->norm != 0 ? (a->norm != b->norm ? ", other normalization" : "") : "");
}

/* ---- pgdl.spec_summary(spec) ---- */

#define SUMMARY_COLUMNS		5

/* A spec's summary into values[0 .. 4]: layers, their number, parameters, FLOPs, input shape. */
static void
summarize(Jsonb *jb, Datum *values)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	NnCost		total;
	NnError		err;
	Datum		dims[3];

	pgdl_spec_from_jsonb(jb, spec);
	if (!nn_spec_cost(spec, NULL, &total, &err))
		pgdl_report_nn_error("model spec", &err);
	for (int d = 0; d < spec->input_ndim; d++)
		dims[d] = Int32GetDatum(spec->input[d]);
	values[0] = CStringGetTextDatum(layers_text(spec));
	values[1] = Int32GetDatum(spec->n_layers);
	values[2] = Int64GetDatum(total.params);
	values[3] = Int64GetDatum(total.flops_forward);
	values[4] = PointerGetDatum(construct_array(dims, spec->input_ndim, INT4OID, 4, true, TYPALIGN_INT));
	pfree(spec);
}

PG_FUNCTION_INFO_V1(pgdl_spec_summary);
Datum
pgdl_spec_summary(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[SUMMARY_COLUMNS];
	bool		nulls[SUMMARY_COLUMNS] = {false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	summarize(PG_GETARG_JSONB_P(0), values);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * Runs fn(arg) in a subtransaction.  A data exception (class 22: what the spec reader raises for a spec
 * that is not valid) is caught and returned as its message and detail, so that one role's row does not
 * fail a query over every role's; NULL when fn returned.  Any other error, a cancel included, goes on.
 */
static char *
data_exception_in_subxact(void (*fn) (void *), void *arg)
{
	ErrorData  *edata = pgdl_call_in_subxact(fn, arg);
	char	   *problem;

	if (edata == NULL)
		return NULL;
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
		ReThrowError(edata);
	problem = edata->detail ? psprintf("%s: %s", edata->message, edata->detail) : pstrdup(edata->message);
	FreeErrorData(edata);
	return problem;
}

typedef struct SummaryCall
{
	Jsonb	   *spec;
	Datum	   *values;
} SummaryCall;

static void
summarize_call(void *arg)
{
	SummaryCall *call = arg;

	summarize(call->spec, call->values);
}

/* The summary of a spec read from the catalog: a spec that is not valid leaves the columns NULL and says why. */
static char *
summarize_or_problem(Jsonb *jb, Datum *values)
{
	SummaryCall call = {jb, values};

	return data_exception_in_subxact(summarize_call, &call);
}

PG_FUNCTION_INFO_V1(pgdl_stored_spec_summary);
Datum
pgdl_stored_spec_summary(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[SUMMARY_COLUMNS + 1];
	bool		nulls[SUMMARY_COLUMNS + 1] = {false};
	char	   *problem;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	problem = summarize_or_problem(PG_GETARG_JSONB_P(0), values);
	for (int c = 0; c < SUMMARY_COLUMNS; c++)
		nulls[c] = problem != NULL;
	nulls[SUMMARY_COLUMNS] = problem == NULL;
	if (problem != NULL)
		values[SUMMARY_COLUMNS] = CStringGetTextDatum(problem);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* ---- pgdl.similar_models(model | spec, k, by) ---- */

typedef enum ZooBy
{
	ZOO_ARCHITECTURE,
	ZOO_DATA,
	ZOO_BOTH
} ZooBy;

typedef struct Candidate
{
	double		distance;
	int64		id;
} Candidate;

/* x ranks after y: the farther, or as far and the higher id */
static inline bool
after(const Candidate *x, const Candidate *y)
{
	return x->distance > y->distance || (x->distance == y->distance && x->id > y->id);
}

/* The k best so far: a max-heap on (distance, id), its root the one to drop next. */
static void
heap_offer(Candidate *heap, int *n, int k, Candidate c)
{
	int			i;

	if (*n < k)
	{
		for (i = (*n)++; i > 0 && after(&c, &heap[(i - 1) / 2]); i = (i - 1) / 2)
			heap[i] = heap[(i - 1) / 2];
		heap[i] = c;
		return;
	}
	if (!after(&heap[0], &c))
		return;
	/* c replaces the root and sinks below every child that ranks after it */
	i = 0;
	for (;;)
	{
		int			child = 2 * i + 1;

		if (child >= k)
			break;
		if (child + 1 < k && after(&heap[child + 1], &heap[child]))
			child++;
		if (!after(&heap[child], &c))
			break;
		heap[i] = heap[child];
		i = child;
	}
	heap[i] = c;
}

static int
candidate_cmp(const void *x, const void *y)
{
	return after(x, y) ? 1 : after(y, x) ? -1 : 0;
}

typedef struct ZooQuery
{
	int64		id;				/* 0: a spec */
	NnSpec	   *spec;
	Token	   *tokens;
	int			n_tokens;
	DataDesc	data;
	ZooBy		by;
} ZooQuery;

static ZooBy
parse_by(text *by)
{
	char	   *s = text_to_cstring(by);

	if (strcmp(s, "architecture") == 0)
		return ZOO_ARCHITECTURE;
	if (strcmp(s, "data") == 0)
		return ZOO_DATA;
	if (strcmp(s, "both") == 0)
		return ZOO_BOTH;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown \"by\": \"%s\"", pgdl_echo(s)),
			 errhint("Compare models by 'architecture', 'data' or 'both'.")));
}

/* The query: a stored model (as the caller sees it) or a spec given as jsonb. */
static void
query_from_arg(FunctionCallInfo fcinfo, ZooQuery *q, DataCache *cache)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 0);
	int64		dataset = 0;

	q->spec = palloc(sizeof(NnSpec));
	q->id = 0;
	if (type == JSONBOID)
		pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), q->spec);
	else
	{
		PgdlModel  *m = type == INT8OID ? pgdl_model_by_id(PG_GETARG_INT64(0))
			: pgdl_model_by_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));

		q->id = m->id;
		memcpy(q->spec, &m->nn->spec, sizeof(NnSpec));
		dataset = m->dataset ? m->dataset->id : 0;
	}
	q->tokens = palloc(sizeof(Token) * Max(q->spec->n_layers, 1));
	q->n_tokens = spec_tokens(q->spec, q->tokens);
	if (dataset == 0 || !data_cached(cache, dataset, &q->data))
		data_from_spec(q->spec, &q->data);
}

/*
 * A distinct spec met in the scan: models of one architecture share it (a grid search's, a zoo's copies), so
 * each is parsed, and its architecture distance computed, once.  Keyed by the jsonb's bytes.
 */
typedef struct SpecKey
{
	Size		len;
	const char *bytes;			/* the Jsonb, header included */
} SpecKey;

typedef struct SpecEntry
{
	SpecKey		key;			/* first: dynahash's key */
	bool		parsed;			/* tried */
	bool		valid;
	Token	   *tokens;
	int			n_tokens;
	DataDesc	spec_data;
	double		arch;			/* < 0: not computed yet */
} SpecEntry;

static uint32
spec_key_hash(const void *key, Size keysize)
{
	const SpecKey *k = key;

	return hash_bytes((const unsigned char *) k->bytes, (int) k->len);
}

static int
spec_key_match(const void *x, const void *y, Size keysize)
{
	const SpecKey *a = x,
			   *b = y;

	return a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0 ? 0 : 1;
}

static HTAB *
spec_table(MemoryContext cxt)
{
	HASHCTL		ctl = {0};

	ctl.keysize = sizeof(SpecKey);
	ctl.entrysize = sizeof(SpecEntry);
	ctl.hash = spec_key_hash;
	ctl.match = spec_key_match;
	ctl.hcxt = cxt;
	return hash_create("pgdl similar_models specs", 256, &ctl, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

/* The entry of spec jb, made (its bytes copied into cxt, not yet parsed) if it is new. */
static SpecEntry *
spec_entry(HTAB *table, Jsonb *jb, MemoryContext cxt)
{
	SpecKey		key = {VARSIZE(jb), (const char *) jb};
	bool		found;
	SpecEntry  *e = hash_search(table, &key, HASH_ENTER, &found);

	if (!found)
	{
		char	   *copy = MemoryContextAlloc(cxt, key.len);

		memcpy(copy, jb, key.len);
		e->key.bytes = copy;
		e->parsed = e->valid = false;
		e->arch = -1;
	}
	return e;
}

static void
parse_entry(SpecEntry *e)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));

	e->parsed = true;
	pgdl_spec_from_jsonb((Jsonb *) e->key.bytes, spec);
	e->tokens = palloc(sizeof(Token) * Max(spec->n_layers, 1));
	e->n_tokens = spec_tokens(spec, e->tokens);
	data_from_spec(spec, &e->spec_data);
	e->valid = true;
	pfree(spec);
}

typedef struct ParseCall
{
	SpecEntry **entries;
	int			from;
	int			to;
} ParseCall;

static void
parse_range(void *arg)
{
	ParseCall  *call = arg;

	for (int i = call->from; i < call->to; i++)
		parse_entry(call->entries[i]);
}

/* Entries [from, to) parsed in a subtransaction; false when one is not a valid spec. */
static bool
parse_in_subxact(SpecEntry **entries, int from, int to)
{
	ParseCall	call = {entries, from, to};

	return data_exception_in_subxact(parse_range, &call) == NULL;
}

/*
 * A batch's new specs, parsed: all in one subtransaction, and only when one of them is not valid (a row
 * written by hand) each in its own, so that its models are left out, not the query failed.
 */
static void
parse_entries(SpecEntry **entries, int n)
{
	if (n == 0 || parse_in_subxact(entries, 0, n))
		return;
	for (int i = 0; i < n; i++)
	{
		entries[i]->valid = false;
		(void) parse_in_subxact(entries, i, i + 1);
		entries[i]->parsed = true;
	}
}

static double
distance_to(const ZooQuery *q, SpecEntry *e, const DataDesc *data, double *row)
{
	double		dd = 0;

	if (q->by != ZOO_DATA && e->arch < 0)
		e->arch = arch_distance(q->tokens, q->n_tokens, e->tokens, e->n_tokens, NULL, row);
	if (q->by != ZOO_ARCHITECTURE)
		dd = data_distance(&q->data, data);
	return q->by == ZOO_ARCHITECTURE ? e->arch : q->by == ZOO_DATA ? dd : (e->arch + dd) / 2;
}

/* A model of a batch: its id, dataset and spec. */
typedef struct ZooRow
{
	int64		id;
	int64		dataset;		/* 0: none */
	SpecEntry  *spec;
} ZooRow;

/* Every model the caller sees, a batch of rows at a time, into the heap; models whose spec is not valid are left out. */
static int
scan_models(ZooQuery *q, DataCache *cache, Candidate *heap, int k)
{
	MemoryContext specs_cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl similar_models specs",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext batch = AllocSetContextCreate(CurrentMemoryContext, "pgdl similar_models batch",
												ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;
	HTAB	   *specs = spec_table(specs_cxt);
	Portal		portal;
	ZooRow	   *rows = palloc(sizeof(ZooRow) * ZOO_FETCH_ROWS);
	SpecEntry **fresh = palloc(sizeof(SpecEntry *) * ZOO_FETCH_ROWS);
	double	   *row = palloc(sizeof(double) * 2 * (NN_MAX_LAYERS + 1));
	int			n = 0;

	portal = SPI_cursor_open_with_args(NULL, "SELECT id, spec, dataset FROM pgdl.models", 0, NULL, NULL, NULL,
									   true, CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPITupleTable *fetched;
		int			n_rows = 0,
					n_fresh = 0;

		SPI_cursor_fetch(portal, true, ZOO_FETCH_ROWS);
		/* a dataset's lookup (data_cached) replaces SPI_tuptable: the batch's rows are held here */
		fetched = SPI_tuptable;
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(batch);
		for (uint64 t = 0; t < SPI_processed; t++)
		{
			HeapTuple	tup = fetched->vals[t];
			TupleDesc	desc = fetched->tupdesc;
			bool		isnull;
			ZooRow	   *r = &rows[n_rows];
			Datum		ds;

			CHECK_FOR_INTERRUPTS();
			r->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			if (r->id == q->id)
				continue;
			r->spec = spec_entry(specs, DatumGetJsonbP(SPI_getbinval(tup, desc, 2, &isnull)), specs_cxt);
			if (!r->spec->parsed)
			{
				r->spec->parsed = true;		/* listed once */
				fresh[n_fresh++] = r->spec;
			}
			ds = SPI_getbinval(tup, desc, 3, &isnull);
			r->dataset = isnull ? 0 : DatumGetInt64(ds);
			n_rows++;
		}
		MemoryContextSwitchTo(specs_cxt);
		parse_entries(fresh, n_fresh);
		MemoryContextSwitchTo(batch);
		for (int i = 0; i < n_rows; i++)
		{
			Candidate	c;
			DataDesc	data;

			CHECK_FOR_INTERRUPTS();
			if (!rows[i].spec->valid)
				continue;
			data = rows[i].spec->spec_data;
			if (q->by != ZOO_ARCHITECTURE && rows[i].dataset != 0)
			{
				MemoryContextSwitchTo(old);
				if (!data_cached(cache, rows[i].dataset, &data))
					data = rows[i].spec->spec_data;
				MemoryContextSwitchTo(batch);
			}
			c.id = rows[i].id;
			c.distance = distance_to(q, rows[i].spec, &data, row);
			heap_offer(heap, &n, k, c);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch);
		SPI_freetuptable(fetched);
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(batch);
	MemoryContextDelete(specs_cxt);
	return n;
}

/* The reason for one result: what differs in the layers, in the data, or both. */
static char *
reason_for(ZooQuery *q, const NnSpec *spec, const DataDesc *data)
{
	if (q->by == ZOO_ARCHITECTURE)
		return arch_reason(q->spec, spec);
	if (q->by == ZOO_DATA)
		return data_reason(&q->data, data);
	return psprintf("%s; %s", arch_reason(q->spec, spec), data_reason(&q->data, data));
}

/* The results, best first, with their names and reasons read again (k rows, not every row). */
static void
put_results(FunctionCallInfo fcinfo, ZooQuery *q, DataCache *cache, Candidate *heap, int n)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	Oid			types[1] = {INT8OID};

	qsort(heap, n, sizeof(Candidate), candidate_cmp);
	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false};
		Datum		arg[1] = {Int64GetDatum(heap[i].id)};
		HeapTuple	tup;
		TupleDesc	desc;
		bool		isnull;
		DataDesc	data;
		Datum		name;

		CHECK_FOR_INTERRUPTS();
		if (SPI_execute_with_args("SELECT name, spec, dataset FROM pgdl.models WHERE id = $1", 1, types, arg,
								  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
			continue;			/* deleted meanwhile: gone from the ranking */
		tup = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		name = SPI_getbinval(tup, desc, 1, &nulls[1]);
		pgdl_spec_from_jsonb(DatumGetJsonbP(SPI_getbinval(tup, desc, 2, &isnull)), spec);
		{
			Datum		ds = SPI_getbinval(tup, desc, 3, &isnull);

			if (isnull || !data_cached(cache, DatumGetInt64(ds), &data))
				data_from_spec(spec, &data);
		}
		values[0] = Int64GetDatum(heap[i].id);
		values[1] = nulls[1] ? (Datum) 0 : PointerGetDatum(DatumGetTextPCopy(name));
		values[2] = Float8GetDatum(heap[i].distance);
		values[3] = CStringGetTextDatum(reason_for(q, spec, &data));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

PG_FUNCTION_INFO_V1(pgdl_similar_models);
Datum
pgdl_similar_models(PG_FUNCTION_ARGS)
{
	ZooQuery	q;
	DataCache	cache = {0};
	Candidate  *heap;
	int32		k;
	int			n;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pgdl.similar_models needs a model (or spec), k and by")));
	k = PG_GETARG_INT32(1);
	if (k < 1 || k > ZOO_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d, got %d", ZOO_MAX_K, k)));
	q.by = parse_by(PG_GETARG_TEXT_PP(2));
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	query_from_arg(fcinfo, &q, &cache);
	heap = palloc(sizeof(Candidate) * k);
	n = scan_models(&q, &cache, heap, k);
	put_results(fcinfo, &q, &cache, heap, n);
	SPI_finish();
	return (Datum) 0;
}
