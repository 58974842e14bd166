/*
 * lifecycle.c -- what outlives one call: which runs are in flight, the
 * checkpoints of finished runs, and what DROP EXTENSION pgdl leaves.
 *
 * A run is in flight while its leader (the backend in pgdl.fit_multiple or
 * pgdl.resume) or one of its workers lives.  Each holds a lock on the run: the
 * leader an exclusive one for its transaction, which ends after the run's last
 * row is committed; the workers a shared one for their lives.  They are two
 * lock tags, so that a leader and its own workers do not conflict.
 * pgdl.resume takes the leader's lock or fails, then finds the workers' lock
 * free or fails: no second leader, and no worker of a cancelled leader still
 * writing checkpoints that the resumed run would write again.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "base/base.h"
#include "catalog/catalog.h"

int			pgdl_keep_checkpoints = 1;

/* The most packed tables the NOTICE of DROP EXTENSION names. */
#define MAX_TABLES_NAMED	20

void
pgdl_lifecycle_init(void)
{
	DefineCustomIntVariable("pgdl.keep_checkpoints",
							"Checkpoints of each model that a finished pgdl.fit_multiple run keeps.",
							"Its last ones: 0 keeps none, -1 every epoch's. A run that did not finish keeps "
							"at least its last ones, for pgdl.resume.",
							&pgdl_keep_checkpoints,
							1, -1, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

/* ---- runs in flight ---- */

/* The run's lock of one kind (base/base.h): the run id is fields 2 and 3, whole. */
static void
run_locktag(LOCKTAG *tag, int64 run, uint16 kind)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) run >> 32), (uint32) run, kind);
}

/* Whether no other backend holds the run's lock of this kind: taken if free, and let go. */
static bool
run_lock_free(int64 run, uint16 kind)
{
	LOCKTAG		tag;

	run_locktag(&tag, run, kind);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return false;
	LockRelease(&tag, ExclusiveLock, true);
	return true;
}

bool
pgdl_run_in_flight(int64 run)
{
	return !run_lock_free(run, PGDL_LOCK_RUN_LEADER) || !run_lock_free(run, PGDL_LOCK_RUN_WORKERS);
}

static void
run_in_progress_error(int64 run) pg_attribute_noreturn();

static void
run_in_progress_error(int64 run)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("run " INT64_FORMAT " is in progress", run),
			 errdetail("A pgdl.fit_multiple or pgdl.resume of it is still running, or its workers are still stopping."),
			 errhint("Wait for it to end, or cancel it (pg_cancel_backend) and resume it then.")));
}

/* The run's status as the caller sees it (row-level security), or NULL; within SPI. */
static char *
run_status(int64 run)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run)};

	if (SPI_execute_with_args("SELECT status FROM pgdl.runs WHERE id = $1", 1, types, values, NULL,
							  true, 1) != SPI_OK_SELECT)
		elog(ERROR, "pgdl: could not read run " INT64_FORMAT, run);
	return SPI_processed == 1 ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : NULL;
}

static void
run_missing_error(int64 run) pg_attribute_noreturn();

static void
run_missing_error(int64 run)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("run " INT64_FORMAT " does not exist", run)));
}

/* The run exists and the caller may see it, or the same error as a missing one. */
static void
check_run_visible(int64 run)
{
	bool		visible;

	SPI_connect();
	visible = run_status(run) != NULL;
	SPI_finish();
	if (!visible)
		run_missing_error(run);
}

/*
 * pgdl.resume's leader: the run for this transaction, or "in progress".  A run
 * the caller may not see does not exist, as pgdl.resume says of it too.
 */
void
pgdl_run_claim(int64 run)
{
	LOCKTAG		tag;

	check_run_visible(run);
	run_locktag(&tag, run, PGDL_LOCK_RUN_LEADER);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL ||
		!run_lock_free(run, PGDL_LOCK_RUN_WORKERS))
		run_in_progress_error(run);
}

