-- One database, many users: every catalog row has an owner, and row-level security shows and lets
-- change only what a role owns or was granted (docs/security.md).  alice trains; bob tries each attack
-- on her work, and each is refused; then alice shares a model with bob, who uses it and cannot change
-- it, until she revokes it.  carol is a member of alice's role and acts as alice; a member of
-- pgdl_admin sees everything.  pg_regress runs as a superuser, who bypasses row-level security.
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- an error with its numbers (ids, which depend on what ran before) replaced, or 'ok'
CREATE FUNCTION sec_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

CREATE ROLE regress_sec_alice;
CREATE ROLE regress_sec_bob;
CREATE ROLE regress_sec_carol IN ROLE regress_sec_alice;
CREATE ROLE regress_sec_admin IN ROLE pgdl_admin;
CREATE ROLE "regress_sec_Dave";
GRANT CREATE ON SCHEMA public TO regress_sec_alice, regress_sec_bob;

CREATE TABLE sec_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x, CASE WHEN a + b > c + d THEN 'cat' ELSE 'dog' END AS label
  FROM generate_series(1, 256) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
GRANT SELECT ON sec_rows TO regress_sec_alice, regress_sec_bob;

-- ---------------------------------------------------------------------------
-- alice's work: a dataset, an architecture, a model, a configuration set, a run with checkpoints,
-- a feature cache
-- ---------------------------------------------------------------------------
SET ROLE regress_sec_alice;
CREATE TABLE sec_alice_rows AS SELECT * FROM sec_rows WHERE i <= 192;
SELECT pgdl.pack('sec_alice_rows', 'x', 'label', 'sec_alice_packed', buffer_rows => 32, partitions => 2,
                 standardize => true) > 0 AS packed;
