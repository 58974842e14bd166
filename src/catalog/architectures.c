/*
 * architectures.c -- networks as SQL sees them (sql/parts/25_architectures.sql):
 * specs and configurations validated, named specs stored in pgdl.architectures
 * (their cost: plan/estimate.c; a new model from them: train/train_agg.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"

Jsonb *
pgdl_architecture_by_name(const char *name, int64 *id)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	MemoryContext caller = CurrentMemoryContext;
	Jsonb	   *spec;
	bool		isnull;

	SPI_connect();
	if (SPI_execute_with_args("SELECT id, spec FROM pgdl.architectures WHERE id = (SELECT pgdl.architecture_id($1))", 1, types, values,
							  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("architecture \"%s\" does not exist", pgdl_echo(name)),
				 errhint("Store one with pgdl.add_architecture(name, spec), or pass the spec as jsonb.")));
	*id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MemoryContextSwitchTo(caller);
	spec = DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	return spec;
}

Jsonb *
pgdl_architecture_by_id(int64 id, char **name)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	MemoryContext caller = CurrentMemoryContext;
	Jsonb	   *spec = NULL;
	bool		isnull;

	SPI_connect();
	if (SPI_execute_with_args("SELECT name, spec FROM pgdl.architectures WHERE id = $1", 1, types, values,
							  NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		MemoryContextSwitchTo(caller);
		*name = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		spec = DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_finish();
	return spec;
}

PG_FUNCTION_INFO_V1(pgdl_add_architecture);
Datum
pgdl_add_architecture(PG_FUNCTION_ARGS)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	Jsonb	   *spec_json = PG_GETARG_JSONB_P(1);
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	Oid			argtypes[2] = {TEXTOID, JSONBOID};
	Datum		values[2];
	int64		id;
	bool		isnull;

	pgdl_spec_from_jsonb(spec_json, spec);
	if (VARSIZE_ANY_EXHDR(name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an architecture needs a non-empty name")));
	values[0] = PointerGetDatum(name);
	values[1] = JsonbPGetDatum(pgdl_spec_to_jsonb(spec));
	SPI_connect();
	if (SPI_execute_with_args("SELECT 1 FROM pgdl.architectures WHERE name = $1 AND owner = quote_ident(current_user)::regrole", 1, argtypes, values,
							  NULL, false, 1) == SPI_OK_SELECT && SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("architecture \"%s\" already exists", pgdl_echo(text_to_cstring(name))),
				 errhint("Choose another name, or delete the old one from pgdl.architectures.")));
	if (SPI_execute_with_args("INSERT INTO pgdl.architectures (name, spec) VALUES ($1, $2) RETURNING id",
							  2, argtypes, values, NULL, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into pgdl.architectures");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	PG_RETURN_INT64(id);
}

PG_FUNCTION_INFO_V1(pgdl_validate_spec);
Datum
pgdl_validate_spec(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));

	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	PG_RETURN_JSONB_P(pgdl_spec_to_jsonb(spec));
}

PG_FUNCTION_INFO_V1(pgdl_validate_config);
Datum
pgdl_validate_config(PG_FUNCTION_ARGS)
{
	PgdlTrainConfig config;

	pgdl_config_from_jsonb(PG_GETARG_JSONB_P(0), &config);
	PG_RETURN_JSONB_P(pgdl_config_with_warm_start(pgdl_config_to_jsonb(&config), PG_GETARG_JSONB_P(0)));
}
