/*
 * predict.c -- inference in SQL: pgdl.features, predict, predict_class and
 * encode, and what predict_batch.c shares with them (evaluation, and the
 * forward pass both read: train/evaluate.c).
 *
 * Every function takes its model three ways, by the same C entry point: an id
 * (bigint), a name (text) or an engine blob (bytea); pgdl_model_arg
 * (model_io.c) tells them apart.
 *
 * Workspaces.  A forward pass writes into the model's workspace (m->work,
 * sized by nn_model_reserve), which is part of the model struct, but never
 * changes its parameters or running statistics (inference mode).  A backend
 * is single-threaded, so:
 *
 *  - the per-row functions (features, predict, predict_class) run the cached
 *    model of model_io.c in place: one example needs a workspace of one row,
 *    the cache keeps it, and the next row pays no allocation, no SPI and no
 *    copy.  Nothing between resolving the model and copying its output out
 *    runs another query, loads another model or takes a lock (arguments are
 *    detoasted first, since opening a TOAST table may process invalidations):
 *    the cache entry may be retired or reused by the next of those;
 *
 *  - the functions that read a table (predict_batch, and train/evaluate.c's) clone the model
 *    and copy its dataset first (pgdl_model_arg_copy): the SPI cursor between
 *    two batches may process invalidations, load other models into the cache
 *    or evict this one.  The clone also keeps a batch-sized workspace out of
 *    the long-lived cache, and makes the whole scan use one consistent model.
 *
 * A bytea model has no dataset: its inputs are used as given (no
 * normalization), its outputs too (no target scaling undone) and its classes
 * are class indices.  The per-row functions
 * keep the last blob's deserialized model per call site, keyed by the blob's
 * bytes, so that `pgdl.predict($1::bytea, x) FROM t` deserializes once.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "predict/predict.h"

/* ---- checks shared by the functions ---- */

/*
 * For predict_class and predict_batch: a model whose outputs name one class
 * per example (cross_entropy, or binary_cross_entropy with one output).
 */
void
pgdl_predict_check_classifier(const NnModel *m, const char *function)
{
	if (nn_loss_is_regression(m->spec.loss))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model is not a classifier"),
				 errdetail("Its loss is %s.", nn_loss_name(m->spec.loss)),
				 errhint("Use pgdl.predict() for the outputs of a regression model instead of %s().", function)));
	if (m->spec.loss == NN_LOSS_BCE && nn_model_output_size(m) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model is not a single-label classifier"),
				 errdetail("It has " INT64_FORMAT " independent binary_cross_entropy outputs.",
						   nn_model_output_size(m)),
				 errhint("Use pgdl.predict() for the probability of each output instead of %s().", function)));
}

/*
 * The first of n values that is NaN or infinite, or -1.  Almost every row is
 * finite: a pass without branches (which the compiler vectorizes) says so
 * first, looking for the all-ones exponent of NaN and infinity.
 */
int64
pgdl_predict_first_nonfinite(const float *x, int64 n)
{
	uint32		any = 0;

	for (int64 j = 0; j < n; j++)
	{
		uint32		bits;

		memcpy(&bits, &x[j], sizeof(bits));
		any |= (bits & 0x7f800000) == 0x7f800000;
	}
	if (!any)
		return -1;
	for (int64 j = 0; j < n; j++)
		if (!isfinite(x[j]))
			return j;
	return -1;
}

/*
 * A network fed NaN or infinity answers with numbers all the same (argmax picks
 * class 0), so such a feature is an error, as it is for pgdl.pack: raw, or once
 * normalized (a huge value divided by a small standard deviation).  `what`
 * names the features in the message: "x", or a row of predict_batch's table.
 */
void
pgdl_predict_check_finite(const float *raw, const float *x, int64 n, const char *what)
{
	int64		j = pgdl_predict_first_nonfinite(x, n);

	if (j < 0)
		return;
	if (!isfinite(raw[j]))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s has a NaN or infinite value in element " INT64_FORMAT, what, j + 1),
				 errdetail("Features must be finite numbers.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s is out of range in element " INT64_FORMAT " once normalized", what, j + 1),
			 errdetail("The model's dataset normalizes %g to a value beyond the range of real.", raw[j])));
}

