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

-- ---- rows checked when written (invalid rows) ----
-- A row of one role must not fail another role's query: specs and weights are checked when written
-- (src/catalog/catalog_checks.c), and the views over many rows show a row that is still invalid (written
-- before 0.7.0, or with the triggers disabled) instead of failing.  Rows already stored are not
-- checked here: an upgrade must not fail on them; pgdl.zoo's problem column shows them.
-- A spec or weights that do not parse would fail the queries of every role that reads the row (a model
-- granted to PUBLIC, every row for pgdl_admin): they are refused when written (src/catalog/catalog_checks.c),
-- by the rules the readers apply.  The functions run as the writer; PUBLIC may not attach them to a
-- table (CREATE TRIGGER needs EXECUTE, firing does not), and each checks the table it fires on.
CREATE FUNCTION pgdl.models_validate() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_models_validate' LANGUAGE C;
COMMENT ON FUNCTION pgdl.models_validate() IS
	'trigger: checks a pgdl.models row: a valid spec, and weights the engine reads whose model has that spec';
REVOKE EXECUTE ON FUNCTION pgdl.models_validate() FROM PUBLIC;
CREATE TRIGGER models_validate BEFORE INSERT OR UPDATE OF spec, weights ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.models_validate();

CREATE FUNCTION pgdl.architectures_validate() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_architectures_validate' LANGUAGE C;
COMMENT ON FUNCTION pgdl.architectures_validate() IS
	'trigger: checks a pgdl.architectures row: a valid spec';
REVOKE EXECUTE ON FUNCTION pgdl.architectures_validate() FROM PUBLIC;
CREATE TRIGGER architectures_validate BEFORE INSERT OR UPDATE OF spec ON pgdl.architectures
	FOR EACH ROW EXECUTE FUNCTION pgdl.architectures_validate();

CREATE FUNCTION pgdl.stored_spec_summary(spec jsonb, OUT layers text, OUT n_layers integer, OUT params bigint,
		OUT flops bigint, OUT input_shape integer[], OUT problem text)
	AS 'MODULE_PATHNAME', 'pgdl_stored_spec_summary' LANGUAGE C STABLE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.stored_spec_summary(jsonb) IS
	'internal, pgdl.zoo: pgdl.spec_summary of a spec read from the catalog, or NULLs and what is wrong with it (problem) when it is not valid';

-- pgdl.zoo: the same columns, and problem at the end
CREATE OR REPLACE VIEW pgdl.zoo WITH (security_invoker = true) AS
SELECT m.id, m.name, m.owner::text AS owner, m.created,
	   s.layers, s.n_layers, s.params, s.flops, s.input_shape,
	   coalesce(d.task, CASE WHEN m.spec ->> 'loss' = 'mse' THEN 'regression' ELSE 'classification' END) AS task,
	   cardinality(d.classes) AS n_classes, d.classes,
	   m.dataset, d.n_rows AS dataset_rows, d.n_features,
	   CASE WHEN d.normalization ? 'scale' THEN 'scale'
			WHEN d.normalization ? 'mean' THEN 'mean_std' END AS normalization,
	   m.config,
	   CASE WHEN jsonb_typeof(m.config -> 'optimizer') = 'string' THEN m.config ->> 'optimizer' END AS optimizer,
	   CASE WHEN jsonb_typeof(m.config -> 'lr') = 'number' AND abs((m.config ->> 'lr')::numeric) < 1e300
			THEN (m.config ->> 'lr')::float8 END AS lr,
	   CASE WHEN jsonb_typeof(m.config -> 'batch_size') = 'number' AND (m.config ->> 'batch_size')::numeric
			BETWEEN 1 AND 2147483647 THEN trunc((m.config ->> 'batch_size')::numeric)::integer END AS batch_size,
	   m.origin,
	   CASE WHEN jsonb_typeof(m.origin -> 'format') = 'string' THEN m.origin ->> 'format' END AS imported_from,
	   CASE WHEN jsonb_typeof(m.origin -> 'warm_start') = 'number' AND (m.origin ->> 'warm_start')::numeric
			BETWEEN 1 AND 9223372036854775807 THEN trunc((m.origin ->> 'warm_start')::numeric)::bigint END AS warm_start,
	   m.parent, m.run,
	   coalesce(r.best_validation_accuracy, mm.validation_accuracy) AS best_validation_accuracy,
	   coalesce(r.best_validation_loss, mm.validation_loss) AS best_validation_loss,
	   coalesce(r.last_train_loss, mm.train_loss) AS last_train_loss,
	   s.problem
  FROM pgdl.models m
 CROSS JOIN LATERAL pgdl.stored_spec_summary(m.spec) s
  LEFT JOIN pgdl.datasets d ON d.id = m.dataset
 CROSS JOIN LATERAL (
	SELECT CASE WHEN jsonb_typeof(m.metrics -> 'validation_accuracy') = 'number'
				 AND abs((m.metrics ->> 'validation_accuracy')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_accuracy')::float8 END AS validation_accuracy,
		   CASE WHEN jsonb_typeof(m.metrics -> 'validation_loss') = 'number'
				 AND abs((m.metrics ->> 'validation_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_loss')::float8 END AS validation_loss,
		   CASE WHEN jsonb_typeof(m.metrics -> 'train_loss') = 'number'
				 AND abs((m.metrics ->> 'train_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'train_loss')::float8 END AS train_loss
 ) mm
  LEFT JOIN LATERAL (
	SELECT max(rm.validation_accuracy) AS best_validation_accuracy,
		   min(rm.validation_loss) AS best_validation_loss,
		   (array_agg(rm.train_loss ORDER BY rm.epoch DESC))[1] AS last_train_loss
	  FROM pgdl.run_metrics rm
	 WHERE rm.model = m.id AND rm.node IS NULL
	HAVING count(*) > 0
  ) r ON true;
COMMENT ON COLUMN pgdl.zoo.problem IS
	'NULL, or why the model''s spec could not be read (its layers, n_layers, params, flops and input_shape are then NULL)';

-- pgdl.vocabulary: the same columns, jsonb typed only where it has the type
CREATE OR REPLACE VIEW pgdl.vocabulary WITH (security_invoker = true) AS
SELECT d.id AS dataset, d.packed, c.position::integer AS position, c.col ->> 'column' AS "column",
	   CASE WHEN d.n_features - c.total + c.before + 1 BETWEEN -2147483648 AND 2147483647
			THEN (d.n_features - c.total + c.before + 1)::integer END AS feature,
	   (v.id + CASE WHEN c.length IS NULL THEN 0 ELSE 1 END)::integer AS id, v.value,
	   c.length
  FROM pgdl.datasets d
 CROSS JOIN LATERAL (
	SELECT e.col, e.position, w.length, sum(coalesce(w.length::bigint + 1, 1)) OVER () AS total,
		   sum(coalesce(w.length::bigint + 1, 1)) OVER (ORDER BY e.position) - coalesce(w.length::bigint + 1, 1) AS before
	  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.categorical) = 'array' THEN d.categorical END)
		   WITH ORDINALITY AS e(col, position)
	 CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.col -> 'length') = 'number'
									 THEN (e.col ->> 'length')::numeric END AS n) l
	 CROSS JOIN LATERAL (SELECT CASE WHEN l.n = trunc(l.n) AND l.n BETWEEN 0 AND 2147483647
									 THEN l.n::integer END AS length) w) c
 CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(c.col -> 'values') = 'array'
												   THEN c.col -> 'values' END) WITH ORDINALITY AS v(value, id);

-- ---- lock tags and cache view names ----
-- Only the schema's owner creates in pgdl_cache now (65_feature_cache.sql): feature cache views are made
-- by pgdl's workers as that owner and given to the caller.  Caches other roles made before stay theirs.
REVOKE CREATE ON SCHEMA pgdl_cache FROM PUBLIC;

-- ---- evaluation and metrics: evaluate over raw rows, pgdl.metrics, confusion_matrix, roc_curve; ----
-- ---- evaluate_targets scores each target (its four columns first, as before) ----
DROP FUNCTION pgdl.evaluate_targets(bigint, regclass);
DROP FUNCTION pgdl.evaluate_targets(text, regclass);
DROP FUNCTION pgdl.evaluate_targets(bytea, regclass);

-- pgdl.evaluate_targets: per target of a model with several (multi-label, several regression outputs)

CREATE FUNCTION pgdl.evaluate_targets(model bigint, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model text, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model bytea, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;

COMMENT ON FUNCTION pgdl.evaluate_targets(bigint, regclass) IS
	'per target of stored model (by id) over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.evaluate_targets(text, regclass) IS
	'per target of stored model (by name) over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.evaluate_targets(bytea, regclass) IS
	'per target of a model blob over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';

-- pgdl.evaluate over raw rows: a table, view or query, preprocessed as the model's training set was packed

CREATE FUNCTION pgdl.evaluate(model bigint, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;
CREATE FUNCTION pgdl.evaluate(model text, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;

COMMENT ON FUNCTION pgdl.evaluate(bigint, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.evaluate(text, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';

-- pgdl.metrics: scikit-learn's metrics of a model over a packed table or raw rows, one row per
-- metric, class and average (see metrics.md for each name)

CREATE FUNCTION pgdl.metrics(model bigint, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model text, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model bytea, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model bigint, source text, features text, label text, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model text, source text, features text, label text, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 40;

COMMENT ON FUNCTION pgdl.metrics(bigint, regclass, integer) IS
	'scikit-learn''s metrics of stored model (by id) over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(text, regclass, integer) IS
	'scikit-learn''s metrics of stored model (by name) over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(bytea, regclass, integer) IS
	'scikit-learn''s metrics of a model blob over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(bigint, text, text, text, integer) IS
	'scikit-learn''s metrics of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.metrics(text, text, text, text, integer) IS
	'scikit-learn''s metrics of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';

-- pgdl.confusion_matrix: (actual, predicted, count, weight) for every pair of a classifier's classes;
-- weight is the rows' weights' sum (scikit-learn's confusion_matrix with sample_weight), count again when unweighted

CREATE FUNCTION pgdl.confusion_matrix(model bigint, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model text, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model bytea, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model bigint, source text, features text, label text)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model text, source text, features text, label text)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 100;

COMMENT ON FUNCTION pgdl.confusion_matrix(bigint, regclass) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by id) over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(text, regclass) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by name) over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(bytea, regclass) IS
	'rows of actual class, predicted class, count and weight of a classifier blob over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(bigint, text, text, text) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by id) over the rows of a table, view or query';
COMMENT ON FUNCTION pgdl.confusion_matrix(text, text, text, text) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by name) over the rows of a table, view or query';

-- pgdl.roc_curve: (threshold, fpr, tpr) of one class against the others, as scikit-learn 1.2's roc_curve

CREATE FUNCTION pgdl.roc_curve(model bigint, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model text, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model bytea, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model bigint, source text, features text, label text, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model text, source text, features text, label text, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 100000 ROWS 100;

COMMENT ON FUNCTION pgdl.roc_curve(bigint, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by id) over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(text, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by name) over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(bytea, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of a classifier blob over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(bigint, text, text, text, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by id) over the rows of a table, view or query, for class positive';
COMMENT ON FUNCTION pgdl.roc_curve(text, text, text, text, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by name) over the rows of a table, view or query, for class positive';

-- ---- predict takes any array of numbers ----
-- x of pgdl.predict and pgdl.predict_class becomes double precision[] (50_predict.sql says why): the real[]
-- overloads go, and the new ones take every array of numbers.  A view or function that a user made on the
-- old overloads keeps them from being dropped: drop it before ALTER EXTENSION pgdl UPDATE, then make it again.
DROP FUNCTION pgdl.predict(bigint, real[]);
DROP FUNCTION pgdl.predict(text, real[]);
DROP FUNCTION pgdl.predict(bytea, real[]);
DROP FUNCTION pgdl.predict_class(bigint, real[]);
DROP FUNCTION pgdl.predict_class(text, real[]);
DROP FUNCTION pgdl.predict_class(bytea, real[]);
DROP FUNCTION pgdl.predict_class(bigint, real[], anyelement);
DROP FUNCTION pgdl.predict_class(text, real[], anyelement);
DROP FUNCTION pgdl.predict_class(bytea, real[], anyelement);
DROP FUNCTION pgdl.predict(bigint, real[], text[]);
DROP FUNCTION pgdl.predict(text, real[], text[]);
DROP FUNCTION pgdl.predict_class(bigint, real[], text[]);
DROP FUNCTION pgdl.predict_class(text, real[], text[]);
DROP FUNCTION pgdl.predict(bigint, real[], text[], jsonb);
DROP FUNCTION pgdl.predict(text, real[], text[], jsonb);
DROP FUNCTION pgdl.predict_class(bigint, real[], text[], jsonb);
DROP FUNCTION pgdl.predict_class(text, real[], text[], jsonb);

-- pgdl.predict

CREATE FUNCTION pgdl.predict(model bigint, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model bytea, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[]) IS
	'outputs of stored model (by id) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(text, double precision[]) IS
	'outputs of stored model (by name) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(bytea, double precision[]) IS
	'outputs of a model blob for one example (features not normalized): class probabilities, sigmoids or values';

-- pgdl.predict_class

CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[]) IS
	'most likely class of one example under stored classifier (by id), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[]) IS
	'most likely class of one example under stored classifier (by name), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(bytea, double precision[]) IS
	'most likely class of one example under a classifier blob, as the class index (a blob has no dataset)';

-- pgdl.predict_class(model, x, label_type): the class in label_type's type (see predict.md)

CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], anyelement) IS
	'most likely class of one example under stored classifier (by id), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], anyelement) IS
	'most likely class of one example under stored classifier (by name), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(bytea, double precision[], anyelement) IS
	'most likely class index of one example under a classifier blob, as a value of label_type''s type';

-- pgdl.predict, pgdl.predict_class with categorical values (datasets packed with categorical => ...)

CREATE FUNCTION pgdl.predict(model bigint, x double precision[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[], text[]) IS
	'outputs of stored model (by id) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, double precision[], text[]) IS
	'outputs of stored model (by name) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], text[]) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features and categorical values';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], text[]) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features and categorical values';

-- ... and with token sequences (datasets packed with sequence => ...): sequences is a JSON array, one
-- array of tokens (or null) per sequence column, e.g. jsonb_build_array(tokens)

CREATE FUNCTION pgdl.predict(model bigint, x double precision[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[], text[], jsonb) IS
	'outputs of stored model (by id) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, double precision[], text[], jsonb) IS
	'outputs of stored model (by name) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], text[], jsonb) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features, categorical values and token sequences';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], text[], jsonb) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features, categorical values and token sequences';

-- ---- pack: per-row weights (weight => 'col') and target scaling (standardize_target => true) ----
DROP FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text,
						regclass, text, integer, text, integer);
CREATE FUNCTION pgdl.pack(
	source regclass,
	features text,
	label text,
	output text,
	buffer_rows integer DEFAULT 128,
	partitions integer DEFAULT 4,
	seed bigint DEFAULT 42,
	scale double precision DEFAULT NULL,
	standardize boolean DEFAULT false,
	nulls text DEFAULT 'error',
	reference regclass DEFAULT NULL,
	categorical text DEFAULT NULL,
	max_categories integer DEFAULT 10000,
	sequence text DEFAULT NULL,
	max_length integer DEFAULT NULL,
	weight text DEFAULT NULL,
	standardize_target boolean DEFAULT false)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer, text, integer, text, boolean) IS
	'packs a table''s features (numeric, categorical columns as vocabulary ids, token sequences as padded ids and a length) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- ---- ranking and restore_best: fit_multiple's and resume's rank_by, run_metrics.validation_metrics ----
ALTER TABLE pgdl.run_metrics ADD COLUMN validation_metrics jsonb;
GRANT UPDATE (validation_metrics) ON pgdl.run_metrics TO PUBLIC;
-- (the leaderboard, which reads rm.*, is made again from its new definition in the folds section below)
DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer);
CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1, priority integer DEFAULT 0, rank_by text DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer, text) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); on a distributed packed table, workers_per_node workers train on each node over libpq; a job of the server''s queue, priority (-100 to 100) ordering the caller''s own queued jobs; rank_by (NULL: the validation loss; accuracy, f1, f1_weighted, precision, recall, roc_auc, average_precision, log_loss, mse, rmse, mae, r2) ranks the leaderboard and halving''s rungs; stores the models and returns the leaderboard';
DROP FUNCTION pgdl.resume(bigint, integer, integer);
CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL, priority integer DEFAULT 0,
		rank_by text DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer, integer, text) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint; priority as pgdl.fit_multiple''s; rank_by NULL or the run''s own';

