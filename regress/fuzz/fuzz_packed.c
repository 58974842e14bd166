/*
 * fuzz_packed.c -- libFuzzer target: the checks a row of a packed table passes
 * before the engine reads it (pgdl_packed_check_row in src/data/packed.c), and the
 * engine on the rows that pass.
 *
 * A packed table belongs to whoever packed it and holds whatever real[] values
 * its owner writes, so each input describes one row as SQL could store it:
 * n, and x and y as any arrays PostgreSQL can hold (any element type, 0 to 6
 * dimensions, any lower bounds, NULL elements), with the dataset's catalog row
 * (n_features > 0 and n_targets > 0, as the catalog's CHECKs require; any
 * number of classes).  A row that passes goes through pgdl_check_model_fits
 * with a model of the dataset's shape, then evaluation and a training step,
 * which must read only what the checks vouched for (AddressSanitizer) and
 * refuse bad class labels with an error.
 *
 * Input: u8 flags (1: classification, 2: binary_cross_entropy), i32 n,
 * i32 n_features, i32 n_targets, u16 n_classes, i32 buffer_id, then x and y,
 * each: u8 kind (bits 0-1: 3 for another element type than real, bit 2 then
 * picks float8 or int4; bits 3-5: dimensions, modulo 7; bit 6: a NULL bitmap),
 * per dimension u16 length - 1 (modulo 4096) and i32 lower bound, the bitmap,
 * then the values that are not NULL.  Bytes past the end read as zeros.
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "data/data.h"

#include "fuzz_engine.h"
#include "fuzz_pg.h"

#define MAX_ITEMS	(1 << 14)	/* per array, so that an iteration stays short */

typedef struct Input
{
	const uint8 *p;
	const uint8 *end;
} Input;

static uint32
take(Input *in, int bytes)
{
	uint32		v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint32) (in->p < in->end ? *in->p++ : 0) << (8 * i);
	return v;
}

/* An array as PostgreSQL lays it out (construct_md_array), or NULL when SQL could not store it. */
static ArrayType *
build_array(Input *in)
{
	uint32		kind = take(in, 1);
	Oid			elemtype = (kind & 3) != 3 ? FLOAT4OID : (kind & 4) ? FLOAT8OID : INT4OID;
	int			elemsize = elemtype == FLOAT8OID ? 8 : 4;
	int			ndim = (int) (((kind >> 3) & 7) % (MAXDIM + 1));
	bool		nulls = ndim > 0 && (kind & 0x40);
	int			dims[MAXDIM],
				lbs[MAXDIM];
	int64		nitems = ndim > 0 ? 1 : 0,
				present;
	bits8		bitmap[(MAX_ITEMS + 7) / 8];
	int32		overhead;
	ArrayType  *a;

	for (int d = 0; d < ndim; d++)
	{
		dims[d] = 1 + (int) (take(in, 2) % 4096);
		lbs[d] = (int32) take(in, 4);
		nitems *= dims[d];
		if (nitems > MAX_ITEMS || (int64) lbs[d] + dims[d] > PG_INT32_MAX)
			return NULL;
	}
	present = nitems;
	if (nulls)
		for (int64 i = 0; i < (nitems + 7) / 8; i++)
			bitmap[i] = (bits8) take(in, 1);
	for (int64 i = 0; nulls && i < nitems; i++)
		present -= !((bitmap[i / 8] >> (i % 8)) & 1);

	/* exactly the bytes PostgreSQL would hold: the sanitizer sees any read past them */
	overhead = nulls ? ARR_OVERHEAD_WITHNULLS(ndim, nitems) : ARR_OVERHEAD_NONULLS(ndim);
	a = palloc0(overhead + present * elemsize);
	SET_VARSIZE(a, overhead + present * elemsize);
	a->ndim = ndim;
	a->dataoffset = nulls ? overhead : 0;
	a->elemtype = elemtype;
	memcpy(ARR_DIMS(a), dims, sizeof(int) * ndim);
	memcpy(ARR_LBOUND(a), lbs, sizeof(int) * ndim);
	if (nulls)
		memcpy(ARR_NULLBITMAP(a), bitmap, (nitems + 7) / 8);
	/* only the elements that are not NULL are stored */
	for (int64 i = 0; i < present * elemsize / 4; i++)
	{
		uint32		v = take(in, 4);

		memcpy(ARR_DATA_PTR(a) + 4 * i, &v, 4);
	}
	return a;
}