/*
 * A network's outputs that are NaN or infinite are no answer (argmax would
 * pick class 0, predict would return {Infinity}): an error naming the first of
 * one example's k outputs, and the features it came from (`what`).
 */
void
pgdl_predict_check_outputs(const float *z, int64 k, const char *what)
{
	int64		j = pgdl_predict_first_nonfinite(z, k);

	if (j < 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("the model's output " INT64_FORMAT " for %s is %s", j + 1, what,
					isnan(z[j]) ? "NaN" : "infinite"),
			 errdetail("A prediction must be a finite number: the model's weights, or these features, "
					   "overflow the range of real in its layers.")));
}

/*
 * x's `length` features (a raw example vector of the dataset: NaN a missing
 * value), checked against the model, expanded (imputed, indicators, one-hot)
 * and normalized with its dataset and checked to be finite, into `dst` (which
 * may be NULL: then returns x itself when nothing needs normalizing, or a
 * palloc'd copy of the model's input).  `what` names x in errors.
 */
const float *
pgdl_predict_prepare_features(const NnModel *m, const PgdlDataset *ds, const float *x, int64 length,
							  float *dst, const char *what)
{
	int64		expected = ds != NULL ? ds->n_raw : nn_model_input_size(m);
	float	   *expanded;

	if (length != expected)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of features"),
				 errdetail("The model takes " INT64_FORMAT " features; %s has " INT64_FORMAT ".",
						   expected, what, length),
				 ds != NULL && ds->n_sequences > 0 && length == ds->n_numeric
				 ? errhint("The dataset has %d categorical and %d sequence columns: give their values as categories => ARRAY[...] and sequences => ...",
						   ds->n_categorical, ds->n_sequences) :
				 ds != NULL && ds->n_categorical > 0 && length == ds->n_numeric
				 ? errhint("The dataset has %d categorical columns: give their values as categories => ARRAY[...].",
						   ds->n_categorical) : 0));
	if (ds == NULL && dst == NULL)
	{
		pgdl_predict_check_finite(x, x, length, what);
		return x;
	}
	if (dst == NULL)
		dst = palloc(sizeof(float) * (ds != NULL ? ds->n_features : length));
	if (ds == NULL || (ds->n_raw == ds->n_features && ds->impute == NULL))
	{
		memcpy(dst, x, sizeof(float) * length);
		if (ds != NULL)
			pgdl_dataset_normalize(ds, dst, 1);
		pgdl_predict_check_finite(x, dst, length, what);
		return dst;
	}
	/* a value not finite is named by its place in the expanded vector, whose numeric features lead as in x */
	expanded = palloc(sizeof(float) * ds->n_features);
	pgdl_dataset_expand(ds, x, expanded, 1);
	memcpy(dst, expanded, sizeof(float) * ds->n_features);
	pgdl_dataset_normalize(ds, dst, 1);
	pgdl_predict_check_finite(expanded, dst, ds->n_features, what);
	pfree(expanded);
	return dst;
}

void
pgdl_predict_check_nulls(const PgdlDataset *ds, bool has_nulls, const char *what)
{
	if (has_nulls && (ds == NULL || ds->impute == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL values", what)));
}

/* Class index `index` as the dataset's value, or as its number when there is no dataset. */
char *
pgdl_predict_class_name(const PgdlDataset *ds, int index)
{
	if (ds == NULL || !ds->classification || ds->classes == NULL)
		return psprintf("%d", index);
	if (index >= ds->n_classes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("class %d is not a class of the model's dataset", index),
				 errdetail("The dataset has %d classes.", ds->n_classes)));
	return pstrdup(ds->classes[index]);
}

/* ---- categorical and sequence columns: values to ids ---- */

/* Token i of a sequence (a JSON string, number or null) as text, NULL for null. */
static char *
sequence_token(JsonbValue *v, int s, int i)
{
	if (v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("token %d of sequence %d is not a string, a number or null", i + 1, s + 1),
			 errdetail("A sequence's tokens are the elements of its array, as pgdl.pack read them.")));
	return NULL;
}

