-- Bayesian search: pgdl.tpe_search proposes configurations of a search space in batches with the
-- Tree-structured Parzen Estimator, each batch a configuration set trained by pgdl.fit_multiple (60_mop.sql).

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