-- ---- folds: cross-validation over the packed partitions ----
ALTER TABLE pgdl.run_metrics ADD COLUMN fold integer;
ALTER TABLE pgdl.run_metrics DROP CONSTRAINT run_metrics_run_config_epoch_node_key;
ALTER TABLE pgdl.run_metrics ADD UNIQUE NULLS NOT DISTINCT (run, config, epoch, node, fold);
GRANT UPDATE (fold) ON pgdl.run_metrics TO PUBLIC;
-- a model of a run is its (run, config, fold): each fold's last epoch is a row
CREATE OR REPLACE VIEW pgdl.leaderboard WITH (security_invoker = true) AS
WITH metrics AS (
	SELECT rm.*,
		   row_number() OVER (PARTITION BY rm.run, rm.config, rm.fold ORDER BY rm.epoch DESC) AS from_last,
		   sum(rm.seconds) OVER (PARTITION BY rm.run, rm.config, rm.fold) AS total_seconds,
		   bool_or(rm.decision = 'stop') OVER (PARTITION BY rm.run, rm.config, rm.fold) AS halted
	  FROM pgdl.run_metrics rm
	 WHERE rm.node IS NULL
),
last_epochs AS (
	SELECT e.run, r.kind, m.id AS model, m.name AS model_name, e.config, a.name AS architecture,
		   CASE WHEN e.state = 'diverged' THEN 'diverged' WHEN e.halted THEN 'stopped' ELSE r.status END AS status,
		   e.epoch AS epochs, e.total_seconds AS seconds,
		   e.train_loss, e.train_accuracy, e.validation_loss, e.validation_accuracy,
		   -- what was trained: the stored model's configuration, else (in flight) its pgdl.configs row, else
		   -- the run's own (that of pgdl.fit; a pgdl.fit_multiple run's is the run's settings)
		   coalesce(m.config, c.config, CASE WHEN r.kind <> 'fit_multiple' THEN r.config END) AS cfg,
		   r.started
	  FROM metrics e
	  JOIN pgdl.runs r ON r.id = e.run
	  LEFT JOIN pgdl.models m ON m.id = e.model
	  LEFT JOIN pgdl.configs c ON c.id = e.config
	  LEFT JOIN pgdl.architectures a ON a.id = coalesce(m.architecture, c.architecture, r.architecture)
	 WHERE e.from_last = 1
)
SELECT s.run, s.kind,
	   -- as pgdl.fit_multiple ranks: diverged last, then the longest trained, then the lowest loss
	   (row_number() OVER (PARTITION BY s.run
						   ORDER BY s.status = 'diverged', s.epochs DESC,
									coalesce(s.validation_loss, s.train_loss) NULLS LAST,
									s.config NULLS LAST, s.model NULLS LAST))::integer AS rank,
	   CASE WHEN s.validation_loss IS NOT NULL THEN 'validation_loss' ELSE 'train_loss' END AS ranked_by,
	   s.model, s.model_name, s.config, s.architecture, s.status, s.epochs, s.seconds,
	   s.train_loss, s.train_accuracy, s.validation_loss, s.validation_accuracy,
	   CASE WHEN jsonb_typeof(s.cfg -> 'optimizer') = 'string' THEN s.cfg ->> 'optimizer' END AS optimizer,
	   f.lr, f.momentum,
	   CASE WHEN jsonb_typeof(s.cfg -> 'nesterov') = 'boolean' THEN (s.cfg -> 'nesterov')::boolean END AS nesterov,
	   f.weight_decay, f.beta1, f.beta2, f.eps,
	   CASE WHEN n.batch_size = trunc(n.batch_size) AND n.batch_size BETWEEN -2147483648 AND 2147483647
			THEN n.batch_size::integer END AS batch_size,
	   CASE WHEN n.seed = trunc(n.seed) AND n.seed BETWEEN -9223372036854775808 AND 9223372036854775807
			THEN n.seed::bigint END AS seed,
	   CASE WHEN jsonb_typeof(s.cfg -> 'base_model') IN ('string', 'number') THEN s.cfg ->> 'base_model' END AS base_model,
	   CASE WHEN jsonb_typeof(s.cfg -> 'freeze') IN ('string', 'number') THEN s.cfg ->> 'freeze' END AS frozen,
	   s.cfg::text AS config_text,
	   s.started
  FROM last_epochs s
 -- the configuration's numbers, as numeric (any JSON number is one)
 CROSS JOIN LATERAL (
	SELECT CASE WHEN jsonb_typeof(s.cfg -> 'lr') = 'number' THEN (s.cfg ->> 'lr')::numeric END AS lr,
		   CASE WHEN jsonb_typeof(s.cfg -> 'momentum') = 'number' THEN (s.cfg ->> 'momentum')::numeric END AS momentum,
		   CASE WHEN jsonb_typeof(s.cfg -> 'weight_decay') = 'number' THEN (s.cfg ->> 'weight_decay')::numeric END AS weight_decay,
		   CASE WHEN jsonb_typeof(s.cfg -> 'beta1') = 'number' THEN (s.cfg ->> 'beta1')::numeric END AS beta1,
		   CASE WHEN jsonb_typeof(s.cfg -> 'beta2') = 'number' THEN (s.cfg ->> 'beta2')::numeric END AS beta2,
		   CASE WHEN jsonb_typeof(s.cfg -> 'eps') = 'number' THEN (s.cfg ->> 'eps')::numeric END AS eps,
		   CASE WHEN jsonb_typeof(s.cfg -> 'batch_size') = 'number' THEN (s.cfg ->> 'batch_size')::numeric END AS batch_size,
		   CASE WHEN jsonb_typeof(s.cfg -> 'seed') = 'number' THEN (s.cfg ->> 'seed')::numeric END AS seed
 ) n
 -- and as double precision where it is one: 1e400 (or 1e-400, which would round to 0) is NULL, not an error
 CROSS JOIN LATERAL (
	SELECT CASE WHEN n.lr = 0 OR abs(n.lr) BETWEEN 1e-307 AND 1e308 THEN n.lr::float8 END AS lr,
		   CASE WHEN n.momentum = 0 OR abs(n.momentum) BETWEEN 1e-307 AND 1e308 THEN n.momentum::float8 END AS momentum,
		   CASE WHEN n.weight_decay = 0 OR abs(n.weight_decay) BETWEEN 1e-307 AND 1e308
				THEN n.weight_decay::float8 END AS weight_decay,
		   CASE WHEN n.beta1 = 0 OR abs(n.beta1) BETWEEN 1e-307 AND 1e308 THEN n.beta1::float8 END AS beta1,
		   CASE WHEN n.beta2 = 0 OR abs(n.beta2) BETWEEN 1e-307 AND 1e308 THEN n.beta2::float8 END AS beta2,
		   CASE WHEN n.eps = 0 OR abs(n.eps) BETWEEN 1e-307 AND 1e308 THEN n.eps::float8 END AS eps
 ) f;


DROP FUNCTION pgdl.fit(regclass, text, jsonb, integer, regclass, text);
DROP FUNCTION pgdl.fit(regclass, jsonb, jsonb, integer, regclass, text);
CREATE FUNCTION pgdl.fit(source regclass, architecture text, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL,
		holdout integer DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, text, jsonb, integer, regclass, text, integer) IS
	'trains a stored architecture on a packed table for some epochs (validating on another packed table if given, or, with holdout, training on every partition but that one and validating on it: one fold of pgdl.fit_multiple(..., folds => true)); stores the model in pgdl.models and returns its id';

CREATE FUNCTION pgdl.fit(source regclass, spec jsonb, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL,
		holdout integer DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_spec' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, jsonb, jsonb, integer, regclass, text, integer) IS
	'trains a network given as a jsonb spec on a packed table (with holdout, on every partition but that one, validated on it); stores the model in pgdl.models and returns its id';

DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer, text);
CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1, priority integer DEFAULT 0, rank_by text DEFAULT NULL,
		folds boolean DEFAULT false)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer, text, boolean) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); on a distributed packed table, workers_per_node workers train on each node over libpq; a job of the server''s queue, priority (-100 to 100) ordering the caller''s own queued jobs; rank_by (NULL: the validation loss; accuracy, f1, f1_weighted, precision, recall, roc_auc, average_precision, log_loss, mse, rmse, mae, r2) ranks the leaderboard and halving''s rungs; with folds, cross-validates: each configuration once per partition held out, ranked by the mean over its folds (pgdl.cross_validation); stores the models and returns the leaderboard';

CREATE VIEW pgdl.cross_validation WITH (security_invoker = true) AS
	SELECT rm.run, rm.config, count(*)::integer AS folds, max(rm.epoch) AS epochs,
		   avg(rm.validation_loss) AS validation_loss, stddev_pop(rm.validation_loss) AS validation_loss_std,
		   avg(rm.validation_accuracy) AS validation_accuracy,
		   stddev_pop(rm.validation_accuracy) AS validation_accuracy_std,
		   bool_or(rm.state = 'diverged') AS diverged
	  FROM pgdl.run_metrics rm
	  JOIN pgdl.models m ON m.id = rm.model AND (m.metrics->>'epoch')::integer = rm.epoch
	 WHERE rm.fold IS NOT NULL
	 GROUP BY rm.run, rm.config;
COMMENT ON VIEW pgdl.cross_validation IS
	'per pgdl.fit_multiple(..., folds => true) run and configuration: its folds, and the mean and spread (population standard deviation, as scikit-learn''s cv_results_) of the validation metrics of its stored fold models';
GRANT SELECT ON pgdl.cross_validation TO PUBLIC;

-- ---- target scaling (pgdl.datasets.target_normalization: pack's standardize_target) and pgdl.split ----
-- Datasets packed before have their targets as they are (NULL).
ALTER TABLE pgdl.datasets ADD COLUMN target_normalization jsonb;
GRANT UPDATE (target_normalization) ON pgdl.datasets TO PUBLIC;

-- pgdl.split: a table's rows into <prefix>_train, <prefix>_validation (and <prefix>_test) tables, created
-- as the caller (see docs/reference/pack.md#split).  A row's place is decided by a hash of its text and
-- the seed (its text as the SET clauses make it), so the same seed gives the same rows whatever the
-- physical order or the session's settings; stratify => a column keeps
-- each of its values' share in every part, within one row.  Pack <prefix>_train, then the others with
-- reference => it: one preprocessing.
CREATE FUNCTION pgdl.split(source regclass, output_prefix text, validation real DEFAULT 0.2,
						   test real DEFAULT 0.0, seed bigint DEFAULT 42, stratify text DEFAULT NULL)
RETURNS TABLE (part text, relation regclass, n_rows bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	-- a row's text, which its place is a hash of, the same in every session
	SET extra_float_digits = 1 SET datestyle = 'ISO, YMD' SET intervalstyle = 'postgres' SET timezone = 'UTC'
	SET bytea_output = 'hex' AS
$$
DECLARE
	names text[];
	schema_name text;
	base text;
	parts text[];
	lower_bound text[];
	upper_bound text[];
	quoted text;
	strat text := '';
	sql text;
	kept bigint;
BEGIN
	IF source IS NULL OR output_prefix IS NULL OR validation IS NULL OR test IS NULL OR seed IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'source, output_prefix, validation, test and seed must not be NULL';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = source) THEN
		RAISE EXCEPTION USING ERRCODE = '42P01', MESSAGE = pg_catalog.format('relation with OID %s does not exist', source::oid);
	END IF;
	IF NOT (validation >= 0 AND test >= 0 AND validation + test > 0 AND validation + test < 1) THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('validation (%s) and test (%s) must be shares of the rows, together above 0 and below 1',
										validation, test),
			DETAIL = 'Each is the share of the rows its table gets, from 0 to 1; the training table gets the rest.';
	END IF;
	names := pg_catalog.parse_ident(output_prefix);
	IF pg_catalog.array_length(names, 1) > 2 THEN
		RAISE EXCEPTION USING ERRCODE = '42601',
			MESSAGE = pg_catalog.format('improper output_prefix "%s"', pg_catalog.left(output_prefix, 64)),
			HINT = 'Give a table name, or a schema and a table name.';
	END IF;
	schema_name := CASE WHEN pg_catalog.array_length(names, 1) = 2 THEN names[1] ELSE pg_catalog.current_schema() END;
	base := names[pg_catalog.array_length(names, 1)];
	IF schema_name IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '3F000', MESSAGE = 'no schema has been selected to create in';
	END IF;
	-- each class's (or the table's) rows in hash order: the first round(n * test) are test, the next
	-- round(n * validation) validation, the rest train
	parts := '{train}';
	lower_bound := '{t + v}';
	upper_bound := '{n}';
	IF validation > 0 THEN
		parts := parts || 'validation'::text;
		lower_bound := lower_bound || 't'::text;
		upper_bound := upper_bound || 't + v'::text;
	END IF;
	IF test > 0 THEN
		parts := parts || 'test'::text;
		lower_bound := lower_bound || '0'::text;
		upper_bound := upper_bound || 't'::text;
	END IF;
	FOREACH quoted IN ARRAY parts LOOP
		IF pg_catalog.octet_length(base || '_' || quoted) > 63 THEN
			RAISE EXCEPTION USING ERRCODE = '42622',
				MESSAGE = pg_catalog.format('output_prefix "%s" is too long', pg_catalog.left(base, 64)),
				DETAIL = pg_catalog.format('Table "%s_%s" would be longer than 63 bytes.', pg_catalog.left(base, 64), quoted);
		END IF;
		IF pg_catalog.to_regclass(pg_catalog.quote_ident(schema_name) || '.' || pg_catalog.quote_ident(base || '_' || quoted)) IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = '42P07',
				MESSAGE = pg_catalog.format('relation "%s.%s_%s" already exists', schema_name, base, quoted),
				HINT = 'Drop it, or give another output_prefix.';
		END IF;
	END LOOP;
	IF stratify IS NOT NULL THEN
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = stratify
						  AND a.attnum > 0 AND NOT a.attisdropped) THEN
			RAISE EXCEPTION USING ERRCODE = '42703',
				MESSAGE = pg_catalog.format('column "%s" of stratify does not exist in %s', pg_catalog.left(stratify, 64), source);
		END IF;
		strat := 'PARTITION BY pgdl_row.' || pg_catalog.quote_ident(stratify);
	END IF;
	FOR i IN 1 .. pg_catalog.array_length(parts, 1) LOOP
		quoted := pg_catalog.quote_ident(schema_name) || '.' || pg_catalog.quote_ident(base || '_' || parts[i]);
		sql := pg_catalog.format(
			'CREATE TABLE %s AS SELECT (r.pgdl_row).* FROM ('
			' SELECT pgdl_row, pg_catalog.row_number() OVER w AS rn,'
			'  pg_catalog.round(pg_catalog.count(*) OVER c * %s::float8) AS t,'
			'  pg_catalog.round(pg_catalog.count(*) OVER c * %s::float8) AS v,'
			'  pg_catalog.count(*) OVER c AS n'
			'  FROM %s pgdl_row'
			'  WINDOW c AS (%s), w AS (%s ORDER BY pg_catalog.hashtextextended(pgdl_row::text, %s))) r'
			' WHERE r.rn > %s AND r.rn <= %s',
			quoted, test, validation, source, strat, strat, seed, lower_bound[i], upper_bound[i]);
		EXECUTE sql;
		GET DIAGNOSTICS kept = ROW_COUNT;
		IF kept = 0 THEN
			RAISE EXCEPTION USING ERRCODE = '22023',
				MESSAGE = pg_catalog.format('split leaves %s without rows', quoted),
				DETAIL = pg_catalog.format('%s has too few rows for validation %s and test %s.', source, validation, test),
				HINT = 'Split a larger table, or give a larger share.';
		END IF;
		part := parts[i];
		relation := quoted::regclass;
		n_rows := kept;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.split(regclass, text, real, real, bigint, text) IS
	'splits a table''s rows by a seeded hash into new tables <prefix>_train, <prefix>_validation and (test > 0) <prefix>_test, optionally stratified by a column; pack the training table, then the others with reference => it';