/* pgdl.fit_multiple's leader, once its first worker recorded the run: until the transaction ends. */
void
pgdl_run_hold_as_leader(int64 run)
{
	LOCKTAG		tag;

	run_locktag(&tag, run, PGDL_LOCK_RUN_LEADER);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* The run whose leader holds this lock, or 0 when the tag is not a leader's lock (pgdl.jobs). */
int64
pgdl_run_of_leader_lock(const LOCKTAG *tag)
{
	if (tag->locktag_type != LOCKTAG_ADVISORY || tag->locktag_field4 != PGDL_LOCK_RUN_LEADER ||
		tag->locktag_field1 == InvalidOid)
		return 0;
	return (int64) (((uint64) tag->locktag_field2 << 32) | tag->locktag_field3);
}

/* A worker, before it writes a row of the run: until it exits. */
void
pgdl_run_hold_as_worker(int64 run)
{
	static int64 held = 0;
	LOCKTAG		tag;

	if (held == run)
		return;
	run_locktag(&tag, run, PGDL_LOCK_RUN_WORKERS);
	(void) LockAcquire(&tag, ShareLock, true, false);
	held = run;
}

PG_FUNCTION_INFO_V1(pgdl_run_in_progress);
Datum
pgdl_run_in_progress(PG_FUNCTION_ARGS)
{
	int64		run = PG_GETARG_INT64(0);

	check_run_visible(run);
	PG_RETURN_BOOL(pgdl_run_in_flight(run));
}

/* ---- checkpoints ---- */

/*
 * Each (config, epoch) of the run whose validation metrics early stopping
 * watches, in epoch order, up to the model's last checkpoint: restore_best's
 * best epoch is the last that beat the best before it by more than min_delta
 * (pgdl_early_stop, replayed as pgdl.resume replays it).  The monitor is the
 * configuration's "monitor", else the run's rank_by (hopper/prepare.c), else
 * the loss; the catalog is its owners' to write, so a value that is not a
 * number of double precision's range is not measured.
 */
static const char *const watched_epochs =
"SELECT rm.config, rm.epoch, k.higher, k.min_delta,"
"       CASE k.monitor WHEN 'loss' THEN rm.validation_loss WHEN 'accuracy' THEN rm.validation_accuracy"
"            ELSE CASE WHEN jsonb_typeof(rm.validation_metrics -> k.monitor) = 'number'"
"                       AND (abs((rm.validation_metrics ->> k.monitor)::numeric) BETWEEN 1e-307 AND 1e308"
"                            OR (rm.validation_metrics ->> k.monitor)::numeric = 0)"
"                      THEN (rm.validation_metrics ->> k.monitor)::float8 END END"
"  FROM pgdl.run_metrics rm"
"  JOIN pgdl.runs r ON r.id = rm.run"
"  JOIN pgdl.configs c ON c.id = rm.config"
" CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(c.config -> 'monitor') = 'string' THEN c.config ->> 'monitor'"
"                                 WHEN jsonb_typeof(r.config -> 'rank_by') = 'string' THEN r.config ->> 'rank_by'"
"                                 ELSE 'loss' END AS name,"
"                            CASE WHEN jsonb_typeof(c.config -> 'min_delta') = 'number'"
"                                  AND (c.config ->> 'min_delta')::numeric BETWEEN 0 AND 1e30"
"                                 THEN (c.config ->> 'min_delta')::float4::float8 ELSE 0 END AS min_delta,"
"                            CASE WHEN jsonb_typeof(c.config -> 'restore_best') = 'boolean'"
"                                 THEN (c.config -> 'restore_best')::boolean"
"                                 ELSE jsonb_typeof(c.config -> 'patience') = 'number'"
"                                      AND (c.config ->> 'patience')::numeric > 0 END AS restore) m"
" CROSS JOIN LATERAL (SELECT CASE m.name WHEN 'validation_loss' THEN 'loss'"
"                                 WHEN 'validation_accuracy' THEN 'accuracy' ELSE m.name END AS monitor,"
"                            m.name IN ('accuracy', 'validation_accuracy', 'f1', 'f1_weighted', 'precision',"
"                                       'recall', 'roc_auc', 'average_precision', 'r2') AS higher,"
"                            m.min_delta) k"
" WHERE rm.run = $1 AND rm.node IS NULL AND rm.fold IS NULL AND m.restore"
"   AND rm.validation_loss IS NOT NULL AND rm.state IS DISTINCT FROM 'diverged'"
"   AND rm.epoch <= (SELECT max(ck.epoch) FROM pgdl.checkpoints ck WHERE ck.run = rm.run AND ck.config = rm.config)"
" ORDER BY rm.config, rm.epoch";

/* A float8 column of the row: NaN when NULL. */
static double
row_float(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? get_float8_nan() : DatumGetFloat8(d);
}

/*
 * The checkpoints of the run that restore_best stores from (each model's best
 * epoch), as arrays of configs and epochs for prune_run: pgdl.resume of a run
 * that did not finish reads them at its end.  Within SPI.
 */
static void
restore_best_epochs(int64 run, Datum *configs, Datum *epochs)
{
	Oid			type = INT8OID;
	Datum		arg = Int64GetDatum(run);
	uint64		n;
	Datum	   *cs;
	Datum	   *es;
	int			kept = 0;

	if (SPI_execute_with_args(watched_epochs, 1, &type, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pgdl: could not read the validation metrics of run " INT64_FORMAT, run);
	n = SPI_processed;
	cs = palloc(sizeof(Datum) * Max(n, 1));
	es = palloc(sizeof(Datum) * Max(n, 1));
	for (uint64 i = 0; i < n;)
	{
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		config = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], desc, 1, &isnull));
		bool		seen = false;
		double		best = 0;
		int32		best_epoch = 0;

		/* one configuration's epochs, as pgdl_early_stop sees them */
		for (; i < n && DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], desc, 1, &isnull)) == config; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			double		v = row_float(tup, desc, 5);

			if (DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull)))
				v = -v;
			if (!isnan(v) && (!seen || v < best - row_float(tup, desc, 4)))
			{
				seen = true;
				best = v;
				best_epoch = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
			}
		}
		if (seen)
		{
			cs[kept] = Int64GetDatum(config);
			es[kept++] = Int32GetDatum(best_epoch);
		}
	}
	*configs = PointerGetDatum(construct_array(cs, kept, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	*epochs = PointerGetDatum(construct_array(es, kept, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

/*
 * All but the last `keep` checkpoints of each model of the run, those the
 * caller may delete (owners.c: nobody holds DELETE on the catalog); within SPI.
 * Where it keeps any, it keeps each model's restore_best epoch too: the stored
 * model's bytes, which pgdl.resume reads at the end of a run that did not
 * finish (and a finished run's record of the model it stored).
 */
static int64
prune_run(int64 run, int32 keep)
{
	Oid			types[4] = {INT8OID, INT4OID, INT8ARRAYOID, INT4ARRAYOID};
	Datum		values[4] = {Int64GetDatum(run), Int32GetDatum(keep)};

	Assert(keep >= 0);
	if (keep == 0)
		return pgdl_catalog_delete("pgdl.checkpoints", "t.run = $1", 1, types, values);
	restore_best_epochs(run, &values[2], &values[3]);
	return pgdl_catalog_delete("pgdl.checkpoints",
							   "t.run = $1 AND (t.config, t.epoch) IN ("
							   " SELECT r.config, r.epoch FROM ("
							   "  SELECT c.config, c.epoch,"
							   "         row_number() OVER (PARTITION BY c.config ORDER BY c.epoch DESC) AS newest"
							   "    FROM pgdl.checkpoints c WHERE c.run = $1) r"
							   " WHERE r.newest > $2)"
							   " AND (t.config, t.epoch) NOT IN (SELECT * FROM unnest($3::bigint[], $4::integer[]))"
							   " AND NOT EXISTS (SELECT 1 FROM pgdl.run_metrics rm JOIN pgdl.models m ON m.id = rm.model"
							   "  WHERE rm.run = $1 AND rm.config = t.config AND rm.epoch = t.epoch"
							   "    AND m.metrics ->> 'epoch' = t.epoch::text)",
							   4, types, values);
}

/* A run that has just finished keeps the last pgdl.keep_checkpoints of each model. */
void
pgdl_run_prune_checkpoints(int64 run)
{
	if (pgdl_keep_checkpoints < 0)
		return;
	SPI_connect();
	(void) prune_run(run, pgdl_keep_checkpoints);
	SPI_finish();
}

/*
 * cleanup_checkpoints for one run: a run that did not finish keeps its last
 * checkpoints, from which pgdl.resume continues.  A run given by name that the
 * caller does not see, or that is in flight, is an error; one in the list of
 * all is skipped.
 */
static int64
cleanup_run(int64 run, int32 keep, bool named)
{
	char	   *status = run_status(run);

	if (status == NULL)
	{
		if (named)
			run_missing_error(run);
		return 0;
	}
	if (pgdl_run_in_flight(run))
	{
		if (named)
			run_in_progress_error(run);
		return 0;
	}
	if (keep < 0)
		return 0;
	return prune_run(run, strcmp(status, "finished") == 0 ? keep : Max(keep, 1));
}

PG_FUNCTION_INFO_V1(pgdl_cleanup_checkpoints);
Datum
pgdl_cleanup_checkpoints(PG_FUNCTION_ARGS)
{
	int32		keep = PG_ARGISNULL(0) ? pgdl_keep_checkpoints : PG_GETARG_INT32(0);
	int64		pruned = 0;

	if (keep < -1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep must be -1 or more, got %d", keep),
				 errdetail("keep is how many checkpoints of each model stay; -1 keeps them all.")));
	SPI_connect();
	if (!PG_ARGISNULL(1))
		pruned = cleanup_run(PG_GETARG_INT64(1), keep, true);
	else if (keep >= 0)
	{
		uint64		n;
		int64	   *runs;

		/* the caller's runs with checkpoints (row-level security shows no other) */
		if (SPI_execute("SELECT DISTINCT run FROM pgdl.checkpoints ORDER BY run", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "pgdl: could not list the runs with checkpoints");
		n = SPI_processed;
		runs = palloc(sizeof(int64) * Max(n, 1));
		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;

			runs[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		}
		for (uint64 i = 0; i < n; i++)
		{
			CHECK_FOR_INTERRUPTS();
			pruned += cleanup_run(runs[i], keep, false);
		}
	}
	SPI_finish();
	PG_RETURN_INT64(pruned);
}

/* ---- DROP EXTENSION ---- */

bool
pgdl_packed_has_columns(Oid relid)
{
	static const struct
	{
		const char *name;
		Oid			type;
	}			columns[] = {
		{"part", INT4OID}, {"buffer_id", INT4OID}, {"n", INT4OID}, {"x", FLOAT4ARRAYOID}, {"y", FLOAT4ARRAYOID}
	};

	for (int i = 0; i < lengthof(columns); i++)
	{
		AttrNumber	att = get_attnum(relid, columns[i].name);

		if (att == InvalidAttrNumber || get_atttype(relid, att) != columns[i].type)
			return false;
	}
	return true;
}

/*
 * Whether a table that pgdl.datasets does not know was packed by an earlier
 * pgdl: it has the columns pgdl.pack writes, and the caller may read it (else
 * its row may be there, hidden by row-level security).
 */
bool
pgdl_packed_left_behind(Oid relid)
{
	return get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE &&
		pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		pgdl_packed_has_columns(relid);
}

/* Whether a DROP statement drops extension pgdl. */
static bool
drops_pgdl(Node *parsetree)
{
	DropStmt   *stmt = (DropStmt *) parsetree;
	ListCell   *lc;

	if (parsetree == NULL || !IsA(parsetree, DropStmt) || stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
		if (IsA(lfirst(lc), String) && strcmp(strVal(lfirst(lc)), "pgdl") == 0)
			return true;
	return false;
}

/* NOTICE: the packed tables that stay, every role's (the dropping role owns the catalog). */
static void
report_packed_tables(void)
{
	Oid			ns = get_namespace_oid("pgdl", true);
	StringInfoData names;
	uint64		n;

	if (!OidIsValid(ns) || !OidIsValid(get_relname_relid("datasets", ns)))
		return;
	SPI_connect();
	if (SPI_execute("SELECT d.packed::text FROM pgdl.datasets d "
					"JOIN pg_catalog.pg_class c ON c.oid = d.packed ORDER BY 1", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pgdl: could not list the packed tables");
	n = SPI_processed;
	initStringInfo(&names);
	for (uint64 i = 0; i < n && i < MAX_TABLES_NAMED; i++)
		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	if (n > MAX_TABLES_NAMED)
		appendStringInfo(&names, " and " UINT64_FORMAT " more", n - MAX_TABLES_NAMED);
	SPI_finish();
	if (n == 0)
		return;
	ereport(NOTICE,
			(errmsg_plural("DROP EXTENSION pgdl leaves " UINT64_FORMAT " packed table",
						   "DROP EXTENSION pgdl leaves " UINT64_FORMAT " packed tables", n, n),
			 errdetail("Packed tables belong to the roles that packed them: %s.", names.data),
			 errhint("A pgdl created again does not know them. Drop them, or pack their sources again with pgdl.pack().")));
}

PG_FUNCTION_INFO_V1(pgdl_on_drop_extension);
Datum
pgdl_on_drop_extension(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgdl.on_drop_extension must be called as an event trigger")));
	if (drops_pgdl(((EventTriggerData *) fcinfo->context)->parsetree))
		report_packed_tables();
	PG_RETURN_NULL();
}