SELECT pgdl.add_architecture('sec_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.fit('sec_alice_packed', 'sec_mlp', '{"lr": 0.1, "seed": 1}', 2, name => 'sec_model') > 0 AS fitted;
SELECT pgdl.grid_search('sec_set', '{sec_mlp}', '{"lr": [0.1, 0.05], "batch_size": 16, "seed": 2}') AS added;
SELECT count(*) AS trained FROM pgdl.fit_multiple('sec_alice_packed', 'sec_set', 1, workers => 1);
SELECT pgdl.grid_search('sec_transfer', '{}',
  '{"base_model": "sec_model", "freeze": 2, "head": [[{"type": "dense", "units": 2}]], "seed": 3}') AS added;
SELECT count(*) AS trained FROM pgdl.fit_multiple('sec_alice_packed', 'sec_transfer', 1, workers => 1,
                                                  feature_cache => 'on');
-- the ids bob will aim at
SELECT m.id AS alice_model, m.dataset AS alice_dataset, a.id AS alice_arch
  FROM pgdl.models m JOIN pgdl.architectures a ON a.id = m.architecture WHERE m.name = 'sec_model' \gset
SELECT c.run AS alice_run, c.config AS alice_config FROM pgdl.checkpoints c ORDER BY c.run, c.config LIMIT 1 \gset
CREATE TABLE sec_alice_before AS
SELECT (SELECT md5(weights) || metrics::text FROM pgdl.models WHERE name = 'sec_model') AS model,
       (SELECT md5(string_agg(classes::text || normalization::text || partitions, ',')) FROM pgdl.datasets) AS dataset,
       (SELECT count(*) FROM pgdl.configs WHERE set_name = 'sec_set') AS set_size;
SELECT owner::text, count(*) FROM (
  SELECT owner FROM pgdl.datasets UNION ALL SELECT owner FROM pgdl.architectures UNION ALL
  SELECT owner FROM pgdl.models UNION ALL SELECT owner FROM pgdl.runs UNION ALL
  SELECT owner FROM pgdl.run_metrics UNION ALL SELECT owner FROM pgdl.configs UNION ALL
  SELECT owner FROM pgdl.checkpoints UNION ALL SELECT owner FROM pgdl.feature_cache) o
 GROUP BY 1;
-- her model, by name and by id, is now in this session's cache of models: bob must not get it from there
SELECT pgdl.predict_class('sec_model', '{0.9, 0.8, 0.1, 0.2}') AS alice_predicts,
       pgdl.predict_class(:alice_model, '{0.9, 0.8, 0.1, 0.2}') AS by_id;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- bob's attacks
-- ---------------------------------------------------------------------------
SET ROLE regress_sec_bob;
-- he sees none of alice's rows
SELECT (SELECT count(*) FROM pgdl.datasets) AS datasets, (SELECT count(*) FROM pgdl.architectures) AS architectures,
       (SELECT count(*) FROM pgdl.models) AS models, (SELECT count(*) FROM pgdl.runs) AS runs,
       (SELECT count(*) FROM pgdl.run_metrics) AS metrics, (SELECT count(*) FROM pgdl.configs) AS configs,
       (SELECT count(*) FROM pgdl.checkpoints) AS checkpoints, (SELECT count(*) FROM pgdl.feature_cache) AS caches;
-- reads her model's weights, by id, by name, through any function (first: no write has flushed the cache)
SELECT pgdl.predict('sec_model', '{0.9, 0.8, 0.1, 0.2}');
SELECT sec_try(format('SELECT pgdl.predict(%s, ''{0.9, 0.8, 0.1, 0.2}'')', :alice_model)) AS predict;
SELECT count(*) FROM pgdl.models WHERE id = :alice_model;
SELECT sec_try(format('SELECT pgdl.model_weights(%s)', :alice_model)) AS model_weights;
SELECT sec_try(format('SELECT pgdl.features(%s, 1, ''{0.9, 0.8, 0.1, 0.2}'')', :alice_model)) AS features,
       sec_try(format('SELECT pgdl.prefix_hash(%s, 1)', :alice_model)) AS prefix_hash,
       sec_try(format('SELECT pgdl.grant_model(%s, ''regress_sec_bob'')', :alice_model)) AS grant_model;
-- overwrites her model's weights, metrics or name: no row to change
WITH u AS (UPDATE pgdl.models SET weights = pgdl.init_model(spec), metrics = '{"train_accuracy": 1}'
            WHERE id = :alice_model RETURNING 1)
SELECT count(*) AS updated FROM u;
WITH u AS (UPDATE pgdl.models SET name = 'bobs' WHERE name = 'sec_model' RETURNING 1) SELECT count(*) AS updated FROM u;
-- plants a checkpoint or metrics into her run, as himself or claiming to be her
INSERT INTO pgdl.checkpoints (run, config, epoch, weights)
SELECT :alice_run, :alice_config, 5, pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 2}]}');
INSERT INTO pgdl.checkpoints (owner, run, config, epoch, weights)
VALUES ('regress_sec_alice', :alice_run, :alice_config, 5, '\x00');
INSERT INTO pgdl.run_metrics (run, config, epoch, train_loss) VALUES (:alice_run, :alice_config, 5, 0);
WITH u AS (UPDATE pgdl.checkpoints SET weights = '\x00' WHERE run = :alice_run RETURNING 1),
     v AS (UPDATE pgdl.runs SET status = 'cancelled' WHERE id = :alice_run RETURNING 1)
SELECT (SELECT count(*) FROM u) AS checkpoints_updated, (SELECT count(*) FROM v) AS runs_updated;
-- resumes her run
SELECT sec_try(format('SELECT pgdl.resume(%s)', :alice_run)) AS resume;
-- rewrites her dataset's classes, normalization or partitions
WITH u AS (UPDATE pgdl.datasets SET classes = '{dog, cat}' WHERE id = :alice_dataset RETURNING 1),
     v AS (UPDATE pgdl.datasets SET normalization = '{"scale": 0}', partitions = 1
            WHERE packed = 'sec_alice_packed'::regclass RETURNING 1)
SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM v) AS updated;
-- reads her dataset's classes, mean and std: he may not read her packed table
SELECT classes, normalization FROM pgdl.datasets WHERE id = :alice_dataset;
SELECT sec_try(format('SELECT pgdl.evaluate(%s, ''sec_alice_packed'')', :alice_model)) AS evaluate;
SELECT pgdl.pack('sec_rows', 'x', 'label', 'sec_bob_copy', reference => 'sec_alice_packed');
-- grid_search into her set name makes a set of his own; her set is as it was
SELECT pgdl.grid_search('sec_set', '{sec_mlp}', '{"lr": 9}');
SELECT pgdl.add_architecture('sec_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.grid_search('sec_set', '{sec_mlp}', '{"lr": [0.1, 0.05], "batch_size": 16, "seed": 2}') AS added;
INSERT INTO pgdl.configs (owner, set_name, architecture, config) VALUES ('regress_sec_alice', 'sec_set', :alice_arch, '{"lr": 9}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('sec_set', :alice_arch, '{"lr": 9}');
SELECT owner::text, count(*) FROM pgdl.configs GROUP BY 1;
-- deletes her runs, metrics, checkpoints, configurations, architectures, caches, datasets, models: DELETE
-- is nobody's (it would let him LOCK the table), and pgdl.delete_rows deletes only his own
DELETE FROM pgdl.models WHERE id = :alice_model;
SELECT pgdl.delete_rows('pgdl.runs', ARRAY[:alice_run]::bigint[]) AS runs,
       pgdl.delete_rows('pgdl.run_metrics', ARRAY[:alice_run]::bigint[]) AS metrics,
       pgdl.delete_rows('pgdl.checkpoints', ARRAY[:alice_run]::bigint[]) AS checkpoints,
       pgdl.delete_rows('pgdl.configs', ARRAY(SELECT id FROM pgdl.configs WHERE owner <> 'regress_sec_bob'::regrole)) AS configs,
       pgdl.delete_rows('pgdl.architectures', ARRAY[:alice_arch]::bigint[]) AS architectures,
       pgdl.delete_rows('pgdl.feature_cache', ARRAY(SELECT generate_series(1, 1000)::bigint)) AS caches,
       pgdl.delete_rows('pgdl.datasets', ARRAY[:alice_dataset]::bigint[]) AS datasets,
       pgdl.delete_rows('pgdl.models', ARRAY[:alice_model]::bigint[]) AS models;
-- writes rows in her name, or gives her his
INSERT INTO pgdl.models (owner, name, spec, weights)
VALUES ('regress_sec_alice', 'sec_gift', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}',
        pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 2}]}'));
INSERT INTO pgdl.runs (owner, kind, config, epochs) VALUES ('regress_sec_alice', 'fit_multiple', '{"set": "sec_set"}', 1);
UPDATE pgdl.architectures SET owner = 'regress_sec_alice' WHERE owner = 'regress_sec_bob'::regrole;
RESET ROLE;

SET ROLE regress_sec_alice;
-- all as it was; her set trains her two configurations only, and her model predicts as before
SELECT b.model = (SELECT md5(weights) || metrics::text FROM pgdl.models WHERE name = 'sec_model') AS model_unchanged,
       b.dataset = (SELECT md5(string_agg(classes::text || normalization::text || partitions, ',')) FROM pgdl.datasets) AS dataset_unchanged,
       b.set_size = (SELECT count(*) FROM pgdl.configs WHERE set_name = 'sec_set') AS set_unchanged
  FROM sec_alice_before b;
SELECT count(*) AS checkpoints_of_her_run, count(*) FILTER (WHERE length(weights) > 1) AS sound
  FROM pgdl.checkpoints WHERE run = :alice_run;
