/*
 * catalog_checks.c -- rows checked when written: the triggers pgdl.models_validate and
 * pgdl.architectures_validate (sql/parts/20_catalog.sql).
 *
 * The catalog is writable by every role (its own rows), and the rows of one role are read by others
 * (a model granted to PUBLIC, every row for pgdl_admin).  A spec or a weights blob that does not parse
 * would make their readers fail, so it is refused when written, by the same rules the readers apply:
 * pgdl_spec_from_jsonb for a spec, nn_model_blob_check (nn_model_deserialize's checks, nothing
 * allocated) for the weights, and a model's spec must be the one its weights hold.  Rows written before
 * 0.7.0, or with the triggers disabled, may still be invalid: the views over many rows show them as
 * such (docs/reference/zoo.md).
 *
 * The trigger functions run as the writer (not SECURITY DEFINER), PUBLIC may not execute them (so
 * nobody attaches them to a table of their own), and each checks that it fires on its own table.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"

/*
 * The tuple a BEFORE ROW trigger on pgdl.<table> writes, after checking how and where it fires.
 * *check: false when the writer bypasses row-level security (a superuser, the tables' owner): such a
 * role may write any row anyway, and a restore, which writes rows of before 0.7.0 as a superuser,
 * keeps them all (the views show one still invalid as invalid).
 */
static HeapTuple
checked_trigger(FunctionCallInfo fcinfo, const char *function, const char *table, bool *check)
{
	const char *const served[] = {table, NULL};
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	pgdl_check_trigger_table(fcinfo, function, served);
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) || TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s may only be called as a trigger BEFORE INSERT OR UPDATE FOR EACH ROW", function)));
	*check = check_enable_rls(RelationGetRelid(trigdata->tg_relation), InvalidOid, true) == RLS_ENABLED;
	return TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
}

/* Column `name` of the tuple; NULL when it is NULL, left to the NOT NULL constraint (checked after). */
static Datum
column(TriggerData *trigdata, HeapTuple tuple, const char *name, Oid type, bool *isnull)
{
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	int			col = SPI_fnumber(desc, name);

	if (col <= 0 || SPI_gettypeid(desc, col) != type)
		elog(ERROR, "pgdl: column %s of %s is missing or of another type", name,
			 RelationGetRelationName(trigdata->tg_relation));
	return heap_getattr(tuple, col, desc, isnull);
}

/* On an UPDATE, whether the column keeps its value (the same bytes, or the same TOAST pointer). */
static bool
unchanged(TriggerData *trigdata, HeapTuple tuple, const char *name, Oid type)
{
	Datum		before,
				after;
	bool		null_before,
				null_after;

	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return false;
	before = column(trigdata, trigdata->tg_trigtuple, name, type, &null_before);
	after = column(trigdata, tuple, name, type, &null_after);
	if (null_before || null_after)
		return null_before && null_after;
	/* a value kept by the UPDATE is its TOAST pointer: compared, not fetched */
	return datumIsEqual(before, after, false, -1);
}

PG_FUNCTION_INFO_V1(pgdl_architectures_validate);
Datum
pgdl_architectures_validate(PG_FUNCTION_ARGS)
{
	bool		check;
	HeapTuple	tuple = checked_trigger(fcinfo, "pgdl.architectures_validate()", "architectures", &check);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	bool		isnull;
	Datum		spec;

	if (!check)
		return PointerGetDatum(tuple);
	spec = column(trigdata, tuple, "spec", JSONBOID, &isnull);
	if (!isnull && !unchanged(trigdata, tuple, "spec", JSONBOID))
	{
		NnSpec	   *parsed = palloc(sizeof(NnSpec));

		pgdl_spec_from_jsonb(DatumGetJsonbP(spec), parsed);
		pfree(parsed);
	}
	return PointerGetDatum(tuple);
}

/* A model's weights are a blob the engine reads, of the model its spec (parsed) describes. */
static void
check_model(Jsonb *spec, bytea *weights)
{
	NnSpec	   *described = palloc(sizeof(NnSpec));
	NnSpec	   *held = palloc(sizeof(NnSpec));
	NnError		err;
	Jsonb	   *canonical,
			   *of_weights;

	pgdl_spec_from_jsonb(spec, described);
	pgdl_engine_prepare();
	if (!nn_model_blob_check((const uint8 *) VARDATA_ANY(weights), VARSIZE_ANY_EXHDR(weights), held, NULL, &err))
		pgdl_report_blob_error(&err);
	/* one canonical form for both: defaults filled in, keys in order */
	canonical = pgdl_spec_to_jsonb(described);
	of_weights = pgdl_spec_to_jsonb(held);
	if (VARSIZE(canonical) != VARSIZE(of_weights) || memcmp(canonical, of_weights, VARSIZE(canonical)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model spec does not match its weights"),
				 errdetail("The weights are of a model with spec %s.",
						   pgdl_echo(JsonbToCString(NULL, &of_weights->root, VARSIZE(of_weights)))),
				 errhint("Store the spec of the weights' model, or weights of the spec's.")));
	pfree(described);
	pfree(held);
}

PG_FUNCTION_INFO_V1(pgdl_models_validate);
Datum
pgdl_models_validate(PG_FUNCTION_ARGS)
{
	bool		check;
	HeapTuple	tuple = checked_trigger(fcinfo, "pgdl.models_validate()", "models", &check);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	bool		spec_null,
				weights_null;
	Datum		spec,
				weights;

	if (!check)
		return PointerGetDatum(tuple);
	spec = column(trigdata, tuple, "spec", JSONBOID, &spec_null);
	weights = column(trigdata, tuple, "weights", BYTEAOID, &weights_null);

	/*
	 * An UPDATE of other columns (a name, a grant) does not fetch megabytes of weights again: what it
	 * keeps was checked when written.
	 */
	if (spec_null || weights_null ||
		(unchanged(trigdata, tuple, "spec", JSONBOID) && unchanged(trigdata, tuple, "weights", BYTEAOID)))
		return PointerGetDatum(tuple);
	check_model(DatumGetJsonbP(spec), DatumGetByteaPP(weights));
	return PointerGetDatum(tuple);
}