static bool
check_row(const PgdlDataset *ds, int32 buffer_id, int32 n, ArrayType *xa, ArrayType *ya,
		  float **x, float **y)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	pgdl_packed_check_row(ds, "fuzz_packed", buffer_id, n, xa, ya, x, y);
	fuzz_error_armed = false;
	return true;
}

static bool
model_fits(const NnSpec *spec, const PgdlDataset *ds)
{
	if (setjmp(fuzz_error_jmp) != 0)
		return false;
	fuzz_error_armed = true;
	pgdl_check_model_fits(spec, ds);
	fuzz_error_armed = false;
	return true;
}

/* One dense layer from the dataset's features to its classes or targets. */
static void
dataset_spec(const PgdlDataset *ds, bool bce, NnSpec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->input_ndim = 1;
	spec->input[0] = ds->n_features;
	spec->n_layers = 1;
	nn_layer_defaults(&spec->layers[0], NN_DENSE);
	if (ds->classification)
	{
		spec->loss = bce ? NN_LOSS_BCE : NN_LOSS_CROSS_ENTROPY;
		spec->layers[0].units = bce ? 1 : ds->n_classes;
	}
	else
	{
		spec->loss = bce ? NN_LOSS_BCE : NN_LOSS_MSE;
		spec->layers[0].units = ds->n_targets;
	}
}

/* What training and evaluation do with a row that passed. */
static void
use_row(const PgdlDataset *ds, bool bce, const float *x, const float *y, int32 n)
{
	NnSpec		spec;
	NnError		err;
	NnModel    *m;
	NnOptim		sgd;
	bool		evaluated,
				trained;

	dataset_spec(ds, bce, &spec);
	if (!nn_spec_validate(&spec, NULL, &err) || !fuzz_spec_small(&spec))
	{
		fuzz_note("row passed; no small model fits the dataset");
		return;
	}
	if (!model_fits(&spec, ds))
	{
		fuzz_note("row passed; model refused: %s", fuzz_error_message);
		return;
	}
	m = nn_model_create(&spec, 42, &err);
	if (m == NULL)
		fuzz_fail("a small valid spec builds no model: %s", err.msg);
	nn_optim_defaults(&sgd, NN_OPT_SGD);
	if (!nn_model_set_optim(m, &sgd, &err))
		fuzz_fail("sgd is refused: %s", err.msg);
	err.msg[0] = '\0';
	evaluated = nn_model_evaluate(m, x, y, n, NULL, &err);
	if (!evaluated && err.msg[0] == '\0')
		fuzz_fail("evaluation fails without a message");
	err.msg[0] = '\0';
	trained = nn_model_train_step(m, x, y, n, NULL, &err);
	if (trained != evaluated)
		fuzz_fail("evaluation and training disagree on a row: %s", err.msg);
	fuzz_note("row passed; %s", trained ? "trained" : err.msg);
	nn_model_free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Input		in = {data, data + size};
	uint32		flags = take(&in, 1);
	PgdlDataset ds;
	int32		n,
				buffer_id;
	ArrayType  *xa,
			   *ya;
	float	   *x,
			   *y;

	memset(&ds, 0, sizeof(ds));
	ds.classification = flags & 1;
	n = (int32) take(&in, 4);
	ds.n_features = (int32) (take(&in, 4) & 0x7FFFFFFF);
	ds.n_targets = (int32) (take(&in, 4) & 0x7FFFFFFF);
	ds.n_features += ds.n_features == 0;	/* the catalog's CHECKs: both positive */
	ds.n_targets += ds.n_targets == 0;
	ds.n_classes = (int32) take(&in, 2);
	buffer_id = (int32) take(&in, 4);
	xa = build_array(&in);
	ya = xa ? build_array(&in) : NULL;
	if (ya == NULL)
		fuzz_note("not an array SQL could store");
	else if (check_row(&ds, buffer_id, n, xa, ya, &x, &y))
		use_row(&ds, (flags & 2) != 0, x, y, n);
	else
		fuzz_note("row refused: %s", fuzz_error_message);
	fuzz_arena_reset();
	return 0;
}