-- ---- the views follow the stored model: pgdl.leaderboard ranks by rank_by at the stored epoch (as ----
-- ---- pgdl.fit_multiple does), pgdl.zoo shows the stored model's numbers, pgdl.training_curves marks it ----
-- The leaderboard's columns as before, and stored_epoch, rank_value and fold at the end; the curves' and
-- stored at the end; the zoo's columns as before, their values the stored model's.
CREATE OR REPLACE VIEW pgdl.leaderboard WITH (security_invoker = true) AS
WITH metrics AS (
	SELECT rm.*,
		   max(rm.epoch) OVER w AS last_epoch,
		   sum(rm.seconds) OVER w AS total_seconds,
		   bool_or(rm.decision = 'stop') OVER w AS halted,
		   -- the epoch the stored model is (restore_best's best one, else its last): its metrics' "epoch"
		   CASE WHEN jsonb_typeof(m.metrics -> 'epoch') = 'number' AND (m.metrics ->> 'epoch') ~ '^[0-9]{1,9}$'
				THEN (m.metrics ->> 'epoch')::integer END AS model_epoch
	  FROM pgdl.run_metrics rm
	  LEFT JOIN pgdl.models m ON m.id = rm.model
	 WHERE rm.node IS NULL
	WINDOW w AS (PARTITION BY rm.run, rm.config, rm.fold)
),
stored AS (
	-- per model the row of its stored epoch, else (in flight, no model, or a forged epoch) its last
	SELECT e.*,
		   row_number() OVER (PARTITION BY e.run, e.config, e.fold
							  ORDER BY e.epoch = e.model_epoch DESC NULLS LAST, e.epoch DESC) AS pick,
		   bool_or(e.state = 'diverged' AND e.epoch = e.last_epoch) OVER (PARTITION BY e.run, e.config, e.fold) AS diverged
	  FROM metrics e
),
last_epochs AS (
	SELECT e.run, r.kind, m.id AS model, m.name AS model_name, e.config, e.fold, a.name AS architecture,
		   CASE WHEN e.diverged THEN 'diverged' WHEN e.halted THEN 'stopped' ELSE r.status END AS status,
		   e.last_epoch AS epochs, e.epoch AS stored_epoch, e.total_seconds AS seconds,
		   e.train_loss, e.train_accuracy, e.validation_loss, e.validation_accuracy, e.validation_metrics,
		   -- the run's rank_by (pgdl.runs.config of pgdl.fit_multiple; absent: the loss)
		   CASE WHEN r.kind = 'fit_multiple' AND jsonb_typeof(r.config -> 'rank_by') = 'string'
				THEN CASE r.config ->> 'rank_by' WHEN 'validation_loss' THEN 'loss'
						  WHEN 'validation_accuracy' THEN 'accuracy' ELSE r.config ->> 'rank_by' END
				ELSE 'loss' END AS rank_by,
		   -- what was trained: the stored model's configuration, else (in flight) its pgdl.configs row, else
		   -- the run's own (that of pgdl.fit; a pgdl.fit_multiple run's is the run's settings)
		   coalesce(m.config, c.config, CASE WHEN r.kind <> 'fit_multiple' THEN r.config END) AS cfg,
		   r.started
	  FROM stored e
	  JOIN pgdl.runs r ON r.id = e.run
	  LEFT JOIN pgdl.models m ON m.id = e.model
	  LEFT JOIN pgdl.configs c ON c.id = e.config
	  LEFT JOIN pgdl.architectures a ON a.id = coalesce(m.architecture, c.architecture, r.architecture)
	 WHERE e.pick = 1
),
ranked AS (
	SELECT s.*, v.rank_value,
		   -- lower first: a metric where higher is better turned round; not measured (NULL, NaN) last
		   CASE WHEN v.rank_value = 'NaN'::float8 THEN NULL
				WHEN s.rank_by IN ('accuracy', 'f1', 'f1_weighted', 'precision', 'recall', 'roc_auc',
								   'average_precision', 'r2') THEN -v.rank_value
				ELSE v.rank_value END AS rank_key,
		   -- with folds, a configuration ranks by its folds' mean validation loss (pgdl.cross_validation)
		   bool_or(s.status = 'diverged') OVER (PARTITION BY s.run, s.config) AS config_diverged,
		   avg(s.validation_loss) OVER (PARTITION BY s.run, s.config) AS config_loss,
		   stddev_pop(s.validation_loss) OVER (PARTITION BY s.run, s.config) AS config_loss_std
	  FROM last_epochs s
	 CROSS JOIN LATERAL (
		SELECT CASE WHEN s.rank_by = 'loss' THEN coalesce(s.validation_loss, s.train_loss)
					WHEN s.rank_by = 'accuracy' THEN s.validation_accuracy
					WHEN jsonb_typeof(s.validation_metrics -> s.rank_by) = 'number'
					 AND (abs((s.validation_metrics ->> s.rank_by)::numeric) BETWEEN 1e-307 AND 1e308
						  OR (s.validation_metrics ->> s.rank_by)::numeric = 0)
					THEN (s.validation_metrics ->> s.rank_by)::float8 END AS rank_value) v
)
SELECT s.run, s.kind,
	   -- as pgdl.fit_multiple ranks: diverged last, then by rank_by at the stored epoch, then by config
	   CASE WHEN s.fold IS NULL
			THEN row_number() OVER (PARTITION BY s.run
									ORDER BY s.status = 'diverged', s.rank_key NULLS LAST,
											 s.config NULLS LAST, s.model NULLS LAST)
			ELSE dense_rank() OVER (PARTITION BY s.run
									ORDER BY s.config_diverged,
											 CASE WHEN NOT s.config_diverged THEN s.config_loss END NULLS LAST,
											 s.config NULLS LAST) END::integer AS rank,
	   CASE WHEN s.fold IS NOT NULL THEN 'validation_loss'
			WHEN s.rank_by = 'loss' THEN CASE WHEN s.validation_loss IS NOT NULL THEN 'validation_loss' ELSE 'train_loss' END
			WHEN s.rank_by = 'accuracy' THEN 'validation_accuracy'
			ELSE s.rank_by END AS ranked_by,
	   s.model, s.model_name, s.config, s.architecture, s.status, s.epochs, s.seconds,
	   s.train_loss, s.train_accuracy, s.validation_loss, s.validation_accuracy,
	   CASE WHEN jsonb_typeof(s.cfg -> 'optimizer') = 'string' THEN s.cfg ->> 'optimizer' END AS optimizer,
	   f.lr, f.momentum,
	   CASE WHEN jsonb_typeof(s.cfg -> 'nesterov') = 'boolean' THEN (s.cfg -> 'nesterov')::boolean END AS nesterov,
	   f.weight_decay, f.beta1, f.beta2, f.eps,
	   CASE WHEN n.batch_size = trunc(n.batch_size) AND n.batch_size BETWEEN -2147483648 AND 2147483647
			THEN n.batch_size::integer END AS batch_size,
	   CASE WHEN n.seed = trunc(n.seed) AND n.seed BETWEEN -9223372036854775808 AND 9223372036854775807
			THEN n.seed::bigint END AS seed,
	   CASE WHEN jsonb_typeof(s.cfg -> 'base_model') IN ('string', 'number') THEN s.cfg ->> 'base_model' END AS base_model,
	   CASE WHEN jsonb_typeof(s.cfg -> 'freeze') IN ('string', 'number') THEN s.cfg ->> 'freeze' END AS frozen,
	   s.cfg::text AS config_text,
	   s.started,
	   s.stored_epoch,
	   CASE WHEN s.fold IS NOT NULL THEN s.config_loss ELSE s.rank_value END AS rank_value,
	   s.fold,
	   -- cross-validation: the spread (population standard deviation) of rank_value over the folds
	   CASE WHEN s.fold IS NOT NULL THEN s.config_loss_std END AS rank_value_std
  FROM ranked s
 -- the configuration's numbers, as numeric (any JSON number is one)
 CROSS JOIN LATERAL (
	SELECT CASE WHEN jsonb_typeof(s.cfg -> 'lr') = 'number' THEN (s.cfg ->> 'lr')::numeric END AS lr,
		   CASE WHEN jsonb_typeof(s.cfg -> 'momentum') = 'number' THEN (s.cfg ->> 'momentum')::numeric END AS momentum,
		   CASE WHEN jsonb_typeof(s.cfg -> 'weight_decay') = 'number' THEN (s.cfg ->> 'weight_decay')::numeric END AS weight_decay,
		   CASE WHEN jsonb_typeof(s.cfg -> 'beta1') = 'number' THEN (s.cfg ->> 'beta1')::numeric END AS beta1,
		   CASE WHEN jsonb_typeof(s.cfg -> 'beta2') = 'number' THEN (s.cfg ->> 'beta2')::numeric END AS beta2,
		   CASE WHEN jsonb_typeof(s.cfg -> 'eps') = 'number' THEN (s.cfg ->> 'eps')::numeric END AS eps,
		   CASE WHEN jsonb_typeof(s.cfg -> 'batch_size') = 'number' THEN (s.cfg ->> 'batch_size')::numeric END AS batch_size,
		   CASE WHEN jsonb_typeof(s.cfg -> 'seed') = 'number' THEN (s.cfg ->> 'seed')::numeric END AS seed
 ) n
 -- and as double precision where it is one: 1e400 (or 1e-400, which would round to 0) is NULL, not an error
 CROSS JOIN LATERAL (
	SELECT CASE WHEN n.lr = 0 OR abs(n.lr) BETWEEN 1e-307 AND 1e308 THEN n.lr::float8 END AS lr,
		   CASE WHEN n.momentum = 0 OR abs(n.momentum) BETWEEN 1e-307 AND 1e308 THEN n.momentum::float8 END AS momentum,
		   CASE WHEN n.weight_decay = 0 OR abs(n.weight_decay) BETWEEN 1e-307 AND 1e308
				THEN n.weight_decay::float8 END AS weight_decay,
		   CASE WHEN n.beta1 = 0 OR abs(n.beta1) BETWEEN 1e-307 AND 1e308 THEN n.beta1::float8 END AS beta1,
		   CASE WHEN n.beta2 = 0 OR abs(n.beta2) BETWEEN 1e-307 AND 1e308 THEN n.beta2::float8 END AS beta2,
		   CASE WHEN n.eps = 0 OR abs(n.eps) BETWEEN 1e-307 AND 1e308 THEN n.eps::float8 END AS eps
 ) f;

COMMENT ON VIEW pgdl.leaderboard IS
	'one row per model of every run the caller may see (pgdl.fit, pgdl.fit_multiple, pgdl.fit_federated): its rank in the run (as pgdl.fit_multiple ranks), status, the stored model''s epoch''s metrics and its training configuration''s keys as columns, in plain SQL types for BI tools';
COMMENT ON COLUMN pgdl.leaderboard.rank IS
	'1 = best in the run, as pgdl.fit_multiple ranks: models that diverged last; before them by the run''s rank_by at the stored epoch (ranked_by, rank_value; best first), then by config and model id; with folds, each fold carries its configuration''s rank (by the mean validation loss of its folds)';
COMMENT ON COLUMN pgdl.leaderboard.ranked_by IS
	'what the model was ranked on: validation_loss (or train_loss when its stored epoch was not validated) for rank_by loss, validation_accuracy, or the rank_by metric''s name (f1, roc_auc, r2, ...: pgdl.run_metrics.validation_metrics)';
COMMENT ON COLUMN pgdl.leaderboard.stored_epoch IS
	'the epoch whose metrics the row shows: the stored model''s (restore_best''s best epoch, else the last); in flight, the last so far';
COMMENT ON COLUMN pgdl.leaderboard.rank_value IS
	'the value of ranked_by at stored_epoch (with folds, the mean validation loss of the configuration''s folds); NULL when not measured';
COMMENT ON COLUMN pgdl.leaderboard.fold IS
	'the partition the model held out (pgdl.fit_multiple(..., folds => true)); NULL otherwise';
COMMENT ON COLUMN pgdl.leaderboard.rank_value_std IS
	'with folds, the spread (population standard deviation, as scikit-learn''s std_test_score) of the validation loss over the configuration''s folds, beside its mean in rank_value; NULL otherwise';
COMMENT ON COLUMN pgdl.leaderboard.config IS
	'the pgdl.configs.id the run records for the model (pgdl.fit_multiple); NULL where it records none';
COMMENT ON COLUMN pgdl.leaderboard.status IS
	'diverged (training stopped on NaN or infinity), stopped (by successive halving), else the run''s status: running, finished, failed, cancelled';
COMMENT ON COLUMN pgdl.leaderboard.epochs IS 'epochs trained: the last epoch with metrics (the metrics shown are stored_epoch''s)';
COMMENT ON COLUMN pgdl.leaderboard.seconds IS 'training seconds, all epochs together';
COMMENT ON COLUMN pgdl.leaderboard.base_model IS
	'the configuration''s "base_model" key (a model''s name or id) as text: the model it was trained from';
COMMENT ON COLUMN pgdl.leaderboard.frozen IS
	'the configuration''s "freeze" key (a number of layers, or the name of the last frozen layer) as text';
COMMENT ON COLUMN pgdl.leaderboard.config_text IS
	'the training configuration as JSON text: the stored model''s, else its pgdl.configs row''s, else the run''s';

CREATE OR REPLACE VIEW pgdl.training_curves WITH (security_invoker = true) AS
SELECT l.run, l.model, l.model_name, l.config, l.architecture, l.rank, rm.epoch, v.metric, v.value,
	   rm.epoch = l.stored_epoch AS stored
  FROM pgdl.run_metrics rm
  JOIN pgdl.leaderboard l ON l.run = rm.run AND coalesce(l.config, 0) = coalesce(rm.config, 0)
						 AND coalesce(l.fold, -1) = coalesce(rm.fold, -1)
 CROSS JOIN LATERAL (VALUES ('train_loss', rm.train_loss), ('train_accuracy', rm.train_accuracy),
							('validation_loss', rm.validation_loss),
							('validation_accuracy', rm.validation_accuracy)) v(metric, value)
 WHERE rm.node IS NULL AND v.value IS NOT NULL;

COMMENT ON VIEW pgdl.training_curves IS
	'the metrics of every epoch of every model of the runs the caller may see, one row per model, epoch and metric (train_loss, train_accuracy, validation_loss, validation_accuracy), ready to chart; stored marks the stored model''s epoch';
COMMENT ON COLUMN pgdl.training_curves.rank IS 'the model''s rank in its run (pgdl.leaderboard)';
COMMENT ON COLUMN pgdl.training_curves.stored IS
	'whether this is the epoch the stored model is (restore_best''s best epoch, else the last; pgdl.leaderboard.stored_epoch)';

CREATE OR REPLACE VIEW pgdl.zoo WITH (security_invoker = true) AS
SELECT m.id, m.name, m.owner::text AS owner, m.created,
	   s.layers, s.n_layers, s.params, s.flops, s.input_shape,
	   coalesce(d.task, CASE WHEN m.spec ->> 'loss' = 'mse' THEN 'regression' ELSE 'classification' END) AS task,
	   cardinality(d.classes) AS n_classes, d.classes,
	   m.dataset, d.n_rows AS dataset_rows, d.n_features,
	   CASE WHEN d.normalization ? 'scale' THEN 'scale'
			WHEN d.normalization ? 'mean' THEN 'mean_std' END AS normalization,
	   m.config,
	   CASE WHEN jsonb_typeof(m.config -> 'optimizer') = 'string' THEN m.config ->> 'optimizer' END AS optimizer,
	   CASE WHEN jsonb_typeof(m.config -> 'lr') = 'number' AND abs((m.config ->> 'lr')::numeric) < 1e300
			THEN (m.config ->> 'lr')::float8 END AS lr,
	   CASE WHEN jsonb_typeof(m.config -> 'batch_size') = 'number' AND (m.config ->> 'batch_size')::numeric
			BETWEEN 1 AND 2147483647 THEN trunc((m.config ->> 'batch_size')::numeric)::integer END AS batch_size,
	   m.origin,
	   CASE WHEN jsonb_typeof(m.origin -> 'format') = 'string' THEN m.origin ->> 'format' END AS imported_from,
	   CASE WHEN jsonb_typeof(m.origin -> 'warm_start') = 'number' AND (m.origin ->> 'warm_start')::numeric
			BETWEEN 1 AND 9223372036854775807 THEN trunc((m.origin ->> 'warm_start')::numeric)::bigint END AS warm_start,
	   m.parent, m.run,
	   -- the stored model's numbers (restore_best's best epoch, else its last): its metrics, else its run's row
	   coalesce(mm.validation_accuracy, r.validation_accuracy) AS best_validation_accuracy,
	   coalesce(mm.validation_loss, r.validation_loss) AS best_validation_loss,
	   coalesce(mm.train_loss, r.train_loss) AS last_train_loss,
	   s.problem
  FROM pgdl.models m
 CROSS JOIN LATERAL pgdl.stored_spec_summary(m.spec) s
  LEFT JOIN pgdl.datasets d ON d.id = m.dataset
 CROSS JOIN LATERAL (
	SELECT CASE WHEN jsonb_typeof(m.metrics -> 'validation_accuracy') = 'number'
				 AND abs((m.metrics ->> 'validation_accuracy')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_accuracy')::float8 END AS validation_accuracy,
		   CASE WHEN jsonb_typeof(m.metrics -> 'validation_loss') = 'number'
				 AND abs((m.metrics ->> 'validation_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_loss')::float8 END AS validation_loss,
		   CASE WHEN jsonb_typeof(m.metrics -> 'train_loss') = 'number'
				 AND abs((m.metrics ->> 'train_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'train_loss')::float8 END AS train_loss
 ) mm
  LEFT JOIN LATERAL (
	SELECT rm.validation_accuracy, rm.validation_loss, rm.train_loss
	  FROM pgdl.run_metrics rm
	 WHERE rm.model = m.id AND rm.node IS NULL
	 ORDER BY rm.epoch::text = (m.metrics ->> 'epoch') DESC NULLS LAST, rm.epoch DESC
	 LIMIT 1
  ) r ON true;
COMMENT ON VIEW pgdl.zoo IS
	'every model the caller may see, with its layers, size, task, data, training configuration, lineage and the stored model''s metrics';
COMMENT ON COLUMN pgdl.zoo.best_validation_accuracy IS
	'the stored model''s validation accuracy: that of the epoch it is (restore_best''s best epoch, else its last), not the best of every epoch';
COMMENT ON COLUMN pgdl.zoo.best_validation_loss IS
	'the stored model''s validation loss: that of the epoch it is (restore_best''s best epoch, else its last)';
COMMENT ON COLUMN pgdl.zoo.last_train_loss IS
	'the stored model''s training loss: that of the epoch it is (restore_best''s best epoch, else its last)';
COMMENT ON COLUMN pgdl.zoo.problem IS
	'NULL, or why the model''s spec could not be read (its layers, n_layers, params, flops and input_shape are then NULL)';

-- ---- per-row weights (pack's weight => col: pgdl.datasets.weighted, the packed table's w real[]) ----
-- Datasets packed before are unweighted.  Added, filled, then given its default and NOT NULL, so that the
-- column is stored as a fresh install's is (ADD COLUMN ... DEFAULT would keep a "missing value").
ALTER TABLE pgdl.datasets ADD COLUMN weighted boolean;
UPDATE pgdl.datasets SET weighted = false;
ALTER TABLE pgdl.datasets ALTER COLUMN weighted SET DEFAULT false, ALTER COLUMN weighted SET NOT NULL;
GRANT UPDATE (weighted) ON pgdl.datasets TO PUBLIC;

-- ---- deployments: pgdl.deploy, rollback, the pgdl.deployments view; fit_multiple's deploy ----
-- Deployments (77_deployments.sql): a name that answers every function taking a model by name with one
-- of its owner's models, and each name's history, newest last.  The model a name serves is the newest
-- entry not rolled back (pgdl.deployed_model).  A deployed model cannot be deleted while its name keeps
-- it in its history: rolling back must find what it goes back to.
CREATE TABLE pgdl.deployment_names (
	id bigserial PRIMARY KEY,
	name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	acl aclitem[],							-- who else may use it: pgdl.grant_deployment
	created timestamptz NOT NULL DEFAULT now(),
	UNIQUE (owner, name)
);
CREATE TABLE pgdl.deployment_history (
	id bigserial PRIMARY KEY,
	deployment bigint NOT NULL REFERENCES pgdl.deployment_names ON DELETE CASCADE,
	model bigint NOT NULL REFERENCES pgdl.models ON DELETE RESTRICT,
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,	-- the name's
	deployed_by regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	deployed_at timestamptz NOT NULL DEFAULT now(),
	rolled_back_by regrole,
	rolled_back_at timestamptz,
	CHECK ((rolled_back_by IS NULL) = (rolled_back_at IS NULL))
);
CREATE INDEX ON pgdl.deployment_history (deployment, id);
CREATE INDEX ON pgdl.deployment_history (model);
COMMENT ON TABLE pgdl.deployment_names IS 'deployment names (pgdl.deploy): owned and granted like models';
COMMENT ON TABLE pgdl.deployment_history IS 'every model each deployment name served, who deployed it and when, and who rolled it back';
SELECT pg_catalog.pg_extension_config_dump('pgdl.deployment_names', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.deployment_names_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.deployment_history', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.deployment_history_id_seq', '');

-- The one rule of which model a deployment serves, for name resolution (pgdl.model_id), rollback, the
-- grantees' policy on pgdl.models and the pgdl.deployments view: its newest entry not rolled back.
CREATE FUNCTION pgdl.deployed_entry(deployment bigint) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT h.id FROM pgdl.deployment_history h
 WHERE h.deployment = $1 AND h.rolled_back_at IS NULL
 ORDER BY h.id DESC LIMIT 1
$$;
COMMENT ON FUNCTION pgdl.deployed_entry(bigint) IS
	'the history entry (pgdl.deployment_history.id) of the model a deployment serves: its newest not rolled back; NULL if none';
CREATE FUNCTION pgdl.deployed_model(deployment bigint) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$ SELECT h.model FROM pgdl.deployment_history h WHERE h.id = pgdl.deployed_entry($1) $$;
COMMENT ON FUNCTION pgdl.deployed_model(bigint) IS
	'the model a deployment (pgdl.deployment_names.id) serves: its newest history entry not rolled back; NULL if none';

-- the per-backend cache learns what a name means from these two tables too
CREATE TRIGGER deployment_names_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.deployment_names
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
CREATE TRIGGER deployment_history_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.deployment_history
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
COMMENT ON FUNCTION pgdl.catalog_changed() IS
	'trigger of pgdl.models, datasets, deployment_names and deployment_history: flushes the per-backend cache of models and datasets when one changes';
GRANT SELECT, INSERT ON pgdl.deployment_names, pgdl.deployment_history TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.deployment_names_id_seq, pgdl.deployment_history_id_seq TO PUBLIC;
ALTER TABLE pgdl.deployment_names ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.deployment_history ENABLE ROW LEVEL SECURITY;
-- A name serves its owner's own models only, so that granting the name grants no more than its owner has.
CREATE POLICY owners ON pgdl.deployment_names USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.deployment_history USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.deployment_names d
					 WHERE d.id = deployment_history.deployment AND d.owner = deployment_history.owner) AND
			EXISTS (SELECT 1 FROM pgdl.models m
					 WHERE m.id = deployment_history.model AND m.owner = deployment_history.owner));

-- A deployment's grantees: its name, its history, and the model it serves now (not the ones it served).
CREATE POLICY grantees ON pgdl.deployment_names FOR SELECT USING (pgdl.granted(acl));
CREATE POLICY grantees ON pgdl.deployment_history FOR SELECT
	USING (EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.id = deployment_history.deployment));
CREATE POLICY deployed ON pgdl.models FOR SELECT
	USING (EXISTS (SELECT 1 FROM pgdl.deployment_names d
					WHERE d.owner = models.owner AND pgdl.granted(d.acl) AND pgdl.deployed_model(d.id) = models.id));
COMMENT ON POLICY deployed ON pgdl.models IS
	'those a deployment was granted to (pgdl.grant_deployment) read the model it serves, when its owner owns the model';
COMMENT ON POLICY owners ON pgdl.deployment_names IS 'the owner of a deployment name (or pgdl_admin) reads and changes it';
COMMENT ON POLICY grantees ON pgdl.deployment_names IS 'those a deployment was granted to (pgdl.grant_deployment) read its name';
COMMENT ON POLICY owners ON pgdl.deployment_history IS
	'the owner of a deployment (or pgdl_admin) reads and changes its history; an entry names a model of the name''s owner';
COMMENT ON POLICY grantees ON pgdl.deployment_history IS 'those who may read a deployment name read its history';
DO $$
DECLARE
	t regclass;
	cols text;
BEGIN
	FOREACH t IN ARRAY '{pgdl.deployment_names, pgdl.deployment_history}'::regclass[] LOOP
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> 'id';
		EXECUTE format('GRANT UPDATE (%s) ON %s TO PUBLIC', cols, t);
		EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgdl_admin', t);
	END LOOP;
END
$$;
-- Models and deployments share one namespace per owner (pgdl.names_free): a name is a role's model or
-- its deployment, never both, and a deployment means the model it serves.
CREATE OR REPLACE FUNCTION pgdl.model_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('model', $1, array_agg(c.id ORDER BY c.id), array_agg(c.owner ORDER BY c.id),
						 'Give the model''s id (pgdl.models.id), or SET ROLE to its owner.')
  FROM (SELECT m.id, m.owner FROM pgdl.models m WHERE m.name = $1
		UNION ALL
		SELECT pgdl.deployed_model(d.id), d.owner FROM pgdl.deployment_names d WHERE d.name = $1) c
 WHERE c.id IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.model_id(text) IS
	'the id of the model a name means to the current role (a model''s name, or a deployment''s: the model it serves): its own, else the only one of that name it may use; NULL if none';

-- A role's model and its deployment may not share a name: predict by name would have to choose.
-- Checked whichever is named second, as the writer sees the other table (its own rows).
CREATE FUNCTION pgdl.names_free() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	taken boolean;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' OR TG_OP NOT IN ('INSERT', 'UPDATE') THEN
		RAISE EXCEPTION 'pgdl.names_free() may only be fired BEFORE INSERT OR UPDATE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated';
	ELSIF TG_RELID = 'pgdl.models'::regclass THEN
		taken := NEW.name IS NOT NULL AND
				 EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.name = NEW.name AND d.owner = NEW.owner);
	ELSIF TG_RELID = 'pgdl.deployment_names'::regclass THEN
		taken := EXISTS (SELECT 1 FROM pgdl.models m WHERE m.name = NEW.name AND m.owner = NEW.owner);
	ELSE
		RAISE EXCEPTION 'pgdl.names_free() may only be fired by pgdl.models and deployment_names'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	IF taken THEN
		RAISE EXCEPTION '"%" is already the name of a % of role %',
			  CASE WHEN length(NEW.name) > 64 THEN left(NEW.name, 64) || '...' ELSE NEW.name END,
			  CASE WHEN TG_RELID = 'pgdl.models'::regclass THEN 'deployment' ELSE 'model' END, NEW.owner
			USING ERRCODE = 'duplicate_object',
				  DETAIL = 'A role''s models and deployments share one set of names, so that a name given to pgdl.predict means one model.',
				  HINT = 'Choose another name.';
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.names_free() IS
	'trigger of pgdl.models and pgdl.deployment_names: a role''s model and deployment may not share a name';
