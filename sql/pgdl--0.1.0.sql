-- pgdl install script, assembled by make from sql/parts/*.sql in name order.

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pgdl" to load this file. \quit
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
	'whether the CUDA backend can be used in this session: "available: <device>", or the reason it cannot';
-- The catalog: datasets (packed tables), architectures, models, runs and their metrics.
-- Rows are the extension's configuration data, so pg_dump keeps them.

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
	reference bigint REFERENCES pgdl.datasets ON DELETE SET NULL,	-- dataset whose classes and normalization were reused
	created timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgdl.architectures (
	id bigserial PRIMARY KEY,
	name text NOT NULL UNIQUE,
	spec jsonb NOT NULL,					-- validated by pgdl.add_architecture
	created timestamptz NOT NULL DEFAULT now()
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
	progress_handle bigint					-- fit_multiple: the run's shared memory, for pgdl.progress
);

CREATE TABLE pgdl.models (
	id bigserial PRIMARY KEY,
	name text UNIQUE,
	architecture bigint REFERENCES pgdl.architectures ON DELETE SET NULL,
	spec jsonb NOT NULL,
	config jsonb,
	dataset bigint REFERENCES pgdl.datasets ON DELETE SET NULL,
	run bigint REFERENCES pgdl.runs ON DELETE SET NULL,
	weights bytea NOT NULL,					-- engine model format: spec, parameters, optimizer state
	metrics jsonb,							-- of the last epoch
	parent bigint REFERENCES pgdl.models ON DELETE SET NULL,
	created timestamptz NOT NULL DEFAULT now()
);
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
	decision text,							-- successive halving: 'continue' or 'stop' at a rung
	UNIQUE NULLS NOT DISTINCT (run, config, epoch)
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

-- Users train, store and share models: the catalog is theirs to read and write.
GRANT USAGE ON SCHEMA pgdl TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs,
	pgdl.run_metrics TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.datasets_id_seq, pgdl.architectures_id_seq, pgdl.models_id_seq,
	pgdl.runs_id_seq TO PUBLIC;

-- A dropped packed table takes its pgdl.datasets row with it.
CREATE FUNCTION pgdl.forget_dropped_datasets() RETURNS event_trigger
	LANGUAGE plpgsql AS
$$
BEGIN
	DELETE FROM pgdl.datasets d
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_datasets() IS
	'event trigger: removes the pgdl.datasets rows of dropped packed tables';
CREATE EVENT TRIGGER pgdl_forget_dropped_datasets ON sql_drop
	EXECUTE FUNCTION pgdl.forget_dropped_datasets();

-- Configuration sets for model selection (pgdl.grid_search, pgdl.random_search, or rows by hand).
CREATE TABLE pgdl.configs (
	id bigserial PRIMARY KEY,
	set_name text NOT NULL,
	architecture bigint REFERENCES pgdl.architectures ON DELETE CASCADE,	-- NULL: the network comes from config's base_model
	config jsonb NOT NULL,					-- a training configuration, stored in canonical form
	created timestamptz NOT NULL DEFAULT now(),
	UNIQUE NULLS NOT DISTINCT (set_name, architecture, config),
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

CREATE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}',
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint)
	AS 'MODULE_PATHNAME', 'pgdl_estimate' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.estimate(jsonb, jsonb) IS
	'cost of a spec: parameters, FLOPs per example (forward; training), activation bytes per example, and training memory for one batch';

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
	reference regclass DEFAULT NULL)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass) IS
	'packs a table''s features and labels into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';
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

-- pgdl.predict

CREATE FUNCTION pgdl.predict(model bigint, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.predict(model text, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.predict(model bytea, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.predict(bigint, real[]) IS
	'outputs of stored model (by id) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(text, real[]) IS
	'outputs of stored model (by name) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(bytea, real[]) IS
	'outputs of a model blob for one example (features not normalized): class probabilities, sigmoids or values';

-- pgdl.predict_class

CREATE FUNCTION pgdl.predict_class(model bigint, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.predict_class(model text, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.predict_class(model bytea, x real[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.predict_class(bigint, real[]) IS
	'most likely class of one example under stored classifier (by id), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(text, real[]) IS
	'most likely class of one example under stored classifier (by name), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(bytea, real[]) IS
	'most likely class of one example under a classifier blob, as the class index (a blob has no dataset)';

-- pgdl.predict_batch

CREATE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch'
	LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 1000;
CREATE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch'
	LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 1000;
CREATE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch'
	LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 1000;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, regclass, text, text, integer) IS
	'class index and its probability for every row of a table under a classifier blob, batch_size rows per forward pass';

-- pgdl.evaluate

CREATE FUNCTION pgdl.evaluate(model bigint, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.evaluate(model text, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.evaluate(model bytea, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.evaluate(bigint, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(text, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(bytea, regclass) IS
	'mean loss and accuracy (NULL for mse) of a model blob over every buffer of a packed table';

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
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto')
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); stores the models and returns the leaderboard';

CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint';

CREATE FUNCTION pgdl.progress_rows(OUT run bigint, OUT config bigint, OUT state text, OUT epoch integer,
		OUT partitions_done integer, OUT partition integer, OUT worker_pid integer,
		OUT images_per_second double precision, OUT seconds_left double precision,
		OUT last_loss double precision)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_progress' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION pgdl.progress_rows() IS
	'the models of pgdl.fit_multiple runs in flight, read from the runs'' shared memory; see the view pgdl.progress';

CREATE VIEW pgdl.progress AS SELECT * FROM pgdl.progress_rows();
COMMENT ON VIEW pgdl.progress IS
	'pgdl.fit_multiple runs in flight: per model, its state, epoch, partition and worker, images/s and estimated seconds left';
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
	staged_from bigint REFERENCES pgdl.feature_cache ON DELETE SET NULL,	-- computed from this shallower cache
	view regclass NOT NULL UNIQUE,			-- the materialized view in pgdl_cache
	owner regrole NOT NULL DEFAULT current_user::text::regrole,
	rows bigint NOT NULL,
	bytes bigint NOT NULL,
	created timestamptz NOT NULL DEFAULT now(),
	refreshed timestamptz NOT NULL DEFAULT now(),
	last_used timestamptz NOT NULL DEFAULT now(),
	source_version text NOT NULL,			-- pgdl.packed_version(source) when it was computed
	valid boolean NOT NULL DEFAULT true		-- false once its base model changed (its source: see source_version)
);
CREATE INDEX ON pgdl.feature_cache (dataset, depth);
COMMENT ON TABLE pgdl.feature_cache IS
	'feature caches: per packed table and frozen prefix of a base model, the materialized view of its outputs, its size, use and validity';
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache_id_seq', '');
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.feature_cache TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.feature_cache_id_seq TO PUBLIC;

-- Staleness.  A cache records the version of its packed table (a hash of its rows' ctid and xmin, which
-- every INSERT, UPDATE, DELETE, TRUNCATE and re-pack changes) and is stale when the table's differs;
-- pgdl.fit_multiple checks before it uses a cache, so no trigger goes on users' tables.  A change to a
-- base model's weights marks its caches stale at once.
CREATE FUNCTION pgdl.packed_version(packed regclass) RETURNS text
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	v text;
BEGIN
	EXECUTE format('SELECT md5(coalesce(string_agg(tableoid::text || ctid::text || xmin::text, '','' '
				   'ORDER BY tableoid, ctid), '''')) FROM %s', packed) INTO v;
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

-- A dropped cache view takes its row with it.
CREATE FUNCTION pgdl.forget_dropped_caches() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	DELETE FROM pgdl.feature_cache f
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = f.view::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_caches() IS
	'event trigger: removes the pgdl.feature_cache rows of dropped cache views';
CREATE EVENT TRIGGER pgdl_forget_dropped_caches ON sql_drop
	EXECUTE FUNCTION pgdl.forget_dropped_caches();

-- What cache views are made of.

CREATE FUNCTION pgdl.prefix_hash(model bigint, layers integer) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_prefix_hash_sql' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.prefix_hash(bigint, integer) IS
	'SHA-256 (hex) of a stored model''s first layers, spec and weights: equal for equal frozen prefixes, the key of feature caches';

CREATE FUNCTION pgdl.cache_features(base bigint, from_layer integer, to_layer integer, base_hash text,
		x real[], n integer) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_cache_features' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.cache_features(bigint, integer, integer, text, real[], integer) IS
	'internal, the rows of feature cache views: layers [from_layer, to_layer) of a base model on a buffer of n examples; an error if the base''s first to_layer layers no longer hash to base_hash';

-- pgdl.features: the output of a network's first layers.

CREATE FUNCTION pgdl.features(model bigint, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.features(model text, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.features(model bytea, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.features(bigint, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by id) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(text, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by name) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(bytea, integer, real[]) IS
	'outputs of the first `layer` layers of a model blob for one example (features used as given), in inference mode';

CREATE FUNCTION pgdl.features_batch(model bigint, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS
$$
DECLARE
	h text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pgdl.datasets d WHERE d.packed = features_batch.source) THEN
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
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS
$$
DECLARE
	id bigint;
BEGIN
	SELECT m.id INTO id FROM pgdl.models m WHERE m.name = model;
	IF id IS NULL THEN
		RAISE EXCEPTION 'model "%" does not exist', model USING ERRCODE = 'undefined_object';
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
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto')
	RETURNS TABLE ("group" integer, source regclass, base_model bigint, frozen_layers integer, configs integer,
				   action text, cache text, validation_cache text, staged_from text, gflops double precision,
				   storage_mb double precision, predicted_seconds double precision, reason text,
				   prefix_gflops_per_pass double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text) IS
	'the plan of pgdl.fit_multiple with the same arguments, without running it: per group of configurations sharing a frozen prefix, the feature cache to reuse, build, refresh or rebuild (or recompute), with predicted compute, storage and time';

CREATE FUNCTION pgdl.drop_feature_cache(cache regclass) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
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
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	c record;
	dropped integer := 0;
BEGIN
	FOR c IN SELECT f.view FROM pgdl.feature_cache f JOIN pg_class r ON r.oid = f.view
			  WHERE f.owner = current_user::text::regrole AND (NOT f.valid OR f.last_used < now() - unused_for)
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
