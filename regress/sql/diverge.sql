-- Divergence: a model whose loss or weights become NaN or infinite stops at that
-- step and is stored as diverged (pgdl.fit, pgdl.fit_multiple, successive halving,
-- pgdl.resume), the others train as if it were not there; NaN and infinite
-- features are errors at prediction time.
SET client_min_messages = warning;
-- (what this test adds to the catalog is removed at its end: the tests after it count runs)
SELECT coalesce(max(id), 0) AS dv_first_run FROM pgdl.runs \gset

CREATE TABLE dv_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 96) i;
SELECT pgdl.pack('dv_rows', 'x', 'label', 'dv_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('dv_rows', 'x', 'label', 'dv_valid', buffer_rows => 32, partitions => 1,
                 reference => 'dv_packed') > 0 AS packed;
SELECT pgdl.add_architecture('dv_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 3}]}') > 0 AS added;

-- pgdl.fit: lr 1e30 overflows at once; training stops in epoch 1 with a WARNING, the model is stored
SET client_min_messages = notice;
SELECT pgdl.fit('dv_packed', 'dv_mlp', '{"lr": 1e30, "batch_size": 4}', 3, 'dv_valid') AS dv_fit \gset
SET client_min_messages = warning;
SELECT m.metrics->'diverged' AS diverged, m.metrics->'epoch' AS epoch, m.metrics->'steps' AS steps,
       m.metrics ? 'validation_loss' AS validated, r.status
  FROM pgdl.models m JOIN pgdl.runs r ON r.id = m.run WHERE m.id = :dv_fit;
SELECT epoch, state, train_loss IS NOT NULL AS measured, validation_loss IS NULL AS not_validated, model = :dv_fit AS linked
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :dv_fit) ORDER BY epoch;
-- the step whose loss was NaN was not applied: the weights it stored are finite
SELECT bool_and(v = v AND abs(v) < 'Infinity') AS finite_weights
  FROM pgdl.model_weights(:dv_fit::bigint), unnest("values") v;
-- a healthy fit records 'ok'
SELECT pgdl.fit('dv_packed', 'dv_mlp', '{"lr": 0.1, "batch_size": 4}', 2) AS dv_ok \gset
SELECT m.metrics ? 'diverged' AS has_diverged_key, array_agg(r.state ORDER BY r.epoch) AS states
  FROM pgdl.models m JOIN pgdl.run_metrics r ON r.run = m.run WHERE m.id = :dv_ok GROUP BY m.metrics;

-- weights that overflow while the loss is still finite: found after the partition (one step here)
CREATE TABLE dv_reg AS SELECT i, ARRAY[sin(i), cos(i)]::real[] AS x, (100 + 50 * sin(3 * i))::real AS target
  FROM generate_series(1, 16) i;
SELECT pgdl.pack('dv_reg', 'x', 'target', 'dv_reg_packed', buffer_rows => 8, partitions => 2) > 0 AS packed;
SELECT pgdl.fit('dv_reg_packed', '{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}'::jsonb,
                '{"lr": 1e37, "batch_size": 8}', 2) AS dv_reg_fit \gset
SELECT metrics->'diverged' AS diverged, metrics->'steps' AS steps FROM pgdl.models WHERE id = :dv_reg_fit;

-- the aggregate has no place for a status: an error, at the step (loss) or at its end (weights)
SELECT pgdl.train(x, y, n, pgdl.init_model(spec, '{"lr": 1e30, "batch_size": 4}') ORDER BY buffer_id)
  FROM dv_packed, pgdl.architectures WHERE name = 'dv_mlp';
SELECT pgdl.train(x, y, n, pgdl.init_model('{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}',
                                           '{"lr": 1e37, "batch_size": 8}') ORDER BY buffer_id)
  FROM dv_reg_packed WHERE part = 0;

-- pgdl.fit_multiple: one diverging configuration among healthy ones (ids from 900001, so that the
-- WARNING that names the configuration does not depend on the tests before)
SELECT last_value AS dv_configs_seq FROM pgdl.configs_id_seq \gset
SELECT setval('pgdl.configs_id_seq', 900000) > 0 AS moved;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT s, a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('dv_mixed', '{"optimizer": "sgd", "lr": 0.1, "batch_size": 4, "seed": 3}'),
               ('dv_mixed', '{"optimizer": "sgd", "lr": 1e30, "batch_size": 4, "seed": 3}'),
               ('dv_mixed', '{"optimizer": "adam", "lr": 0.01, "batch_size": 4, "seed": 3}'),
               ('dv_healthy', '{"optimizer": "sgd", "lr": 0.1, "batch_size": 4, "seed": 3}'),
               ('dv_healthy', '{"optimizer": "adam", "lr": 0.01, "batch_size": 4, "seed": 3}')) v(s, c)
 WHERE a.name = 'dv_mlp' ORDER BY s, c;
