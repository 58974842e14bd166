-- Reading pgdl.datasets back.  Every function that reads a dataset row (a
-- stored model's dataset, a packed table given to evaluate or fit, a reference
-- given to pack) reads it through one reader that checks every value: a row
-- that pgdl.pack could not have written gives ERRCODE_DATA_CORRUPTED (XX001)
-- with a detail naming the column, never a crash.  Each forgery below is made
-- as a superuser and rolled back.  Tables are named ds_*.

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

-- Changes dataset `packed` by `change` (an UPDATE's SET list), reads it back,
-- and rolls the change back.
CREATE FUNCTION pg_temp.forged(packed text, change text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	results text[];
BEGIN
	BEGIN
		EXECUTE format('UPDATE pgdl.datasets SET %s WHERE packed = %L::regclass', change, packed);
		results := ARRAY(SELECT pg_temp.read_back(packed));
		RAISE EXCEPTION USING ERRCODE = 'PD001', MESSAGE = 'roll back';
	EXCEPTION WHEN SQLSTATE 'PD001' THEN
		NULL;
	END;
	RETURN QUERY SELECT unnest(results);
END $$;

-- as pgdl.pack wrote them
SELECT pg_temp.read_back('ds_cls') AS classification;
SELECT pg_temp.read_back('ds_reg') AS regression;

BEGIN;
-- the table's CHECK constraints would refuse some forgeries: drop them until ROLLBACK
ALTER TABLE pgdl.datasets DROP CONSTRAINT datasets_task_check, DROP CONSTRAINT datasets_n_features_check,
	DROP CONSTRAINT datasets_n_targets_check;
SELECT pg_temp.forged('ds_cls', $$task = 'clustering'$$) AS task;

-- n_features, n_targets, partitions, n_rows out of range
SELECT pg_temp.forged('ds_cls', 'n_features = 0') AS n_features_zero;
SELECT pg_temp.forged('ds_cls', 'n_features = 2147483647') AS n_features_huge;
SELECT pg_temp.forged('ds_cls', 'n_targets = 2') AS n_targets_of_classes;
SELECT pg_temp.forged('ds_reg', 'n_targets = -1') AS n_targets_negative;
SELECT pg_temp.forged('ds_cls', 'partitions = 0') AS partitions_zero;
SELECT pg_temp.forged('ds_reg', 'partitions = 1025') AS partitions_too_many;
SELECT pg_temp.forged('ds_cls', 'n_rows = -1') AS n_rows_negative;

-- classes: present exactly for classification, a 1-d array of distinct, non-NULL values
SELECT pg_temp.forged('ds_cls', 'classes = NULL') AS classes_null;
SELECT pg_temp.forged('ds_cls', $$classes = '{}'$$) AS classes_empty;
SELECT pg_temp.forged('ds_cls', $$classes = '{{a,b},{c,d}}'$$) AS classes_2d;
SELECT pg_temp.forged('ds_cls', $$classes = '{a,NULL}'$$) AS classes_with_null;
SELECT pg_temp.forged('ds_cls', $$classes = '{b,a,b}'$$) AS classes_twice;
SELECT pg_temp.forged('ds_reg', $$classes = '{a}'$$) AS classes_of_regression;

-- normalization: an object with a "scale", or a "mean" and a "std" of n_features numbers
SELECT pg_temp.forged('ds_reg', $$normalization = '[0.5]'$$) AS normalization_array;
SELECT pg_temp.forged('ds_reg', $$normalization = '0.5'$$) AS normalization_scalar;
SELECT pg_temp.forged('ds_reg', $$normalization = '{}'$$) AS normalization_empty;
SELECT pg_temp.forged('ds_reg', $$normalization = '{"scale": "0.5"}'$$) AS scale_text;
SELECT pg_temp.forged('ds_reg', $$normalization = '{"scale": 0}'$$) AS scale_zero;
SELECT pg_temp.forged('ds_reg', $$normalization = '{"scale": 1e-50}'$$) AS scale_zero_as_real;
SELECT pg_temp.forged('ds_reg', $$normalization = '{"scale": 1e300}'$$) AS scale_infinite_as_real;
SELECT pg_temp.forged('ds_reg', $$normalization = '{"scale": 1e400}'$$) AS scale_infinite;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"scale": 1, "mean": [0, 0, 0], "std": [1, 1, 1]}'$$)
       AS scale_and_mean;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0, 0]}'$$) AS no_std;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": 0, "std": [1, 1, 1]}'$$) AS mean_not_array;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0], "std": [1, 1, 1]}'$$) AS mean_too_short;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, "0", 0], "std": [1, 1, 1]}'$$) AS mean_text;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, null, 0], "std": [1, 1, 1]}'$$) AS mean_null;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0, 1e39], "std": [1, 1, 1]}'$$)
       AS mean_infinite_as_real;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0, 0], "std": [1, 0, 1]}'$$) AS std_zero;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0, 0], "std": [1, 1, -2]}'$$) AS std_negative;
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [0, 0, 0], "std": [1, 1, 1, 1]}'$$) AS std_too_long;

-- a hand-written normalization that pgdl.pack could have written is used
SELECT pg_temp.forged('ds_cls', $$normalization = '{"mean": [1, 2, 3], "std": [2, 4, 8]}'$$) AS valid_by_hand;
SAVEPOINT by_hand;
UPDATE pgdl.datasets SET normalization = '{"mean": [1, 2, 3], "std": [2, 4, 8]}' WHERE id = :cls_id;
-- x = [1, 2, 3] is normalized to [0, 0, 0]: z = b = [0, 0], probabilities [0.5, 0.5]
SELECT pgdl.predict('ds_cls_model', '{1,2,3}') AS normalized;
ROLLBACK TO by_hand;
ROLLBACK;

-- the constraints are back, and the rows read as before
SELECT count(*) AS constraints FROM pg_constraint WHERE conrelid = 'pgdl.datasets'::regclass AND contype = 'c';
SELECT pg_temp.read_back('ds_cls') AS classification;
SELECT pg_temp.read_back('ds_reg') AS regression;