REVOKE EXECUTE ON FUNCTION pgdl.names_free() FROM PUBLIC;
-- after models_owner, which sets a run's model's owner (BEFORE triggers fire in name order)
CREATE TRIGGER models_same_name BEFORE INSERT OR UPDATE OF name, owner ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.names_free();
CREATE TRIGGER deployment_names_same_name BEFORE INSERT OR UPDATE OF name, owner ON pgdl.deployment_names
	FOR EACH ROW EXECUTE FUNCTION pgdl.names_free();

-- The rule of grants, for models and deployments alike: acl without role's item, then with USAGE
-- granted by owner when shared.  role is a role's name or "public".
CREATE FUNCTION pgdl.acl_with(acl aclitem[], role text, owner regrole, shared boolean) RETURNS aclitem[]
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	to_role oid;
BEGIN
	-- NULL would read as "no role": a revoke from every grantee
	IF role IS NULL OR shared IS NULL THEN
		RAISE EXCEPTION 'role and shared must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	to_role := CASE WHEN lower(role) = 'public' THEN 0 ELSE role::regrole::oid END;
	-- regrole takes any number as an oid, and 0 or '-' as no role: only "public" means PUBLIC
	IF lower(role) <> 'public' AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = to_role) THEN
		RAISE EXCEPTION 'role with OID % does not exist', to_role USING ERRCODE = 'undefined_object';
	END IF;
	RETURN nullif(ARRAY(SELECT i FROM unnest(acl) i
						 WHERE (SELECT a.grantee FROM aclexplode(ARRAY[i]) a) <> to_role) ||
				  CASE WHEN shared THEN ARRAY[makeaclitem(to_role, owner, 'USAGE', false)]
					   ELSE '{}'::aclitem[] END, '{}');
END
$$;
COMMENT ON FUNCTION pgdl.acl_with(aclitem[], text, regrole, boolean) IS
	'internal, the grants of models and deployments: acl without role''s USAGE, then with it (granted by owner) when shared';

CREATE OR REPLACE FUNCTION pgdl.set_model_grant(model bigint, model_label text, role text, shared boolean)
	RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	model_owner regrole;
	new_acl aclitem[];
BEGIN
	-- a 10 MB name is not echoed whole
	IF length(model_label) > 66 THEN
		model_label := left(model_label, 65) || '..."';
	END IF;
	SELECT m.owner INTO model_owner FROM pgdl.models m WHERE m.id = model;
	IF NOT FOUND THEN
		-- the role is checked first, as it was before a model is looked up
		PERFORM pgdl.acl_with(NULL, role, NULL, shared);
		RAISE EXCEPTION 'model % does not exist', model_label USING ERRCODE = 'undefined_object';
	END IF;
	new_acl := pgdl.acl_with((SELECT m.acl FROM pgdl.models m WHERE m.id = model), role, model_owner, shared);
	IF NOT pgdl.acts_as(model_owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model_label
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s, who may grant and revoke its use.', model_label, model_owner);
	END IF;
	UPDATE pgdl.models m SET acl = new_acl WHERE m.id = model;
END
$$;
DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer, text, boolean);
CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1, priority integer DEFAULT 0, rank_by text DEFAULT NULL,
		folds boolean DEFAULT false, deploy text DEFAULT NULL, time_limit interval DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer, text, boolean, text, interval) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); on a distributed packed table, workers_per_node workers train on each node over libpq; a job of the server''s queue, priority (-100 to 100) ordering the caller''s own queued jobs; rank_by (NULL: the validation loss; accuracy, f1, f1_weighted, precision, recall, roc_auc, average_precision, log_loss, mse, rmse, mae, r2) ranks the leaderboard and halving''s rungs; with folds, cross-validates: each configuration once per partition held out, ranked by the mean over its folds (pgdl.cross_validation); with deploy, deploys the winner under that name when it beats the model the name serves on the validation table (pgdl.deploy); with time_limit, no model starts an epoch once that much time has passed since the call (each trains one at least; those cut short end stopped); stores the models and returns the leaderboard';

-- Deployments: a name that answers every function taking a model by name (predict, predict_batch,
-- evaluate, metrics, explain, export_onnx, ...) with one model, its history, and rollback.
--
-- The tables are in 20_catalog.sql, their policies in 70_owners.sql.  A name belongs to the owner of
-- the models it serves; the model it serves is pgdl.deployed_model's (the newest entry not rolled back).
-- Every function here runs as the caller: row-level security decides what it may see and change.

-- One label for a name in messages: a 10 MB name is not echoed whole.
CREATE FUNCTION pgdl.deployment_label(name text) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT '"' || CASE WHEN length($1) > 64 THEN left($1, 64) || '...' ELSE $1 END || '"' $$;
COMMENT ON FUNCTION pgdl.deployment_label(text) IS
	'internal, a deployment name as messages quote it, cut short';

-- The caller's deployment of a name, locked until the transaction ends (one deploy or rollback of a
-- name at a time); its own, else the only one it acts as owner of.
CREATE FUNCTION pgdl.deployment_for_update(name text) RETURNS pgdl.deployment_names
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	found_id bigint;
	found_row pgdl.deployment_names;
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION 'name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	found_id := pgdl.resolve_name('deployment', $1, array_agg(d.id ORDER BY d.id), array_agg(d.owner ORDER BY d.id),
							'SET ROLE to the owner of the deployment you mean.')
		    FROM pgdl.deployment_names d WHERE d.name = $1 AND pgdl.acts_as(d.owner);
	SELECT * INTO found_row FROM pgdl.deployment_names d WHERE d.id = found_id FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'deployment % does not exist', pgdl.deployment_label(name)
			USING ERRCODE = 'undefined_object',
				  HINT = CASE WHEN EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.name = $1)
							  THEN 'Only its owner may change it.' ELSE 'Make one with pgdl.deploy().' END;
	END IF;
	RETURN found_row;
END
$$;
COMMENT ON FUNCTION pgdl.deployment_for_update(text) IS
	'internal, the deployment of a name the caller acts as owner of, locked FOR UPDATE; an error if none';

CREATE FUNCTION pgdl.deploy(name text, model bigint) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	m record;
	d pgdl.deployment_names;