SELECT status FROM pgdl.runs WHERE id = :alice_run;
SELECT count(*) AS trained FROM pgdl.fit_multiple('sec_alice_packed', 'sec_set', 1, workers => 1);
SELECT pgdl.predict_class('sec_model', '{0.9, 0.8, 0.1, 0.2}') AS alice_predicts;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- Sharing: alice grants her model to bob
-- ---------------------------------------------------------------------------
SET ROLE regress_sec_alice;
SELECT pgdl.grant_model('sec_model', 'regress_sec_bob');
SELECT name, acl::text ~ '^\{regress_sec_bob=U/regress_sec_alice\}$' AS acl FROM pgdl.models WHERE acl IS NOT NULL;
RESET ROLE;
SET ROLE regress_sec_bob;
-- he sees the model, and its dataset's row (its classes and normalization are the model's), nothing else
SELECT name, owner::text FROM pgdl.models WHERE owner <> 'regress_sec_bob'::regrole;
SELECT classes, packed::text FROM pgdl.datasets;
SELECT count(*) AS runs FROM pgdl.runs WHERE owner <> 'regress_sec_bob'::regrole;
-- he predicts with it, by name and by id
SELECT pgdl.predict_class('sec_model', '{0.9, 0.8, 0.1, 0.2}') AS bob_predicts,
       pgdl.predict_class(:alice_model, '{0.9, 0.8, 0.1, 0.2}') AS by_id;
SELECT array_length(pgdl.features('sec_model', 1, '{0.9, 0.8, 0.1, 0.2}'), 1) AS features;
-- he evaluates it on rows of his own, packed with its dataset's classes and normalization
CREATE TABLE sec_bob_rows AS SELECT * FROM sec_rows WHERE i > 192;
SELECT pgdl.pack('sec_bob_rows', 'x', 'label', 'sec_bob_packed', buffer_rows => 32, partitions => 2,
                 reference => 'sec_alice_packed') > 0 AS packed;
SELECT n, accuracy > 0.5 AS learned FROM pgdl.evaluate('sec_model', 'sec_bob_packed');
-- and never on her packed table: table data is read as the caller
SELECT n FROM pgdl.evaluate('sec_model', 'sec_alice_packed');
-- he trains on it as a base model, into a set and a feature cache of his own
SELECT pgdl.grid_search('bob_transfer', '{}',
  '{"base_model": "sec_model", "freeze": 2, "head": [[{"type": "dense", "units": 2}]], "seed": 3}') AS added;
SELECT count(*) AS trained FROM pgdl.fit_multiple('sec_bob_packed', 'bob_transfer', 1, workers => 1,
                                                  feature_cache => 'on');
SELECT m.parent = :alice_model AS parent_is_hers, m.owner::text
  FROM pgdl.models m JOIN pgdl.runs r ON r.id = m.run WHERE r.owner = 'regress_sec_bob'::regrole;
SELECT owner::text, count(*) FROM pgdl.feature_cache GROUP BY 1;
-- he cannot change it, nor share it on
WITH u AS (UPDATE pgdl.models SET weights = pgdl.init_model(spec), name = 'bobs', acl = NULL
            WHERE id = :alice_model RETURNING 1)
SELECT (SELECT count(*) FROM u) AS updated, pgdl.delete_rows('pgdl.models', ARRAY[:alice_model]::bigint[]) AS deleted;
SELECT pgdl.grant_model('sec_model', 'regress_sec_carol');
SELECT pgdl.revoke_model('sec_model', 'regress_sec_bob');
-- a model of his own of the same name is the one the name means to him
SELECT pgdl.fit('sec_bob_packed', 'sec_mlp', '{"lr": 0.1, "seed": 9}', 1, name => 'sec_model') > 0 AS fitted;
SELECT pgdl.model_id('sec_model') = :alice_model AS name_means_hers,
       (SELECT owner::text FROM pgdl.models WHERE id = pgdl.model_id('sec_model')) AS name_means;