/*
 * sequences, a jsonb array with one element per sequence column of the
 * dataset, each an array of tokens or null (an empty sequence), as each
 * column's L ids and length into out (pgdl_sequence_layout): a token the
 * vocabulary lacks, or null, is the unseen id; tokens past L are left out.
 */
static void
encode_sequences(const PgdlDataset *ds, Jsonb *sequences, float *out)
{
	int			n = JB_ROOT_IS_ARRAY(sequences) && !JB_ROOT_IS_SCALAR(sequences)
		? (int) JsonContainerSize(&sequences->root) : -1;

	if (n != ds->n_sequences)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequences must be a JSON array of %d sequences", ds->n_sequences),
				 errdetail("The dataset has %d sequence columns; give each one's tokens as an array, "
						   "for example with jsonb_build_array(tokens).", ds->n_sequences)));
	for (int s = 0; s < n; s++)
	{
		const PgdlVocabulary *v = &ds->vocabulary[ds->n_categorical + s];
		JsonbValue *seq = getIthJsonbValueFromContainer(&sequences->root, s);
		int32	   *ids = palloc(sizeof(int32) * v->length);
		int32		kept = 0;

		if (seq->type == jbvBinary && JsonContainerIsArray(seq->val.binary.data))
			kept = (int32) Min(JsonContainerSize(seq->val.binary.data), (uint32) v->length);
		else if (seq->type != jbvNull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sequence %d is not an array of tokens", s + 1),
					 errdetail("Each element of sequences is an array of tokens, or null for an empty sequence.")));
		for (int32 i = 0; i < kept; i++)
			ids[i] = pgdl_dataset_category_id(ds, ds->n_categorical + s,
											  sequence_token(getIthJsonbValueFromContainer(seq->val.binary.data, i), s, i));
		pgdl_sequence_layout(ids, kept, v->length, out);
		out += v->length + 1;
		pfree(ids);
	}
}

/*
 * categories, a text[] with one value per categorical column of the dataset
 * (NULL elements allowed), as its ids after the raw numeric features xraw,
 * then the sequences (NULL: none given) as encode_sequences lays them out,
 * into a palloc'd vector of the dataset's n_features (not normalized).  Runs
 * no query: the cached model that holds ds stays valid.
 */
float *
pgdl_predict_encode_inputs(const PgdlDataset *ds, const float *xraw, int64 length, ArrayType *categories,
			  Jsonb *sequences, const char *function)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	float	   *x;

	if (ds == NULL || (ds->n_categorical == 0 && ARR_NDIM(categories) > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has no categorical columns", ds == NULL ? "a model blob" : "the dataset"),
				 errdetail("Only a dataset packed with categorical => ... maps categorical values to ids."),
				 strcmp(function, "pgdl.encode") == 0 ? 0 :
				 errhint("Call %s without categories.", function)));
	if (ARR_NDIM(categories) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("categories must be a one-dimensional array")));
	deconstruct_array(categories, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != ds->n_categorical)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of categorical values"),
				 errdetail("The dataset has %d categorical columns; categories has %d values.",
						   ds->n_categorical, n)));
	if (sequences == NULL && ds->n_sequences > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the dataset has %d sequence columns", ds->n_sequences),
				 errhint("Give their tokens as a fourth argument, for example jsonb_build_array(tokens).")));
	if (length != ds->n_numeric)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of features"),
				 errdetail("The dataset has %d numeric features besides its categorical%s columns; x has " INT64_FORMAT ".",
						   ds->n_numeric, ds->n_sequences > 0 ? " and sequence" : "", length)));
	x = palloc(sizeof(float) * ds->n_raw);
	memcpy(x, xraw, sizeof(float) * length);
	for (int c = 0; c < n; c++)
		x[length + c] = (float) pgdl_dataset_category_id(ds, c, nulls[c] ? NULL : TextDatumGetCString(elems[c]));
	if (sequences != NULL)
		encode_sequences(ds, sequences, x + length + n);
	return x;
}

/*
 * pgdl.encode(packed, x, categories [, sequences]): the vector pgdl.predict
 * takes, for predict_batch's queries.
 */