BEGIN
	IF name IS NULL OR model IS NULL THEN
		RAISE EXCEPTION 'name and model must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF length(name) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'a deployment name must have 1 to 200 characters, not %', length(name)
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT x.id, x.owner, x.metrics INTO m FROM pgdl.models x WHERE x.id = $2;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', model USING ERRCODE = 'undefined_object';
	END IF;
	IF NOT pgdl.acts_as(m.owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s. A deployment serves its owner''s own models, so that granting it grants no more than its owner has.', model, m.owner),
				  HINT = format('Ask %s to deploy it.', m.owner);
	END IF;
	-- the same rule pgdl.predict applies: a model whose weights are not a trained model's serves nothing
	IF jsonb_typeof(m.metrics) = 'object' AND m.metrics->'diverged' = 'true' THEN
		RAISE EXCEPTION 'model % diverged in epoch %', model, m.metrics->>'epoch'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Its loss or weights became NaN or infinite in that epoch and training stopped: its weights are not those of a trained model.';
	END IF;
	SELECT * INTO d FROM pgdl.deployment_names x WHERE x.name = $1 AND x.owner = m.owner FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO pgdl.deployment_names (name, owner) VALUES ($1, m.owner) RETURNING * INTO d;
	ELSIF pgdl.deployed_model(d.id) = model THEN
		RAISE NOTICE 'model % is already deployed as %', model, pgdl.deployment_label(name);
		RETURN model;
	END IF;
	INSERT INTO pgdl.deployment_history (deployment, model, owner) VALUES (d.id, model, m.owner);
	RETURN model;
END
$$;
CREATE FUNCTION pgdl.deploy(name text, model text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	id bigint;
BEGIN
	IF model IS NULL THEN
		RAISE EXCEPTION 'name and model must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	id := pgdl.model_id(model);
	IF id IS NULL THEN
		RAISE EXCEPTION 'model % does not exist', pgdl.deployment_label(model) USING ERRCODE = 'undefined_object';
	END IF;
	RETURN pgdl.deploy(name, id);
END
$$;
COMMENT ON FUNCTION pgdl.deploy(text, bigint) IS
	'makes a name answer every function that takes a model by name with stored model (by id), the owner''s; keeps the name''s history; returns the model''s id';
COMMENT ON FUNCTION pgdl.deploy(text, text) IS
	'makes a name answer every function that takes a model by name with stored model (by name, or the model another deployment serves); returns the model''s id';

CREATE FUNCTION pgdl.rollback(name text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	d pgdl.deployment_names := pgdl.deployment_for_update(name);
	current_entry bigint := pgdl.deployed_entry(d.id);
	previous_model bigint;
BEGIN
	SELECT h.model INTO previous_model FROM pgdl.deployment_history h
	 WHERE h.deployment = d.id AND h.rolled_back_at IS NULL AND h.id < current_entry ORDER BY h.id DESC LIMIT 1;
	IF previous_model IS NULL THEN
		RAISE EXCEPTION 'deployment % has no earlier model to go back to', pgdl.deployment_label(name)
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Every model it served before the one it serves now was rolled back, or it served no other.',
				  HINT = 'Deploy another model with pgdl.deploy(), or remove the name with pgdl.drop_deployment().';
	END IF;
	UPDATE pgdl.deployment_history h
	   SET rolled_back_by = quote_ident(current_user)::regrole, rolled_back_at = now()
	 WHERE h.id = current_entry;
	RETURN previous_model;
END
$$;
COMMENT ON FUNCTION pgdl.rollback(text) IS
	'makes a deployment serve again the model it served before the one it serves now (which is marked rolled back in its history); returns that model''s id';

CREATE FUNCTION pgdl.drop_deployment(name text) RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	PERFORM pgdl.delete_rows('pgdl.deployment_names', ARRAY[(pgdl.deployment_for_update(name)).id]);
END
$$;
COMMENT ON FUNCTION pgdl.drop_deployment(text) IS
	'removes a deployment name and its history (its models stay, and may be deleted then)';

CREATE FUNCTION pgdl.set_deployment_grant(name text, role text, shared boolean) RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	d pgdl.deployment_names := pgdl.deployment_for_update(name);
BEGIN
	UPDATE pgdl.deployment_names x SET acl = pgdl.acl_with(d.acl, role, d.owner, shared) WHERE x.id = d.id;
END
$$;
COMMENT ON FUNCTION pgdl.set_deployment_grant(text, text, boolean) IS
	'internal, pgdl.grant_deployment and pgdl.revoke_deployment: adds or removes a role''s USAGE in a deployment''s acl';
CREATE FUNCTION pgdl.grant_deployment(name text, role text) RETURNS void
	LANGUAGE sql VOLATILE AS
$$ SELECT pgdl.set_deployment_grant($1, $2, true) $$;
CREATE FUNCTION pgdl.revoke_deployment(name text, role text) RETURNS void
	LANGUAGE sql VOLATILE AS
$$ SELECT pgdl.set_deployment_grant($1, $2, false) $$;
COMMENT ON FUNCTION pgdl.grant_deployment(text, text) IS
	'lets a role (or PUBLIC) use a deployment: every function that takes a model by name, with the model it serves at the time; only its owner grants';
COMMENT ON FUNCTION pgdl.revoke_deployment(text, text) IS
	'takes back from a role (or PUBLIC) the use of a deployment that pgdl.grant_deployment gave';

-- Each name's history, oldest first: what it served, who deployed and rolled back what, and when; the
-- model's metrics (of its last or restored epoch, with the validation set's) where the reader may see it.
CREATE VIEW pgdl.deployments WITH (security_invoker = true) AS
	SELECT d.name, d.owner,
		   row_number() OVER (PARTITION BY d.id ORDER BY h.id)::integer AS version,
		   h.model, m.name AS model_name, h.deployed_by, h.deployed_at, h.rolled_back_by, h.rolled_back_at,
		   h.id IS NOT DISTINCT FROM pgdl.deployed_entry(d.id) AS active,
		   m.metrics
	  FROM pgdl.deployment_names d
	  JOIN pgdl.deployment_history h ON h.deployment = d.id
	  LEFT JOIN pgdl.models m ON m.id = h.model;
COMMENT ON VIEW pgdl.deployments IS
	'every deployment name''s history, a row per model it served (version 1 first): who deployed it and when, whether it was rolled back, whether it serves now (active), the model''s metrics';
GRANT SELECT ON pgdl.deployments TO PUBLIC;
-- ---- explanations ----
-- pgdl.explain: a row per feature of the model's input: x's value, the baseline's, and the feature's share of
-- f(x) - f(baseline), f being what pgdl.predict answers (the class's probability, or the output)

CREATE FUNCTION pgdl.explain(model bigint, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model text, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model bytea, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model bigint, x double precision[], categories text[], sequences jsonb DEFAULT NULL,
							 target_class text DEFAULT NULL, baseline double precision[] DEFAULT NULL,
							 steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_categories'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model text, x double precision[], categories text[], sequences jsonb DEFAULT NULL,
							 target_class text DEFAULT NULL, baseline double precision[] DEFAULT NULL,
							 steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_categories'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;


COMMENT ON FUNCTION pgdl.explain(bigint, double precision[], text, double precision[], integer) IS
	'integrated gradients of stored model (by id) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(text, double precision[], text, double precision[], integer) IS
	'integrated gradients of stored model (by name) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(bytea, double precision[], text, double precision[], integer) IS
	'integrated gradients of a model blob (features not normalized, zeros as the default baseline) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(bigint, double precision[], text[], jsonb, text, double precision[], integer) IS
	'integrated gradients of stored model (by id) at raw numeric features, categorical values and token sequences: embedded ids attributed in their embedding space, one row per id';
COMMENT ON FUNCTION pgdl.explain(text, double precision[], text[], jsonb, text, double precision[], integer) IS
	'integrated gradients of stored model (by name) at raw numeric features, categorical values and token sequences: embedded ids attributed in their embedding space, one row per id';

-- pgdl.feature_importance: permutation importance, the worsening of a metric when one feature is shuffled
-- across the rows (larger: more important), mean and standard deviation over seeded repeats

CREATE FUNCTION pgdl.feature_importance(model bigint, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model text, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model bytea, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model bigint, source text, features text, label text,
										metric text DEFAULT NULL, repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model text, source text, features text, label text,
										metric text DEFAULT NULL, repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;


COMMENT ON FUNCTION pgdl.feature_importance(bigint, regclass, text, integer, bigint) IS
	'permutation importance of stored model (by id) over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(text, regclass, text, integer, bigint) IS
	'permutation importance of stored model (by name) over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(bytea, regclass, text, integer, bigint) IS
	'permutation importance of a model blob over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(bigint, text, text, text, text, integer, bigint) IS
	'permutation importance of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.feature_importance(text, text, text, text, text, integer, bigint) IS
	'permutation importance of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';

-- ---- Bayesian search: pgdl.tpe_search ----

CREATE FUNCTION pgdl.tpe_search(source regclass, architectures text[], space jsonb, trials integer DEFAULT 16,
		batch integer DEFAULT 4, epochs integer DEFAULT 10, validation regclass DEFAULT NULL,
		rank_by text DEFAULT NULL, seed bigint DEFAULT 42, workers integer DEFAULT NULL,
		set_name text DEFAULT NULL, name_prefix text DEFAULT NULL, priority integer DEFAULT 0,
		deploy text DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean, batch integer, score double precision)
	AS 'MODULE_PATHNAME', 'pgdl_tpe_search' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.tpe_search(regclass, text[], jsonb, integer, integer, integer, regclass, text, bigint, integer, text, text, integer, text) IS
	'Bayesian search (TPE): trains trials configurations of a search space (as pgdl.random_search takes it) in batches of batch, each batch the configuration set set_name/N trained by pgdl.fit_multiple; the first batch is drawn from the space, each later one proposed by the Tree-structured Parzen Estimator from the rank_by scores of the batches before it, so a seed gives the same configurations and models whatever the workers; deploy as pgdl.fit_multiple''s; returns the leaderboard of every batch''s models with their batch and score';
-- ---- automl: pgdl.automl, pgdl.retrain, pgdl.deploy_if_better, pgdl.rank_metrics ----
-- AutoML: from a raw table to a deployed model in one call (pgdl.automl), and a deployed model refitted on
-- new rows and redeployed only when it does better (pgdl.retrain, what a pg_cron job runs nightly).
--
-- Orchestration only: pgdl.split, pgdl.pack, pgdl.random_search, pgdl.explain_fit_multiple,
-- pgdl.fit_multiple and pgdl.deploy_if_better do the work, each with its own checks, as the caller.
-- See docs/reference/automl.md.

CREATE FUNCTION pgdl.rank_metrics() RETURNS TABLE (metric text, higher_is_better boolean, task text)
	AS 'MODULE_PATHNAME', 'pgdl_rank_metrics' LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 13;
COMMENT ON FUNCTION pgdl.rank_metrics() IS
	'the validation metrics that rank models (fit_multiple''s rank_by, automl''s metric, deploy_if_better''s metric): name, direction, and the task each suits (any, classification, regression)';

CREATE FUNCTION pgdl.deploy_if_better(name text, model bigint, validation regclass, metric text DEFAULT NULL)
	RETURNS TABLE (deployed boolean, previous bigint, metric text, score double precision,
				   previous_score double precision, candidate bigint)
	AS 'MODULE_PATHNAME', 'pgdl_deploy_if_better_sql' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.deploy_if_better(text, bigint, regclass, text) IS
	'deploys a model under a name only when it beats the model the name serves, both scored now on a validation packed table by metric (NULL: the validation loss), as fit_multiple''s deploy does; returns whether the name serves it, the model served before and both scores';

-- The columns of a source and what automl makes of each: 'numeric' (a feature, standardized), 'array'
-- (one array column of numbers, the same length in every row: the features; 'image' when that length is
-- a square, side >= 4), 'categorical' (an embedding), 'sequence' (token arrays: a GRU or attention), or
-- 'skipped' with the reason.  What pack cannot take yet is skipped, never guessed.
CREATE FUNCTION pgdl.automl_columns(source regclass, label text, features text DEFAULT NULL)
RETURNS TABLE (column_name text, role text, detail text)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	col record;
	wanted text[];
	n bigint;
	d bigint;
	lo integer;
	hi integer;
	side integer;
	have_array boolean := false;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = label
					  AND a.attnum > 0 AND NOT a.attisdropped) THEN
		RAISE EXCEPTION USING ERRCODE = '42703',
			MESSAGE = pg_catalog.format('column "%s" of label does not exist in %s', pg_catalog.left(label, 64), source);
	END IF;
	IF features IS NOT NULL THEN
		SELECT pg_catalog.array_agg((pg_catalog.parse_ident(pg_catalog.btrim(f)))[1] ORDER BY o) INTO wanted
		  FROM pg_catalog.unnest(pg_catalog.string_to_array(features, ',')) WITH ORDINALITY AS u(f, o);
		IF wanted IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'features names no column',
				HINT = 'Give column names separated by commas, or NULL for every column but the label.';
		END IF;
		SELECT w INTO column_name FROM pg_catalog.unnest(wanted) w
		 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = w
							  AND a.attnum > 0 AND NOT a.attisdropped) LIMIT 1;
		IF FOUND THEN
			RAISE EXCEPTION USING ERRCODE = '42703',
				MESSAGE = pg_catalog.format('column "%s" of features does not exist in %s', pg_catalog.left(column_name, 64), source);
		END IF;
	END IF;
	EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', source) INTO n;
	FOR col IN
		SELECT a.attname::text AS name, t.typname::text AS typ, et.typname::text AS elem
		  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		  LEFT JOIN pg_catalog.pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
		 WHERE a.attrelid = source AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> label
		   AND (wanted IS NULL OR a.attname = ANY (wanted))
		 ORDER BY CASE WHEN wanted IS NULL THEN a.attnum ELSE pg_catalog.array_position(wanted, a.attname::text) END
	LOOP
		column_name := col.name;
		role := 'skipped';
		detail := NULL;
		IF col.typ IN ('int2', 'int4', 'int8', 'text', 'varchar', 'bpchar') THEN
			EXECUTE pg_catalog.format('SELECT pg_catalog.count(DISTINCT %I) FROM %s', col.name, source) INTO d;
			IF d = n AND n > 20 AND features IS NULL THEN
				detail := 'every value is distinct: an identifier';
			ELSIF col.typ IN ('int2', 'int4', 'int8') AND d > 10 THEN
				role := 'numeric';
			ELSIF d <= 1000 THEN
				role := 'categorical';
				detail := d || ' values';
			ELSE
				detail := d || ' distinct values: too many for a category';
			END IF;
		ELSIF col.typ IN ('float4', 'float8', 'numeric') THEN
			role := 'numeric';
		ELSIF col.elem IN ('int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'text', 'varchar', 'bpchar') THEN
			EXECUTE pg_catalog.format('SELECT pg_catalog.min(pg_catalog.cardinality(%1$I)), pg_catalog.max(pg_catalog.cardinality(%1$I)) FROM %2$s',
									  col.name, source) INTO lo, hi;
			IF col.elem IN ('text', 'varchar', 'bpchar') OR (col.elem IN ('int2', 'int4', 'int8') AND lo IS DISTINCT FROM hi) THEN
				role := 'sequence';
				detail := 'up to ' || hi || ' tokens';
			ELSIF lo IS DISTINCT FROM hi OR lo = 0 THEN
				detail := 'arrays of numbers of different lengths';
			ELSIF have_array THEN
				detail := 'pack takes one array of features';
			ELSE
				have_array := true;
				side := pg_catalog.round(pg_catalog.sqrt(lo));
				role := CASE WHEN side >= 4 AND side * side = lo THEN 'image' ELSE 'array' END;
				detail := CASE WHEN role = 'image' THEN side || 'x' || side ELSE lo || ' values' END;
			END IF;
		ELSE
			detail := 'type ' || col.typ || ' is not a feature pack takes (cast it, or leave it out)';
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_columns(regclass, text, text) IS
	'internal to pgdl.automl: what it makes of each column of a source (numeric, array, image, categorical, sequence, or skipped and why)';

-- The architectures automl searches for a packed table, fitted to its shape: MLPs of a few widths and
-- depths on any input; small CNNs on image-shaped features; an embedding per categorical column and a
-- GRU or a self-attention block per sequence column, joined to the numeric features by concat.
CREATE FUNCTION pgdl.automl_architectures(packed regclass, image_side integer DEFAULT NULL)
RETURNS TABLE (kind text, spec jsonb)
	LANGUAGE plpgsql STABLE PARALLEL SAFE AS
$$
DECLARE
	ds record;
	n_numeric integer;
	branches jsonb := '[]';
	names jsonb := '[]';
	voc record;
	head jsonb;
	out_layer jsonb;
	w integer;
	depth integer;
	seq_kind text;
BEGIN
	SELECT d.n_features, d.task, COALESCE(pg_catalog.array_length(d.classes, 1), d.n_targets) AS outputs
	  INTO ds FROM pgdl.datasets d WHERE d.packed = automl_architectures.packed;
	out_layer := pg_catalog.jsonb_build_object('type', 'dense', 'units', ds.outputs);
	head := CASE WHEN ds.task = 'regression' THEN '{"loss": "mse"}' ELSE '{"loss": "cross_entropy"}' END;
	n_numeric := ds.n_features - COALESCE((SELECT pg_catalog.sum(COALESCE(v.length + 1, 1))
		FROM (SELECT DISTINCT ON (x.position) x.position, x.length FROM pgdl.vocabulary x
			   WHERE x.packed = automl_architectures.packed) v), 0)::integer;
	IF n_numeric = ds.n_features THEN
		FOR w, depth IN SELECT * FROM (VALUES (64, 1), (128, 1), (256, 1), (64, 2), (128, 2), (256, 2), (128, 3)) v LOOP
			kind := 'mlp';
			spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(ds.n_features),
				'layers', pgdl.automl_dense_stack(w, depth, depth > 1) || out_layer);
			RETURN NEXT;
		END LOOP;
		IF image_side IS NOT NULL THEN
			FOR w, depth IN SELECT * FROM (VALUES (16, 1), (16, 2), (32, 2)) v LOOP
				kind := 'cnn';
				spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(1, image_side, image_side),
					'layers', pgdl.automl_conv_stack(w, depth, image_side) || out_layer);
				RETURN NEXT;
			END LOOP;
		END IF;
		RETURN;
	END IF;
	-- the graph form: a slice per input kind (pack's layout: numeric, categorical ids, each sequence's ids
	-- and length), each made a flat vector, concatenated
	IF n_numeric > 0 THEN
		branches := pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('type', 'slice', 'name', 'numeric',
			'inputs', '["input"]'::jsonb, 'start', 0, 'length', n_numeric));
		names := '["numeric"]';
	END IF;
	FOREACH seq_kind IN ARRAY ARRAY['gru', 'attention'] LOOP
		FOR w, depth IN SELECT * FROM (VALUES (64, 1), (128, 2)) v LOOP
			kind := CASE WHEN EXISTS (SELECT FROM pgdl.vocabulary x WHERE x.packed = automl_architectures.packed AND x.length IS NOT NULL)
						 THEN seq_kind ELSE 'embedding' END;
			CONTINUE WHEN kind = 'embedding' AND seq_kind = 'attention';
			spec := branches;
			FOR voc IN SELECT x.position, x.feature, x.length, pg_catalog.max(x.id) + 1 AS vocab FROM pgdl.vocabulary x
						WHERE x.packed = automl_architectures.packed GROUP BY x.position, x.feature, x.length ORDER BY x.position LOOP
				spec := spec || pgdl.automl_input_branch('in' || voc.position, voc.feature - 1, voc.length, voc.vocab::integer, seq_kind);
			END LOOP;
			spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(ds.n_features),
				'layers', spec || pg_catalog.jsonb_build_object('type', 'concat', 'inputs', names ||
					(SELECT pg_catalog.jsonb_agg('in' || p ORDER BY p) FROM (SELECT DISTINCT x.position AS p FROM pgdl.vocabulary x
						WHERE x.packed = automl_architectures.packed) q))
					|| pgdl.automl_dense_stack(w, depth, depth > 1) || out_layer);
			RETURN NEXT;
		END LOOP;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_architectures(regclass, integer) IS
	'internal to pgdl.automl: the architectures it searches for a packed table (MLPs; CNNs on image-shaped features; embeddings, GRUs and attention on categorical and sequence columns), by kind';

CREATE FUNCTION pgdl.automl_dense_stack(width integer, depth integer, dropout boolean) RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT pg_catalog.jsonb_agg(l ORDER BY i, j) FROM pg_catalog.generate_series(1, LEAST(depth, 8)) i,
		LATERAL (VALUES (1, pg_catalog.jsonb_build_object('type', 'dense', 'units', GREATEST(width >> (i - 1), 16))),
						(2, '{"type": "relu"}'::jsonb),
						(3, CASE WHEN dropout THEN '{"type": "dropout", "rate": 0.2}'::jsonb END)) v(j, l)
	 WHERE l IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.automl_dense_stack(integer, integer, boolean) IS
	'internal to pgdl.automl: depth dense layers (width, halved each layer), ReLU, optional dropout 0.2';

CREATE FUNCTION pgdl.automl_conv_stack(filters integer, blocks integer, side integer) RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT pg_catalog.jsonb_agg(l ORDER BY i, j) || '[{"type": "flatten"}, {"type": "dense", "units": 64}, {"type": "relu"}]'::jsonb
	  FROM pg_catalog.generate_series(1, LEAST(blocks, 4)) i,
		LATERAL (VALUES (1, pg_catalog.jsonb_build_object('type', 'conv2d', 'filters', filters << (i - 1), 'kernel', 3, 'padding', 1)),
						(2, '{"type": "relu"}'::jsonb),
						(3, CASE WHEN side >> i >= 2 THEN '{"type": "maxpool2d", "size": 2}'::jsonb END)) v(j, l)
	 WHERE l IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.automl_conv_stack(integer, integer, integer) IS
	'internal to pgdl.automl: blocks of 3x3 convolution (filters, doubled each block), ReLU and 2x2 max pooling while the image allows, then a dense layer of 64';

