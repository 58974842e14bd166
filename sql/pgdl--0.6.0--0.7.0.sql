-- pgdl 0.6.0 to 0.7.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.7.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.7.0'" to load this file. \quit

-- ---- trust: trigger functions serve pgdl's tables only; no ordinary role can LOCK the catalog;
-- ---- an id another role's is refused as a missing one is (docs/security.md) ----

-- A trigger of a role's own table that calls one of pgdl's trigger functions was the way to run them
-- (two of them as the extension's owner) on rows pgdl does not own: each such trigger goes, with a
-- WARNING (an extension's script runs with client_min_messages at least WARNING: a NOTICE is not seen).
DO $$
DECLARE
	t record;
BEGIN
	FOR t IN SELECT g.tgname, g.tgrelid::regclass AS rel, g.tgfoid::regprocedure AS fn
			   FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_proc p ON p.oid = g.tgfoid
			  WHERE p.pronamespace = 'pgdl'::regnamespace AND NOT g.tgisinternal
				AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
								 WHERE d.classid = 'pg_class'::regclass AND d.objid = g.tgrelid
								   AND d.refclassid = 'pg_extension'::regclass AND e.extname = 'pgdl' AND d.deptype = 'e')
			  ORDER BY g.tgrelid, g.tgname
	LOOP
		EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
		RAISE WARNING 'dropped trigger "%" on table %, which called pgdl''s trigger function %', t.tgname, t.rel, t.fn
			USING DETAIL = 'pgdl''s trigger functions serve only pgdl''s own catalog tables; fired by another table, '
						   'two of them ran as the extension''s owner.';
	END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgdl.forget_deleted_rows() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	IF TG_WHEN <> 'AFTER' OR TG_LEVEL <> 'STATEMENT' OR TG_OP <> 'DELETE' THEN
		RAISE EXCEPTION 'pgdl.forget_deleted_rows() may only be fired AFTER DELETE FOR EACH STATEMENT'
			USING ERRCODE = 'trigger_protocol_violated';
	ELSIF TG_RELID = 'pgdl.datasets'::regclass AND TG_ARGV[0] = 'reference' THEN
		UPDATE pgdl.datasets t SET reference = NULL WHERE t.reference IN (SELECT g.id FROM gone g);
	ELSIF TG_RELID = 'pgdl.models'::regclass AND TG_ARGV[0] = 'parent' THEN
		UPDATE pgdl.models t SET parent = NULL WHERE t.parent IN (SELECT g.id FROM gone g);
	ELSIF TG_RELID = 'pgdl.feature_cache'::regclass AND TG_ARGV[0] = 'staged_from' THEN
		UPDATE pgdl.feature_cache t SET staged_from = NULL WHERE t.staged_from IN (SELECT g.id FROM gone g);
	ELSE
		RAISE EXCEPTION 'pgdl.forget_deleted_rows() may only be fired by pgdl''s own catalog tables'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION pgdl.forget_deleted_rows() IS
	'trigger of pgdl.datasets, models and feature_cache: sets to NULL the column (the argument) of the rows that named deleted rows of the same table';
COMMENT ON FUNCTION pgdl.catalog_changed() IS
	'trigger of pgdl.models and pgdl.datasets: flushes the per-backend cache of models and datasets when either changes';
REVOKE EXECUTE ON FUNCTION pgdl.forget_deleted_rows(), pgdl.catalog_changed() FROM PUBLIC;
COMMENT ON FUNCTION pgdl.forget_deleted_rows() IS
	'trigger of pgdl.datasets, models and feature_cache: sets to NULL the column (the argument) of the rows that named deleted rows of the same table';

CREATE OR REPLACE FUNCTION pgdl.base_model_changed() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	IF TG_RELID <> 'pgdl.models'::regclass OR TG_WHEN <> 'AFTER' OR TG_LEVEL <> 'ROW'
	   OR TG_OP NOT IN ('UPDATE', 'DELETE') THEN
		RAISE EXCEPTION 'pgdl.base_model_changed() may only be fired by pgdl.models, AFTER UPDATE OR DELETE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	UPDATE pgdl.feature_cache SET valid = false WHERE base_model = OLD.id AND valid;
	RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION pgdl.base_model_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgdl.forget_dropped_relations() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgdl.configs_validate() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pgdl.on_drop_extension() FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdl.owned_by_run() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	run_owner regrole;
BEGIN
	-- pgdl.calibrate() times a copy of pgdl.checkpoints in schema pgdl, where only pgdl creates tables
	IF (TG_RELID NOT IN ('pgdl.run_metrics'::regclass, 'pgdl.checkpoints'::regclass, 'pgdl.models'::regclass)
		AND NOT (TG_TABLE_SCHEMA = 'pgdl' AND TG_TABLE_NAME LIKE 'calibrate\_checkpoint\_%'))
	   OR TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' THEN
		RAISE EXCEPTION 'pgdl.owned_by_run() may only be fired by pgdl.run_metrics, checkpoints and models, BEFORE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	-- a run the writer may not see leaves the row as written, for the policy to refuse
	SELECT r.owner INTO run_owner FROM pgdl.runs r WHERE r.id = NEW.run;
	IF FOUND THEN
		NEW.owner := run_owner;
	END IF;
	RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION pgdl.owned_by_run() FROM PUBLIC;

CREATE FUNCTION pgdl.references_visible() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	cols text[];
	refs text[];
	keys bigint[];
	olds bigint[];
	seen boolean;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' OR TG_OP NOT IN ('INSERT', 'UPDATE') THEN
		RAISE EXCEPTION 'pgdl.references_visible() may only be fired BEFORE INSERT OR UPDATE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated';
	ELSIF TG_RELID = 'pgdl.models'::regclass THEN
		cols := '{architecture, dataset, run}';
		refs := '{architectures, datasets, runs}';
		keys := ARRAY[NEW.architecture, NEW.dataset, NEW.run];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.architecture, OLD.dataset, OLD.run] END;
	ELSIF TG_RELID = 'pgdl.runs'::regclass THEN
		cols := '{dataset, validation, architecture}';
		refs := '{datasets, datasets, architectures}';
		keys := ARRAY[NEW.dataset, NEW.validation, NEW.architecture];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.dataset, OLD.validation, OLD.architecture] END;
	ELSIF TG_RELID = 'pgdl.feature_cache'::regclass THEN
		cols := '{dataset}';
		refs := '{datasets}';
		keys := ARRAY[NEW.dataset];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.dataset] END;
	ELSE
		RAISE EXCEPTION 'pgdl.references_visible() may only be fired by pgdl.models, runs and feature_cache'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	FOR i IN 1 .. cardinality(cols) LOOP
		CONTINUE WHEN keys[i] IS NULL OR keys[i] IS NOT DISTINCT FROM olds[i]
				   OR NOT row_security_active(format('pgdl.%I', refs[i]));
		EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgdl.%I r WHERE r.id = $1)', refs[i]) INTO seen USING keys[i];
		IF NOT seen THEN
			RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"',
				  TG_TABLE_NAME, format('%s_%s_fkey', TG_TABLE_NAME, cols[i])
				USING ERRCODE = 'foreign_key_violation',
					  DETAIL = format('Key (%s)=(%s) is not present in table "%s".', cols[i], keys[i], refs[i]),
					  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME,
					  CONSTRAINT = format('%s_%s_fkey', TG_TABLE_NAME, cols[i]);
		END IF;
	END LOOP;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.references_visible() IS
	'trigger of pgdl.models, runs and feature_cache: an id the writer may not see is refused as a missing one is';
