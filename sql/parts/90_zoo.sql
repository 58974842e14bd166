-- The model zoo (docs/reference/zoo.md): every model the caller may see with its descriptors, the stored
-- models most like a model or a spec, and (src/train/transfer.c) warm starts from one of them.

CREATE FUNCTION pgdl.spec_summary(spec jsonb, OUT layers text, OUT n_layers integer, OUT params bigint,
		OUT flops bigint, OUT input_shape integer[])
	AS 'MODULE_PATHNAME', 'pgdl_spec_summary' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.spec_summary(jsonb) IS
	'a spec in a line: its layers as text (''conv2d(8,3x3) relu flatten dense(10)''), their number, parameters, forward FLOPs per example and input shape';

CREATE FUNCTION pgdl.stored_spec_summary(spec jsonb, OUT layers text, OUT n_layers integer, OUT params bigint,
		OUT flops bigint, OUT input_shape integer[], OUT problem text)
	AS 'MODULE_PATHNAME', 'pgdl_stored_spec_summary' LANGUAGE C STABLE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.stored_spec_summary(jsonb) IS
	'internal, pgdl.zoo: pgdl.spec_summary of a spec read from the catalog, or NULLs and what is wrong with it (problem) when it is not valid';

-- A model's best metrics come from its run's rows (which its run's owner sees), else from the last
-- epoch's that pgdl.models keeps (which whoever sees the model sees).  Values read from jsonb are typed
-- only when they have the type, as in the BI views: a row written by hand shows NULL, never an error.
-- A spec that is not valid (a row from before 0.7.0, or written by a superuser, whom models_validate
-- does not check) leaves its summary's columns NULL and says why in the last, problem.
CREATE VIEW pgdl.zoo WITH (security_invoker = true) AS
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
GRANT SELECT ON pgdl.zoo TO PUBLIC;

CREATE FUNCTION pgdl.similar_models(query bigint, k integer DEFAULT 10, by text DEFAULT 'architecture')
	RETURNS TABLE (model bigint, name text, distance double precision, reason text)
	AS 'MODULE_PATHNAME', 'pgdl_similar_models' LANGUAGE C STABLE PARALLEL UNSAFE;
CREATE FUNCTION pgdl.similar_models(query text, k integer DEFAULT 10, by text DEFAULT 'architecture')
	RETURNS TABLE (model bigint, name text, distance double precision, reason text)
	AS 'MODULE_PATHNAME', 'pgdl_similar_models' LANGUAGE C STABLE PARALLEL UNSAFE;
CREATE FUNCTION pgdl.similar_models(query jsonb, k integer DEFAULT 10, by text DEFAULT 'architecture')
	RETURNS TABLE (model bigint, name text, distance double precision, reason text)
	AS 'MODULE_PATHNAME', 'pgdl_similar_models' LANGUAGE C STABLE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.similar_models(bigint, integer, text) IS
	'the k stored models (that the caller may see) nearest to a model by architecture, data or both, with a distance in [0, 1] and a reason';
COMMENT ON FUNCTION pgdl.similar_models(text, integer, text) IS
	'the k stored models (that the caller may see) nearest to a named model by architecture, data or both, with a distance in [0, 1] and a reason';
COMMENT ON FUNCTION pgdl.similar_models(jsonb, integer, text) IS
	'the k stored models (that the caller may see) nearest to a spec by architecture, data (the spec''s input and output sizes) or both';