-- One categorical column (an embedding of its id) or sequence column (an embedding of its ids read by a
-- GRU, or by self-attention with learned positions and the mean over the steps), named name.
CREATE FUNCTION pgdl.automl_input_branch(name text, start integer, seq_length integer, vocab integer, seq_kind text)
RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT CASE
		WHEN seq_length IS NULL THEN pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', 1),
			pg_catalog.jsonb_build_object('type', 'embedding', 'vocab', vocab, 'dim', LEAST(16, 2 + pg_catalog.ceil(pg_catalog.sqrt(vocab))::integer)),
			pg_catalog.jsonb_build_object('type', 'flatten', 'name', name))
		WHEN seq_kind = 'gru' THEN pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', seq_length),
			pg_catalog.jsonb_build_object('type', 'embedding', 'vocab', vocab, 'dim', 16),
			pg_catalog.jsonb_build_object('type', 'gru', 'units', 32, 'name', name))
		ELSE pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', seq_length),
			pg_catalog.jsonb_build_object('type', 'embedding', 'name', name || '_tokens', 'vocab', vocab, 'dim', 16, 'positions', true),
			pg_catalog.jsonb_build_object('type', 'attention', 'name', name || '_attended', 'heads', 2),
			pg_catalog.jsonb_build_object('type', 'add', 'inputs', pg_catalog.jsonb_build_array(name || '_tokens', name || '_attended')),
			'{"type": "layernorm"}'::jsonb,
			pg_catalog.jsonb_build_object('type', 'global_avgpool', 'name', name))
	END
$$;
COMMENT ON FUNCTION pgdl.automl_input_branch(text, integer, integer, integer, text) IS
	'internal to pgdl.automl: the layers that make one categorical or sequence column a named flat vector';

-- The round r of a set named <prefix>_round<r>, else NULL.
CREATE FUNCTION pgdl.automl_round_of(prefix text, set_name text) RETURNS integer
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS
$$
	SELECT CASE WHEN pg_catalog.starts_with(set_name, prefix || '_round')
					 AND pg_catalog.substr(set_name, pg_catalog.length(prefix) + 7) ~ '^[0-9]{1,9}$'
				THEN pg_catalog.substr(set_name, pg_catalog.length(prefix) + 7)::integer END
$$;
COMMENT ON FUNCTION pgdl.automl_round_of(text, text) IS
	'internal to pgdl.automl: the round r of a configuration set named <prefix>_round<r>, else NULL';

-- A prefix for automl's and retrain's tables that no relation of the current schema uses yet, nor a
-- configuration set of the caller's (<prefix>_pool, <prefix>_round<r>): base, else base_2, base_3, ...  Its tables are <prefix>_raw_train, <prefix>_raw_validation (pgdl.split's, dropped
-- once packed), <prefix>_train and <prefix>_validation (packed, with partitions _p0, ...).
CREATE FUNCTION pgdl.automl_prefix(base text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	candidate text;
	k integer := 1;
BEGIN
	base := pg_catalog.left(pg_catalog.regexp_replace(pg_catalog.lower(base), '[^a-z0-9_]+', '_', 'g'), 40);
	LOOP
		candidate := base || CASE WHEN k > 1 THEN '_' || k ELSE '' END;
		EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_class c
							   WHERE c.relnamespace = pg_catalog.current_schema()::regnamespace
								 AND c.relname IN (candidate || '_raw_train', candidate || '_raw_validation',
												   candidate || '_train', candidate || '_validation', candidate || '_leaderboard',
												   candidate || '_train_p0', candidate || '_validation_p0'))
				  AND NOT EXISTS (SELECT FROM pgdl.configs c WHERE c.owner = pg_catalog.current_user()::regrole
									AND (c.set_name = candidate || '_pool' OR pgdl.automl_round_of(candidate, c.set_name) IS NOT NULL));
		k := k + 1;
	END LOOP;
	RETURN candidate;
END
$$;
COMMENT ON FUNCTION pgdl.automl_prefix(text) IS
	'internal to pgdl.automl and pgdl.retrain: a prefix for their tables that no relation of the current schema uses';

-- Split a raw table, pack the training part (with the preprocessing automl chose from the column types, or
-- a reference's) and the validation part with its preprocessing; the raw copies are dropped.  Returns the
-- packed training table's rows.
CREATE FUNCTION pgdl.automl_prepare(source regclass, label text, prefix text, validation real, seed bigint,
		workers integer, classification boolean, features text, categorical text DEFAULT NULL,
		sequence text DEFAULT NULL, reference regclass DEFAULT NULL)
RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	n bigint;
	rows_per_buffer integer;
	train regclass;
BEGIN
	PERFORM pgdl.split(source, pg_catalog.quote_ident(prefix || '_raw'), validation => validation, seed => seed,
					   stratify => CASE WHEN classification THEN label END);
	EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %I', prefix || '_raw_train') INTO n;
	rows_per_buffer := CASE WHEN n < 4000 THEN 32 ELSE 128 END;
	IF reference IS NOT NULL THEN
		-- the reference's columns, classes, normalization and vocabularies
		PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_train')::regclass, features, label, pg_catalog.quote_ident(prefix || '_train'),
						  buffer_rows => rows_per_buffer, partitions => 1, seed => seed, nulls => 'skip',
						  reference => reference);
	ELSE
		-- Preprocessing chosen from the column types: numbers standardized, text and few-valued integers as
		-- vocabularies, token arrays as sequences, rows with a NULL number skipped, a regression's target
		-- standardized.  Where pack learns imputation, min-max and robust scaling and one-hot, this is
		-- the one place to choose them.
		PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_train')::regclass, features, label, pg_catalog.quote_ident(prefix || '_train'),
						  buffer_rows => rows_per_buffer,
						  partitions => GREATEST(1, LEAST(workers, (n + rows_per_buffer - 1) / rows_per_buffer))::integer,
						  seed => seed, standardize => true, nulls => 'skip', categorical => categorical,
						  sequence => sequence, standardize_target => NOT classification);
	END IF;
	train := pg_catalog.quote_ident(prefix || '_train')::regclass;
	PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_validation')::regclass, features, label, pg_catalog.quote_ident(prefix || '_validation'),
					  buffer_rows => 256, partitions => 1, seed => seed, nulls => 'skip', reference => train);
	EXECUTE pg_catalog.format('DROP TABLE %I, %I', prefix || '_raw_train', prefix || '_raw_validation');
	RETURN (SELECT d.n_rows FROM pgdl.datasets d WHERE d.packed = train);
END
$$;
COMMENT ON FUNCTION pgdl.automl_prepare(regclass, text, text, real, bigint, integer, boolean, text, text, text, regclass) IS
	'internal to pgdl.automl and pgdl.retrain: a seeded split of the raw table, the training part packed with the preprocessing chosen from the column types (or a reference''s), the validation part with its preprocessing';

-- One round's configurations: the next k of the pool (pgdl.random_search's draws, in order) into the round's
-- set, as many as fit in `allowed` seconds by pgdl.explain_fit_multiple's prediction (the calibrated
-- profile's, or pgdl.cpu_gflops's) times `factor`, what earlier rounds measured against their predictions.
-- Fewer configurations first, then fewer epochs; k = 0 when not even one configuration for 3 epochs fits.
-- The strategy is fit_multiple's: a TPE strategy there proposes from the results of the set's earlier
-- batches, and this is where automl would hand it the rounds before.
CREATE FUNCTION pgdl.automl_round(train regclass, valid regclass, pool text, round_set text, used integer,
		INOUT k integer, INOUT epochs integer, workers integer, strategy text, factor double precision,
		allowed double precision, OUT predicted double precision)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
BEGIN
	INSERT INTO pgdl.configs (set_name, architecture, config)
	SELECT round_set, c.architecture, c.config FROM pgdl.configs c
	 WHERE c.set_name = pool AND c.owner = pg_catalog.current_user()::regrole ORDER BY c.id OFFSET used LIMIT k;
	LOOP
		SELECT e.predicted_seconds INTO predicted
		  FROM pgdl.explain_fit_multiple(train, round_set, epochs, valid, workers, strategy) e WHERE e.action = 'total';
		EXIT WHEN predicted * factor <= allowed;
		IF k > 1 THEN
			k := k / 2;
			DELETE FROM pgdl.configs c WHERE c.set_name = round_set AND c.owner = pg_catalog.current_user()::regrole
			   AND c.id > (SELECT x.id FROM pgdl.configs x WHERE x.set_name = round_set
							  AND x.owner = pg_catalog.current_user()::regrole ORDER BY x.id OFFSET k - 1 LIMIT 1);
		ELSIF epochs > 3 THEN
			epochs := GREATEST(3, epochs / 2);
		ELSE
			k := 0;
			DELETE FROM pgdl.configs c WHERE c.set_name = round_set AND c.owner = pg_catalog.current_user()::regrole;
			RETURN;
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_round(regclass, regclass, text, text, integer, integer, integer, integer, text, double precision, double precision) IS
	'internal to pgdl.automl: a round''s configurations from the pool, shrunk (fewer configurations, then fewer epochs) until the predicted time times the measured factor fits the time allowed';

-- The search: rounds of fit_multiple under the budget until it is spent or the pool is.  The first round
-- may take 40% of what is left (nothing is measured yet), later ones 90%; each measured round updates the
-- factor between the predicted and the measured time (the largest of the last two: a round that took
-- longer than planned makes the next ones smaller).  The plan is a prediction; the deadline is kept by
-- fit_multiple's time_limit, after which no model of the round starts an epoch.  Returns how many models
-- it trained: each is named <prefix>_<configuration id>, of the set <prefix>_round<r>.
CREATE FUNCTION pgdl.automl_search(train regclass, valid regclass, prefix text, deadline timestamptz,
		workers integer, strategy text, metric text)
RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	pool text := prefix || '_pool';
	epochs integer := pgdl.automl_epochs(train);
	pool_n integer;
	used integer := 0;
	r integer := 0;
	next_k integer := GREATEST(4, 2 * workers);
	k integer;
	e integer;
	predicted double precision;
	factor double precision := 1;
	last_factor double precision;
	allowed double precision;
	started timestamptz;
	measured double precision;
	trained integer := 0;
BEGIN
	IF deadline > pg_catalog.clock_timestamp() + interval '1 day' THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'deadline must be within a day';
	END IF;
	SELECT pg_catalog.count(*) INTO pool_n FROM pgdl.configs c
	 WHERE c.set_name = pool AND c.owner = pg_catalog.current_user()::regrole;
	LOOP
		allowed := EXTRACT(epoch FROM deadline - pg_catalog.clock_timestamp()) * CASE WHEN r = 0 THEN 0.4 ELSE 0.9 END;
		EXIT WHEN allowed <= 0.2 OR used >= pool_n;
		r := r + 1;
		k := LEAST(next_k, pool_n - used);
		e := epochs;
		SELECT x.k, x.epochs, x.predicted INTO k, e, predicted
		  FROM pgdl.automl_round(train, valid, pool, prefix || '_round' || r, used, k, e, workers, strategy, factor, allowed) x;
		EXIT WHEN k = 0;
		started := pg_catalog.clock_timestamp();
		trained := trained + (SELECT pg_catalog.count(*) FROM pgdl.fit_multiple(train, prefix || '_round' || r, e, valid,
								workers, strategy, name_prefix => prefix || '_', rank_by => metric,
								time_limit => GREATEST(deadline - pg_catalog.clock_timestamp(), interval '1 millisecond')) f);
		measured := EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started);
		RAISE DEBUG 'automl round %: % configurations, % epochs, predicted % s x %, took % s', r, k, e, predicted, factor, measured;
		factor := GREATEST(measured / GREATEST(predicted, 1e-6), COALESCE(last_factor, 0));
		last_factor := measured / GREATEST(predicted, 1e-6);
		used := used + k;
		-- a round well within what was allowed: the next one may hold more configurations
		next_k := CASE WHEN measured < allowed / 4 THEN LEAST(2 * next_k, 32) ELSE next_k END;
	END LOOP;
	RETURN trained;
END
$$;
COMMENT ON FUNCTION pgdl.automl_search(regclass, regclass, text, timestamptz, integer, text, text) IS
	'internal to pgdl.automl: rounds of pgdl.fit_multiple over the configuration pool, each planned with pgdl.explain_fit_multiple and the measured factor to end before the deadline';

-- Epochs for a packed table: about 1,500 steps of 32 examples, 10 to 200.
CREATE FUNCTION pgdl.automl_epochs(train regclass) RETURNS integer
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
	SELECT LEAST(200, GREATEST(10, pg_catalog.ceil(1500.0 / pg_catalog.ceil(d.n_rows / 32.0))))::integer
	  FROM pgdl.datasets d WHERE d.packed = train
$$;
COMMENT ON FUNCTION pgdl.automl_epochs(regclass) IS
	'internal to pgdl.automl: the epochs its configurations train for on a packed table (about 1,500 steps of 32 examples, 10 to 200)';

-- The architectures for a packed table stored under names of their kind and spec (reused when the caller
-- has them already), and a pool of configurations drawn from them and a space of training settings.
CREATE FUNCTION pgdl.automl_pool(train regclass, pool text, image_side integer, seed bigint)
RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	a record;
	names text[] := '{}';
	arch text;
	rows_per_buffer integer;
BEGIN
	FOR a IN SELECT * FROM pgdl.automl_architectures(train, image_side) LOOP
		arch := 'automl_' || a.kind || '_' || pg_catalog.left(pg_catalog.md5(a.spec::text), 12);
		IF NOT EXISTS (SELECT FROM pgdl.architectures x WHERE x.name = arch AND x.owner = pg_catalog.current_user()::regrole) THEN
			PERFORM pgdl.add_architecture(arch, a.spec);
		END IF;
		names := names || arch;
	END LOOP;
	SELECT d.buffer_rows INTO rows_per_buffer FROM pgdl.datasets d WHERE d.packed = train;
	RETURN pgdl.random_search(pool, names, pg_catalog.jsonb_build_object(
		'optimizer', 'adam', 'lr', '{"log_uniform": [0.0003, 0.01]}'::jsonb,
		'batch_size', pg_catalog.jsonb_build_object('choice', (SELECT pg_catalog.jsonb_agg(b) FROM pg_catalog.unnest(ARRAY[16, 32, 64, 128]) b
																 WHERE b <= rows_per_buffer AND b * 8 >= rows_per_buffer)),
		'weight_decay', '{"choice": [0, 0.0001, 0.001]}'::jsonb,
		'schedule', '{"choice": ["none", "cosine"]}'::jsonb,
		'patience', GREATEST(5, pgdl.automl_epochs(train) / 5), 'seed', seed), 500, seed);
END
$$;
COMMENT ON FUNCTION pgdl.automl_pool(regclass, text, integer, bigint) IS
	'internal to pgdl.automl: its architectures stored, and a pool of 500 configurations drawn from them and a space of Adam settings';

-- A procedure, not a function: pgdl.fit_multiple's workers are sessions of their own, which see only
-- committed tables, so the packed tables are committed before the search, and each round after it.
CREATE PROCEDURE pgdl.automl(source regclass, label text, features text DEFAULT NULL,
		budget interval DEFAULT '60 seconds', name text DEFAULT NULL, metric text DEFAULT NULL,
		seed bigint DEFAULT 0, validation real DEFAULT 0.2, workers integer DEFAULT NULL,
		strategy text DEFAULT 'asha', output_prefix text DEFAULT NULL,
		INOUT leaderboard regclass DEFAULT NULL, INOUT model bigint DEFAULT NULL, INOUT deployed boolean DEFAULT NULL)
	LANGUAGE plpgsql AS
$$
DECLARE
	started timestamptz := pg_catalog.clock_timestamp();
	cols record;
	plan record;
	prefix text;
	trained integer;
BEGIN
	SELECT * INTO plan FROM pgdl.automl_check(source, label, budget, name, seed, validation, workers, strategy, metric);
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'numeric') AS numerics,
		   pg_catalog.min(pg_catalog.quote_ident(c.column_name)) FILTER (WHERE c.role IN ('array', 'image')) AS array_col,
		   pg_catalog.max(pg_catalog.split_part(c.detail, 'x', 1)::integer) FILTER (WHERE c.role = 'image') AS side,
		   pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'categorical') AS cats,
		   pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'sequence') AS seqs,
		   pg_catalog.string_agg(pg_catalog.format('%s (%s)', c.column_name, c.detail), ', ') FILTER (WHERE c.role = 'skipped') AS skipped
	  INTO cols FROM pgdl.automl_columns(source, label, features) c;
	IF cols.skipped IS NOT NULL THEN
		RAISE NOTICE 'automl leaves out %', cols.skipped USING HINT = 'Name the columns to use with features =>.';
	END IF;
	IF cols.numerics IS NULL AND cols.array_col IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = pg_catalog.format('%s has no numeric column to learn from', source),
			DETAIL = 'pgdl.pack needs at least one number per row beside categorical and sequence columns.',
			HINT = 'Add a numeric column, or name the columns to use with features =>.';
	END IF;
	IF cols.array_col IS NOT NULL AND cols.numerics IS NOT NULL THEN
		RAISE NOTICE 'automl learns from array % and leaves out %', cols.array_col, cols.numerics
			USING DETAIL = 'pgdl.pack takes either one array column or numeric columns as the features.';
	END IF;
	prefix := pgdl.automl_prefix(COALESCE(output_prefix, 'automl_' || (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = source)));
	PERFORM pgdl.automl_prepare(source, label, prefix, validation, seed, plan.workers, plan.classification,
								COALESCE(cols.array_col, cols.numerics), cols.cats, cols.seqs);
	PERFORM pgdl.automl_pool(pg_catalog.quote_ident(prefix || '_train')::regclass, prefix || '_pool',
							 CASE WHEN cols.array_col IS NOT NULL THEN cols.side END, seed);
	COMMIT;
	trained := pgdl.automl_search(pg_catalog.quote_ident(prefix || '_train')::regclass,
								  pg_catalog.quote_ident(prefix || '_validation')::regclass, prefix,
								  started + budget - (budget * 0.03 + interval '0.3 seconds'), plan.workers, strategy, plan.metric);
	IF trained = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = pg_catalog.format('a budget of %s trains no model on %s', budget, source),
			DETAIL = pg_catalog.format('%s s were left after splitting and packing; the smallest round, one configuration for 3 epochs, is predicted to take longer.',
									   pg_catalog.round(EXTRACT(epoch FROM started + budget - pg_catalog.clock_timestamp())::numeric, 1)),
			HINT = 'Give a larger budget.';
	END IF;
	EXECUTE pg_catalog.format('CREATE TABLE %I AS SELECT * FROM pgdl.automl_leaderboard($1, $2, $3, $4, $5)', prefix || '_leaderboard')
		USING prefix, pg_catalog.quote_ident(prefix || '_validation')::regclass, name, plan.metric, plan.higher;
	leaderboard := pg_catalog.quote_ident(prefix || '_leaderboard')::regclass;
	EXECUTE pg_catalog.format('SELECT l.model, l.deployed FROM %s l WHERE l.rank = 1', leaderboard) INTO model, deployed;
	RAISE NOTICE 'automl trained % models in % s of a budget of % s', trained,
		pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started)::numeric, 1), EXTRACT(epoch FROM budget)::double precision
		USING DETAIL = pg_catalog.format('Its tables: %1$s_train and %1$s_validation (packed), %1$s_leaderboard.', prefix);
