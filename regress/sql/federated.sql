-- pgdl.fit_federated on one server (its partitions are one site, "coordinator"): the run and each round
-- recorded with a checkpoint; pgdl.resume of a run stopped after a round ends with the bytes of an
-- uninterrupted run; the sites' seeded order; min_sites; differentially private averaging (each site's
-- update clipped to clip, noise of sd noise_multiplier x clip) and its privacy per round; every error.
-- (Sites on other servers, a site killed mid-run, resume after it, and epsilon against the formula
-- computed independently: regress/t/021_federated.pl.)
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- an error's SQLSTATE and message with its numbers replaced, or 'ok'
CREATE FUNCTION fd_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

-- whether run r's recorder let go of it within 10 s (it exits just after the call that recorded the run)
CREATE FUNCTION fd_settled(r bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. 1000 LOOP
    IF NOT pgdl.run_in_progress(r) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END $$;

CREATE TABLE fd_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7)]::real[] AS x, (sin(i) + cos(i * 0.7) > 0)::int AS label
  FROM generate_series(1, 256) i;
SELECT pgdl.pack('fd_rows', 'x', 'label', 'fd_packed', buffer_rows => 32, partitions => 4, seed => 3) > 0 AS packed;
SELECT pgdl.pack('fd_rows', 'x', 'label', 'fd_valid', buffer_rows => 64, partitions => 1,
                 reference => 'fd_packed') > 0 AS packed;
SELECT pgdl.add_architecture('fd_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
CREATE TABLE fd_cfg AS SELECT '{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 8, "seed": 11}'::jsonb AS c;

-- ---------------------------------------------------------------------------
-- A run: recorded, each round with its rows and a checkpoint (all of them kept here)
-- ---------------------------------------------------------------------------
SET pgdl.keep_checkpoints = -1;
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 4, 2, 'fd_valid', 'fd_full') > 0 AS trained FROM fd_cfg;
SELECT id AS fd_run FROM pgdl.runs WHERE kind = 'fit_federated' ORDER BY id DESC LIMIT 1 \gset
SELECT kind, status, epochs, config - 'lr' - 'momentum' - 'seed' - 'batch_size' - 'nesterov' - 'weight_decay' AS settings
  FROM pgdl.runs WHERE id = :fd_run;
SELECT epoch, node, train_loss > 0 AS trained, validation_loss IS NOT NULL AS validated, federation
  FROM pgdl.run_metrics WHERE run = :fd_run ORDER BY epoch, node NULLS LAST;
SELECT config, array_agg(epoch ORDER BY epoch) AS rounds FROM pgdl.checkpoints WHERE run = :fd_run GROUP BY config;
-- the last checkpoint is the stored model
SELECT c.weights = m.weights AS last_checkpoint_is_the_model
  FROM pgdl.checkpoints c JOIN pgdl.models m ON m.run = c.run WHERE c.run = :fd_run AND c.epoch = 4;

-- one site trains its partitions in pgdl.fit's seeded order of each epoch: round r's local epoch e is
-- epoch 2(r - 1) + e of pgdl.fit, so that a one-site run of one round per epoch is pgdl.fit, bit for bit
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 3, 1, name => 'fd_one') > 0 AS trained FROM fd_cfg;
SELECT pgdl.fit('fd_packed', 'fd_mlp', c, 3, name => 'fd_fit') > 0 AS trained FROM fd_cfg;
SELECT (SELECT weights FROM pgdl.models WHERE name = 'fd_one') = (SELECT weights FROM pgdl.models WHERE name = 'fd_fit')
  AS one_site_is_fit;

-- ---------------------------------------------------------------------------
-- pgdl.resume: a run stopped after round 2 (its later rounds, rows and model taken away, as a
-- crash would leave it) continues from its checkpoint to the bytes of the uninterrupted run
-- ---------------------------------------------------------------------------
SELECT md5(weights) AS fd_full_md5 FROM pgdl.models WHERE name = 'fd_full' \gset
UPDATE pgdl.run_metrics SET model = NULL WHERE run = :fd_run;
DELETE FROM pgdl.models WHERE run = :fd_run;
DELETE FROM pgdl.run_metrics WHERE run = :fd_run AND epoch > 2;
DELETE FROM pgdl.checkpoints WHERE run = :fd_run AND epoch > 2;
UPDATE pgdl.runs SET status = 'failed' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT rank, config, architecture, epochs, train_loss > 0 AS trained, validation_loss IS NOT NULL AS validated,
       stopped, diverged
  FROM pgdl.resume(:fd_run);
SELECT md5(weights) = :'fd_full_md5' AS same_bytes, name, metrics ->> 'epoch' AS epoch
  FROM pgdl.models WHERE run = :fd_run;
