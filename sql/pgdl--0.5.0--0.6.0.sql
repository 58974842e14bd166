-- pgdl 0.5.0 to 0.6.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.6.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.6.0'" to load this file. \quit

-- ---- devices: pgdl.cuda_devices(), pgdl.cuda_status() lists devices ----
CREATE FUNCTION pgdl.cuda_devices(OUT ordinal integer, OUT device text, OUT name text,
		OUT compute_capability text, OUT total_mb double precision, OUT free_mb double precision,
		OUT driver text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_cuda_devices'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_devices() IS
	'the CUDA devices this server sees (none without CUDA): the name pgdl.device and "device" take, model, compute capability, total and free memory, driver; creates no CUDA context';

COMMENT ON FUNCTION pgdl.cuda_status() IS
	'whether CUDA devices can be used: "available: " and each device (name, compute capability, memory) and the driver, or the reason they cannot; creates no CUDA context';
-- ---- throughput prediction: pgdl.calibrate, pgdl.server_profiles, pgdl.estimate's pace ----
DROP FUNCTION pgdl.estimate(jsonb, jsonb);
CREATE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}', examples bigint DEFAULT NULL,
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint,
		OUT profile bigint, OUT basis text, OUT images_per_second double precision,
		OUT seconds_per_epoch double precision, OUT workers jsonb, OUT memory jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_estimate' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.estimate(jsonb, jsonb, bigint) IS
	'cost of a spec: parameters, FLOPs per example (forward; training), activation bytes per example, training memory for one batch, and the predicted pace from this server''s profile (pgdl.calibrate) or pgdl.cpu_gflops';
CREATE TABLE pgdl.server_profiles (
	id bigserial PRIMARY KEY,
	created timestamptz NOT NULL DEFAULT now(),
	system_identifier bigint NOT NULL,		-- pg_control_system().system_identifier of the server measured
	hostname text NOT NULL,
	cores integer NOT NULL,
	workers integer NOT NULL,				-- that ran at once to measure concurrency (1: not measured)
	seconds double precision NOT NULL,		-- the calibration's wall time
	measurements jsonb NOT NULL				-- {"version", "points": [{kind, size, batch, seconds}], "concurrency"}
);
COMMENT ON TABLE pgdl.server_profiles IS
	'measurements of this server by pgdl.calibrate (per layer kind, shape class, batch size and worker count), for pgdl.estimate';
GRANT SELECT ON pgdl.server_profiles TO PUBLIC;

CREATE FUNCTION pgdl.calibrate(seconds double precision DEFAULT 40, workers integer DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_calibrate' LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgdl.calibrate(double precision, integer) IS
	'measures this server''s training pace for about `seconds` (alone and with `workers` at once, default min(cores, pgdl.max_workers)) and stores a new profile in pgdl.server_profiles; returns its id';
REVOKE EXECUTE ON FUNCTION pgdl.calibrate(double precision, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgdl.calibrate(double precision, integer) TO pgdl_admin;
ALTER TABLE pgdl.run_metrics ADD COLUMN predicted_seconds double precision;
ALTER TABLE pgdl.run_metrics ADD COLUMN bracket integer;
DROP FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer);
CREATE FUNCTION pgdl.explain_fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1)
	RETURNS TABLE ("group" integer, source regclass, base_model bigint, frozen_layers integer, configs integer,
				   action text, cache text, validation_cache text, staged_from text, gflops double precision,
				   storage_mb double precision, predicted_seconds double precision, reason text,
				   prefix_gflops_per_pass double precision, memory_mb double precision, basis text,
				   predictions jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_explain_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer) IS
	'the plan of pgdl.fit_multiple with the same arguments, without running it: per group of configurations sharing a frozen prefix, the feature cache to reuse, build, refresh or rebuild (or recompute), with predicted compute, storage, time and memory, and each configuration''s predicted pace';