END
$$;
COMMENT ON PROCEDURE pgdl.automl(regclass, text, text, interval, text, text, bigint, real, integer, text, text, regclass, bigint, boolean) IS
	'from a raw table to ranked models under a time budget: a seeded split, preprocessing chosen from the column types, architectures fitted to the data''s shape (MLPs, CNNs for image-shaped arrays, embeddings, GRU and attention), rounds of fit_multiple (strategy, asha by default) planned with explain_fit_multiple; deploys the best under name when it beats the model the name serves; returns the leaderboard table, the best model and whether it is deployed';

-- automl's arguments checked before anything is made: the task (from the label's type), the metric
-- (NULL: the validation loss, fit_multiple's rank_by: on a small validation split accuracy ties and jumps
-- by a row, the loss does not) and its direction, the workers (NULL: pgdl.max_workers).
CREATE FUNCTION pgdl.automl_check(source regclass, label text, budget interval, name text, seed bigint,
		validation real, INOUT workers integer, strategy text, INOUT metric text, OUT classification boolean,
		OUT higher boolean)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	label_type text;
	the_task text;
BEGIN
	IF source IS NULL OR label IS NULL OR budget IS NULL OR seed IS NULL OR validation IS NULL OR strategy IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'source, label, budget, seed, validation and strategy must not be NULL';
	END IF;
	IF NOT (budget >= interval '1 second' AND budget <= interval '1 day') THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('budget must be from 1 second to 1 day, not %s', budget),
			DETAIL = 'The search plans its rounds to end within the budget, from splitting the table to deploying the winner.';
	END IF;
	IF NOT (validation >= 0.05 AND validation <= 0.5) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('validation must be from 0.05 to 0.5, not %s', validation),
			DETAIL = 'It is the share of the rows held out to rank the models.';
	END IF;
	IF name IS NOT NULL AND pg_catalog.length(name) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('a deployment name must have 1 to 200 characters, not %s', pg_catalog.length(name));
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = source) THEN
		RAISE EXCEPTION USING ERRCODE = '42P01', MESSAGE = pg_catalog.format('relation with OID %s does not exist', source::oid);
	END IF;
	PERFORM pgdl.version();		-- loads pgdl, whose settings are read below
	workers := COALESCE(workers, pg_catalog.current_setting('pgdl.max_workers')::integer);
	SELECT t.typname INTO label_type FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
	 WHERE a.attrelid = source AND a.attname = label AND a.attnum > 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '42703',
			MESSAGE = pg_catalog.format('column "%s" of label does not exist in %s', pg_catalog.left(label, 64), source);
	END IF;
	classification := label_type NOT IN ('float4', 'float8', 'numeric');
	the_task := CASE WHEN classification THEN 'classification' ELSE 'regression' END;
	metric := COALESCE(metric, 'loss');
	SELECT m.higher_is_better INTO higher FROM pgdl.rank_metrics() m WHERE m.metric = automl_check.metric AND m.task IN ('any', the_task);
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('metric "%s" does not rank a %s model', pg_catalog.left(metric, 64), the_task),
			HINT = (SELECT 'Rank it by ' || pg_catalog.string_agg(m.metric, ', ') || '.' FROM pgdl.rank_metrics() m WHERE m.task IN ('any', the_task));
	END IF;
END
$$;
COMMENT ON FUNCTION pgdl.automl_check(regclass, text, interval, text, bigint, real, integer, text, text) IS
	'internal to pgdl.automl: its arguments checked; the task, the metric''s direction and the workers';

-- The models of every round (named <prefix>_<configuration id>, of the sets <prefix>_round<r>) ranked by
-- their validation score (ties by validation loss; diverged ones last), the best deployed under name when it
-- beats what the name serves.
CREATE FUNCTION pgdl.automl_leaderboard(prefix text, valid regclass, name text, metric text, higher boolean)
RETURNS TABLE (rank integer, model bigint, round integer, kind text, architecture text, config jsonb,
			   epochs integer, stopped boolean, ranked_by text, score double precision, deployed boolean)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	best bigint;
	serving boolean := false;
BEGIN
	CREATE TEMP TABLE pgdl_automl_board ON COMMIT DROP AS
	SELECT (pg_catalog.row_number() OVER (ORDER BY t.diverged, t.score IS NULL,
			CASE WHEN higher THEN -t.score ELSE t.score END, t.loss, t.round, t.model))::integer AS rank, t.*
	  FROM (SELECT m.id AS model, pgdl.automl_round_of(prefix, c.set_name) AS round,
				   pg_catalog.split_part(a.name, '_', 2) AS kind, a.name AS architecture, m.config,
				   COALESCE((m.metrics ->> 'epochs_trained')::integer, (m.metrics ->> 'epoch')::integer) AS epochs,
				   COALESCE((m.metrics ->> 'stopped')::boolean, false) AS stopped,
				   COALESCE((m.metrics ->> 'diverged')::boolean, false) AS diverged,
				   (m.metrics ->> ('validation_' || metric))::double precision AS score,
				   (m.metrics ->> 'validation_loss')::double precision AS loss
			  FROM pgdl.configs c
			  JOIN pgdl.models m ON m.name = prefix || '_' || c.id AND m.owner = c.owner
			  JOIN pgdl.architectures a ON a.id = c.architecture
			 WHERE c.owner = pg_catalog.current_user()::regrole AND pgdl.automl_round_of(prefix, c.set_name) IS NOT NULL) t;
	SELECT b.model INTO best FROM pg_temp.pgdl_automl_board b WHERE b.rank = 1;
	IF name IS NOT NULL AND best IS NOT NULL THEN
		SELECT d.deployed INTO serving FROM pgdl.deploy_if_better(name, best, valid, metric) d;
	END IF;
	RETURN QUERY SELECT b.rank, b.model, b.round, b.kind, b.architecture, b.config, b.epochs, b.stopped, metric,
						b.score, serving AND b.rank = 1
				   FROM pg_temp.pgdl_automl_board b ORDER BY b.rank;
	DROP TABLE pg_temp.pgdl_automl_board;
END
$$;
COMMENT ON FUNCTION pgdl.automl_leaderboard(text, regclass, text, text, boolean) IS
	'internal to pgdl.automl: every round''s models ranked by their validation score, the best deployed under name when it beats the model the name serves';

-- pgdl.retrain: the model a deployment serves refitted on new rows (its architecture and configuration,
-- warm-started from it, packed with its training set's preprocessing), and deployed only when it beats
-- the served model on a held-out split of those rows.  A function (pgdl.fit trains in the caller's
-- transaction), so that a pg_cron job runs it as one statement.  A refit that is not deployed leaves
-- nothing behind unless kept (its packed tables and its model; pgdl.fit keeps no checkpoints): a nightly
-- job would otherwise copy the rows into new tables every night; a deployed one keeps its tables, whose
-- preprocessing it predicts with and the next retrain packs with.
CREATE FUNCTION pgdl.retrain(name text, source regclass, validation real DEFAULT 0.2, epochs integer DEFAULT NULL,
		seed bigint DEFAULT 0, metric text DEFAULT NULL, warm_start boolean DEFAULT true, keep boolean DEFAULT false)
RETURNS TABLE (previous bigint, candidate bigint, deployed boolean, ranked_by text, score double precision,
			   previous_score double precision, train regclass, valid regclass)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	d pgdl.deployment_names;
	m record;
	ds record;
	prefix text;
	outcome record;
BEGIN
	IF name IS NULL OR source IS NULL OR validation IS NULL OR seed IS NULL OR warm_start IS NULL OR keep IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'name, source, validation, seed, warm_start and keep must not be NULL';
	END IF;
	IF NOT (validation >= 0.05 AND validation <= 0.5) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('validation must be from 0.05 to 0.5, not %s', validation),
			DETAIL = 'It is the share of the new rows held out to compare the refitted model with the deployed one.';
	END IF;
	IF epochs IS NOT NULL AND NOT (epochs BETWEEN 1 AND 100000) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('epochs must be from 1 to 100000, not %s', epochs);
	END IF;
	d := pgdl.deployment_for_update(name);		-- its owner's, locked: one retrain of a name at a time
	SELECT x.id, x.spec, x.config, x.dataset, COALESCE((x.metrics ->> 'epochs_trained')::integer, (x.metrics ->> 'epoch')::integer) AS trained_epochs INTO m
	  FROM pgdl.models x WHERE x.id = pgdl.deployed_model(d.id);
	SELECT x.packed, x.features, x.label, x.task INTO ds FROM pgdl.datasets x WHERE x.id = m.dataset;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = pg_catalog.format('model %s served by %s has no training set any more', m.id, pgdl.deployment_label(name)),
			DETAIL = 'retrain packs the new rows with the preprocessing of the model''s packed training table, which was dropped.',
			HINT = 'Train and deploy a model on a packed table that stays, then retrain.';
	END IF;
	metric := COALESCE(metric, 'loss');
	IF NOT EXISTS (SELECT FROM pgdl.rank_metrics() r WHERE r.metric = retrain.metric AND r.task IN ('any', ds.task)) THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('metric "%s" does not rank a %s model', pg_catalog.left(metric, 64), ds.task),
			HINT = (SELECT 'Rank it by ' || pg_catalog.string_agg(r.metric, ', ') || '.' FROM pgdl.rank_metrics() r WHERE r.task IN ('any', ds.task));
	END IF;
	prefix := pgdl.automl_prefix('retrain_' || pg_catalog.left(name, 24));
	PERFORM pgdl.automl_prepare(source, ds.label, prefix, validation, seed, 1, ds.task = 'classification',
								ds.features, reference => ds.packed);
	train := pg_catalog.quote_ident(prefix || '_train')::regclass;
	valid := pg_catalog.quote_ident(prefix || '_validation')::regclass;
	candidate := pgdl.fit(train, m.spec,
						  CASE WHEN warm_start THEN m.config || pg_catalog.jsonb_build_object('warm_start', m.id) ELSE m.config END,
						  COALESCE(epochs, m.trained_epochs, 10), valid);
	SELECT * INTO outcome FROM pgdl.deploy_if_better(name, candidate, valid, metric);
	IF NOT outcome.deployed AND NOT keep THEN
		PERFORM pgdl.delete_rows('pgdl.models', ARRAY[candidate]);
		EXECUTE pg_catalog.format('DROP TABLE %s, %s', train, valid);
		candidate := NULL;
		train := NULL;
		valid := NULL;
	END IF;
	previous := m.id;
	deployed := outcome.deployed;
	ranked_by := outcome.metric;
	score := outcome.score;
	previous_score := outcome.previous_score;
	RETURN NEXT;
END
$$;
COMMENT ON FUNCTION pgdl.retrain(text, regclass, real, integer, bigint, text, boolean, boolean) IS
	'refits the model a deployment serves on new rows (its architecture and configuration, warm-started from it, with its training set''s preprocessing) and deploys the refit only when it beats the served model on a held-out split of the rows; a refit not deployed is deleted with its packed tables unless keep; returns both models (the refit NULL when deleted), their scores and the new packed tables';
-- ---- preprocessing that travels with the model: pack's impute, impute_value, scaling and one_hot; ----
-- ---- pgdl.datasets.imputation, min-max and robust normalization, one-hot vocabularies ----
-- Datasets packed before impute nothing (NULL); their normalization and vocabularies read as before.
ALTER TABLE pgdl.datasets ADD COLUMN imputation jsonb;
GRANT UPDATE (imputation) ON pgdl.datasets TO PUBLIC;
DROP FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text,
						regclass, text, integer, text, integer, text, boolean);
CREATE FUNCTION pgdl.pack(
	source regclass,
	features text,
	label text,
	output text,
	buffer_rows integer DEFAULT 128,
	partitions integer DEFAULT 4,
	seed bigint DEFAULT 42,
	scale double precision DEFAULT NULL,
	standardize boolean DEFAULT false,
	nulls text DEFAULT 'error',
	reference regclass DEFAULT NULL,
	categorical text DEFAULT NULL,
	max_categories integer DEFAULT 10000,
	sequence text DEFAULT NULL,
	max_length integer DEFAULT NULL,
	weight text DEFAULT NULL,
	standardize_target boolean DEFAULT false,
	impute text DEFAULT NULL,
	impute_value double precision DEFAULT NULL,
	scaling text DEFAULT NULL,
	one_hot text DEFAULT NULL)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer, text, integer, text, boolean, text, double precision, text, text) IS
	'packs a table''s features (numeric, missing ones imputed with an indicator, scaled; categorical columns as vocabulary ids or one-hot, token sequences as padded ids and a length) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- a one-hot column takes a feature per value
CREATE OR REPLACE VIEW pgdl.vocabulary WITH (security_invoker = true) AS
SELECT d.id AS dataset, d.packed, c.position::integer AS position, c.col ->> 'column' AS "column",
	   CASE WHEN d.n_features - c.total + c.before + 1 BETWEEN -2147483648 AND 2147483647
			THEN (d.n_features - c.total + c.before + 1)::integer END AS feature,
	   (v.id + CASE WHEN c.length IS NULL THEN 0 ELSE 1 END)::integer AS id, v.value,
	   c.length
  FROM pgdl.datasets d
 CROSS JOIN LATERAL (
	SELECT e.col, e.position, w.length, sum(w.width) OVER () AS total,
		   sum(w.width) OVER (ORDER BY e.position) - w.width AS before
	  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.categorical) = 'array' THEN d.categorical END)
		   WITH ORDINALITY AS e(col, position)
	 CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.col -> 'length') = 'number'
									 THEN (e.col ->> 'length')::numeric END AS n) l
	 CROSS JOIN LATERAL (SELECT CASE WHEN l.n = trunc(l.n) AND l.n BETWEEN 0 AND 2147483647
									 THEN l.n::integer END AS length) m
	 CROSS JOIN LATERAL (SELECT m.length,
								CASE WHEN m.length IS NOT NULL THEN m.length::bigint + 1
									 WHEN e.col -> 'one_hot' = 'true' AND jsonb_typeof(e.col -> 'values') = 'array'
									 THEN jsonb_array_length(e.col -> 'values') ELSE 1 END AS width) w) c
 CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(c.col -> 'values') = 'array'
												   THEN c.col -> 'values' END) WITH ORDINALITY AS v(value, id);
COMMENT ON VIEW pgdl.vocabulary IS
	'the vocabulary of each categorical and sequence column of the datasets the caller may read: value and its id (categorical: id 0 is unseen or NULL; sequence: id 0 is padding, id 1 unseen or NULL), the first feature of the example vector that carries the column (a one-hot column''s id i at feature + i - 1), and a sequence''s length L';

-- a dataset's description for federation carries its imputation (pgdl.export_dataset, import_dataset)
CREATE OR REPLACE FUNCTION pgdl.export_dataset(packed regclass) RETURNS jsonb
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
	SELECT jsonb_build_object('task', d.task, 'n_features', d.n_features, 'n_targets', d.n_targets,
							  'classes', to_jsonb(d.classes), 'label_type', d.label_type::text,
							  'normalization', d.normalization, 'partitions', d.partitions, 'n_rows', d.n_rows)
		   -- the vocabularies only when there are some: a description without them reads as before
		   || CASE WHEN d.categorical IS NOT NULL THEN jsonb_build_object('categorical', d.categorical) ELSE '{}' END
		   || CASE WHEN d.imputation IS NOT NULL THEN jsonb_build_object('imputation', d.imputation) ELSE '{}' END
	  FROM pgdl.datasets d WHERE d.packed = export_dataset.packed
$$;
COMMENT ON FUNCTION pgdl.export_dataset(regclass) IS
	'what a packed table''s rows mean (task, features, targets, classes, label type, normalization, vocabularies of categorical columns, imputation), as jsonb: pgdl.import_dataset on another server makes it a reference for pgdl.pack there';

-- No SET search_path: the table goes where the caller's CREATE TABLE would put it (its first schema).
CREATE OR REPLACE FUNCTION pgdl.import_dataset(description jsonb, name text) RETURNS regclass
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE AS
$$
DECLARE
	schema name := (pg_catalog.current_schemas(false))[1];
	made regclass;
	label_regtype regtype;