SELECT pgdl.grant_model('sec_model', 'regress_sec_carol');
RESET ROLE;

-- carol, a member of alice's role, may use both: the name is ambiguous to her, an id is not
SET ROLE regress_sec_carol;
SELECT pgdl.predict_class('sec_model', '{0.9, 0.8, 0.1, 0.2}');
SELECT pgdl.predict_class(:alice_model, '{0.9, 0.8, 0.1, 0.2}') AS by_id;
RESET ROLE;

-- revoked, it is gone for bob
SET ROLE regress_sec_alice;
SELECT pgdl.predict_class('sec_model', '{0.9, 0.8, 0.1, 0.2}') AS alice_predicts;
SELECT pgdl.revoke_model('sec_model', 'regress_sec_bob');
SELECT count(*) AS grants FROM pgdl.models WHERE acl IS NOT NULL;
RESET ROLE;
SET ROLE regress_sec_bob;
SELECT count(*) AS models_of_alice FROM pgdl.models WHERE owner = 'regress_sec_alice'::regrole;
SELECT sec_try(format('SELECT pgdl.predict_class(%s, ''{0.9, 0.8, 0.1, 0.2}'')', :alice_model)) AS predict_class;
SELECT count(*) AS datasets_of_alice FROM pgdl.datasets WHERE owner = 'regress_sec_alice'::regrole;
SELECT sec_try(format('SELECT pgdl.evaluate(%s, ''sec_bob_packed'')', :alice_model)) AS evaluate;
RESET ROLE;

-- granted SELECT on her packed table, bob reads its dataset's row (he could compute it himself)
SET ROLE regress_sec_alice;
GRANT SELECT ON sec_alice_packed TO regress_sec_bob;
RESET ROLE;
SET ROLE regress_sec_bob;
SELECT packed::text, classes FROM pgdl.datasets WHERE owner = 'regress_sec_alice'::regrole;
RESET ROLE;

-- PUBLIC: every role may use the model
SET ROLE regress_sec_alice;
SELECT pgdl.grant_model(:alice_model, 'public');
RESET ROLE;
SET ROLE "regress_sec_Dave";
SELECT pgdl.predict_class(:alice_model, '{0.9, 0.8, 0.1, 0.2}') AS dave_predicts;
-- a role whose name needs quoting owns what it writes
SELECT pgdl.add_architecture('dave_arch', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}') > 0 AS added;
SELECT owner::text FROM pgdl.architectures;
RESET ROLE;
GRANT SELECT ON sec_bob_packed TO "regress_sec_Dave";
SET ROLE "regress_sec_Dave";
SELECT pgdl.grid_search('dave_set', '{}', jsonb_build_object('base_model', :alice_model, 'freeze', 2,
  'head', '[[{"type": "dense", "units": 2}]]'::jsonb)) AS added;
SELECT count(*) AS trained FROM pgdl.fit_multiple('sec_bob_packed', 'dave_set', 1, workers => 1, feature_cache => 'on');
SELECT owner::text FROM pgdl.feature_cache;
RESET ROLE;
SET ROLE regress_sec_alice;
SELECT pgdl.revoke_model(:alice_model, 'PUBLIC');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- carol acts as alice, a member of pgdl_admin sees everything
-- ---------------------------------------------------------------------------
SET ROLE regress_sec_carol;
SELECT count(*) AS alice_models FROM pgdl.models WHERE owner = 'regress_sec_alice'::regrole;
WITH u AS (UPDATE pgdl.models SET metrics = metrics || '{"checked": true}' WHERE id = :alice_model RETURNING 1)
SELECT count(*) AS updated FROM u;
SELECT pgdl.grant_model(:alice_model, 'regress_sec_bob');
SELECT pgdl.revoke_model(:alice_model, 'regress_sec_bob');
-- what she writes is hers; written as alice, it is alice's
SELECT pgdl.add_architecture('carol_arch', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}') > 0 AS added;
INSERT INTO pgdl.architectures (owner, name, spec)
SELECT 'regress_sec_alice', 'carol_for_alice', spec FROM pgdl.architectures WHERE name = 'carol_arch';
SELECT name, owner::text FROM pgdl.architectures WHERE name LIKE 'carol%' ORDER BY name;
RESET ROLE;

