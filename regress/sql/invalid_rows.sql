-- No row of one role makes another role's query fail (docs/security.md).  bob writes a model whose spec
-- and weights do not parse and grants it to PUBLIC: refused when written.  The same rows planted anyway
-- (written before pgdl 0.7.0, or by a superuser with the triggers disabled) are shown as invalid by the
-- views and functions over many roles' rows, to alice (granted the model), a superuser and a member of
-- pgdl_admin (who see every row), instead of failing their queries.
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE ROLE regress_inv_alice;
CREATE ROLE regress_inv_bob;
CREATE ROLE regress_inv_admin IN ROLE pgdl_admin;
GRANT CREATE ON SCHEMA public TO regress_inv_bob;

\set spec '{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'
\set other_spec '{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'

-- ---------------------------------------------------------------------------
-- Refused when written
-- ---------------------------------------------------------------------------
SET ROLE regress_inv_bob;
-- valid rows pass: a model, an architecture
INSERT INTO pgdl.models (name, spec, weights, acl)
VALUES ('inv_valid', :'spec', pgdl.model_from_weights(:'spec', '{1,0,0,1,0,0}'), '{=U/regress_inv_bob}');
INSERT INTO pgdl.architectures (name, spec) VALUES ('inv_arch', :'spec');
-- the attack: a spec that is not one, weights that are not a model, shared with everybody
INSERT INTO pgdl.models (name, spec, weights, acl) VALUES ('inv_attack', '"x"', '\xdeadbeef', '{=U/regress_inv_bob}');
INSERT INTO pgdl.models (name, spec, weights) VALUES ('inv_attack', :'spec', '\xdeadbeef');
-- weights cut short, or with a byte changed (the checksum), or of another spec
INSERT INTO pgdl.models (name, spec, weights)
SELECT 'inv_attack', :'spec', substring(w for length(w) - 1)
  FROM pgdl.model_from_weights(:'spec', '{1,0,0,1,0,0}') w;
INSERT INTO pgdl.models (name, spec, weights)
SELECT 'inv_attack', :'spec', overlay(w PLACING '\x7f' FROM 60)
  FROM pgdl.model_from_weights(:'spec', '{1,0,0,1,0,0}') w;
INSERT INTO pgdl.models (name, spec, weights)
VALUES ('inv_attack', :'spec', pgdl.model_from_weights(:'other_spec', '{1,0,0,0,1,0,0,0}'));
-- an UPDATE is checked too; one of other columns (a name, a grant) passes
UPDATE pgdl.models SET spec = '{"input": [2], "layers": 5}' WHERE name = 'inv_valid';
UPDATE pgdl.models SET weights = '\x00' WHERE name = 'inv_valid';
UPDATE pgdl.models SET spec = :'other_spec' WHERE name = 'inv_valid';
WITH u AS (UPDATE pgdl.models SET name = 'inv_renamed' WHERE name = 'inv_valid' RETURNING 1)
SELECT count(*) AS updated FROM u;
SELECT pgdl.revoke_model('inv_renamed', 'public');
SELECT pgdl.grant_model('inv_renamed', 'regress_inv_alice');
WITH u AS (UPDATE pgdl.models SET spec = spec, weights = weights WHERE name = 'inv_renamed' RETURNING 1)
SELECT count(*) AS updated FROM u;
INSERT INTO pgdl.architectures (name, spec) VALUES ('inv_attack', '{"input": [4], "layers": 5}');
UPDATE pgdl.architectures SET spec = '[]' WHERE name = 'inv_arch';
SELECT count(*) AS bobs_models FROM pgdl.models WHERE owner = 'regress_inv_bob'::regrole;
-- the trigger functions: nobody attaches them to a table of their own
CREATE TABLE inv_bob_table (spec jsonb, weights bytea);
CREATE TRIGGER inv_check BEFORE INSERT ON inv_bob_table FOR EACH ROW EXECUTE FUNCTION pgdl.models_validate();
RESET ROLE;
-- and attached by a superuser to another table, they refuse to fire there
CREATE TABLE inv_lookalike (spec jsonb, weights bytea);
CREATE TRIGGER inv_check BEFORE INSERT ON inv_lookalike FOR EACH ROW EXECUTE FUNCTION pgdl.models_validate();
INSERT INTO inv_lookalike VALUES (:'spec', pgdl.model_from_weights(:'spec', '{1,0,0,1,0,0}'));
CREATE TRIGGER inv_check BEFORE INSERT ON pgdl.models FOR EACH STATEMENT EXECUTE FUNCTION pgdl.models_validate();
INSERT INTO pgdl.models (name, spec, weights) VALUES ('inv_statement', :'spec', pgdl.model_from_weights(:'spec', '{1,0,0,1,0,0}'));
DROP TRIGGER inv_check ON pgdl.models;
DROP TABLE inv_lookalike, inv_bob_table;
SELECT p.oid::regprocedure AS trigger_function, p.prosecdef AS security_definer,
       has_function_privilege('regress_inv_bob', p.oid, 'EXECUTE') AS public_executes
  FROM pg_proc p
 WHERE p.oid IN ('pgdl.models_validate()'::regprocedure, 'pgdl.architectures_validate()'::regprocedure)
 ORDER BY 1;