BEGIN
	IF pg_catalog.jsonb_typeof(description) IS DISTINCT FROM 'object'
	   OR pg_catalog.jsonb_typeof(description->'task') IS DISTINCT FROM 'string'
	   OR pg_catalog.jsonb_typeof(description->'n_features') IS DISTINCT FROM 'number'
	   OR pg_catalog.jsonb_typeof(description->'n_targets') IS DISTINCT FROM 'number'
	   OR pg_catalog.jsonb_typeof(description->'classes') NOT IN ('array', 'null')
	   OR pg_catalog.jsonb_typeof(description->'label_type') IS DISTINCT FROM 'string'
	   OR pg_catalog.jsonb_typeof(description->'normalization') IS DISTINCT FROM 'object' THEN
		RAISE EXCEPTION 'invalid dataset description'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'A description is what pgdl.export_dataset returns: an object with task, n_features, n_targets, classes, label_type and normalization.';
	END IF;
	-- checked before the casts, whose errors would echo the value (a number of any length)
	IF (description->>'n_features') !~ '^[1-9][0-9]{0,8}$' OR (description->>'n_targets') !~ '^[1-9][0-9]{0,8}$' THEN
		RAISE EXCEPTION 'invalid dataset description'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Its n_features and n_targets must be positive integers.';
	END IF;
	-- a type name is parsed as SQL: any error of it (syntax, no such type or schema) is the description's
	BEGIN
		label_regtype := (description->>'label_type')::regtype;
	EXCEPTION
		WHEN OTHERS THEN
			RAISE EXCEPTION 'invalid label_type "%" in dataset description', pg_catalog.left(description->>'label_type', 64)
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = 'It must name a type of this server, as pgdl.export_dataset writes it.';
	END;
	IF schema IS NULL THEN
		RAISE EXCEPTION 'no schema to create "%" in', pg_catalog.left(name, 64) USING ERRCODE = 'invalid_schema_name';
	END IF;
	IF pg_catalog.octet_length(name) > 60 OR name = '' THEN
		RAISE EXCEPTION 'invalid table name "%"', pg_catalog.left(name, 64)
			USING ERRCODE = 'invalid_name', DETAIL = 'The name must be 1 to 60 bytes long.';
	END IF;
	EXECUTE pg_catalog.format('CREATE TABLE %I.%I (part integer NOT NULL, buffer_id integer NOT NULL, n integer NOT NULL,'
				   ' x real[] NOT NULL, y real[] NOT NULL, PRIMARY KEY (part, buffer_id)) PARTITION BY LIST (part)',
				   schema, name);
	made := pg_catalog.format('%I.%I', schema, name)::regclass;
	EXECUTE pg_catalog.format('CREATE TABLE %I.%I PARTITION OF %s FOR VALUES IN (0)', schema, name || '_p0', made);
	INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
							   normalization, n_rows, n_buffers, buffer_rows, partitions, seed, categorical, imputation)
	VALUES (made, 'pgdl.import_dataset', '', '', description->>'task', (description->>'n_features')::integer,
			(description->>'n_targets')::integer,
			CASE WHEN pg_catalog.jsonb_typeof(description->'classes') = 'array'
				 THEN ARRAY(SELECT pg_catalog.jsonb_array_elements_text(description->'classes')) END,
			label_regtype, description->'normalization', 0, 0, 1, 1, 0,
			CASE WHEN pg_catalog.jsonb_typeof(description->'categorical') = 'array' THEN description->'categorical' END,
			CASE WHEN pg_catalog.jsonb_typeof(description->'imputation') = 'object' THEN description->'imputation' END);
	RETURN made;
END
$$;
COMMENT ON FUNCTION pgdl.import_dataset(jsonb, text) IS
	'an empty packed table with the classes and normalization of a dataset that pgdl.export_dataset described on another server: give it as reference => to pgdl.pack, so that a node packs its own rows as the coordinator''s';
-- ---- the huber loss (a regression loss): pgdl.zoo's task of a model without a dataset ----
-- The view as sql/parts/90_zoo.sql makes it: a huber model is a regression model, as an mse one.
CREATE OR REPLACE VIEW pgdl.zoo WITH (security_invoker = true) AS
SELECT m.id, m.name, m.owner::text AS owner, m.created,
	   s.layers, s.n_layers, s.params, s.flops, s.input_shape,
	   coalesce(d.task, CASE WHEN m.spec ->> 'loss' IN ('mse', 'huber') THEN 'regression' ELSE 'classification' END) AS task,
	   cardinality(d.classes) AS n_classes, d.classes,
	   m.dataset, d.n_rows AS dataset_rows, d.n_features,
	   CASE WHEN d.normalization ? 'scale' THEN 'scale'
			WHEN d.normalization ? 'mean' THEN 'mean_std' END AS normalization,
	   m.config,
	   CASE WHEN jsonb_typeof(m.config -> 'optimizer') = 'string' THEN m.config ->> 'optimizer' END AS optimizer,
	   CASE WHEN jsonb_typeof(m.config -> 'lr') = 'number' AND abs((m.config ->> 'lr')::numeric) < 1e300
			THEN (m.config ->> 'lr')::float8 END AS lr,
	   CASE WHEN jsonb_typeof(m.config -> 'batch_size') = 'number' AND (m.config ->> 'batch_size')::numeric
			BETWEEN 1 AND 2147483647 THEN trunc((m.config ->> 'batch_size')::numeric)::integer END AS batch_size,
	   m.origin,
	   CASE WHEN jsonb_typeof(m.origin -> 'format') = 'string' THEN m.origin ->> 'format' END AS imported_from,
	   CASE WHEN jsonb_typeof(m.origin -> 'warm_start') = 'number' AND (m.origin ->> 'warm_start')::numeric
			BETWEEN 1 AND 9223372036854775807 THEN trunc((m.origin ->> 'warm_start')::numeric)::bigint END AS warm_start,
	   m.parent, m.run,
	   -- the stored model's numbers (restore_best's best epoch, else its last): its metrics, else its run's row
	   coalesce(mm.validation_accuracy, r.validation_accuracy) AS best_validation_accuracy,
	   coalesce(mm.validation_loss, r.validation_loss) AS best_validation_loss,
	   coalesce(mm.train_loss, r.train_loss) AS last_train_loss,
	   s.problem
  FROM pgdl.models m
 CROSS JOIN LATERAL pgdl.stored_spec_summary(m.spec) s
  LEFT JOIN pgdl.datasets d ON d.id = m.dataset
 CROSS JOIN LATERAL (
	SELECT CASE WHEN jsonb_typeof(m.metrics -> 'validation_accuracy') = 'number'
				 AND abs((m.metrics ->> 'validation_accuracy')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_accuracy')::float8 END AS validation_accuracy,
		   CASE WHEN jsonb_typeof(m.metrics -> 'validation_loss') = 'number'
				 AND abs((m.metrics ->> 'validation_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'validation_loss')::float8 END AS validation_loss,
		   CASE WHEN jsonb_typeof(m.metrics -> 'train_loss') = 'number'
				 AND abs((m.metrics ->> 'train_loss')::numeric) < 1e300
				THEN (m.metrics ->> 'train_loss')::float8 END AS train_loss
 ) mm
  LEFT JOIN LATERAL (
	SELECT rm.validation_accuracy, rm.validation_loss, rm.train_loss
	  FROM pgdl.run_metrics rm
	 WHERE rm.model = m.id AND rm.node IS NULL
	 ORDER BY rm.epoch::text = (m.metrics ->> 'epoch') DESC NULLS LAST, rm.epoch DESC
	 LIMIT 1
  ) r ON true;

-- ---- fit_federated that survives: its run and a checkpoint per round (pgdl.resume), min_sites, ----
-- ---- differentially private averaging (clip, noise_multiplier, delta), pgdl.run_metrics.federation ----
ALTER TABLE pgdl.run_metrics ADD COLUMN federation jsonb;
GRANT UPDATE (federation) ON pgdl.run_metrics TO PUBLIC;
COMMENT ON TABLE pgdl.checkpoints IS 'models of pgdl.fit_multiple runs after each epoch, and of pgdl.fit_federated runs after each round (config 0), for pgdl.resume';
DROP FUNCTION pgdl.fit_federated(regclass, text, jsonb, integer, integer, regclass, text);
CREATE FUNCTION pgdl.fit_federated(source regclass, architecture text, config jsonb DEFAULT '{}',
		rounds integer DEFAULT 10, local_epochs integer DEFAULT 1, validation regclass DEFAULT NULL,
		name text DEFAULT NULL, min_sites integer DEFAULT NULL, clip double precision DEFAULT NULL,
		noise_multiplier double precision DEFAULT NULL, delta double precision DEFAULT 1e-5)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_federated' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_federated(regclass, text, jsonb, integer, integer, regclass, text, integer,
									   double precision, double precision, double precision) IS
	'federated averaging over the sites of a distributed packed table (the partitions each server holds): each round every site trains a copy of the model on its own partitions in seeded order, local_epochs times, and the copies are averaged weighted by their examples; only models leave a site; each round is committed with a checkpoint (pgdl.resume continues a failed run); min_sites lets a round go on without sites that are down; clip and noise_multiplier make the average differentially private (each site''s update clipped, Gaussian noise added; the privacy spent per round in pgdl.run_metrics.federation, epsilon at delta); stores the model and returns its id';
COMMENT ON FUNCTION pgdl.resume(bigint, integer, integer, text) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint (a pgdl.fit_federated run from its last round); priority as pgdl.fit_multiple''s; rank_by NULL or the run''s own';

-- ---- feature caches on the nodes: pgdl.node_feature_cache (function and table), feature_cache_bytes counts them ----
-- Feature caches on the nodes of a distributed packed table (node_cache.c).  A node keeps the outputs of
-- frozen layers over a table it holds in a table of its schema pgdl_cache that the caller owns, names it
-- itself and stamps it with the layers' hash and the table's pgdl.packed_version; the coordinator
-- records each in pgdl.node_feature_cache.  A row is a record, never a pointer: the planner refuses one
-- that names another relation than the node's own cache.
CREATE FUNCTION pgdl.node_feature_cache(prefix bytea, packed regclass, build boolean DEFAULT false)
	RETURNS TABLE (cache text, action text, version text, bytes bigint)
	AS 'MODULE_PATHNAME', 'pgdl_node_feature_cache' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.node_feature_cache(bytea, regclass, boolean) IS
	'on a node: the caller''s cache of the outputs of frozen layers (prefix, a model blob) over a packed table of this server, in pgdl_cache: what it needs (reuse, materialize, refresh, rebuild; recompute for a table with row-level security) and, with build, made so; what a coordinator''s pgdl.fit_multiple runs on its nodes; returns the cache''s name, the action, the table''s version and the cache''s bytes';

CREATE TABLE pgdl.node_feature_cache (
	id bigserial PRIMARY KEY,
	source regclass NOT NULL,				-- the coordinator's distributed packed table
	server text NOT NULL,					-- the foreign server of the node
	remote_table text NOT NULL,				-- the node's table (qualified, quoted) the cache computed
	base_model bigint,						-- the model whose first `depth` layers computed it
	base_hash text NOT NULL,				-- SHA-256 of those layers: pgdl.prefix_hash
	depth integer NOT NULL CHECK (depth > 0),
	cache text NOT NULL,					-- the node's table in its schema pgdl_cache
	source_version text NOT NULL,			-- pgdl.packed_version of the node's table when computed
	bytes bigint NOT NULL,
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	created timestamptz NOT NULL DEFAULT now(),
	last_used timestamptz NOT NULL DEFAULT now(),
	UNIQUE (source, server, remote_table, depth, owner)
);
COMMENT ON TABLE pgdl.node_feature_cache IS
	'feature caches on the nodes of distributed packed tables: per node table, frozen prefix and role, the node''s table of its outputs and the version it was computed from';
SELECT pg_catalog.pg_extension_config_dump('pgdl.node_feature_cache', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.node_feature_cache_id_seq', '');
GRANT SELECT, INSERT ON pgdl.node_feature_cache TO PUBLIC;
-- a rebuild updates its row in place: UPDATE by column, since DELETE (or UPDATE of the table) would let
-- any role LOCK the table in modes that block everyone's planner
GRANT UPDATE (base_model, base_hash, cache, source_version, bytes, created, last_used) ON pgdl.node_feature_cache TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.node_feature_cache_id_seq TO PUBLIC;
ALTER TABLE pgdl.node_feature_cache ENABLE ROW LEVEL SECURITY;
CREATE POLICY owners ON pgdl.node_feature_cache USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
COMMENT ON POLICY owners ON pgdl.node_feature_cache IS 'the owner of a node''s feature cache (or pgdl_admin) reads and changes its row';

CREATE OR REPLACE FUNCTION pgdl.feature_cache_bytes() RETURNS bigint
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT (SELECT coalesce(sum(f.bytes), 0) FROM pgdl.feature_cache f)::bigint
		+ (SELECT coalesce(sum(n.bytes), 0) FROM pgdl.node_feature_cache n)::bigint $$;
COMMENT ON FUNCTION pgdl.feature_cache_bytes() IS
	'bytes that all feature caches (every role''s, on this server and on the nodes) take, against pgdl.feature_cache_budget';
-- ---- distribute idempotent per partition (checksums, orphans dropped); pgdl.add_node ----
COMMENT ON FUNCTION pgdl.distribute(regclass, text[]) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; a partition already moved stays, so calling again finishes an interrupted call, without copying again what a node already holds (same rows, by checksum); copies it made that the table no longer reads are dropped on the nodes; returns the partitions this call moved';
CREATE FUNCTION pgdl.add_node(packed regclass, server text) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_add_node' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.add_node(regclass, text) IS
	'moves partitions of a distributed packed table onto a new node (a postgres_fdw server the table does not use), copy then swap as pgdl.distribute does: of the m partitions pgdl.distribute put on s servers the new one gets floor(m / (s + 1)), each the highest-numbered partition of the server then holding the most; nothing else moves; the old copies are dropped by the next pgdl.distribute or pgdl.add_node of the table; returns the partitions moved';
-- ---- replicated partitions: pgdl.distribute(..., replicas), pgdl.partition_replicas ----
DROP FUNCTION pgdl.distribute(regclass, text[]);
CREATE FUNCTION pgdl.distribute(packed regclass, servers text[], replicas integer DEFAULT 1) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_distribute' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.distribute(regclass, text[], integer) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; with replicas r, copies of partition k also go to servers[(k + 1) % n] .. servers[(k + r - 1) % n], each checksummed, recorded in pgdl.partition_replicas, where a model hopper run goes on when a node is lost; a partition already moved stays, so calling again finishes an interrupted call, without copying again what a node already holds (same rows, by checksum); copies it made that the table no longer reads are dropped on the nodes; returns the partitions this call moved';

-- Where the copies of a partition other than the one its foreign table reads live (pgdl.distribute's
-- replicas): the node's table has the name of the partition here, on another server.  A row is written
-- only once the node's copy has the checksum of the partition as sent.
CREATE TABLE pgdl.partition_replicas (
	packed regclass NOT NULL,				-- the coordinator's distributed packed table
	part integer NOT NULL CHECK (part >= 0),
	replica integer NOT NULL CHECK (replica > 0),	-- 1: the first a run turns to, on servers[(part + 1) % n]
	server text NOT NULL,					-- the foreign server of the node
	remote_schema text NOT NULL,			-- the node's table, its two parts as they are
	remote_table text NOT NULL,
	checksum text NOT NULL,					-- rows and md5 of the rows as sent, verified on the node
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	created timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (packed, part, replica),
	UNIQUE (packed, part, server)
);
COMMENT ON TABLE pgdl.partition_replicas IS
	'replicas of the partitions of distributed packed tables (pgdl.distribute with replicas): per partition the servers beyond its foreign table''s that hold a checksummed copy, in the order a model hopper run turns to them';
SELECT pg_catalog.pg_extension_config_dump('pgdl.partition_replicas', '');
GRANT SELECT, INSERT ON pgdl.partition_replicas TO PUBLIC;
-- UPDATE by column (for the FOR UPDATE of pgdl_catalog_delete), never of the table: see 70_owners.sql
GRANT UPDATE (checksum, created) ON pgdl.partition_replicas TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.partition_replicas TO pgdl_admin;
ALTER TABLE pgdl.partition_replicas ENABLE ROW LEVEL SECURITY;
-- a row is written by the owner of the packed table only: another role's runs trust it
CREATE POLICY owners ON pgdl.partition_replicas USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND pg_catalog.pg_has_role(
		(SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = packed), 'USAGE'));
CREATE POLICY readers ON pgdl.partition_replicas FOR SELECT
	USING (pg_catalog.has_table_privilege(packed, 'SELECT'));
COMMENT ON POLICY owners ON pgdl.partition_replicas IS 'the role that distributed the table (or pgdl_admin) reads and changes its replicas; only an owner of the packed table records one';
COMMENT ON POLICY readers ON pgdl.partition_replicas IS 'whoever may read the packed table reads where its replicas are, for the runs that train on it';

-- ---- CPU kernels' instruction set, recorded with runs and models (issue 41) ----
CREATE FUNCTION pgdl.cpu_info() RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_cpu_info'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cpu_info() IS
	'the instruction set pgdl''s CPU kernels use in this session ("isa": pgdl.cpu_isa, "setting", capped by the CPU''s best, "cpu") and OpenBLAS''s kernels ("blas_core"), as runs and models record them';

ALTER TABLE pgdl.runs ADD COLUMN engine jsonb;
ALTER TABLE pgdl.models ADD COLUMN engine jsonb;
GRANT UPDATE (engine) ON pgdl.runs, pgdl.models TO PUBLIC;

-- ---- a model whose packed training table was dropped refuses to predict: the drop marks its origin ----
CREATE OR REPLACE FUNCTION pgdl.forget_dropped_relations() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	UPDATE pgdl.models m
	   SET origin = CASE WHEN jsonb_typeof(m.origin) = 'object' THEN m.origin ELSE '{}' END
					|| jsonb_build_object('dataset_dropped', jsonb_build_object('dataset', d.id, 'packed', o.object_identity))
	  FROM pgdl.datasets d, pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid AND m.dataset = d.id;
	DELETE FROM pgdl.datasets d
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid;
	DELETE FROM pgdl.feature_cache f
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = f.view::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_relations() IS
	'event trigger: removes the pgdl.datasets rows of dropped packed tables (marking the origin of the models trained on them) and the pgdl.feature_cache rows of dropped cache views';
