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
		   row_number() OVER (PARTITION BY rm.run, rm.config, rm.fold ORDER BY rm.epoch DESC) AS from_last,
		   sum(rm.seconds) OVER (PARTITION BY rm.run, rm.config, rm.fold) AS total_seconds,
		   bool_or(rm.decision = 'stop') OVER (PARTITION BY rm.run, rm.config, rm.fold) AS halted
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
