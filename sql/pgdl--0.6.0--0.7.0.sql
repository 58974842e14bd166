-- pgdl 0.6.0 to 0.7.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.7.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.7.0'" to load this file. \quit

-- ---- rows checked when written (invalid rows) ----
-- A row of one role must not fail another role's query: specs and weights are checked when written
-- (src/catalog_checks.c), and the views over many rows show a row that is still invalid (written
-- before 0.7.0, or with the triggers disabled) instead of failing.  Rows already stored are not
-- checked here: an upgrade must not fail on them; pgdl.zoo's problem column shows them.
-- A spec or weights that do not parse would fail the queries of every role that reads the row (a model
-- granted to PUBLIC, every row for pgdl_admin): they are refused when written (src/catalog_checks.c),
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
