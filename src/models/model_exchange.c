/*
 * model_exchange.c -- weights in and out of pgdl: pgdl.model_weights lists a
 * model's parameter tensors, pgdl.model_from_weights builds a model from a
 * spec and such tensors.
 *
 * Tensors (spec/tensors.c) are named and shaped as PyTorch's state_dict has them (dense
 * "weight" is [out, in], conv2d "weight" [filters, channels, k, k], batchnorm
 * "running_mean" and "running_var" are buffers), so that weights move between
 * the two without transposing.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"

/* ---- pgdl.model_weights: one row per tensor ---- */

static void
put_tensor(ReturnSetInfo *rsinfo, const NnModel *m, const PgdlTensor *t)
{
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	Datum		dims[PGDL_TENSOR_MAX_DIMS];
	const float *base = t->buffer ? m->buffers : m->params;

	for (int d = 0; d < t->ndim; d++)
		dims[d] = Int32GetDatum(t->shape[d]);
	values[0] = Int32GetDatum(t->layer);
	values[1] = CStringGetTextDatum(t->name);
	values[2] = PointerGetDatum(construct_array(dims, t->ndim, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	values[3] = PointerGetDatum(pgdl_float4_array_from(base + t->offset, pgdl_tensor_size(t)));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(pgdl_model_weights);
Datum
pgdl_model_weights(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext rowcxt;
	MemoryContext old;
	NnModel    *m;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl model_weights row", ALLOCSET_DEFAULT_SIZES);

	/*
	 * The model is read in place: nothing below runs a query or takes a lock,
	 * so the cache cannot drop it meanwhile.
	 */
	m = pgdl_model_arg(fcinfo)->nn;
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		PgdlTensor	t[PGDL_LAYER_MAX_TENSORS];
		int			n = pgdl_layer_tensors(m, i, t);

		CHECK_FOR_INTERRUPTS();
		for (int j = 0; j < n; j++)
		{
			old = MemoryContextSwitchTo(rowcxt);
			put_tensor(rsinfo, m, &t[j]);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
	}
	MemoryContextDelete(rowcxt);
	return (Datum) 0;
}

/* ---- pgdl.model_from_weights: a model blob from a spec and its tensors ---- */

/* Copies `what` into dst after checking its length and values. */
static void
copy_weights(ArrayType *array, const char *what, float *dst, int64 expected, const char *expected_what)
{
	int64		length;
	const float *v = pgdl_float4_array(array, what, &length);

	if (length != expected)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of %s", what),
				 errdetail("The spec needs " INT64_FORMAT " %s, %s holds " INT64_FORMAT ".",
						   expected, expected_what, what, length),
				 errhint("Concatenate the tensors in the order pgdl.model_weights() lists them.")));
	for (int64 j = 0; j < length; j++)
		if (!isfinite(v[j]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be finite", what),
					 errdetail("Value " INT64_FORMAT " is %s.", j + 1, isnan(v[j]) ? "NaN" : "infinite")));
	if (length > 0)
		memcpy(dst, v, sizeof(float) * length);
}

/* A variance below zero would make batchnorm divide by the root of a negative. */
static void
check_running_variances(const NnModel *m)
{
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int			c = NN_IN_SHAPE(m->shape, &m->spec, i).c;
		const float *var;

		if (m->spec.layers[i].type != NN_BATCHNORM)
			continue;
		var = m->buffers + m->buffer_off[i] + c;
		for (int j = 0; j < c; j++)
			if (var[j] < 0.0f)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("running variance of layer %d must not be negative", i),
						 errdetail("Channel %d has %g.", j, (double) var[j])));
	}
}

PG_FUNCTION_INFO_V1(pgdl_model_from_weights);
Datum
pgdl_model_from_weights(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec;
	NnModel    *m;
	NnError		err;
	int64		seed;

	/* STRICT but for buffers, which may be NULL */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	seed = PG_GETARG_INT64(3);
	if (seed < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seed must not be negative"),
				 errdetail("It is " INT64_FORMAT ".", seed)));

	pgdl_engine_prepare();
	spec = palloc0(sizeof(NnSpec));
	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	pgdl_check_model_memory(spec, NULL, 0, "the model");
	m = nn_model_create(spec, (uint64) seed, &err);
	if (m == NULL)
		pgdl_report_nn_error("model spec", &err);
	pgdl_model_free_with(m, CurrentMemoryContext);

	copy_weights(PG_GETARG_ARRAYTYPE_P(1), "params", m->params, m->n_params, "parameters");
	if (!PG_ARGISNULL(2))
		copy_weights(PG_GETARG_ARRAYTYPE_P(2), "buffers", m->buffers, m->n_buffers,
					 "batchnorm running statistics");
	check_running_variances(m);
	PG_RETURN_BYTEA_P(pgdl_model_serialize(m));
}