-- ---------------------------------------------------------------------------
-- Planted anyway: rows from before pgdl 0.7.0, or written with the triggers disabled
-- ---------------------------------------------------------------------------
SET ROLE regress_inv_bob;
-- a run of bob's with metrics of the model to come, and a dataset alice may read
INSERT INTO pgdl.runs (kind, config, epochs, status) VALUES ('fit', '{"lr": 0.1}', 1, 'finished')
RETURNING id AS inv_run \gset
CREATE TABLE inv_rows AS SELECT i, ARRAY[i, -i]::real[] AS x, (i % 2)::text AS label, (i % 3)::text AS city
  FROM generate_series(1, 8) i;
SELECT pgdl.pack('inv_rows', 'x', 'label', 'inv_packed', buffer_rows => 4, partitions => 1,
                 categorical => 'city') > 0 AS packed;
GRANT SELECT ON inv_packed TO regress_inv_alice;
RESET ROLE;
ALTER TABLE pgdl.models DISABLE TRIGGER models_validate;
ALTER TABLE pgdl.architectures DISABLE TRIGGER architectures_validate;
INSERT INTO pgdl.models (owner, name, spec, weights, acl, run)
VALUES ('regress_inv_bob', 'inv_planted', '"x"', '\xdeadbeef', '{=U/regress_inv_bob}', :inv_run)
RETURNING id AS inv_planted \gset
INSERT INTO pgdl.models (owner, name, spec, weights, acl)
VALUES ('regress_inv_bob', 'inv_planted_layers', '{"input": [2], "layers": 5}', '\x00', '{=U/regress_inv_bob}');
INSERT INTO pgdl.architectures (owner, name, spec) VALUES ('regress_inv_bob', 'inv_planted', '{"layers": "x"}');
ALTER TABLE pgdl.models ENABLE TRIGGER models_validate;
ALTER TABLE pgdl.architectures ENABLE TRIGGER architectures_validate;
INSERT INTO pgdl.run_metrics (run, model, epoch, train_loss, owner)
SELECT :inv_run, id, 1, 0.5, 'regress_inv_bob' FROM pgdl.models WHERE name = 'inv_planted';
-- a vocabulary whose length and values are not what pgdl.pack writes (the datasets table has no check)
UPDATE pgdl.datasets SET categorical = '[{"column": "city", "type": "text", "values": {"a": 1}, "length": "x"},
                                         {"column": "town", "values": ["p", "q"], "length": 1e12}, 7]'
 WHERE packed = 'inv_packed'::regclass;

-- Every role that sees the rows: alice (granted the models), a member of pgdl_admin, the superuser.
CREATE FUNCTION pg_temp.inv_views() RETURNS TABLE (reader text, answer text) LANGUAGE sql AS $$
SELECT 'zoo', string_agg(format('%s: %s, %s', name, coalesce(layers, 'NULL'), coalesce(problem, 'valid')), '; '
                         ORDER BY name)
  FROM pgdl.zoo WHERE name LIKE 'inv\_%'
UNION ALL
SELECT 'zoo, all rows', (count(*) > 0)::text FROM pgdl.zoo
UNION ALL
SELECT 'leaderboard', string_agg(format('%s: %s', model_name, status), '; ')
  FROM pgdl.leaderboard WHERE model_name LIKE 'inv\_%'
UNION ALL
SELECT 'training_curves', string_agg(format('%s: %s %s', model_name, metric, value), '; ')
  FROM pgdl.training_curves WHERE model_name LIKE 'inv\_%'
UNION ALL
SELECT 'similar_models', coalesce(string_agg(name, ', ' ORDER BY name), 'none')
  FROM pgdl.similar_models('inv_renamed', 10000, 'both') WHERE name LIKE 'inv\_%'
UNION ALL
SELECT 'similar_models to a spec', string_agg(name, ', ' ORDER BY name)
  FROM pgdl.similar_models('{"input": [2], "layers": [{"type": "dense", "units": 2}]}'::jsonb, 10000)
 WHERE name LIKE 'inv\_%'
UNION ALL
SELECT 'vocabulary', string_agg(format('%s %s: %s %s %s', "column", coalesce(feature::text, 'NULL'), v.id, value,
                                       coalesce(length::text, 'NULL')), '; ' ORDER BY position, v.id)
  FROM pgdl.vocabulary v JOIN pgdl.datasets d ON d.id = v.dataset WHERE d.packed = 'inv_packed'::regclass
UNION ALL
SELECT 'architectures', string_agg(name, ', ' ORDER BY name) FROM pgdl.architectures WHERE name LIKE 'inv\_%'
$$;
SET ROLE regress_inv_alice;
SELECT * FROM pg_temp.inv_views();
SET ROLE regress_inv_admin;
SELECT * FROM pg_temp.inv_views();
RESET ROLE;
SELECT * FROM pg_temp.inv_views();
-- a function on one model may still refuse it: that model is the caller's choice
SET ROLE regress_inv_alice;
SELECT pgdl.predict(:inv_planted, '{1,2}');
SELECT * FROM pgdl.similar_models(:inv_planted);
SELECT * FROM pgdl.spec_summary('"x"');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- Clean up
-- ---------------------------------------------------------------------------
DELETE FROM pgdl.models WHERE owner = 'regress_inv_bob'::regrole;
DELETE FROM pgdl.architectures WHERE owner = 'regress_inv_bob'::regrole;
DELETE FROM pgdl.runs WHERE owner = 'regress_inv_bob'::regrole;
DROP TABLE inv_packed, inv_rows;
REVOKE CREATE ON SCHEMA public FROM regress_inv_bob;
DROP ROLE regress_inv_alice, regress_inv_bob, regress_inv_admin;