SET ROLE regress_sec_admin;
SELECT count(DISTINCT owner) AS model_owners, count(*) = (SELECT count(*) FROM pgdl.models WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%')
  FROM pgdl.models WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
SELECT count(*) AS datasets FROM pgdl.datasets WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
RESET ROLE;

-- a change to her model's weights marks every cache computed from it stale, whoever built it
SELECT owner::text, valid FROM pgdl.feature_cache WHERE base_model = :alice_model ORDER BY owner::text COLLATE "C";
SET ROLE regress_sec_alice;
WITH u AS (UPDATE pgdl.models SET weights = weights WHERE id = :alice_model RETURNING 1) SELECT count(*) AS updated FROM u;
RESET ROLE;
SELECT owner::text, valid FROM pgdl.feature_cache WHERE base_model = :alice_model ORDER BY owner::text COLLATE "C";

-- ---------------------------------------------------------------------------
-- The resume path reads only the run owner's checkpoints, even for a caller (a superuser) whom
-- row-level security does not restrict, and whose triggers could be off
-- ---------------------------------------------------------------------------
SET session_replication_role = replica;
INSERT INTO pgdl.checkpoints (owner, run, config, epoch, weights)
VALUES ('regress_sec_bob', :alice_run, :alice_config, 7, '\x00');
SET session_replication_role = DEFAULT;
UPDATE pgdl.runs SET status = 'cancelled' WHERE id = :alice_run;
SELECT count(*) AS resumed FROM pgdl.resume(:alice_run, workers => 1);
-- and it ends with the models of the run it resumed, which are the run owner's
SELECT count(*) AS models, count(DISTINCT md5(weights)) AS distinct_weights,
       bool_and(owner = 'regress_sec_alice'::regrole) AS hers
  FROM pgdl.models WHERE run = :alice_run;
DELETE FROM pgdl.checkpoints WHERE owner = 'regress_sec_bob'::regrole;

-- ---------------------------------------------------------------------------
-- Clean up: a role's catalog rows outlive it unless deleted (docs/security.md)
-- ---------------------------------------------------------------------------
DROP TABLE sec_alice_packed, sec_alice_rows, sec_alice_before, sec_bob_packed, sec_bob_rows, sec_rows CASCADE;
DROP FUNCTION sec_try(text);
DELETE FROM pgdl.models WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
DELETE FROM pgdl.runs WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
DELETE FROM pgdl.configs WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
DELETE FROM pgdl.architectures WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
SELECT count(*) AS rows_left FROM (
  SELECT owner FROM pgdl.datasets UNION ALL SELECT owner FROM pgdl.architectures UNION ALL
  SELECT owner FROM pgdl.models UNION ALL SELECT owner FROM pgdl.runs UNION ALL
  SELECT owner FROM pgdl.run_metrics UNION ALL SELECT owner FROM pgdl.configs UNION ALL
  SELECT owner FROM pgdl.checkpoints UNION ALL SELECT owner FROM pgdl.feature_cache) o
 WHERE pg_get_userbyid(owner) LIKE 'regress\_sec%';
SELECT count(*) AS cache_views_left FROM pg_class WHERE relnamespace = 'pgdl_cache'::regnamespace;
REVOKE CREATE ON SCHEMA public FROM regress_sec_alice, regress_sec_bob;
DROP ROLE regress_sec_alice, regress_sec_bob, regress_sec_carol, regress_sec_admin, "regress_sec_Dave";
