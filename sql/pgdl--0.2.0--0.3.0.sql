-- pgdl 0.2.0 to 0.3.0 (ALTER EXTENSION pgdl UPDATE): several servers.
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.3.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.3.0'" to load this file. \quit

-- fit_multiple and explain_fit_multiple take workers_per_node (a new argument is a new function).
DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text);
DROP FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text);
CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); on a distributed packed table, workers_per_node workers train on each node over libpq; stores the models and returns the leaderboard';

CREATE FUNCTION pgdl.explain_fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1)
	RETURNS TABLE ("group" integer, source regclass, base_model bigint, frozen_layers integer, configs integer,
				   action text, cache text, validation_cache text, staged_from text, gflops double precision,
				   storage_mb double precision, predicted_seconds double precision, reason text,
				   prefix_gflops_per_pass double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer) IS
	'the plan of pgdl.fit_multiple with the same arguments, without running it: per group of configurations sharing a frozen prefix, the feature cache to reuse, build, refresh or rebuild (or recompute), with predicted compute, storage and time';

-- Several servers: a coordinator and its nodes (postgres_fdw foreign servers, reached over libpq).

CREATE FUNCTION pgdl.train_partitions(model bytea, config jsonb, packed regclass, parts integer[],
		epochs integer DEFAULT 1)
	RETURNS TABLE (model bytea, examples bigint, loss_sum double precision, correct bigint, n bigint,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_train_partitions' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer) IS
	'trains a model on partitions of a packed table of this server, in the order given, epochs times, as a model hopper worker does: what a coordinator runs on its nodes; returns the model and what it measured';

CREATE FUNCTION pgdl.distribute(packed regclass, servers text[]) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_distribute' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.distribute(regclass, text[]) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; a partition already moved stays, so calling again finishes an interrupted call; returns the partitions this call moved';
