/*
 * owners.c -- the C side of 70_owners.sql: who acts as a row's owner, which
 * table a trigger function may serve, deleting catalog rows, and the one way
 * C code acts with another role's rights (pgdl_act_as_begin: the catalog
 * delete here, a feature cache view's CREATE in feature_cache.c; both argued
 * in docs/security.md).
 *
 * Invariants (docs/security.md says why each holds):
 * - No ordinary role holds UPDATE or DELETE on a catalog table as a whole.  In
 *   PostgreSQL 15 either privilege lets its holder LOCK the table in every mode
 *   (ACCESS EXCLUSIVE included), which would stall every role's predict, fit
 *   and catalog read.  Roles update by column privileges, and delete through
 *   pgdl_catalog_delete, which deletes exactly the rows the caller could have
 *   deleted under row-level security.
 * - A trigger function of pgdl serves only the tables its SQL definition names:
 *   pgdl_check_trigger_table refuses any other relation, so nobody can attach
 *   one to a table of their own.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "base/base.h"

/* Whether the current role acts as owner: pgdl.acts_as() in SQL, for the C code. */
bool
pgdl_acts_as(Oid owner)
{
	Oid			me = GetUserId();
	Oid			admin;

	if (is_member_of_role(me, owner))
		return true;			/* superusers too */
	admin = get_role_oid("pgdl_admin", true);
	return OidIsValid(admin) && is_member_of_role(me, admin);
}

/*
 * The relation is pgdl.<name> for one of the names.  Schema pgdl is the
 * extension's alone (nobody else may create in it), so a name there is its.
 */
static bool
is_catalog_table(Oid relid, const char *const *names)
{
	Oid			ns = get_namespace_oid("pgdl", true);
	char	   *relname;

	if (!OidIsValid(ns) || get_rel_namespace(relid) != ns)
		return false;
	relname = get_rel_name(relid);
	for (int i = 0; relname != NULL && names[i] != NULL; i++)
		if (strcmp(relname, names[i]) == 0)
			return true;
	return false;
}

/*
 * Refuses a call of trigger function `fn` that is not a trigger firing on one
 * of the catalog tables `names` (NULL-terminated).  EXECUTE on the trigger
 * functions is revoked from PUBLIC, which CREATE TRIGGER needs; this is the
 * second wall, for a role granted EXECUTE by mistake and for the functions of
 * an installation upgraded from a version that granted it.
 */
void
pgdl_check_trigger_table(FunctionCallInfo fcinfo, const char *fn, const char *const *names)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s may only be called as a trigger", fn)));
	if (!is_catalog_table(RelationGetRelid(trigdata->tg_relation), names))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s may only be fired by pgdl's own catalog tables", fn),
				 errdetail("It was fired by table \"%s\".",
						   pgdl_clip_for_error(RelationGetRelationName(trigdata->tg_relation), 64))));
}

/*
 * Deletes the rows of catalog table `table` (schema-qualified) that
 * `where` picks, as far as the caller may delete them, and returns how many.
 * The caller's own query picks the rows under row-level security and locks
 * them FOR UPDATE, which only the owners policy allows (a grantee's policy is
 * for SELECT); the DELETE of exactly those row versions then runs as the
 * table's owner, who holds the DELETE privilege no ordinary role has.  The
 * locks keep each picked row as it was picked until the transaction ends.
 * Within SPI; `where` is pgdl's own text, over alias t.
 */
int64
pgdl_catalog_delete(const char *table, const char *where, int nargs, Oid *argtypes, Datum *args)
{
	Oid			relid = DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(table)));
	HeapTuple	class_tuple;
	Oid			table_owner;
	PgdlActAs	saved;
	Datum		tids;
	bool		isnull;
	Oid			tid_type = TIDARRAYOID;
	int64		deleted;

	if (SPI_execute_with_args(psprintf("SELECT pg_catalog.array_agg(s.ctid) FROM "
									   "(SELECT t.ctid FROM %s t WHERE %s FOR UPDATE OF t) s", table, where),
							  nargs, argtypes, args, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "pgdl: could not pick the rows of %s to delete", table);
	tids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return 0;
	tids = datumCopy(tids, false, -1);

	class_tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(class_tuple))
		elog(ERROR, "pgdl: cache lookup failed for relation %u", relid);
	table_owner = ((Form_pg_class) GETSTRUCT(class_tuple))->relowner;
	ReleaseSysCache(class_tuple);

	pgdl_act_as_begin(table_owner, &saved);
	if (SPI_execute_with_args(psprintf("DELETE FROM %s WHERE ctid = ANY ($1)", table),
							  1, &tid_type, &tids, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "pgdl: could not delete rows of %s", table);
	deleted = (int64) SPI_processed;
	pgdl_act_as_end(&saved);
	return deleted;
}

/*
 * The one way pgdl's C code acts with another role's rights: as `role`, as a
 * restricted operation (no SET ROLE, no temporary objects), with search_path
 * pg_catalog, pg_temp, until pgdl_act_as_end.  An error in between restores
 * both, as the transaction's abort does.
 */
void
pgdl_act_as_begin(Oid role, PgdlActAs *saved)
{
	GetUserIdAndSecContext(&saved->user, &saved->context);
	SetUserIdAndSecContext(role, saved->context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	saved->nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
pgdl_act_as_end(const PgdlActAs *saved)
{
	AtEOXact_GUC(false, saved->nest);
	SetUserIdAndSecContext(saved->user, saved->context);
}

/* The catalog tables pgdl.delete_rows takes, and the column its ids are of. */
static const struct
{
	const char *table;
	const char *key;
}			deletable[] = {
	{"datasets", "id"}, {"architectures", "id"}, {"models", "id"}, {"runs", "id"},
	{"configs", "id"}, {"feature_cache", "id"}, {"run_metrics", "run"}, {"checkpoints", "run"},
	{"deployment_names", "id"},
};

/*
 * pgdl.delete_rows(catalog regclass, ids bigint[]): DELETE FROM catalog WHERE
 * key = ANY (ids), as the caller's row-level security allows it; the key is
 * id, or run for a run's metrics and checkpoints.  Rows the caller may not
 * delete stay, as with DELETE.
 */
PG_FUNCTION_INFO_V1(pgdl_delete_rows);
Datum
pgdl_delete_rows(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Datum		ids = PG_GETARG_DATUM(1);
	Oid			type = INT8ARRAYOID;
	int64		deleted = -1;

	for (int i = 0; i < lengthof(deletable); i++)
	{
		const char *names[2] = {deletable[i].table, NULL};

		if (!is_catalog_table(relid, names))
			continue;
		SPI_connect();
		deleted = pgdl_catalog_delete(psprintf("pgdl.%s", deletable[i].table),
									  psprintf("t.%s = ANY ($1)", deletable[i].key), 1, &type, &ids);
		SPI_finish();
		break;
	}
	if (deleted < 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a table of pgdl's catalog",
						get_rel_name(relid) ? pgdl_echo(get_rel_name(relid)) : psprintf("%u", relid)),
				 errhint("pgdl.delete_rows deletes rows of pgdl.datasets, architectures, models, runs, configs, "
						 "feature_cache, deployment_names (by id), run_metrics and checkpoints (by run).")));
	PG_RETURN_INT64(deleted);
}
