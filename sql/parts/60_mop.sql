-- Model hopper parallelism: many configurations trained at once by background workers.

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

CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL, priority integer DEFAULT 0,
		rank_by text DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer, integer, text) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint (a pgdl.fit_federated run from its last round); priority as pgdl.fit_multiple''s; rank_by NULL or the run''s own';

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