REVOKE EXECUTE ON FUNCTION pgdl.references_visible() FROM PUBLIC;
CREATE TRIGGER models_references BEFORE INSERT OR UPDATE OF architecture, dataset, run ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();
CREATE TRIGGER runs_references BEFORE INSERT OR UPDATE OF dataset, validation, architecture ON pgdl.runs
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();
CREATE TRIGGER feature_cache_references BEFORE INSERT OR UPDATE OF dataset ON pgdl.feature_cache
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();

REVOKE UPDATE, DELETE ON pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs, pgdl.run_metrics,
	pgdl.configs, pgdl.checkpoints, pgdl.feature_cache FROM PUBLIC;
DO $$
DECLARE
	t regclass;
	cols text;
BEGIN
	FOREACH t IN ARRAY '{pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs, pgdl.run_metrics, pgdl.configs,
						 pgdl.checkpoints, pgdl.feature_cache}'::regclass[] LOOP
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> 'id';
		EXECUTE format('GRANT UPDATE (%s) ON %s TO PUBLIC', cols, t);
		EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgdl_admin', t);
	END LOOP;
END
$$;

CREATE FUNCTION pgdl.delete_rows(catalog regclass, ids bigint[]) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_delete_rows' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.delete_rows(regclass, bigint[]) IS
	'deletes the rows of a pgdl catalog table with these ids (run_metrics and checkpoints: of these runs) that the caller may delete; returns how many';