PG_FUNCTION_INFO_V1(pgdl_encode);
Datum
pgdl_encode(PG_FUNCTION_ARGS)
{
	Oid			packed = PG_GETARG_OID(0);
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *ca = PG_GETARG_ARRAYTYPE_P(2);
	Jsonb	   *sa = PG_NARGS() > 3 ? PG_GETARG_JSONB_P(3) : NULL;
	int64		length;
	bool		has_nulls;
	const float *xraw = pgdl_number_array_missing(xa, "x", &length, &has_nulls);
	PgdlDataset *ds = pgdl_dataset_by_packed(packed);

	/* a NULL feature is NaN in the vector, for predict to impute */
	pgdl_predict_check_nulls(ds, has_nulls, "x");
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(pgdl_predict_encode_inputs(ds, xraw, length, ca, sa, "pgdl.encode"),
												 ds->n_raw));
}

/* ---- pgdl.features: the output of a network's first layers ---- */

PG_FUNCTION_INFO_V1(pgdl_features);
Datum
pgdl_features(PG_FUNCTION_ARGS)
{
	int32		layer = PG_GETARG_INT32(1);
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(2);	/* detoasted before the model is resolved */
	int64		length;
	const float *xraw = pgdl_float4_array(xa, "x", &length);
	PgdlModel  *model;
	NnModel    *m;
	NnError		err;
	const float *x;
	const float *z;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	pgdl_check_model_usable(model);
	m = model->nn;
	if (layer < 1 || layer > m->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layer must be between 1 and %d, got %d", m->spec.n_layers, layer),
				 errdetail("pgdl.features returns the output of the model's first `layer` layers.")));
	pgdl_check_model_fits(&m->spec, model->dataset);
	x = pgdl_predict_prepare_features(m, model->dataset, xraw, length, NULL, "x");
	pgdl_check_model_batch(m, 1, "the model");
	if (!nn_model_reserve(m, 1, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	pgdl_check_model_input(m, x, 1);
	z = nn_model_forward_upto(m, x, 1, layer);
	m->last_input = NULL;
	m->last_n = 0;
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(z, NN_SHAPE_SIZE(m->shape[layer])));
}

/* ---- pgdl.predict, pgdl.predict_class: one example ---- */

PG_FUNCTION_INFO_V1(pgdl_predict);
Datum
pgdl_predict(PG_FUNCTION_ARGS)
{
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);	/* detoasted before the model is resolved */
	ArrayType  *ca = PG_NARGS() > 2 ? PG_GETARG_ARRAYTYPE_P(2) : NULL;
	Jsonb	   *sa = PG_NARGS() > 3 ? PG_GETARG_JSONB_P(3) : NULL;
	int64		length;
	bool		has_nulls;
	const float *xraw = pgdl_number_array_missing(xa, "x", &length, &has_nulls);
	PgdlModel  *model;
	NnModel    *m;
	const float *x;
	const float *z;
	float	   *out;
	int64		k;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	pgdl_check_model_usable(model);
	m = model->nn;
	pgdl_check_model_fits(&m->spec, model->dataset);
	pgdl_predict_check_nulls(model->dataset, has_nulls, "x");
	if (ca != NULL)
	{
		xraw = pgdl_predict_encode_inputs(model->dataset, xraw, length, ca, sa, "pgdl.predict");
		length = model->dataset->n_raw;
	}
	x = pgdl_predict_prepare_features(m, model->dataset, xraw, length, NULL, "x");
	z = pgdl_model_outputs(m, x, 1);
	k = nn_model_output_size(m);
	pgdl_predict_check_outputs(z, k, "x");
	out = palloc(sizeof(float) * k);
	pgdl_model_probabilities(m->spec.loss, z, k, out);
	/* a regression model of standardized targets answers in target units */
	if (model->dataset != NULL && nn_loss_is_regression(m->spec.loss))
		pgdl_dataset_unscale_targets(model->dataset, out, 1);
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(out, k));
}

/*
 * The most likely class of predict_class's x under its model, as its dataset's
 * label text (or the class index for a blob), and the dataset's label type
 * (InvalidOid for a blob).  Copied out of the model, which the cache may retire
 * at the next catalog access (such as a type lookup).
 */