SELECT setval('pgdl.configs_id_seq', :dv_configs_seq) > 0 AS restored;
SET client_min_messages = notice;
CREATE TABLE dv_lb AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_mixed', 3, 'dv_valid', workers => 2);
SET client_min_messages = warning;
CREATE TABLE dv_lb_healthy AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_healthy', 3, 'dv_valid', workers => 1);
-- the diverged model last, with its state; the others trained for every epoch
SELECT rank, config_json->>'lr' AS lr, epochs, stopped, diverged, validation_loss IS NULL AS not_validated
  FROM dv_lb ORDER BY rank;
-- each configuration alone with pgdl.fit
CREATE TABLE dv_fits AS
SELECT config, pgdl.fit('dv_packed', 'dv_mlp', config_json, 3, 'dv_valid') AS model FROM dv_lb ORDER BY config;
-- the healthy models are the bytes of a run without the diverging configuration, and of pgdl.fit
SELECT l.config_json->>'optimizer' AS optimizer, m.weights = mh.weights AS same_as_without_it,
       m.weights = mf.weights AS same_as_fit
  FROM dv_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN dv_lb_healthy h ON h.config_json = l.config_json JOIN pgdl.models mh ON mh.id = h.model
  JOIN dv_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model
 ORDER BY 1;
-- the diverged model is the bytes pgdl.fit stores for that configuration; its metrics say so
SELECT m.weights = mf.weights AS same_as_fit, m.metrics->'diverged' AS diverged, m.metrics->'stopped' AS stopped,
       m.metrics->'epoch' AS epoch, m.metrics->'steps' = mf.metrics->'steps' AS same_steps
  FROM dv_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN dv_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model
 WHERE l.diverged;
-- the run finished; one metrics row per model and epoch it trained, the diverged one's marked
SELECT r.status, count(*) AS metrics, count(*) FILTER (WHERE x.state = 'diverged') AS diverged,
       count(*) FILTER (WHERE x.model IS NOT NULL) AS linked
  FROM pgdl.runs r JOIN pgdl.run_metrics x ON x.run = r.id
 WHERE r.id = (SELECT DISTINCT m.run FROM dv_lb l JOIN pgdl.models m ON m.id = l.model) GROUP BY r.status;

-- the weights check in the model hopper: at the same place, the same bytes as pgdl.fit's
SELECT pgdl.add_architecture('dv_lin', '{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}') > 0
    AS added;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'dv_reg_set', id, c::jsonb
  FROM pgdl.architectures, unnest(ARRAY['{"lr": 1e37, "batch_size": 8}', '{"lr": 0.001, "batch_size": 8}']) c
 WHERE name = 'dv_lin';
SET client_min_messages = error;
CREATE TABLE dv_reg_lb AS SELECT * FROM pgdl.fit_multiple('dv_reg_packed', 'dv_reg_set', 2, workers => 2);
SET client_min_messages = warning;
SELECT l.rank, l.config_json->>'lr' AS lr, l.epochs, l.diverged, m.metrics->'steps' AS steps,
       CASE WHEN l.diverged THEN m.weights = (SELECT weights FROM pgdl.models WHERE id = :dv_reg_fit) END AS same_as_fit
  FROM dv_reg_lb l JOIN pgdl.models m ON m.id = l.model ORDER BY l.rank;

-- successive halving (eta 2, 4 epochs: rungs after epochs 1 and 2): the diverged model is never
-- promoted and takes no place; the healthy ones are decided as in a run without it.  With one
-- worker the healthy models reach the first rung before the diverging one starts (same cost: the
-- first in the set goes first), so its divergence is what decides the rung they wait at.
CREATE TABLE dv_sh AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_mixed', 4, 'dv_valid', workers => 1,
                                                      strategy => 'successive_halving', eta => 2);
CREATE TABLE dv_sh_healthy AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_healthy', 4, 'dv_valid', workers => 2,
                                                              strategy => 'successive_halving', eta => 2);
SELECT rank, config_json->>'lr' AS lr, epochs, stopped, diverged FROM dv_sh ORDER BY rank;
SELECT l.config_json->>'optimizer' AS optimizer, l.epochs = h.epochs AND l.stopped = h.stopped AS same_decision,
       m.weights = mh.weights AS same_bytes
  FROM dv_sh l JOIN pgdl.models m ON m.id = l.model
  JOIN dv_sh_healthy h ON h.config_json = l.config_json JOIN pgdl.models mh ON mh.id = h.model
 ORDER BY 1;