SELECT status FROM pgdl.runs WHERE id = :fd_run;
SELECT count(*) AS rows, count(DISTINCT epoch) AS rounds FROM pgdl.run_metrics WHERE run = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS finished;
-- a run with no checkpoint yet starts from round 1
UPDATE pgdl.run_metrics SET model = NULL WHERE run = :fd_run;
DELETE FROM pgdl.models WHERE run = :fd_run;
DELETE FROM pgdl.run_metrics WHERE run = :fd_run;
DELETE FROM pgdl.checkpoints WHERE run = :fd_run;
UPDATE pgdl.runs SET status = 'failed' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT epochs FROM pgdl.resume(:fd_run);
SELECT md5(weights) = :'fd_full_md5' AS same_bytes FROM pgdl.models WHERE run = :fd_run;
-- what resume refuses: workers or rank_by (a federated run has neither), a checkpoint of another network
UPDATE pgdl.runs SET status = 'failed' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s, workers => 2)', :fd_run)) AS workers;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s, rank_by => %L)', :fd_run, 'accuracy')) AS rank_by;
UPDATE pgdl.run_metrics SET model = NULL WHERE run = :fd_run;
DELETE FROM pgdl.models WHERE run = :fd_run;
UPDATE pgdl.checkpoints SET weights = pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 2}]}')
 WHERE run = :fd_run AND epoch = 4;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS other_network;
UPDATE pgdl.checkpoints SET weights = '\x00' WHERE run = :fd_run AND epoch = 4;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS not_a_model;
UPDATE pgdl.runs SET config = config || '{"local_epochs": 0}' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS bad_local_epochs;
UPDATE pgdl.runs SET config = config || '{"local_epochs": 2, "clip": "x"}' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS bad_clip;
UPDATE pgdl.runs SET config = config - 'clip' || '{"min_sites": 2}' WHERE id = :fd_run;
SELECT fd_settled(:fd_run) AS settled;
SELECT fd_try(format('SELECT * FROM pgdl.resume(%s)', :fd_run)) AS more_sites_than_there_are;
DELETE FROM pgdl.runs WHERE id = :fd_run;

-- ---------------------------------------------------------------------------
-- min_sites: within the sites there are (here one); the run's config keeps it
-- ---------------------------------------------------------------------------
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 2, 1, min_sites => 1) > 0 AS trained FROM fd_cfg;
SELECT config -> 'min_sites' AS min_sites FROM pgdl.runs WHERE kind = 'fit_federated' ORDER BY id DESC LIMIT 1;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, min_sites => 2)') AS too_many;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, min_sites => 0)') AS zero;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, min_sites => -2147483648)') AS huge_negative;

-- ---------------------------------------------------------------------------
-- Differentially private averaging
-- ---------------------------------------------------------------------------
-- the update is clipped: one site, one round, noise next to nothing: the model moved by clip exactly
CREATE TABLE fd_init AS SELECT a.name, pgdl.init_model(a.spec, c) AS w FROM pgdl.architectures a, fd_cfg WHERE a.name = 'fd_mlp';
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 1, 1, clip => 0.01, noise_multiplier => 1e-9,
                          name => 'fd_clipped') > 0 AS trained FROM fd_cfg;
CREATE FUNCTION fd_diff(a bytea, b bytea) RETURNS TABLE (d double precision) LANGUAGE sql AS $$
  SELECT x.v - y.v
    FROM pgdl.model_weights(a) wa CROSS JOIN LATERAL unnest(wa."values") WITH ORDINALITY x(v, k)
    JOIN pgdl.model_weights(b) wb ON wb.layer = wa.layer AND wb.name = wa.name
    CROSS JOIN LATERAL unnest(wb."values") WITH ORDINALITY y(v, k)
   WHERE x.k = y.k
$$;
SELECT round(sqrt(sum(d * d))::numeric, 6) AS update_norm
  FROM pgdl.models m, fd_init i, fd_diff(m.weights, i.w) WHERE m.name = 'fd_clipped' AND i.name = 'fd_mlp';
