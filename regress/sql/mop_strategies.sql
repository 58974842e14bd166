-- pgdl.fit_multiple's strategies: successive_halving, hyperband (several brackets) and asha (asynchronous
-- successive halving, decided in a fixed order).  Each makes the same decisions with 1 and 2 workers, records
-- them in pgdl.run_metrics (decision, bracket), and its models equal pgdl.fit of the same configuration for
-- the epochs they trained.
SET client_min_messages = warning;

CREATE TABLE mst_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label
  FROM generate_series(1, 384) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('mst_rows', 'x', 'label', 'mst_packed', buffer_rows => 16, partitions => 4) > 0 AS packed;
SELECT pgdl.pack('mst_rows', 'x', 'label', 'mst_valid', buffer_rows => 64, partitions => 1,
                 reference => 'mst_packed') > 0 AS packed;
SELECT pgdl.add_architecture('mst_small', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}') > 0 AS added;
SELECT pgdl.add_architecture('mst_wide', '{"input": [4], "layers": [{"type": "dense", "units": 16},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS added;
-- 8 configurations: 2 architectures x 2 optimizers x 2 learning rates
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'mst_set', a.id, jsonb_build_object('optimizer', opt, 'lr', lr, 'batch_size', 8, 'seed', 7)
  FROM pgdl.architectures a, (VALUES ('sgd', 0.02), ('sgd', 0.2), ('adam', 0.002), ('adam', 0.02)) o(opt, lr)
 WHERE a.name IN ('mst_small', 'mst_wide')
 ORDER BY a.name, opt, lr;

-- each strategy with 1 and with 2 workers, 4 epochs, eta 2: rungs at epochs 1 and 2 (brackets of 2, 1, 0 rungs)
CREATE TABLE mst_results (strategy text, workers int, run bigint, rank int, model bigint, config bigint,
                          epochs int, stopped bool);
CREATE FUNCTION mst_run(strat text, w int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO mst_results
  SELECT strat, w, NULL, f.rank, f.model, f.config, f.epochs, f.stopped
    FROM pgdl.fit_multiple('mst_packed', 'mst_set', 4, 'mst_valid', workers => w, strategy => strat, eta => 2) f;
$$;
SELECT count(mst_run(s, w)) AS runs
  FROM (VALUES ('successive_halving'), ('hyperband'), ('asha')) s(s), (VALUES (1), (2)) w(w);
UPDATE mst_results x SET run = m.run FROM pgdl.models m WHERE m.id = x.model;

-- the runs' settings
SELECT DISTINCT r.config->>'strategy' AS strategy, r.config->>'eta' AS eta, r.status
  FROM mst_results x JOIN pgdl.runs r ON r.id = x.run ORDER BY 1;

-- the decisions: one per model and rung it reached, the same with 1 and 2 workers
CREATE TABLE mst_decisions AS
SELECT x.strategy, x.workers, m.config, m.epoch, m.decision, m.bracket
  FROM (SELECT DISTINCT strategy, workers, run FROM mst_results) x
  JOIN pgdl.run_metrics m ON m.run = x.run WHERE m.decision IS NOT NULL;
SELECT strategy, bracket, epoch, decision, count(*) FILTER (WHERE workers = 1) AS one_worker,
       count(*) FILTER (WHERE workers = 2) AS two_workers
  FROM mst_decisions GROUP BY 1, 2, 3, 4 ORDER BY 1, 2 DESC, 3, 4;
SELECT strategy, count(*) AS differing_decisions
  FROM ((SELECT strategy, config, epoch, decision, bracket FROM mst_decisions WHERE workers = 1
         EXCEPT ALL
         SELECT strategy, config, epoch, decision, bracket FROM mst_decisions WHERE workers = 2)
        UNION ALL
        (SELECT strategy, config, epoch, decision, bracket FROM mst_decisions WHERE workers = 2
         EXCEPT ALL
         SELECT strategy, config, epoch, decision, bracket FROM mst_decisions WHERE workers = 1)) d
 GROUP BY 1 ORDER BY 1;

-- hyperband: 3 brackets of 3, 3 and 2 configurations (the most aggressive first); a model stopped at a rung
-- trained that rung's epochs; every bracket has a model that went to the end
SELECT bracket, count(DISTINCT config) AS configs FROM (
  SELECT DISTINCT x.config, coalesce(d.bracket, 0) AS bracket
    FROM mst_results x LEFT JOIN mst_decisions d ON d.config = x.config AND d.strategy = x.strategy AND d.workers = x.workers
   WHERE x.strategy = 'hyperband' AND x.workers = 1) b GROUP BY 1 ORDER BY 1 DESC;
SELECT x.strategy, bool_and(x.epochs = d.epoch) AS stopped_at_their_rung
  FROM mst_results x JOIN mst_decisions d ON d.config = x.config AND d.strategy = x.strategy
   AND d.workers = x.workers AND d.decision = 'stop'
 WHERE x.stopped GROUP BY 1 ORDER BY 1;
SELECT strategy, workers, count(*) FILTER (WHERE epochs = 4) AS to_the_end, count(*) FILTER (WHERE stopped) AS stopped
  FROM mst_results GROUP BY 1, 2 ORDER BY 1, 2;

-- the models: the same bytes with 1 and 2 workers, and the same as pgdl.fit for the epochs each trained
SELECT a.strategy, bool_and(ma.weights = mb.weights AND a.epochs = b.epochs) AS same_models
  FROM mst_results a JOIN mst_results b ON b.strategy = a.strategy AND b.config = a.config AND b.workers = 2
  JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mb ON mb.id = b.model
 WHERE a.workers = 1 GROUP BY 1 ORDER BY 1;
CREATE TABLE mst_fits AS
SELECT e.epochs, c.id AS config, pgdl.fit('mst_packed', a.name, c.config, e.epochs) AS model
  FROM (SELECT DISTINCT config, epochs FROM mst_results WHERE workers = 2) e
  JOIN pgdl.configs c ON c.id = e.config JOIN pgdl.architectures a ON a.id = c.architecture;
SELECT x.strategy, count(*) AS models, bool_and(mf.weights = mm.weights) AS fit_equals_fit_multiple
  FROM mst_results x JOIN mst_fits f ON f.config = x.config AND f.epochs = x.epochs
  JOIN pgdl.models mf ON mf.id = f.model JOIN pgdl.models mm ON mm.id = x.model
 WHERE x.workers = 2 GROUP BY 1 ORDER BY 1;

-- one epoch: no rung, every model trains to the end, nothing is decided
SELECT count(*) AS models, bool_and(epochs = 1 AND NOT stopped) AS all_trained
  FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, 'mst_valid', workers => 2, strategy => 'hyperband', eta => 3);
SELECT count(*) AS decisions FROM pgdl.run_metrics WHERE run = (SELECT max(id) FROM pgdl.runs) AND decision IS NOT NULL;

-- time_limit: once it has passed no model starts another epoch; each trains one at least.  One millisecond
-- passes before the workers start, so every model trains exactly one epoch and ends stopped, with the bytes
-- pgdl.fit gives for one epoch: the models promoted at the rung of epoch 1 stop there, and hyperband's
-- brackets whose first rung is at epoch 2 are left with no model to decide
CREATE TABLE mst_limited AS
SELECT s.strategy, f.config, f.model, f.epochs, f.stopped
  FROM (VALUES ('all'), ('asha'), ('hyperband')) s(strategy),
       LATERAL pgdl.fit_multiple('mst_packed', 'mst_set', 4, 'mst_valid', workers => 2, strategy => s.strategy,
                                 eta => 2, time_limit => '1 millisecond') f;
SELECT strategy, count(*) AS models, bool_and(epochs = 1 AND stopped) AS one_epoch_each
  FROM mst_limited GROUP BY 1 ORDER BY 1;
SELECT DISTINCT l.strategy, r.status, r.config->'time_limit' AS time_limit
  FROM mst_limited l JOIN pgdl.models m ON m.id = l.model JOIN pgdl.runs r ON r.id = m.run ORDER BY 1;
CREATE TABLE mst_one_epoch AS
SELECT c.id AS config, pgdl.fit('mst_packed', a.name, c.config, 1) AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture WHERE c.set_name = 'mst_set';
SELECT l.strategy, bool_and(mf.weights = ml.weights) AS fit_equals_limited
  FROM mst_limited l JOIN mst_one_epoch f ON f.config = l.config
  JOIN pgdl.models mf ON mf.id = f.model JOIN pgdl.models ml ON ml.id = l.model GROUP BY 1 ORDER BY 1;
-- a limit longer than the run changes nothing: every model to the end
SELECT count(*) AS models, bool_and(epochs = 2 AND NOT stopped) AS all_trained
  FROM pgdl.fit_multiple('mst_packed', 'mst_set', 2, 'mst_valid', workers => 2, time_limit => '1 hour');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, time_limit => '0 seconds');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, time_limit => '-1 hour');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, time_limit => '367 days');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, time_limit => '1 year 7 days');

-- errors: unknown strategy (names are exact), eta out of range, NULL
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'ASHA');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'hyperband ');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => '');
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'asha', eta => 1);
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'asha', eta => -2147483648);
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'hyperband', eta => 101);
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'hyperband', eta => 2147483647);
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => 'asha', eta => NULL);
SELECT * FROM pgdl.fit_multiple('mst_packed', 'mst_set', 1, strategy => NULL);

DROP FUNCTION mst_run;
DROP TABLE mst_rows, mst_results, mst_decisions, mst_fits, mst_limited, mst_one_epoch;
