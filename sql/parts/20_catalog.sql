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
	categorical jsonb,						-- vocabularies of categorical and sequence columns (see pack.md); NULL if none
	target_normalization jsonb,				-- standardize_target: {"mean": [...], "std": [...]} per target; NULL if none
	weighted boolean NOT NULL DEFAULT false,	-- weight => col: the packed table's w real[] holds each example's weight
	imputation jsonb						-- impute => ...: {"strategy", "values", "indicators"} (see pack.md); NULL if none
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
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	engine jsonb							-- the CPU kernels it trained on: pgdl.cpu_info()'s isa, setting, blas_core
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
	engine jsonb,							-- its run's: the CPU kernels that trained it (NULL: no run)
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
	validation_metrics jsonb,				-- rank_by or monitor beyond loss and accuracy: the epoch's validation scores
	fold integer,							-- pgdl.fit_multiple(..., folds => true): the partition the model holds out
	federation jsonb,						-- pgdl.fit_federated: on a round's row, the sites missing and the privacy spent
	UNIQUE NULLS NOT DISTINCT (run, config, epoch, node, fold)
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

-- A row that names another row of its own table (a dataset's reference, a model's parent) does so
-- without a foreign key: pg_dump loads the catalog's rows in the order their foreign keys allow, and a
-- table's key to itself is a loop it warns about ("circular foreign-key constraints").  Deleting a row
-- clears the names of it, as ON DELETE SET NULL did, in every role's rows: as the extension's owner.
-- So it runs only as the trigger of the three tables it serves, each with its own column, and names no
-- table or column it was given (docs/security.md argues every SECURITY DEFINER function).
CREATE FUNCTION pgdl.forget_deleted_rows() RETURNS trigger
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
CREATE TRIGGER datasets_reference AFTER DELETE ON pgdl.datasets REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('reference');
CREATE TRIGGER models_parent AFTER DELETE ON pgdl.models REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('parent');

-- Backends cache deserialized models and datasets, and what names mean; a change to one of these tables
-- flushes every backend's cache (a relcache invalidation of the table).
CREATE FUNCTION pgdl.catalog_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_catalog_changed'
	LANGUAGE C;
REVOKE EXECUTE ON FUNCTION pgdl.forget_deleted_rows(), pgdl.catalog_changed() FROM PUBLIC;
COMMENT ON FUNCTION pgdl.catalog_changed() IS
	'trigger of pgdl.models, datasets, deployment_names and deployment_history: flushes the per-backend cache of models and datasets when one changes';

CREATE TRIGGER models_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.models
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
CREATE TRIGGER datasets_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.datasets
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
CREATE TRIGGER deployment_names_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.deployment_names
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
CREATE TRIGGER deployment_history_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pgdl.deployment_history
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();

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

-- Users train, store and share models: the catalog is theirs to read and write, each their own rows.
-- UPDATE by column and DELETE through pgdl.delete_rows (70_owners.sql): either privilege on a whole table
-- would let its holder LOCK it in every mode.
GRANT SELECT, INSERT ON pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs, pgdl.run_metrics,
	pgdl.deployment_names, pgdl.deployment_history TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.datasets_id_seq, pgdl.architectures_id_seq, pgdl.models_id_seq,
	pgdl.runs_id_seq, pgdl.deployment_names_id_seq, pgdl.deployment_history_id_seq TO PUBLIC;

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
GRANT SELECT, INSERT ON pgdl.configs TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.configs_id_seq TO PUBLIC;

-- Every model of a pgdl.fit_multiple run after every epoch (a pgdl.fit_federated run's after every round),
-- each in its own committed transaction, so that pgdl.resume can continue a cancelled or crashed run.
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
COMMENT ON TABLE pgdl.checkpoints IS 'models of pgdl.fit_multiple runs after each epoch, and of pgdl.fit_federated runs after each round (config 0), for pgdl.resume';
SELECT pg_catalog.pg_extension_config_dump('pgdl.checkpoints', '');
GRANT SELECT, INSERT ON pgdl.checkpoints TO PUBLIC;