-- the noise: lr next to nothing, so the model moved by the noise alone, sd noise_multiplier x clip / sites
-- (0.25 x 2 / 1), over the 898 weights of a wider network
SELECT pgdl.add_architecture('fd_wide', '{"input": [4], "layers": [{"type": "dense", "units": 128},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
INSERT INTO fd_init SELECT a.name, pgdl.init_model(a.spec, c) FROM pgdl.architectures a, fd_cfg WHERE a.name = 'fd_wide';
SELECT pgdl.fit_federated('fd_packed', 'fd_wide', c || '{"lr": 1e-12, "momentum": 0}', 1, 1, clip => 2,
                          noise_multiplier => 0.25, name => 'fd_noise') > 0 AS trained FROM fd_cfg;
SELECT count(*) AS coordinates, stddev_pop(d) BETWEEN 0.5 * 0.9 AND 0.5 * 1.1 AS sd_is_half,
       abs(avg(d)) < 0.05 AS centred
  FROM pgdl.models m, fd_init i, fd_diff(m.weights, i.w)
 WHERE m.name = 'fd_noise' AND i.name = 'fd_wide';
-- the same seed draws the same noise; another seed, other noise
SELECT pgdl.fit_federated('fd_packed', 'fd_wide', c || '{"lr": 1e-12, "momentum": 0}', 1, 1, clip => 2,
                          noise_multiplier => 0.25, name => 'fd_noise2') > 0 AS trained FROM fd_cfg;
SELECT pgdl.fit_federated('fd_packed', 'fd_wide', c || '{"lr": 1e-12, "momentum": 0, "seed": 12}', 1, 1, clip => 2,
                          noise_multiplier => 0.25, name => 'fd_noise3') > 0 AS trained FROM fd_cfg;
SELECT (SELECT weights FROM pgdl.models WHERE name = 'fd_noise') = (SELECT weights FROM pgdl.models WHERE name = 'fd_noise2')
         AS same_seed_same_noise,
       (SELECT weights FROM pgdl.models WHERE name = 'fd_noise') = (SELECT weights FROM pgdl.models WHERE name = 'fd_noise3')
         AS other_seed_same_noise;
-- the privacy spent, per round: mu = sqrt(round) / noise_multiplier, epsilon at delta; no site's rows,
-- no training loss (they are of the sites' data, unnoised); validation is the coordinator's
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 3, 1, 'fd_valid', clip => 1, noise_multiplier => 2,
                          delta => 1e-6) > 0 AS trained FROM fd_cfg;
SELECT id AS fd_dp_run FROM pgdl.runs WHERE kind = 'fit_federated' ORDER BY id DESC LIMIT 1 \gset
SELECT epoch, node, train_loss, validation_loss IS NOT NULL AS validated,
       federation - 'mu' - 'epsilon' AS federation,
       abs((federation ->> 'mu')::float8 - sqrt(epoch) / 2) < 1e-12 AS mu_is_sqrt_rounds_over_z,
       round((federation ->> 'epsilon')::numeric, 4) AS epsilon
  FROM pgdl.run_metrics WHERE run = :fd_dp_run ORDER BY epoch, node NULLS LAST;
SELECT config - 'lr' - 'momentum' - 'seed' - 'batch_size' - 'nesterov' - 'weight_decay' AS settings
  FROM pgdl.runs WHERE id = :fd_dp_run;

-- ---------------------------------------------------------------------------
-- Errors: NULLs, ranges, NaN and infinities, sizes
-- ---------------------------------------------------------------------------
SELECT fd_try('SELECT pgdl.fit_federated(NULL, ''fd_mlp'')') AS null_source;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', NULL)') AS null_rounds;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, clip => 1)') AS clip_alone;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, noise_multiplier => 1)') AS noise_alone;
SELECT fd_try(format('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, clip => %s, noise_multiplier => %s)',
                     a, b)) AS bad_privacy
  FROM (VALUES ('0', '1'), ('-1', '1'), ('''NaN''', '1'), ('''Infinity''', '1'), ('1', '0'), ('1', '''NaN'''),
               ('1', '''-Infinity'''), ('1e308', '''Infinity''')) v(a, b);
SELECT fd_try(format('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, clip => 1, noise_multiplier => 1, delta => %s)',
                     d)) AS bad_delta
  FROM (VALUES ('0'), ('1'), ('-1e-5'), ('''NaN'''), ('''Infinity''')) v(d);
-- a NULL delta is the default's
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 1, 1, clip => 1, noise_multiplier => 1, delta => NULL) > 0 AS trained
  FROM fd_cfg;
SELECT federation -> 'delta' AS default_delta FROM pgdl.run_metrics
 WHERE run = (SELECT max(id) FROM pgdl.runs WHERE kind = 'fit_federated') AND node IS NULL;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 100000, 2)') AS too_many_epochs;
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2147483647, 1)') AS huge_rounds;
-- a model name taken is refused before the run starts
SELECT fd_try('SELECT pgdl.fit_federated(''fd_packed'', ''fd_mlp'', ''{}'', 2, 1, name => ''fd_one'')') AS name_taken;

-- in a transaction that wrote before, the run and its rounds are recorded in that transaction
BEGIN;
CREATE TEMP TABLE fd_written (i int);
SELECT pgdl.fit_federated('fd_packed', 'fd_mlp', c, 2, 1, name => 'fd_in_xact') > 0 AS trained FROM fd_cfg;
SELECT r.status, count(c.*) AS checkpoints FROM pgdl.models m JOIN pgdl.runs r ON r.id = m.run
  JOIN pgdl.checkpoints c ON c.run = r.id WHERE m.name = 'fd_in_xact' GROUP BY r.status;
COMMIT;

-- nothing of these runs is left for the tests after this one
RESET pgdl.keep_checkpoints;
DELETE FROM pgdl.runs WHERE kind = 'fit_federated' OR id IN (SELECT run FROM pgdl.models WHERE name LIKE 'fd\_%');
DELETE FROM pgdl.models WHERE name LIKE 'fd\_%';
DELETE FROM pgdl.architectures WHERE name LIKE 'fd\_%';
DROP FUNCTION fd_try(text);
DROP FUNCTION fd_settled(bigint);
DROP FUNCTION fd_diff(bytea, bytea);
DROP TABLE fd_rows, fd_packed, fd_valid, fd_cfg, fd_init;
