-- Reading pgdl.datasets back.  Every function that reads a dataset row (a
-- stored model's dataset, a packed table given to evaluate or fit, a reference
-- given to pack) reads it through one reader that checks every value: a row
-- that pgdl.pack could not have written gives ERRCODE_DATA_CORRUPTED (XX001)
-- with a detail naming the column, never a crash.  Each forgery below is made
-- as a superuser in a savepoint that is rolled back.  Tables are named ds_*.

CREATE TABLE ds_src (id integer, f real[], lab text, target real);
INSERT INTO ds_src
SELECT i, ARRAY[i, -i, i % 2]::real[], (ARRAY['a', 'b'])[1 + i % 2], i * 0.5
  FROM generate_series(1, 8) i;
SELECT pgdl.pack('ds_src', 'f', 'lab', 'ds_cls', buffer_rows => 2, partitions => 2,
                 standardize => true) AS cls_id \gset
SELECT pgdl.pack('ds_src', 'f', 'target', 'ds_reg', buffer_rows => 2, partitions => 2,
                 scale => 0.5) AS reg_id \gset
\set cls_spec '{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'
\set reg_spec '{"input": [3], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}'
INSERT INTO pgdl.models (name, spec, weights, dataset) VALUES
	('ds_cls_model', :'cls_spec', pgdl.model_from_weights(:'cls_spec', '{1,0,0,0,1,0,0,0}'), :cls_id),
	('ds_reg_model', :'reg_spec', pgdl.model_from_weights(:'reg_spec', '{1,1,1,0}'), :reg_id);

-- Reads dataset `packed` three ways and returns what each gave ('ok', or the
-- error's SQLSTATE, message and detail, the dataset id in the message as N):
-- one row when the three agree.
CREATE FUNCTION pg_temp.read_back(packed text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	model text := packed || '_model';
	label text := CASE packed WHEN 'ds_cls' THEN 'lab' ELSE 'target' END;
	readers text[] := ARRAY[
		-- a stored model's dataset, by id, through the per-backend cache
		format('SELECT pgdl.predict(%L, ''{1,2,3}'')', model),
		-- a packed table, through the cache
		format('SELECT * FROM pgdl.evaluate((SELECT weights FROM pgdl.models WHERE name = %L), %L)', model, packed),
		-- pgdl.pack's reference, uncached
		format('SELECT pgdl.pack(''ds_src'', ''f'', %L, ''ds_out'', buffer_rows => 2, partitions => 2, reference => %L)',
			   label, packed)];
	results text[] := '{}';
	reader text;
	state text;
	message text;
	detail text;
BEGIN
	FOREACH reader IN ARRAY readers LOOP
		BEGIN
			EXECUTE reader;
			-- undo what succeeded (the packed table pgdl.pack made)
			RAISE EXCEPTION USING ERRCODE = 'PD000', MESSAGE = 'ok';
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
			results := results || CASE WHEN state = 'PD000' THEN 'ok'
				ELSE state || ' ' || regexp_replace(message, '\d+', 'N') || ': ' || detail END;
		END;
	END LOOP;
	RETURN QUERY SELECT DISTINCT r FROM unnest(results) r;
END $$;

-- as pgdl.pack wrote them
SELECT pg_temp.read_back('ds_cls') AS classification;
SELECT pg_temp.read_back('ds_reg') AS regression;

BEGIN;
-- task
SAVEPOINT forged;
ALTER TABLE pgdl.datasets DROP CONSTRAINT datasets_task_check;
UPDATE pgdl.datasets SET task = 'clustering' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS task;
ROLLBACK TO forged;

-- n_features, n_targets, partitions, n_rows out of range
SAVEPOINT forged;
ALTER TABLE pgdl.datasets DROP CONSTRAINT datasets_n_features_check;
UPDATE pgdl.datasets SET n_features = 0 WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS n_features_zero;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET n_features = 2147483647 WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS n_features_huge;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET n_targets = 2 WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS n_targets_of_classes;
ROLLBACK TO forged;
SAVEPOINT forged;
ALTER TABLE pgdl.datasets DROP CONSTRAINT datasets_n_targets_check;
UPDATE pgdl.datasets SET n_targets = -1 WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS n_targets_negative;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET partitions = 0 WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS partitions_zero;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET partitions = 1025 WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS partitions_too_many;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET n_rows = -1 WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS n_rows_negative;
ROLLBACK TO forged;

-- classes: present exactly for classification, a 1-d array of distinct, non-NULL values
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = NULL WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS classes_null;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = '{}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS classes_empty;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = '{{a,b},{c,d}}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS classes_2d;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = '{a,NULL}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS classes_with_null;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = '{b,a,b}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS classes_twice;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET classes = '{a}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS classes_of_regression;
ROLLBACK TO forged;

-- normalization: an object with a "scale", or a "mean" and a "std" of n_features numbers
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '[0.5]' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS normalization_array;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '0.5' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS normalization_scalar;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS normalization_empty;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": "0.5"}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS scale_text;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": 0}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS scale_zero;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": 1e-50}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS scale_zero_as_real;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": 1e300}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS scale_infinite_as_real;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": 1e400}' WHERE id = :reg_id;
SELECT pg_temp.read_back('ds_reg') AS scale_infinite;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"scale": 1, "mean": [0, 0, 0], "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS scale_and_mean;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0, 0]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS no_std;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": 0, "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS mean_not_array;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0], "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS mean_too_short;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, "0", 0], "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS mean_text;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, null, 0], "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS mean_null;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0, 1e39], "std": [1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS mean_infinite_as_real;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0, 0], "std": [1, 0, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS std_zero;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0, 0], "std": [1, 1, -2]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS std_negative;
ROLLBACK TO forged;
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [0, 0, 0], "std": [1, 1, 1, 1]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS std_too_long;
ROLLBACK TO forged;
-- a hand-written normalization that pgdl.pack could have written is used
SAVEPOINT forged;
UPDATE pgdl.datasets SET normalization = '{"mean": [1, 2, 3], "std": [2, 4, 8]}' WHERE id = :cls_id;
SELECT pg_temp.read_back('ds_cls') AS valid_by_hand;
-- x = [1, 2, 3] is normalized to [0, 0, 0]: z = b = [0, 0], probabilities [0.5, 0.5]
SELECT pgdl.predict('ds_cls_model', '{1,2,3}') AS normalized;
ROLLBACK TO forged;
COMMIT;

-- the constraints are back, and the rows read as before
SELECT count(*) AS constraints FROM pg_constraint WHERE conrelid = 'pgdl.datasets'::regclass AND contype = 'c';
SELECT pg_temp.read_back('ds_cls') AS classification;
SELECT pg_temp.read_back('ds_reg') AS regression;