-- the leaderboard's subquery reads rm.*: made again, as a fresh install has it
CREATE OR REPLACE VIEW pgdl.leaderboard WITH (security_invoker = true) AS
WITH metrics AS (
	SELECT rm.*,
		   row_number() OVER (PARTITION BY rm.run, rm.config ORDER BY rm.epoch DESC) AS from_last,
		   sum(rm.seconds) OVER (PARTITION BY rm.run, rm.config) AS total_seconds,
		   bool_or(rm.decision = 'stop') OVER (PARTITION BY rm.run, rm.config) AS halted
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

-- The server's queue of pgdl jobs (src/jobs.c): at most pgdl.max_workers pgdl workers train at once,
-- whoever started them; jobs that find none free wait their turn.
CREATE FUNCTION pgdl.job_rows(OUT pid integer, OUT owner regrole, OUT database text, OUT state text,
		OUT "position" integer, OUT workers integer, OUT queued_since timestamptz, OUT run bigint,
		OUT priority integer, OUT predicted_seconds_left double precision)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_job_rows' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION pgdl.job_rows() IS
	'the pgdl.fit_multiple and pgdl.resume calls of every database of the server that hold or wait for pgdl worker slots, from the lock table, with their priority and the seconds their run has left as pgdl.estimate predicts them; see the view pgdl.jobs';

CREATE VIEW pgdl.jobs AS
SELECT j.pid, j.owner, j.database, j.state, j."position", j.priority, j.workers, j.queued_since, j.run,
	   p.configurations_left, p.seconds_left, j.predicted_seconds_left
  FROM pgdl.job_rows() j
  LEFT JOIN LATERAL (
	SELECT count(*) FILTER (WHERE g.state IN ('waiting', 'training', 'at rung'))::integer AS configurations_left,
		   sum(g.seconds_left) / greatest(j.workers, 1) AS seconds_left
	  FROM pgdl.progress g
	 WHERE g.run = j.run AND g.kind = 'fit_multiple'
  ) p ON j.run IS NOT NULL
 WHERE pgdl.acts_as(j.owner);
COMMENT ON VIEW pgdl.jobs IS
	'pgdl jobs (pgdl.fit_multiple and pgdl.resume calls) queued or running on this server, the caller''s own (all for pgdl_admin): state, place in the queue, priority among the owner''s jobs, workers held, the run, configurations left, seconds left at the pace measured so far and as predicted by the calibrated estimate';
GRANT SELECT ON pgdl.jobs TO PUBLIC;

-- ---- mixed inputs: categorical columns in pgdl.pack (vocabularies in pgdl.datasets.categorical), several targets ----
ALTER TABLE pgdl.datasets ADD COLUMN categorical jsonb;
DROP FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass);
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
	max_length integer DEFAULT NULL)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer, text, integer) IS
	'packs a table''s features (numeric, categorical columns as vocabulary ids, token sequences as padded ids and a length) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- The vocabularies of categorical and sequence columns, one row per value.  A categorical column's id 0
-- (not listed) is any value not seen when packing, and NULL; a sequence column's id 0 is padding and id 1
-- an unseen or NULL token.  feature: the first (1-based) of the floats of the example vector that carry
-- the column, a sequence's L ids and then its length.  security_invoker: a role sees the vocabularies of
-- the datasets it may read.
CREATE VIEW pgdl.vocabulary WITH (security_invoker = true) AS
SELECT d.id AS dataset, d.packed, c.position::integer AS position, c.col ->> 'column' AS "column",
	   (d.n_features - c.total + c.before + 1)::integer AS feature,
	   (v.id + CASE WHEN c.col ->> 'length' IS NULL THEN 0 ELSE 1 END)::integer AS id, v.value,
	   (c.col ->> 'length')::integer AS length
  FROM pgdl.datasets d
 CROSS JOIN LATERAL (
	SELECT e.col, e.position, sum(w.width) OVER () AS total,
		   sum(w.width) OVER (ORDER BY e.position) - w.width AS before
	  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.categorical) = 'array' THEN d.categorical END)
		   WITH ORDINALITY AS e(col, position)
	 CROSS JOIN LATERAL (SELECT coalesce((e.col ->> 'length')::bigint + 1, 1) AS width) w) c
 CROSS JOIN LATERAL jsonb_array_elements_text(c.col -> 'values') WITH ORDINALITY AS v(value, id);
COMMENT ON VIEW pgdl.vocabulary IS
	'the vocabulary of each categorical and sequence column of the datasets the caller may read: value and its id (categorical: id 0 is unseen or NULL; sequence: id 0 is padding, id 1 unseen or NULL), the first feature of the example vector that carries the column, and a sequence''s length L';
GRANT SELECT ON pgdl.vocabulary TO PUBLIC;

