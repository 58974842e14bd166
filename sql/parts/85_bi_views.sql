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
	-- the columns by name, not rm.*: a column added since (federation) would make a fresh install's view
	-- differ from an upgraded one's
	SELECT rm.run, rm.config, rm.model, rm.epoch, rm.train_loss, rm.train_accuracy, rm.validation_loss,
		   rm.validation_accuracy, rm.seconds, rm.images_per_second, rm.decision, rm.owner, rm.state, rm.node,
		   rm.predicted_seconds, rm.bracket, rm.validation_metrics, rm.fold,
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

CREATE VIEW pgdl.training_curves WITH (security_invoker = true) AS
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

GRANT SELECT ON pgdl.leaderboard, pgdl.training_curves TO PUBLIC;