static char *
predict_label(FunctionCallInfo fcinfo, bool categories, Oid *label_type)
{
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *ca = categories ? PG_GETARG_ARRAYTYPE_P(2) : NULL;
	Jsonb	   *sa = categories && PG_NARGS() > 3 ? PG_GETARG_JSONB_P(3) : NULL;
	int64		length;
	bool		has_nulls;
	const float *xraw = pgdl_number_array_missing(xa, "x", &length, &has_nulls);
	PgdlModel  *model;
	NnModel    *m;
	const float *x;
	const float *z;
	int			index;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	pgdl_check_model_usable(model);
	m = model->nn;
	pgdl_predict_check_classifier(m, "pgdl.predict_class");
	pgdl_check_model_fits(&m->spec, model->dataset);
	pgdl_predict_check_nulls(model->dataset, has_nulls, "x");
	if (ca != NULL)
	{
		xraw = pgdl_predict_encode_inputs(model->dataset, xraw, length, ca, sa, "pgdl.predict_class");
		length = model->dataset->n_raw;
	}
	x = pgdl_predict_prepare_features(m, model->dataset, xraw, length, NULL, "x");
	z = pgdl_model_outputs(m, x, 1);
	pgdl_predict_check_outputs(z, nn_model_output_size(m), "x");
	index = pgdl_model_class_of(m, z, NULL);
	*label_type = model->dataset ? model->dataset->label_type : InvalidOid;
	return pgdl_predict_class_name(model->dataset, index);
}

PG_FUNCTION_INFO_V1(pgdl_predict_class);
Datum
pgdl_predict_class(PG_FUNCTION_ARGS)
{
	Oid			label_type;

	PG_RETURN_TEXT_P(cstring_to_text(predict_label(fcinfo, false, &label_type)));
}

/* predict_class(model, x, categories text[] [, sequences jsonb]) */
PG_FUNCTION_INFO_V1(pgdl_predict_class_categories);
Datum
pgdl_predict_class_categories(PG_FUNCTION_ARGS)
{
	Oid			label_type;

	PG_RETURN_TEXT_P(cstring_to_text(predict_label(fcinfo, true, &label_type)));
}

/*
 * A class's label as type `type`, by that type's input function: the dataset's
 * label type gives back the value that was packed.  A label that `type` cannot
 * read is an error naming both types; other errors (a cancel) pass unchanged.
 */
Datum
pgdl_predict_label_as(const char *label, Oid type, Oid label_type, FmgrInfo *input, Oid ioparam)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		result = (Datum) 0;

	PG_TRY();
	{
		result = InputFunctionCall(input, (char *) label, ioparam, -1);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			e->sqlerrcode != ERRCODE_INVALID_TEXT_REPRESENTATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("class \"%s\" cannot be returned as %s", pgdl_echo(label), format_type_be(type)),
				 OidIsValid(label_type) ?
				 errdetail("The model's dataset has labels of type %s; %s says: %s.",
						   format_type_be(label_type), format_type_be(type), e->message) :
				 errdetail("A model blob has no dataset: its classes are indices (integer); %s says: %s.",
						   format_type_be(type), e->message),
				 errhint("Pass label_type as NULL::%s, the type of the dataset's label column, or use the text form.",
						 OidIsValid(label_type) ? format_type_be(label_type) : "integer")));
	}
	PG_END_TRY();
	return result;
}

/* predict_class(model, x, label_type anyelement): the class as label_type's type. */
PG_FUNCTION_INFO_V1(pgdl_predict_class_as);
Datum
pgdl_predict_class_as(PG_FUNCTION_ARGS)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 2);
	Oid			label_type;
	Oid			input;
	Oid			ioparam;
	FmgrInfo	flinfo;
	char	   *label;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (!OidIsValid(type))
		elog(ERROR, "could not determine the type of label_type");
	label = predict_label(fcinfo, false, &label_type);
	getTypeInputInfo(type, &input, &ioparam);
	fmgr_info(input, &flinfo);
	return pgdl_predict_label_as(label, type, label_type, &flinfo, ioparam);
}