SELECT (c.config->>'lr')::float8 > 1 AS diverging, x.epoch, x.decision, x.state
  FROM pgdl.run_metrics x JOIN pgdl.configs c ON c.id = x.config
 WHERE x.run = (SELECT DISTINCT m.run FROM dv_sh l JOIN pgdl.models m ON m.id = l.model)
   AND (x.decision IS NOT NULL OR x.state <> 'ok')
 ORDER BY 1, 2, c.config->>'optimizer';

-- pgdl.resume of a run with a diverged model: it stays diverged, the others go on
CREATE TABLE dv_r1 AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_mixed', 1, 'dv_valid', workers => 2);
SELECT DISTINCT m.run AS dv_run FROM dv_r1 l JOIN pgdl.models m ON m.id = l.model \gset
UPDATE pgdl.runs SET status = 'running', epochs = 2 WHERE id = :dv_run;
CREATE TABLE dv_r2 AS SELECT * FROM pgdl.resume(:dv_run);
CREATE TABLE dv_straight AS SELECT * FROM pgdl.fit_multiple('dv_packed', 'dv_mixed', 2, 'dv_valid', workers => 1);
SELECT r.rank, r.config_json->>'lr' AS lr, r.epochs, r.diverged, m.weights = ms.weights AS same_as_straight_run
  FROM dv_r2 r JOIN pgdl.models m ON m.id = r.model
  JOIN dv_straight s ON s.config = r.config JOIN pgdl.models ms ON ms.id = s.model
 ORDER BY r.rank;
SELECT status FROM pgdl.runs WHERE id = :dv_run;

-- NaN and infinite features are errors naming the element (and the row), as in pgdl.pack
SELECT pgdl.fit('dv_packed', 'dv_mlp', '{"lr": 0.1, "batch_size": 4}', 1, name => 'dv_good') > 0 AS fitted;
SELECT pgdl.predict('dv_good', '{0.5,0.5,0.5,0.5}') IS NOT NULL AS finite_ok;
SELECT pgdl.predict('dv_good', '{0.5,NaN,0.5,0.5}');
SELECT pgdl.predict_class('dv_good', '{0.5,0.5,Infinity,0.5}');
SELECT pgdl.features('dv_good', 1, '{0.5,0.5,0.5,-Infinity}');
SELECT pgdl.predict((SELECT weights FROM pgdl.models WHERE name = 'dv_good'), '{NaN,0.5,0.5,0.5}');
SELECT pgdl.predict_class((SELECT weights FROM pgdl.models WHERE name = 'dv_good'), '{0.5,0.5,0.5,Infinity}');
-- finite, but not once normalized (scale 10)
SELECT pgdl.pack('dv_rows', 'x', 'label', 'dv_scaled', buffer_rows => 16, partitions => 2, scale => 10) > 0 AS packed;
SELECT pgdl.fit('dv_scaled', 'dv_mlp', '{"lr": 0.01, "batch_size": 4}', 1, name => 'dv_scaled_model') > 0 AS fitted;
SELECT pgdl.predict('dv_scaled_model', '{0.5,3e38,0.5,0.5}');
CREATE TABLE dv_rows_bad (id integer, f real[]);
INSERT INTO dv_rows_bad VALUES (1, '{0.5,0.5,0.5,0.5}'), (2, NULL), (3, '{0.5,0.5,NaN,0.5}');
SELECT * FROM pgdl.predict_batch('dv_good', 'dv_rows_bad', 'id', 'f');
UPDATE dv_rows_bad SET id = NULL WHERE id = 3;
SELECT * FROM pgdl.predict_batch('dv_good', 'dv_rows_bad', 'id', 'f');
DELETE FROM dv_rows_bad WHERE id IS NULL;
INSERT INTO dv_rows_bad VALUES (4, '{3e38,0.5,0.5,0.5}');
SELECT * FROM pgdl.predict_batch('dv_scaled_model', 'dv_rows_bad', 'id', 'f', 1);
DELETE FROM dv_rows_bad WHERE id = 4;
SELECT id, class IS NOT NULL AS classified FROM pgdl.predict_batch('dv_good', 'dv_rows_bad', 'id', 'f') ORDER BY id;
-- a packed table written by hand with a NaN: evaluate and fit say which buffer, example and value
CREATE TABLE dv_forged_keep AS SELECT * FROM dv_valid;
UPDATE dv_valid SET x[6] = 'NaN' WHERE buffer_id = 1;
SELECT * FROM pgdl.evaluate('dv_good', 'dv_valid');
SELECT pgdl.fit('dv_valid', 'dv_mlp', '{"lr": 0.1}', 1);
UPDATE dv_valid SET x[6] = 'Infinity' WHERE buffer_id = 1;
SELECT * FROM pgdl.evaluate('dv_good', 'dv_valid');
UPDATE dv_valid v SET x = k.x FROM dv_forged_keep k WHERE v.buffer_id = k.buffer_id;
SELECT n > 0 AS evaluated FROM pgdl.evaluate('dv_good', 'dv_valid');

