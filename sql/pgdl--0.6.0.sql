-- pgdl install script, assembled by make from sql/parts/*.sql in name order.

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pgdl" to load this file. \quit

-- The control file names schema pg_catalog, so that PostgreSQL does not make schema pgdl outside the
-- extension: the script makes it, a member, and DROP EXTENSION takes it.  Every object is named with
-- its schema, and every function that runs SQL sets its search_path or qualifies what it names.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'pgdl') THEN
		RAISE EXCEPTION 'schema "pgdl" already exists'
			USING ERRCODE = 'duplicate_schema',
				  DETAIL = 'pgdl makes its schema pgdl itself. DROP EXTENSION pgdl of pgdl 0.1.0 left an empty one behind.',
				  HINT = 'Drop it (DROP SCHEMA pgdl), or rename it if it holds tables of yours, then create the extension.';
	END IF;
END
$$;
CREATE SCHEMA pgdl;
COMMENT ON SCHEMA pgdl IS 'pgdl: deep learning as SQL (its functions and catalog)';
GRANT USAGE ON SCHEMA pgdl TO PUBLIC;
-- What this build is and what it can run on.

CREATE FUNCTION pgdl.version() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_version'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.version() IS
	'pgdl''s version and build: engine model format, BLAS library, CUDA support';

CREATE FUNCTION pgdl.cuda_status() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_cuda_status'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_status() IS
	'whether CUDA devices can be used: "available: " and each device (name, compute capability, memory) and the driver, or the reason they cannot; creates no CUDA context';

CREATE FUNCTION pgdl.cuda_devices(OUT ordinal integer, OUT device text, OUT name text,
		OUT compute_capability text, OUT total_mb double precision, OUT free_mb double precision,
		OUT driver text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_cuda_devices'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_devices() IS
	'the CUDA devices this server sees (none without CUDA): the name pgdl.device and "device" take, model, compute capability, total and free memory, driver; creates no CUDA context';
-- The catalog: datasets (packed tables), architectures, models, runs and their metrics.
-- Rows are the extension's configuration data, so pg_dump keeps them.  Every row has an owner, the
-- role that wrote it; row-level security (70_owners.sql) shows and lets change only what the current
-- role owns or was granted.
--
-- New columns go at the end of their table: an installed pgdl is upgraded by ALTER TABLE ... ADD COLUMN
-- (sql/pgdl--A--B.sql), which appends, and regress/t/005_upgrade.pl checks that an upgraded catalog
-- equals a fresh one, column order included.

CREATE TABLE pgdl.datasets (
	id bigserial PRIMARY KEY,
	packed regclass NOT NULL UNIQUE,		-- the LIST-partitioned table pgdl.pack wrote
	source text NOT NULL,					-- the table it was packed from, as named then
	features text NOT NULL,					-- the feature column(s), as given
	label text NOT NULL,
	task text NOT NULL CHECK (task IN ('classification', 'regression')),
	n_features integer NOT NULL CHECK (n_features > 0),
	n_targets integer NOT NULL CHECK (n_targets > 0),	-- 1 for classes; outputs for regression
	classes text[],							-- class values, index i = class i; NULL for regression
	label_type regtype NOT NULL,			-- type of the source label column
	normalization jsonb NOT NULL,			-- {"scale": s} or {"mean": [...], "std": [...]}
	n_rows bigint NOT NULL,
	n_buffers integer NOT NULL,
	buffer_rows integer NOT NULL,
	partitions integer NOT NULL,
	seed bigint NOT NULL,
	reference bigint,						-- dataset whose classes and normalization were reused (see below)
	created timestamptz NOT NULL DEFAULT now(),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	categorical jsonb						-- vocabularies of categorical and sequence columns (see pack.md); NULL if none
);

CREATE TABLE pgdl.architectures (
	id bigserial PRIMARY KEY,
	name text NOT NULL,
	spec jsonb NOT NULL,					-- validated by pgdl.add_architecture
	created timestamptz NOT NULL DEFAULT now(),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	UNIQUE (owner, name)
);

CREATE TABLE pgdl.runs (
	id bigserial PRIMARY KEY,
	kind text NOT NULL,						-- 'fit' or 'fit_multiple'
	dataset bigint REFERENCES pgdl.datasets ON DELETE SET NULL,
	validation bigint REFERENCES pgdl.datasets ON DELETE SET NULL,
	architecture bigint REFERENCES pgdl.architectures ON DELETE SET NULL,
	config jsonb NOT NULL,
	epochs integer NOT NULL,
	status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'failed', 'cancelled')),
	started timestamptz NOT NULL DEFAULT now(),
	finished timestamptz,
	progress_handle bigint,					-- fit_multiple: the run's shared memory, for pgdl.progress
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole
);

CREATE TABLE pgdl.models (
	id bigserial PRIMARY KEY,
	name text,
	architecture bigint REFERENCES pgdl.architectures ON DELETE SET NULL,
	spec jsonb NOT NULL,
	config jsonb,
	dataset bigint REFERENCES pgdl.datasets ON DELETE SET NULL,
	run bigint REFERENCES pgdl.runs ON DELETE SET NULL,
	weights bytea NOT NULL,					-- engine model format: spec, parameters, optimizer state
	metrics jsonb,							-- of the last epoch
	parent bigint,							-- the base model of a transfer configuration (see below)
	created timestamptz NOT NULL DEFAULT now(),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	acl aclitem[],							-- who else may use it: pgdl.grant_model
	origin jsonb,							-- where it came from besides training: ONNX import, warm start
	UNIQUE (owner, name)
);
CREATE INDEX ON pgdl.models (dataset);		-- who may read a dataset's row: 70_owners.sql
ALTER TABLE pgdl.models ALTER COLUMN weights SET STORAGE EXTERNAL;

CREATE TABLE pgdl.run_metrics (
	run bigint NOT NULL REFERENCES pgdl.runs ON DELETE CASCADE,
	config bigint,							-- pgdl.configs.id in a pgdl.fit_multiple run
	model bigint,							-- filled in when the model is stored
	epoch integer NOT NULL,
	train_loss double precision,
	train_accuracy double precision,
	validation_loss double precision,
	validation_accuracy double precision,
	seconds double precision,
	images_per_second double precision,
	decision text,							-- halving strategies: 'continue' or 'stop' at a rung
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,	-- the run's, whoever writes the row
	state text NOT NULL DEFAULT 'ok' CHECK (state IN ('ok', 'diverged')),	-- 'diverged': training stopped in this epoch
	node text,								-- pgdl.fit_federated: the server a site's row is of; NULL: the run's model
	predicted_seconds double precision,	-- pgdl.fit_multiple: the epoch's training as pgdl.estimate predicted it
	bracket integer,						-- pgdl.fit_multiple: with a decision, the model's bracket (its rungs' count)
	UNIQUE NULLS NOT DISTINCT (run, config, epoch, node)
);

COMMENT ON TABLE pgdl.datasets IS 'packed training data written by pgdl.pack: shape, classes, normalization';
COMMENT ON TABLE pgdl.architectures IS 'named, validated network specs (jsonb) for pgdl.fit';
COMMENT ON TABLE pgdl.models IS 'trained models: spec, configuration, weights (engine format), metrics, lineage';
COMMENT ON TABLE pgdl.runs IS 'training runs: what was trained on what, and how it ended';
COMMENT ON TABLE pgdl.run_metrics IS 'per-epoch training and validation metrics of each run';

SELECT pg_catalog.pg_extension_config_dump('pgdl.datasets', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.datasets_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.architectures', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.architectures_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.runs', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.runs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.models', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.models_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.run_metrics', '');

-- A row that names another row of its own table (a dataset's reference, a model's parent) does so
-- without a foreign key: pg_dump loads the catalog's rows in the order their foreign keys allow, and a
-- table's key to itself is a loop it warns about ("circular foreign-key constraints").  Deleting a row
-- clears the names of it, as ON DELETE SET NULL did, in every role's rows: as the extension's owner.
CREATE FUNCTION pgdl.forget_deleted_rows() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	EXECUTE format('UPDATE %I.%I t SET %I = NULL WHERE t.%I IN (SELECT g.id FROM gone g)',
				   TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[0]);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION pgdl.forget_deleted_rows() IS
	'trigger: sets to NULL the column (the argument) of the rows that named deleted rows of the same table';
CREATE TRIGGER datasets_reference AFTER DELETE ON pgdl.datasets REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('reference');
CREATE TRIGGER models_parent AFTER DELETE ON pgdl.models REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('parent');

-- Backends cache deserialized models and datasets; a change to either table
-- flushes every backend's cache (a relcache invalidation of the table).
CREATE FUNCTION pgdl.catalog_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_catalog_changed'
	LANGUAGE C;
COMMENT ON FUNCTION pgdl.catalog_changed() IS
	'trigger: flushes the per-backend cache of models and datasets when pgdl.models or pgdl.datasets changes';

CREATE TRIGGER models_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.models
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
CREATE TRIGGER datasets_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.datasets
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();

-- Users train, store and share models: the catalog is theirs to read and write, each their own rows.
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs,
	pgdl.run_metrics TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.datasets_id_seq, pgdl.architectures_id_seq, pgdl.models_id_seq,
	pgdl.runs_id_seq TO PUBLIC;

-- Configuration sets for model selection (pgdl.grid_search, pgdl.random_search, or rows by hand).
CREATE TABLE pgdl.configs (
	id bigserial PRIMARY KEY,
	set_name text NOT NULL,
	architecture bigint REFERENCES pgdl.architectures ON DELETE CASCADE,	-- NULL: the network comes from config's base_model
	config jsonb NOT NULL,					-- a training configuration, stored in canonical form
	created timestamptz NOT NULL DEFAULT now(),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	UNIQUE NULLS NOT DISTINCT (owner, set_name, architecture, config),
	CHECK ((architecture IS NULL) = (config ? 'base_model'))
);
COMMENT ON TABLE pgdl.configs IS
	'configuration sets for pgdl.fit_multiple: an architecture (or a base model in the configuration) and a training configuration per row';
SELECT pg_catalog.pg_extension_config_dump('pgdl.configs', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.configs_id_seq', '');
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.configs TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.configs_id_seq TO PUBLIC;

-- Every model of a pgdl.fit_multiple run after every epoch, each in its own committed transaction,
-- so that pgdl.resume can continue a cancelled or crashed run.
CREATE TABLE pgdl.checkpoints (
	run bigint NOT NULL REFERENCES pgdl.runs ON DELETE CASCADE,
	config bigint NOT NULL,					-- pgdl.configs.id
	epoch integer NOT NULL,
	weights bytea NOT NULL,
	created timestamptz NOT NULL DEFAULT now(),
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,	-- the run's, whoever writes the row
	PRIMARY KEY (run, config, epoch)
);
ALTER TABLE pgdl.checkpoints ALTER COLUMN weights SET STORAGE EXTERNAL;
COMMENT ON TABLE pgdl.checkpoints IS 'models of pgdl.fit_multiple runs after each epoch, for pgdl.resume';
SELECT pg_catalog.pg_extension_config_dump('pgdl.checkpoints', '');
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.checkpoints TO PUBLIC;
-- Specs and configurations: validation, storage, cost.

CREATE FUNCTION pgdl.validate_spec(spec jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_validate_spec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.validate_spec(jsonb) IS
	'checks a network spec (errors name the layer and field) and returns it in canonical form, defaults filled in';

CREATE FUNCTION pgdl.validate_config(config jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_validate_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.validate_config(jsonb) IS
	'checks a training configuration (optimizer, lr, batch_size, seed, ...) and returns it with defaults filled in';

CREATE FUNCTION pgdl.add_architecture(name text, spec jsonb) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_add_architecture' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.add_architecture(text, jsonb) IS
	'validates a network spec and stores it in pgdl.architectures under a name; returns its id';

CREATE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}', examples bigint DEFAULT NULL,
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint,
		OUT profile bigint, OUT basis text, OUT images_per_second double precision,
		OUT seconds_per_epoch double precision, OUT workers jsonb, OUT memory jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_estimate' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.estimate(jsonb, jsonb, bigint) IS
	'cost of a spec: parameters, FLOPs per example (forward; training), activation bytes per example, training memory for one batch, and the predicted pace from this server''s profile (pgdl.calibrate) or pgdl.cpu_gflops';

CREATE FUNCTION pgdl.estimate_layers(spec jsonb,
		OUT layer integer, OUT type text, OUT output_shape integer[], OUT parameters bigint,
		OUT flops_forward bigint, OUT flops_train bigint, OUT activation_bytes bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_estimate_layers' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 16;
COMMENT ON FUNCTION pgdl.estimate_layers(jsonb) IS
	'cost of a spec layer by layer: output shape, parameters, FLOPs per example, activation bytes per example';

CREATE FUNCTION pgdl.init_model(spec jsonb, config jsonb DEFAULT '{}') RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_init_model' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.init_model(jsonb, jsonb) IS
	'a new model blob for a spec, initialized from the configuration''s seed, with its optimizer: the starting point for the pgdl.train aggregate';
-- pgdl.pack: a table to shuffled minibatch buffers in a LIST-partitioned table (see docs/reference/pack.md).

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
-- Training as an aggregate: state = model + optimizer state, transition = the
-- minibatch steps of one packed buffer, combine = average weighted by examples.

CREATE FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea, jsonb) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_transition' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_transition' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_combine(internal, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_combine' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_serial(internal) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_train_serial' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.train_deserial(bytea, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_deserial' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.train_final(internal) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_train_final' LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE pgdl.train(x real[], y real[], n integer, model bytea, config jsonb) (
	SFUNC = pgdl.train_transition,
	STYPE = internal,
	COMBINEFUNC = pgdl.train_combine,
	SERIALFUNC = pgdl.train_serial,
	DESERIALFUNC = pgdl.train_deserial,
	FINALFUNC = pgdl.train_final,
	PARALLEL = SAFE
);
CREATE AGGREGATE pgdl.train(x real[], y real[], n integer, model bytea) (
	SFUNC = pgdl.train_transition,
	STYPE = internal,
	COMBINEFUNC = pgdl.train_combine,
	SERIALFUNC = pgdl.train_serial,
	DESERIALFUNC = pgdl.train_deserial,
	FINALFUNC = pgdl.train_final,
	PARALLEL = SAFE
);

COMMENT ON FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea, jsonb) IS
	'pgdl.train transition: the minibatch steps of one packed buffer';
COMMENT ON FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea) IS
	'pgdl.train transition: the minibatch steps of one packed buffer, with the model''s own optimizer';
COMMENT ON FUNCTION pgdl.train_combine(internal, internal) IS
	'pgdl.train combine: average of two models weighted by the examples each has seen';
COMMENT ON FUNCTION pgdl.train_serial(internal) IS 'pgdl.train state to bytea, for parallel aggregation';
COMMENT ON FUNCTION pgdl.train_deserial(bytea, internal) IS 'pgdl.train state from bytea, for parallel aggregation';
COMMENT ON FUNCTION pgdl.train_final(internal) IS 'pgdl.train final: the trained model blob';
COMMENT ON AGGREGATE pgdl.train(real[], real[], integer, bytea, jsonb) IS
	'trains model (a blob) on packed buffers (x, y, n) with a training configuration; returns the trained blob';
COMMENT ON AGGREGATE pgdl.train(real[], real[], integer, bytea) IS
	'trains model (a blob) on packed buffers (x, y, n) with the optimizer stored in the model (or SGD defaults)';
-- pgdl.fit: one configuration trained for epochs over a packed table.

CREATE FUNCTION pgdl.fit(source regclass, architecture text, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, text, jsonb, integer, regclass, text) IS
	'trains a stored architecture on a packed table for some epochs (validating on another packed table if given); stores the model in pgdl.models and returns its id';

CREATE FUNCTION pgdl.fit(source regclass, spec jsonb, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_spec' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, jsonb, jsonb, integer, regclass, text) IS
	'trains a network given as a jsonb spec on a packed table; stores the model in pgdl.models and returns its id';
-- Inference: predictions for one example or a table, evaluation on a packed
-- table, and a model's weights in and out as arrays.
--
-- Every function that takes a model takes it three ways: by id (bigint, a row of
-- pgdl.models), by name (text) or as an engine blob (bytea, e.g. the result of
-- pgdl.train or pgdl.model_from_weights).  The three overloads share one C
-- function.  Stored models normalize raw features with their dataset; a blob has
-- no dataset: its features are used as given and its classes are indices.
--
-- A network on a row costs what a few hundred rows of a scan do: COST 1000 (of cpu_operator_cost) says so,
-- so that the planner runs the per-row functions after ORDER BY ... LIMIT and filters, not before.

-- pgdl.predict

CREATE FUNCTION pgdl.predict(model bigint, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model bytea, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, real[]) IS
	'outputs of stored model (by id) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(text, real[]) IS
	'outputs of stored model (by name) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(bytea, real[]) IS
	'outputs of a model blob for one example (features not normalized): class probabilities, sigmoids or values';

-- pgdl.predict_class

CREATE FUNCTION pgdl.predict_class(model bigint, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, real[]) IS
	'most likely class of one example under stored classifier (by id), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(text, real[]) IS
	'most likely class of one example under stored classifier (by name), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(bytea, real[]) IS
	'most likely class of one example under a classifier blob, as the class index (a blob has no dataset)';

-- pgdl.predict_class(model, x, label_type): the class in label_type's type (see predict.md)

CREATE FUNCTION pgdl.predict_class(model bigint, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, real[], anyelement) IS
	'most likely class of one example under stored classifier (by id), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(text, real[], anyelement) IS
	'most likely class of one example under stored classifier (by name), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(bytea, real[], anyelement) IS
	'most likely class index of one example under a classifier blob, as a value of label_type''s type';

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

-- pgdl.predict_batch
--
-- pgdl.predict_batch_rows does the work, one row per call, fetching batch_size rows of the source at a
-- time; each pgdl.predict_batch is an SQL function that calls it in a select list, so that PostgreSQL
-- inlines it into the caller's query and LIMIT stops it after the batches it read (a C function in FROM is
-- run to its end).  Not STRICT, or it would not be inlined: NULL arguments give no rows, as STRICT would.
-- COST is per row returned: a share of a batched forward pass.  PARALLEL RESTRICTED: a cursor lives in the
-- session that declared it.

CREATE FUNCTION pgdl.predict_batch_rows(model bigint, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;
CREATE FUNCTION pgdl.predict_batch_rows(model text, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;
CREATE FUNCTION pgdl.predict_batch_rows(model bytea, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;

COMMENT ON FUNCTION pgdl.predict_batch_rows(bigint, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (by id) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';
COMMENT ON FUNCTION pgdl.predict_batch_rows(text, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (by name) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';
COMMENT ON FUNCTION pgdl.predict_batch_rows(bytea, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (blob) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';

CREATE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, regclass, text, text, integer) IS
	'class index and its probability for every row of a table under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, text, text, text, integer) IS
	'class and its probability for every row of a table, view or query under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, text, text, text, integer) IS
	'class and its probability for every row of a table, view or query under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, text, text, text, integer) IS
	'class index and its probability for every row of a table, view or query under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, refcursor, text, text, integer) IS
	'class and its probability for every row of an open cursor under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, refcursor, text, text, integer) IS
	'class and its probability for every row of an open cursor under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, refcursor, text, text, integer) IS
	'class index and its probability for every row of an open cursor under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, regclass, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, regclass, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, regclass, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of a table under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, text, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table, view or query under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, text, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table, view or query under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, text, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of a table, view or query under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, refcursor, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of an open cursor under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, refcursor, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of an open cursor under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, refcursor, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of an open cursor under a classifier blob, batch_size rows per forward pass';

-- pgdl.evaluate: a network over a whole packed table, COST 100000 (that of some hundred per-row predictions)

CREATE FUNCTION pgdl.evaluate(model bigint, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;
CREATE FUNCTION pgdl.evaluate(model text, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;
CREATE FUNCTION pgdl.evaluate(model bytea, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;

COMMENT ON FUNCTION pgdl.evaluate(bigint, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(text, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(bytea, regclass) IS
	'mean loss and accuracy (NULL for mse) of a model blob over every buffer of a packed table';

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

-- pgdl.model_weights, pgdl.model_from_weights

CREATE FUNCTION pgdl.model_weights(model bigint)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.model_weights(model text)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.model_weights(model bytea)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.model_weights(bigint) IS
	'parameter tensors of stored model (by id) in order, named and shaped as in PyTorch''s state_dict';
COMMENT ON FUNCTION pgdl.model_weights(text) IS
	'parameter tensors of stored model (by name) in order, named and shaped as in PyTorch''s state_dict';
COMMENT ON FUNCTION pgdl.model_weights(bytea) IS
	'parameter tensors of a model blob in order, named and shaped as in PyTorch''s state_dict';

CREATE FUNCTION pgdl.model_from_weights(spec jsonb, params real[], buffers real[] DEFAULT NULL,
										seed bigint DEFAULT 42)
	RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_model_from_weights'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.model_from_weights(jsonb, real[], real[], bigint) IS
	'model blob from a spec and its parameters (and batchnorm running statistics), concatenated in pgdl.model_weights order';
-- Models in and out as ONNX files (docs/reference/onnx.md).
--
-- pgdl.export_onnx writes a model as an ONNX ModelProto (opset 13, float32) that computes what
-- pgdl.predict returns: the network in inference mode, then softmax (cross_entropy) or sigmoid
-- (binary_cross_entropy).  A stored model's dataset normalization is folded in as the graph's first
-- nodes unless with_normalization is false; the classes, the loss and the model's id and name go into the
-- file's metadata.  pgdl.import_onnx reads such a file (pgdl's or another framework's) into a new row of
-- pgdl.models (src/onnx_import.c), and recognizes what export added around the network.

-- pgdl.export_onnx

CREATE FUNCTION pgdl.export_onnx(model bigint, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.export_onnx(model text, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.export_onnx(model bytea, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.export_onnx(bigint, boolean) IS
	'stored model (by id) as an ONNX file: the network, its dataset''s normalization (unless with_normalization is false) and the output transform of pgdl.predict';
COMMENT ON FUNCTION pgdl.export_onnx(text, boolean) IS
	'stored model (by name) as an ONNX file: the network, its dataset''s normalization (unless with_normalization is false) and the output transform of pgdl.predict';
COMMENT ON FUNCTION pgdl.export_onnx(bytea, boolean) IS
	'model blob as an ONNX file (features as given, classes as indices): the network and the output transform of pgdl.predict';

-- pgdl.import_onnx

CREATE FUNCTION pgdl.import_onnx(name text, onnx bytea, dataset regclass DEFAULT NULL, loss text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_import_onnx'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.import_onnx(text, bytea, regclass, text) IS
	'stores an ONNX model (a chain of Gemm, MatMul+Add, Conv, pooling, BatchNormalization, activations, Dropout, Flatten) as a new pgdl model, optionally tied to a packed dataset; returns its id';
-- Configuration sets for model selection: rows of pgdl.configs (table in 20_catalog.sql), written by hand or
-- by pgdl.grid_search and pgdl.random_search, for pgdl.fit_multiple.

CREATE FUNCTION pgdl.configs_validate() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_configs_validate' LANGUAGE C;
COMMENT ON FUNCTION pgdl.configs_validate() IS
	'trigger: checks a pgdl.configs row (a non-empty set name, a valid training configuration) and stores its configuration in canonical form';
CREATE TRIGGER configs_validate BEFORE INSERT OR UPDATE ON pgdl.configs
	FOR EACH ROW EXECUTE FUNCTION pgdl.configs_validate();

CREATE FUNCTION pgdl.grid_search(set_name text, architectures text[], params jsonb) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_grid_search' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.grid_search(text, text[], jsonb) IS
	'adds to a configuration set every combination of the values in params (arrays are tried, scalars fixed) for each architecture; returns how many configurations were new';

CREATE FUNCTION pgdl.random_search(set_name text, architectures text[], space jsonb, n integer,
		seed bigint DEFAULT 42) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_random_search' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.random_search(text, text[], jsonb, integer, bigint) IS
	'adds to a configuration set n samples of a search space (choice, uniform, log_uniform, int, or fixed values per key), each with an architecture drawn from the list; deterministic for a seed; returns how many configurations were new';
-- Model hopper parallelism: many configurations trained at once by background workers.

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

CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL, priority integer DEFAULT 0)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer, integer) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint; priority as pgdl.fit_multiple''s';

CREATE FUNCTION pgdl.progress_rows(OUT run bigint, OUT config bigint, OUT state text, OUT epoch integer,
		OUT partitions_done integer, OUT partition integer, OUT worker_pid integer,
		OUT images_per_second double precision, OUT seconds_left double precision,
		OUT last_loss double precision, OUT node text, OUT kind text, OUT phase text, OUT pid integer,
		OUT target regclass, OUT done bigint, OUT total bigint, OUT unit text,
		OUT call_seconds_left double precision)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_progress' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION pgdl.progress_rows() IS
	'the long calls of pgdl in flight: the models of pgdl.fit_multiple runs (from the runs'' shared memory), and pgdl.fit, pgdl.pack, pgdl.distribute and feature cache builds (from their backends'' progress slots); see the view pgdl.progress';

CREATE VIEW pgdl.progress AS SELECT * FROM pgdl.progress_rows();
COMMENT ON VIEW pgdl.progress IS
	'long calls in flight: per pgdl.fit_multiple model its state, epoch, partition and worker (and the node it trains on), images/s and estimated seconds left; per pgdl.fit, pgdl.pack, pgdl.distribute or feature cache build its phase, epoch, units done of the phase, rate and estimated seconds left for the whole call';
GRANT SELECT ON pgdl.progress TO PUBLIC;
-- Transfer learning and materialized feature layers: configurations that freeze the first layers of a
-- stored base model share those layers' outputs, kept in materialized views in schema pgdl_cache.

CREATE SCHEMA pgdl_cache;
COMMENT ON SCHEMA pgdl_cache IS
	'feature caches of pgdl.fit_multiple: materialized views of frozen layers'' outputs, owned by the users who built them';
-- Workers build caches as the calling user, who owns them; nobody else is granted anything on them.
GRANT USAGE, CREATE ON SCHEMA pgdl_cache TO PUBLIC;

CREATE TABLE pgdl.feature_cache (
	id bigserial PRIMARY KEY,
	dataset bigint NOT NULL REFERENCES pgdl.datasets ON DELETE CASCADE,
	source regclass NOT NULL,				-- the packed table whose buffers it holds the features of
	base_model bigint,						-- the model whose first `depth` layers computed them
	base_hash text NOT NULL,				-- SHA-256 of those layers (spec and weights): pgdl.prefix_hash
	depth integer NOT NULL CHECK (depth > 0),
	staged_from bigint,						-- computed from this shallower cache (no foreign key: 20_catalog.sql)
	view regclass NOT NULL UNIQUE,			-- the materialized view in pgdl_cache
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	rows bigint NOT NULL,
	bytes bigint NOT NULL,
	created timestamptz NOT NULL DEFAULT now(),
	refreshed timestamptz NOT NULL DEFAULT now(),
	last_used timestamptz NOT NULL DEFAULT now(),
	source_version text NOT NULL,			-- pgdl.packed_version(source) when it was computed
	valid boolean NOT NULL DEFAULT true		-- false once its base model changed (its source: see source_version)
);
CREATE INDEX ON pgdl.feature_cache (dataset, depth);
CREATE TRIGGER feature_cache_staged_from AFTER DELETE ON pgdl.feature_cache REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('staged_from');
COMMENT ON TABLE pgdl.feature_cache IS
	'feature caches: per packed table and frozen prefix of a base model, the materialized view of its outputs, its size, use and validity';
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache_id_seq', '');
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.feature_cache TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.feature_cache_id_seq TO PUBLIC;

-- The storage of every role's caches, for pgdl.feature_cache_budget, which is for all of them: as the
-- extension's owner, since row-level security shows each role only its own.
CREATE FUNCTION pgdl.feature_cache_bytes() RETURNS bigint
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT coalesce(sum(f.bytes), 0)::bigint FROM pgdl.feature_cache f $$;
COMMENT ON FUNCTION pgdl.feature_cache_bytes() IS
	'bytes that all feature caches (every role''s) take, against pgdl.feature_cache_budget';

-- Staleness.  A cache records the version of its packed table (a hash of its rows' ctid and xmin, which
-- every INSERT, UPDATE, DELETE, TRUNCATE and re-pack changes) and is stale when the table's differs;
-- pgdl.fit_multiple checks before it uses a cache, so no trigger goes on users' tables.  A change to a
-- base model's weights marks its caches stale at once.
CREATE FUNCTION pgdl.packed_version(packed regclass) RETURNS text
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	rel record;
	v text;
BEGIN
	-- a regclass argument may be any oid: a dropped table's, or 0
	SELECT n.nspname, c.relname INTO rel
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = packed::oid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'relation with OID % does not exist', packed::oid USING ERRCODE = 'undefined_table';
	END IF;
	EXECUTE format('SELECT md5(coalesce(string_agg(tableoid::text || ctid::text || xmin::text, '','' '
				   'ORDER BY tableoid, ctid), '''')) FROM %I.%I', rel.nspname, rel.relname) INTO v;
	RETURN v;
END
$$;
COMMENT ON FUNCTION pgdl.packed_version(regclass) IS
	'the version of a packed table: it changes with any change to its rows; feature caches of another version are stale';

CREATE FUNCTION pgdl.base_model_changed() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	UPDATE pgdl.feature_cache SET valid = false WHERE base_model = OLD.id AND valid;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION pgdl.base_model_changed() IS
	'trigger on pgdl.models: marks the feature caches computed by a model stale when its weights change or it is deleted';
CREATE TRIGGER models_feature_cache AFTER UPDATE OF weights OR DELETE ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.base_model_changed();

-- A dropped packed table takes its pgdl.datasets row with it, a dropped cache view its
-- pgdl.feature_cache row, whoever drops them: as the extension's owner, since the rows need not be
-- the dropping role's (70_owners.sql).
CREATE FUNCTION pgdl.forget_dropped_relations() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	DELETE FROM pgdl.datasets d
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid;
	DELETE FROM pgdl.feature_cache f
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = f.view::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_relations() IS
	'event trigger: removes the pgdl.datasets rows of dropped packed tables and the pgdl.feature_cache rows of dropped cache views';
CREATE EVENT TRIGGER pgdl_forget_dropped_relations ON sql_drop
	EXECUTE FUNCTION pgdl.forget_dropped_relations();

-- What cache views are made of.  A network on a buffer of examples: COST 50000 (per call, or per row
-- returned), some fifty per-row predictions.

CREATE FUNCTION pgdl.prefix_hash(model bigint, layers integer) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_prefix_hash_sql' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.prefix_hash(bigint, integer) IS
	'SHA-256 (hex) of a stored model''s first layers, spec and weights: equal for equal frozen prefixes, the key of feature caches';

-- Row-level security on: a cache view is refreshed as its owner, who reads the base model under the
-- catalog's policies, also when a restore (which sets row_security off) refreshes it.
CREATE FUNCTION pgdl.cache_features(base bigint, from_layer integer, to_layer integer, base_hash text,
		x real[], n integer) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_cache_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 50000
	SET row_security = on;
COMMENT ON FUNCTION pgdl.cache_features(bigint, integer, integer, text, real[], integer) IS
	'internal, the rows of feature cache views: layers [from_layer, to_layer) of a base model on a buffer of n examples; an error if the base''s first to_layer layers no longer hash to base_hash';

-- pgdl.features: the output of a network's first layers.

CREATE FUNCTION pgdl.features(model bigint, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.features(model text, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.features(model bytea, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
COMMENT ON FUNCTION pgdl.features(bigint, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by id) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(text, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by name) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(bytea, integer, real[]) IS
	'outputs of the first `layer` layers of a model blob for one example (features used as given), in inference mode';

-- A packed table is one with a pgdl.datasets row and a pg_class row (a forged dataset row may name a
-- dropped table); a model name that does not exist is echoed cut, not 10 MB of it.
CREATE FUNCTION pgdl.features_batch(model bigint, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE COST 50000 AS
$$
DECLARE
	h text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pgdl.datasets d JOIN pg_catalog.pg_class c ON c.oid = d.packed WHERE d.packed = features_batch.source) THEN
		RAISE EXCEPTION 'relation "%" is not a packed table', features_batch.source
			USING ERRCODE = 'wrong_object_type', HINT = 'Pack a table with pgdl.pack() first.';
	END IF;
	h := pgdl.prefix_hash(model, layer);
	RETURN QUERY EXECUTE format(
		'SELECT part, buffer_id, n, pgdl.cache_features($1, 0, $2, $3, x, n), y FROM %s ORDER BY part, buffer_id',
		features_batch.source) USING model, layer, h;
END
$$;
CREATE FUNCTION pgdl.features_batch(model text, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE COST 50000 AS
$$
DECLARE
	id bigint;
BEGIN
	id := pgdl.model_id(model);
	IF id IS NULL THEN
		RAISE EXCEPTION 'model "%" does not exist', CASE WHEN length(model) > 64 THEN left(model, 64) || '...' ELSE model END USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY SELECT * FROM pgdl.features_batch(id, layer, features_batch.source);
END
$$;
COMMENT ON FUNCTION pgdl.features_batch(bigint, integer, regclass) IS
	'pgdl.features over a packed table: per buffer of a packed table (part, buffer_id, n, y as packed), the outputs of stored model''s first `layer` layers, as a feature cache holds them';
COMMENT ON FUNCTION pgdl.features_batch(text, integer, regclass) IS
	'pgdl.features over a packed table: per buffer of a packed table (part, buffer_id, n, y as packed), the outputs of stored model''s first `layer` layers, as a feature cache holds them';

-- Planning and housekeeping.

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

CREATE FUNCTION pgdl.drop_feature_cache(cache regclass) RETURNS void
	LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	-- the catalog is writable by all: only materialized views in pgdl_cache are caches
	IF NOT EXISTS (SELECT 1 FROM pgdl.feature_cache f JOIN pg_class c ON c.oid = f.view
				    WHERE f.view = cache AND c.relkind = 'm' AND c.relnamespace = 'pgdl_cache'::regnamespace) THEN
		RAISE EXCEPTION '"%" is not a feature cache', cache
			USING ERRCODE = 'wrong_object_type', HINT = 'The caches are listed in pgdl.feature_cache.';
	END IF;
	-- deeper caches computed from it go with it
	EXECUTE format('DROP MATERIALIZED VIEW %s CASCADE', cache);
END
$$;
COMMENT ON FUNCTION pgdl.drop_feature_cache(regclass) IS
	'drops a feature cache view (and the caches staged from it) and its pgdl.feature_cache row';

CREATE FUNCTION pgdl.cleanup_feature_cache(unused_for interval DEFAULT '7 days') RETURNS integer
	LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	c record;
	dropped integer := 0;
BEGIN
	FOR c IN SELECT f.view FROM pgdl.feature_cache f JOIN pg_class r ON r.oid = f.view
			  WHERE f.owner = quote_ident(current_user)::regrole AND (NOT f.valid OR f.last_used < now() - unused_for)
			    AND r.relkind = 'm' AND r.relnamespace = 'pgdl_cache'::regnamespace
				AND r.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
			  ORDER BY f.depth DESC
	LOOP
		-- an earlier CASCADE may have taken it already
		IF EXISTS (SELECT 1 FROM pgdl.feature_cache f WHERE f.view = c.view) THEN
			EXECUTE format('DROP MATERIALIZED VIEW %s CASCADE', c.view);
			dropped := dropped + 1;
		END IF;
	END LOOP;
	RETURN dropped;
END
$$;
COMMENT ON FUNCTION pgdl.cleanup_feature_cache(interval) IS
	'drops the caller''s feature caches that are stale or unused for the given interval; returns how many';
-- Owners, sharing and row-level security (see docs/security.md).
--
-- Every catalog row has an owner, the role that wrote it.  Row-level security makes PostgreSQL's usual
-- rules hold in the catalog: a role sees and changes the rows of the roles it is a member of, and sees
-- the models it was granted (pgdl.grant_model) and the datasets it may read; superusers and members of
-- pgdl_admin see and change everything.  The functions of pgdl run as the caller, background workers
-- too, so these rules are the only ones: nothing of pgdl reads the catalog with other rights but the
-- four SECURITY DEFINER functions that must touch other roles' rows (65_feature_cache.sql:
-- base_model_changed, forget_dropped_relations, feature_cache_bytes; 20_catalog.sql:
-- forget_deleted_rows).

-- The administrators of the catalog.  A role is not part of an extension: DROP EXTENSION leaves it.
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgdl_admin') THEN
		CREATE ROLE pgdl_admin NOLOGIN;
		COMMENT ON ROLE pgdl_admin IS
			'pgdl: its members see and change every row of the pgdl catalog, whoever owns it (made by CREATE EXTENSION pgdl, left by DROP EXTENSION)';
	END IF;
END
$$;

-- Who acts as an owner; written once for every policy.  SQL functions without SET, so that the
-- planner inlines them; every name is qualified.
CREATE FUNCTION pgdl.acts_as(owner regrole) RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT pg_catalog.pg_has_role($1, 'MEMBER')
	OR coalesce(pg_catalog.pg_has_role(pg_catalog.to_regrole('pgdl_admin'), 'MEMBER'), false)
$$;
COMMENT ON FUNCTION pgdl.acts_as(regrole) IS
	'whether the current role acts as the owner of a catalog row: a member of the owning role or of pgdl_admin';

-- An owner may write any acl into its own rows: one aclexplode refuses (empty, 2-D, a NULL) grants
-- nothing, rather than failing every other role's read of pgdl.models.
CREATE FUNCTION pgdl.granted(acl aclitem[]) RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT CASE WHEN pg_catalog.array_ndims($1) = 1 AND pg_catalog.array_position($1, NULL) IS NULL
			THEN EXISTS (SELECT 1 FROM pg_catalog.aclexplode($1) a
						  WHERE a.grantee = 0 OR pg_catalog.pg_has_role(a.grantee, 'MEMBER'))
			ELSE false END
$$;
COMMENT ON FUNCTION pgdl.granted(aclitem[]) IS
	'whether a pgdl.models acl grants the current role (or PUBLIC) the use of the model';

-- What a run writes (its metrics, checkpoints and models) belongs to the run's owner, whoever writes it
-- (a member of the owning role resuming its run, a superuser): so "the checkpoints of run r" are
-- always its owner's.  A model given away later keeps its new owner: that trigger fires on INSERT only,
-- and only for a row that names its writer as its owner (the default), so that a restore, which writes
-- every row with its owner, keeps the models given away (all but those given to the restoring role).
CREATE FUNCTION pgdl.owned_by_run() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	run_owner regrole;
BEGIN
	-- a run the writer may not see leaves the row as written, for the policy to refuse
	SELECT r.owner INTO run_owner FROM pgdl.runs r WHERE r.id = NEW.run;
	IF FOUND THEN
		NEW.owner := run_owner;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.owned_by_run() IS
	'trigger on pgdl.run_metrics, pgdl.checkpoints and pgdl.models: a row a run writes belongs to the owner of the run';
CREATE TRIGGER run_metrics_owner BEFORE INSERT OR UPDATE OF run, owner ON pgdl.run_metrics
	FOR EACH ROW EXECUTE FUNCTION pgdl.owned_by_run();
CREATE TRIGGER checkpoints_owner BEFORE INSERT OR UPDATE OF run, owner ON pgdl.checkpoints
	FOR EACH ROW EXECUTE FUNCTION pgdl.owned_by_run();
CREATE TRIGGER models_owner BEFORE INSERT ON pgdl.models
	FOR EACH ROW WHEN (NEW.run IS NOT NULL AND NEW.owner = quote_ident(current_user)::regrole)
	EXECUTE FUNCTION pgdl.owned_by_run();

-- ---- Row-level security ----
--
-- The owners: every command.  A row written must be the writer's (or a role's it is a member of),
-- and what it points at in the catalog must be the writer's to use.
ALTER TABLE pgdl.datasets ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.architectures ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.run_metrics ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.configs ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.feature_cache ENABLE ROW LEVEL SECURITY;

CREATE POLICY owners ON pgdl.datasets USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.architectures USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.runs USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.models USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.feature_cache USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.configs USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND (architecture IS NULL OR
			EXISTS (SELECT 1 FROM pgdl.architectures a WHERE a.id = configs.architecture)));
-- nobody writes into another role's run: its checkpoints are what pgdl.resume trains on
CREATE POLICY owners ON pgdl.run_metrics USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.runs r WHERE r.id = run_metrics.run AND r.owner = run_metrics.owner));
CREATE POLICY owners ON pgdl.checkpoints USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.runs r WHERE r.id = checkpoints.run AND r.owner = checkpoints.owner));

-- Who else reads.  A model: those it was granted to.  A dataset (classes, normalization, size): those
-- who may read its packed table, and those granted a model its owner trained on it, since predicting
-- with the model needs them.
CREATE POLICY grantees ON pgdl.models FOR SELECT USING (pgdl.granted(acl));
CREATE POLICY readers ON pgdl.datasets FOR SELECT
	USING (pg_catalog.has_table_privilege(packed::oid, 'SELECT') OR
		   EXISTS (SELECT 1 FROM pgdl.models m
					WHERE m.dataset = datasets.id AND pg_catalog.pg_has_role(m.owner, datasets.owner, 'MEMBER')));

COMMENT ON POLICY owners ON pgdl.datasets IS 'the owner of a dataset (or pgdl_admin) reads and changes it';
COMMENT ON POLICY readers ON pgdl.datasets IS
	'those who may SELECT the packed table, or use a model the dataset''s owner trained on it, read the dataset';
COMMENT ON POLICY owners ON pgdl.architectures IS 'the owner of an architecture (or pgdl_admin) reads and changes it';
COMMENT ON POLICY owners ON pgdl.runs IS 'the owner of a run (or pgdl_admin) reads and changes it';
COMMENT ON POLICY owners ON pgdl.models IS 'the owner of a model (or pgdl_admin) reads and changes it';
COMMENT ON POLICY grantees ON pgdl.models IS 'those a model was granted to (pgdl.grant_model) read it';
COMMENT ON POLICY owners ON pgdl.feature_cache IS 'the owner of a feature cache (or pgdl_admin) reads and changes its row';
COMMENT ON POLICY owners ON pgdl.configs IS
	'the owner of a configuration (or pgdl_admin) reads and changes it; its architecture must be one the writer may use';
COMMENT ON POLICY owners ON pgdl.run_metrics IS
	'the owner of a run (or pgdl_admin) reads and changes its metrics; nobody writes metrics into another role''s run';
COMMENT ON POLICY owners ON pgdl.checkpoints IS
	'the owner of a run (or pgdl_admin) reads and changes its checkpoints; nobody writes checkpoints into another role''s run';

-- ---- Names ----
--
-- A model, architecture or configuration set named by the current role is its own, else the only one
-- of that name it may use; several, none its own, is an error (what it echoes cut short); none is NULL
-- (as to_regclass), for the caller's own "does not exist".
CREATE FUNCTION pgdl.resolve_name(kind text, name text, ids bigint[], owners regrole[], hint text)
	RETURNS bigint
	LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	me regrole := quote_ident(current_user)::regrole;
BEGIN
	FOR i IN 1 .. coalesce(cardinality(ids), 0) LOOP
		IF owners[i] = me THEN
			RETURN ids[i];
		END IF;
	END LOOP;
	IF cardinality(ids) > 1 THEN
		RAISE EXCEPTION '% "%" is ambiguous', left(kind, 64), CASE WHEN length(name) > 64 THEN left(name, 64) || '...' ELSE name END
			USING ERRCODE = 'ambiguous_alias',
				  DETAIL = format('You have none of that name, and these roles have one you may use: %s.',
								  array_to_string(owners[1:10]::text[], ', ') || CASE WHEN cardinality(owners) > 10 THEN ', ...' ELSE '' END),
				  HINT = left(hint, 200);
	END IF;
	RETURN ids[1];
END
$$;
COMMENT ON FUNCTION pgdl.resolve_name(text, text, bigint[], regrole[], text) IS
	'internal, the rule of names: of the rows of a name the current role may use (ids, their owners), its own, else the only one; NULL if none, an error if several';

CREATE FUNCTION pgdl.model_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('model', $1, array_agg(m.id ORDER BY m.id), array_agg(m.owner ORDER BY m.id),
						 'Give the model''s id (pgdl.models.id), or SET ROLE to its owner.')
  FROM pgdl.models m WHERE m.name = $1
$$;
COMMENT ON FUNCTION pgdl.model_id(text) IS
	'the id of the model a name means to the current role: its own, else the only one of that name it may use; NULL if none';

CREATE FUNCTION pgdl.architecture_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('architecture', $1, array_agg(a.id ORDER BY a.id), array_agg(a.owner ORDER BY a.id),
						 'Store one of your own with pgdl.add_architecture(), or SET ROLE to its owner.')
  FROM pgdl.architectures a WHERE a.name = $1
$$;
COMMENT ON FUNCTION pgdl.architecture_id(text) IS
	'the id of the architecture a name means to the current role: its own, else the only one of that name it may use; NULL if none';

-- A set is the rows of one owner with one set name; a run's set is its owner's.
CREATE FUNCTION pgdl.config_set_owner(set_name text, run bigint DEFAULT NULL) RETURNS regrole
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT CASE WHEN coalesce($2, 0) <> 0 THEN (SELECT r.owner FROM pgdl.runs r WHERE r.id = $2)
	   ELSE (SELECT pgdl.resolve_name('configuration set', $1, array_agg(s.o::oid::bigint ORDER BY s.o),
									  array_agg(s.o ORDER BY s.o),
									  'SET ROLE to the owner of the set you mean, or make a set of your own.')::oid::regrole
			   FROM (SELECT DISTINCT c.owner AS o FROM pgdl.configs c WHERE c.set_name = $1) s)
	   END
$$;
COMMENT ON FUNCTION pgdl.config_set_owner(text, bigint) IS
	'whose configuration set a name means to the current role: its own, else the only one of that name it may use (NULL if none); with a run, the run''s owner';

-- ---- Sharing ----
--
-- A granted model can be used (predict, evaluate, features, a base model) and not changed: the
-- grantees policy lets it be read, and only the owners policy lets it be written.  Grants are
-- aclitems, USAGE, granted by the model's owner.
CREATE FUNCTION pgdl.set_model_grant(model bigint, model_label text, role text, shared boolean)
	RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	to_role oid;
	model_owner regrole;
BEGIN
	-- a 10 MB name is not echoed whole
	IF length(model_label) > 66 THEN
		model_label := left(model_label, 65) || '..."';
	END IF;
	-- NULL would read as "no role": a revoke from every grantee
	IF role IS NULL OR shared IS NULL THEN
		RAISE EXCEPTION 'role and shared must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	to_role := CASE WHEN lower(role) = 'public' THEN 0 ELSE role::regrole::oid END;
	-- regrole takes any number as an oid, and 0 or '-' as no role: only "public" means PUBLIC
	IF lower(role) <> 'public' AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = to_role) THEN
		RAISE EXCEPTION 'role with OID % does not exist', to_role USING ERRCODE = 'undefined_object';
	END IF;
	SELECT m.owner INTO model_owner FROM pgdl.models m WHERE m.id = model;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', model_label USING ERRCODE = 'undefined_object';
	END IF;
	IF NOT pgdl.acts_as(model_owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model_label
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s, who may grant and revoke its use.', model_label, model_owner);
	END IF;
	UPDATE pgdl.models m
	   SET acl = nullif(ARRAY(SELECT i FROM unnest(m.acl) i
							   WHERE (SELECT a.grantee FROM aclexplode(ARRAY[i]) a) <> to_role) ||
						CASE WHEN shared THEN ARRAY[makeaclitem(to_role, model_owner, 'USAGE', false)]
							 ELSE '{}'::aclitem[] END, '{}')
	 WHERE m.id = model;
END
$$;
COMMENT ON FUNCTION pgdl.set_model_grant(bigint, text, text, boolean) IS
	'internal, pgdl.grant_model and pgdl.revoke_model: adds or removes a role''s USAGE in a model''s acl';

CREATE FUNCTION pgdl.grant_model(model bigint, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant($1, $1::text, $2, true) $$;
CREATE FUNCTION pgdl.grant_model(model text, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant(pgdl.model_id($1), format('"%s"', $1), $2, true) $$;
CREATE FUNCTION pgdl.revoke_model(model bigint, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant($1, $1::text, $2, false) $$;
CREATE FUNCTION pgdl.revoke_model(model text, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant(pgdl.model_id($1), format('"%s"', $1), $2, false) $$;
COMMENT ON FUNCTION pgdl.grant_model(bigint, text) IS
	'lets a role (or PUBLIC) use stored model (by id): predict, evaluate, features, base model; not change it. Only its owner grants';
COMMENT ON FUNCTION pgdl.grant_model(text, text) IS
	'lets a role (or PUBLIC) use stored model (by name): predict, evaluate, features, base model; not change it. Only its owner grants';
COMMENT ON FUNCTION pgdl.revoke_model(bigint, text) IS
	'takes back from a role (or PUBLIC) the use of stored model (by id) that pgdl.grant_model gave';
COMMENT ON FUNCTION pgdl.revoke_model(text, text) IS
	'takes back from a role (or PUBLIC) the use of stored model (by name) that pgdl.grant_model gave';
-- This server's measured pace (pgdl.calibrate), from which pgdl.estimate and pgdl.explain_fit_multiple
-- predict.  A profile is a measurement of a machine, not user data: everybody reads it, nobody but
-- pgdl.calibrate writes it (the table belongs to the extension's owner and grants only SELECT), and pg_dump
-- leaves it out (a restored catalog lives on another server, which calibrates anew).  Calibrating again adds
-- a newer row; the newest row of this server (system identifier and host name) is used.

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
-- The extension's life: checkpoints of finished runs, runs in flight, DROP EXTENSION.

-- Checkpoints are for pgdl.resume; a finished run keeps the last pgdl.keep_checkpoints of each of its
-- models (pruned when it finishes), and this prunes those of earlier runs.
CREATE FUNCTION pgdl.cleanup_checkpoints(keep integer DEFAULT NULL, run bigint DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_cleanup_checkpoints' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.cleanup_checkpoints(integer, bigint) IS
	'deletes all but the last `keep` checkpoints (default pgdl.keep_checkpoints; -1 keeps all) of each model of the caller''s runs not in flight (or of one run), keeping at least the last of a run that did not finish so that it can be resumed; returns how many';

CREATE FUNCTION pgdl.run_in_progress(run bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'pgdl_run_in_progress' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.run_in_progress(bigint) IS
	'whether a pgdl.fit_multiple or pgdl.resume of the run is in flight: its leader or one of its workers is alive';

-- DROP EXTENSION pgdl takes its schemas, catalog and caches, and leaves the packed tables, which are
-- their owners' tables: it says which.  ddl_command_start, since by sql_drop pgdl.datasets is gone;
-- the C function reads the statement, so that it speaks only when pgdl is dropped.
CREATE FUNCTION pgdl.on_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'pgdl_on_drop_extension' LANGUAGE C;
COMMENT ON FUNCTION pgdl.on_drop_extension() IS
	'event trigger: a NOTICE at DROP EXTENSION pgdl that lists the packed tables it leaves';
CREATE EVENT TRIGGER pgdl_drop_extension ON ddl_command_start WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION pgdl.on_drop_extension();
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
-- Several servers: a coordinator and its nodes (postgres_fdw foreign servers, reached over libpq).

CREATE FUNCTION pgdl.train_partitions(model bytea, config jsonb, packed regclass, parts integer[],
		epochs integer DEFAULT 1, prefix bytea DEFAULT NULL)
	RETURNS TABLE (model bytea, examples bigint, loss_sum double precision, correct bigint, n bigint,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_train_partitions' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer, bytea) IS
	'trains a model on partitions of a packed table of this server, in the order given, epochs times, through its frozen layers (prefix) if it has some, as a model hopper worker does: what a coordinator runs on its nodes; returns the model and what it measured';

CREATE FUNCTION pgdl.distribute(packed regclass, servers text[]) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_distribute' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.distribute(regclass, text[]) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; a partition already moved stays, so calling again finishes an interrupted call; returns the partitions this call moved';

CREATE FUNCTION pgdl.fit_federated(source regclass, architecture text, config jsonb DEFAULT '{}',
		rounds integer DEFAULT 10, local_epochs integer DEFAULT 1, validation regclass DEFAULT NULL,
		name text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_federated' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_federated(regclass, text, jsonb, integer, integer, regclass, text) IS
	'federated averaging over the sites of a distributed packed table (the partitions each server holds): each round every site trains a copy of the model on its own partitions, local_epochs times, and the copies are averaged weighted by their examples; only models leave a site; stores the model and returns its id';

CREATE FUNCTION pgdl.average_models(models bytea[], examples bigint[]) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_average_models' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.average_models(bytea[], bigint[]) IS
	'the average of models of one architecture weighted by the examples each trained on, folded in array order as pgdl.fit_federated averages its sites (and the pgdl.train aggregate its partial models)';

-- Federating: each node packs its own rows with the coordinator's classes and normalization.

CREATE FUNCTION pgdl.export_dataset(packed regclass) RETURNS jsonb
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
CREATE FUNCTION pgdl.import_dataset(description jsonb, name text) RETURNS regclass
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

CREATE FUNCTION pgdl.attach_partitions(packed regclass, server text, remote_packed text) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_attach_partitions' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.attach_partitions(regclass, text, text) IS
	'adds the partitions of a packed table on a node (packed there with reference => pgdl.import_dataset of this one''s description) as partitions of a packed table here, foreign tables over the node''s: its rows never leave the node; returns the partitions added';
-- Views for BI tools and charts (docs/reference/bi.md): the runs' models and their training curves in
-- plain SQL types, since ODBC drivers report jsonb and arrays as varchar(255).  Both views run with the
-- rights of the role that queries them (security_invoker), so row-level security shows each role only
-- its own runs (70_owners.sql).
--
-- A model of a run is what pgdl.run_metrics has rows of: its (run, config), config NULL where the run
-- records none (pgdl.fit, pgdl.fit_federated); the per-site rows of pgdl.fit_federated (node set) are not
-- models.
-- The catalog is writable by its owners, so every value read from jsonb is typed only when it has the
-- type: a configuration whose "lr" is a string or an object shows NULL there, never an error.

CREATE VIEW pgdl.leaderboard WITH (security_invoker = true) AS
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

COMMENT ON VIEW pgdl.leaderboard IS
	'one row per model of every run the caller may see (pgdl.fit, pgdl.fit_multiple, pgdl.fit_federated): its rank in the run (as pgdl.fit_multiple ranks), status, last epoch''s metrics and its training configuration''s keys as columns, in plain SQL types for BI tools';
COMMENT ON COLUMN pgdl.leaderboard.rank IS
	'1 = best in the run: models that diverged last; before them, those trained the most epochs first, then by ranked_by (lower first), then by config and model id';
COMMENT ON COLUMN pgdl.leaderboard.ranked_by IS
	'the loss the model was ranked on: validation_loss when its last epoch was validated, else train_loss';
COMMENT ON COLUMN pgdl.leaderboard.config IS
	'the pgdl.configs.id the run records for the model (pgdl.fit_multiple); NULL where it records none';
COMMENT ON COLUMN pgdl.leaderboard.status IS
	'diverged (training stopped on NaN or infinity), stopped (by successive halving), else the run''s status: running, finished, failed, cancelled';
COMMENT ON COLUMN pgdl.leaderboard.epochs IS 'epochs trained: the last epoch with metrics';
COMMENT ON COLUMN pgdl.leaderboard.seconds IS 'training seconds, all epochs together';
COMMENT ON COLUMN pgdl.leaderboard.base_model IS
	'the configuration''s "base_model" key (a model''s name or id) as text: the model it was trained from';
COMMENT ON COLUMN pgdl.leaderboard.frozen IS
	'the configuration''s "freeze" key (a number of layers, or the name of the last frozen layer) as text';
COMMENT ON COLUMN pgdl.leaderboard.config_text IS
	'the training configuration as JSON text: the stored model''s, else its pgdl.configs row''s, else the run''s';

CREATE VIEW pgdl.training_curves WITH (security_invoker = true) AS
SELECT l.run, l.model, l.model_name, l.config, l.architecture, l.rank, rm.epoch, v.metric, v.value
  FROM pgdl.run_metrics rm
  JOIN pgdl.leaderboard l ON l.run = rm.run AND coalesce(l.config, 0) = coalesce(rm.config, 0)
 CROSS JOIN LATERAL (VALUES ('train_loss', rm.train_loss), ('train_accuracy', rm.train_accuracy),
							('validation_loss', rm.validation_loss),
							('validation_accuracy', rm.validation_accuracy)) v(metric, value)
 WHERE rm.node IS NULL AND v.value IS NOT NULL;

COMMENT ON VIEW pgdl.training_curves IS
	'the metrics of every epoch of every model of the runs the caller may see, one row per model, epoch and metric (train_loss, train_accuracy, validation_loss, validation_accuracy), ready to chart';
COMMENT ON COLUMN pgdl.training_curves.rank IS 'the model''s rank in its run (pgdl.leaderboard)';

GRANT SELECT ON pgdl.leaderboard, pgdl.training_curves TO PUBLIC;
-- The model zoo (docs/reference/zoo.md): every model the caller may see with its descriptors, the stored
-- models most like a model or a spec, and (src/transfer.c) warm starts from one of them.

CREATE FUNCTION pgdl.spec_summary(spec jsonb, OUT layers text, OUT n_layers integer, OUT params bigint,
		OUT flops bigint, OUT input_shape integer[])
	AS 'MODULE_PATHNAME', 'pgdl_spec_summary' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.spec_summary(jsonb) IS
	'a spec in a line: its layers as text (''conv2d(8,3x3) relu flatten dense(10)''), their number, parameters, forward FLOPs per example and input shape';

-- A model's best metrics come from its run's rows (which its run's owner sees), else from the last
-- epoch's that pgdl.models keeps (which whoever sees the model sees).  Values read from jsonb are typed
-- only when they have the type, as in the BI views: a row written by hand shows NULL, never an error.
CREATE VIEW pgdl.zoo WITH (security_invoker = true) AS
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
	   coalesce(r.last_train_loss, mm.train_loss) AS last_train_loss
  FROM pgdl.models m
 CROSS JOIN LATERAL pgdl.spec_summary(m.spec) s
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
COMMENT ON VIEW pgdl.zoo IS
	'every model the caller may see, with its layers, size, task, data, training configuration, lineage and best metrics';
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