CREATE FUNCTION pgdl.encode(packed regclass, x real[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_encode'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.encode(regclass, real[], text[]) IS
	'the example vector of a dataset with categorical columns: raw numeric features x, then the id of each categorical value (0 when unseen or NULL); what pgdl.predict and predict_batch take';

CREATE FUNCTION pgdl.encode(packed regclass, x real[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_encode'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.encode(regclass, real[], text[], jsonb) IS
	'the example vector of a dataset with categorical and sequence columns: raw numeric features x, the id of each categorical value, then each sequence (a JSON array of tokens in sequences) as its L ids, padded or cut, and its length';

-- pgdl.predict, pgdl.predict_class with categorical values (datasets packed with categorical => ...)

CREATE FUNCTION pgdl.predict(model bigint, x real[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x real[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x real[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x real[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, real[], text[]) IS
	'outputs of stored model (by id) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, real[], text[]) IS
	'outputs of stored model (by name) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, real[], text[]) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features and categorical values';
COMMENT ON FUNCTION pgdl.predict_class(text, real[], text[]) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features and categorical values';

-- ... and with token sequences (datasets packed with sequence => ...): sequences is a JSON array, one
-- array of tokens (or null) per sequence column, e.g. jsonb_build_array(tokens)

CREATE FUNCTION pgdl.predict(model bigint, x real[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x real[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x real[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x real[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, real[], text[], jsonb) IS
	'outputs of stored model (by id) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, real[], text[], jsonb) IS
	'outputs of stored model (by name) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, real[], text[], jsonb) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features, categorical values and token sequences';
COMMENT ON FUNCTION pgdl.predict_class(text, real[], text[], jsonb) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features, categorical values and token sequences';

-- pgdl.export_dataset and pgdl.import_dataset carry the vocabularies (for packing on nodes with a reference)
CREATE OR REPLACE FUNCTION pgdl.export_dataset(packed regclass) RETURNS jsonb
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
	SELECT jsonb_build_object('task', d.task, 'n_features', d.n_features, 'n_targets', d.n_targets,
							  'classes', to_jsonb(d.classes), 'label_type', d.label_type::text,
							  'normalization', d.normalization, 'partitions', d.partitions, 'n_rows', d.n_rows)
		   -- the vocabularies only when there are some: a description without them reads as before
		   || CASE WHEN d.categorical IS NOT NULL THEN jsonb_build_object('categorical', d.categorical) ELSE '{}' END
	  FROM pgdl.datasets d WHERE d.packed = export_dataset.packed
$$;
COMMENT ON FUNCTION pgdl.export_dataset(regclass) IS
	'what a packed table''s rows mean (task, features, targets, classes, label type, normalization, vocabularies of categorical columns), as jsonb: pgdl.import_dataset on another server makes it a reference for pgdl.pack there';

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
							   normalization, n_rows, n_buffers, buffer_rows, partitions, seed, categorical)
	VALUES (made, 'pgdl.import_dataset', '', '', description->>'task', (description->>'n_features')::integer,
			(description->>'n_targets')::integer,
			CASE WHEN pg_catalog.jsonb_typeof(description->'classes') = 'array'
				 THEN ARRAY(SELECT pg_catalog.jsonb_array_elements_text(description->'classes')) END,
			label_regtype, description->'normalization', 0, 0, 1, 1, 0,
			CASE WHEN pg_catalog.jsonb_typeof(description->'categorical') = 'array' THEN description->'categorical' END);
	RETURN made;
END
$$;
COMMENT ON FUNCTION pgdl.import_dataset(jsonb, text) IS
	'an empty packed table with the classes and normalization of a dataset that pgdl.export_dataset described on another server: give it as reference => to pgdl.pack, so that a node packs its own rows as the coordinator''s';
-- ---- the job queue: a priority among a role's own jobs ----
DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer);
CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1, priority integer DEFAULT 0)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer, integer) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); on a distributed packed table, workers_per_node workers train on each node over libpq; a job of the server''s queue, priority (-100 to 100) ordering the caller''s own queued jobs; stores the models and returns the leaderboard';
DROP FUNCTION pgdl.resume(bigint, integer);
CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL, priority integer DEFAULT 0)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer, integer) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint; priority as pgdl.fit_multiple''s';

-- pgdl.evaluate_targets: per target of a model with several (multi-label, several regression outputs)

CREATE FUNCTION pgdl.evaluate_targets(model bigint, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model text, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model bytea, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;

COMMENT ON FUNCTION pgdl.evaluate_targets(bigint, regclass) IS
	'per target of stored model (by id) over a packed table: mean loss (binary cross-entropy or squared error) and, for binary_cross_entropy, the share of rows whose label is right';
COMMENT ON FUNCTION pgdl.evaluate_targets(text, regclass) IS
	'per target of stored model (by name) over a packed table: mean loss (binary cross-entropy or squared error) and, for binary_cross_entropy, the share of rows whose label is right';
COMMENT ON FUNCTION pgdl.evaluate_targets(bytea, regclass) IS
	'per target of a model blob over a packed table: mean loss (binary cross-entropy or squared error) and, for binary_cross_entropy, the share of rows whose label is right';