-- a diverged model answers nothing: predict, predict_class, predict_batch and features are errors naming
-- the epoch it diverged in (55000); the healthy one works.  The model's id is the same in each message.
CREATE FUNCTION dv_error(q text, id bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d text;
  h text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
  RETURN SQLSTATE || ' ' || replace(SQLERRM, 'model ' || id || ' ', 'model <id> ') || E'\n' || coalesce(nullif(d, ''), '-') || E'\n' || coalesce(nullif(h, ''), '-');
END $$;
UPDATE pgdl.models SET name = 'dv_diverged' WHERE id = :dv_fit;
SELECT dv_error(format('SELECT pgdl.predict(%s::bigint, ''{0.5,0.5,0.5,0.5}'')', :dv_fit), :dv_fit);
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS by_name;
SELECT dv_error('SELECT pgdl.predict_class(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS predict_class;
SELECT dv_error('SELECT count(*) FROM pgdl.predict_batch(''dv_diverged'', ''dv_rows_bad'', ''id'', ''f'')', :dv_fit)
    AS predict_batch;
SELECT dv_error('SELECT pgdl.features(''dv_diverged'', 1, ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS features;
-- and evaluation: of a packed table, of raw rows, its metrics
SELECT dv_error('SELECT * FROM pgdl.evaluate(''dv_diverged'', ''dv_valid'')', :dv_fit) AS evaluate;
SELECT dv_error('SELECT * FROM pgdl.evaluate(''dv_diverged'', ''dv_rows'', ''x'', ''label'')', :dv_fit) AS evaluate_rows;
SELECT dv_error('SELECT * FROM pgdl.metrics(''dv_diverged'', ''dv_valid'')', :dv_fit) AS metrics;
SELECT pgdl.predict_class('dv_good', '{0.5,0.5,0.5,0.5}') IS NOT NULL AS healthy_predicts,
       (SELECT count(*) FROM pgdl.predict_batch('dv_good', 'dv_rows_bad', 'id', 'f')) AS healthy_batch;
-- its metrics are anyone's data: forged ones are an error (XX001), never a crash or a model served
UPDATE pgdl.models SET metrics = m FROM (VALUES ('{"diverged": "yes"}'::jsonb)) v(m) WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS forged;
UPDATE pgdl.models SET metrics = '{"diverged": true, "epoch": 1.5}' WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS forged;
UPDATE pgdl.models SET metrics = '{"diverged": true}' WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS forged;
UPDATE pgdl.models SET metrics = '[true]' WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS forged;
-- "diverged": false passes, and its weights (from lr 1e30) answer: with infinity, an error of its own (22003)
UPDATE pgdl.models SET metrics = '{"diverged": false, "epoch": 3}' WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS not_diverged;
UPDATE pgdl.models SET metrics = '{"diverged": true, "epoch": 2}' WHERE id = :dv_fit;
SELECT dv_error('SELECT pgdl.predict(''dv_diverged'', ''{0.5,0.5,0.5,0.5}'')', :dv_fit) AS epoch_2;
DROP FUNCTION dv_error(text, bigint);

-- a model whose output is NaN or infinite (finite features, but too large for its layers) answers
-- nothing either (22003): by name, as a blob, and in a batch
SELECT pgdl.predict('dv_good', '{3e38,-3e38,3e38,-3e38}');
SELECT pgdl.predict_class((SELECT weights FROM pgdl.models WHERE name = 'dv_good'), '{3e38,-3e38,3e38,-3e38}');
INSERT INTO dv_rows_bad VALUES (5, '{3e38,-3e38,3e38,-3e38}');
SELECT * FROM pgdl.predict_batch('dv_good', 'dv_rows_bad', 'id', 'f');
DELETE FROM dv_rows_bad WHERE id = 5;

-- leave nothing behind
DELETE FROM pgdl.models WHERE run > :dv_first_run;
DELETE FROM pgdl.runs WHERE id > :dv_first_run;
DELETE FROM pgdl.configs WHERE set_name IN ('dv_mixed', 'dv_healthy', 'dv_reg_set');
DELETE FROM pgdl.architectures WHERE name IN ('dv_mlp', 'dv_lin');
DROP TABLE dv_rows, dv_packed, dv_valid, dv_reg, dv_reg_packed, dv_scaled, dv_lb, dv_lb_healthy, dv_fits, dv_sh,
           dv_sh_healthy, dv_r1, dv_r2, dv_straight, dv_rows_bad, dv_forged_keep, dv_reg_lb;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :dv_first_run) AS runs,
       (SELECT count(*) FROM pgdl.models WHERE name LIKE 'dv\_%' OR run > :dv_first_run) AS models,
       (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'dv\_%') AS datasets;
