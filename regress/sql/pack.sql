-- pgdl.pack: a source table to shuffled minibatch buffers in a LIST-partitioned
-- table, registered in pgdl.datasets.  Dataset ids are kept in psql variables
-- (other tests may have used the sequence); tables are named pack_*.

-- ten rows, an int[] feature column, an integer label (classes 0, 1, 2)
CREATE TABLE pack_src (id integer, f integer[], f4 real[], a smallint, b double precision, c numeric,
                       lab integer, name text, target double precision);
INSERT INTO pack_src
SELECT i, ARRAY[i, 10 * i, 100 * i], ARRAY[i, -i]::real[], i::smallint, i / 2.0, i * 3,
       i % 3, (ARRAY['cat', 'dog', 'ant'])[1 + i % 3], i * 1.5
  FROM generate_series(1, 10) i;

-- 10 rows, buffers of 3 (the last has 1), buffer b in partition b % 2
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_int', buffer_rows => 3, partitions => 2) AS pack_int_id \gset
SELECT tableoid::regclass AS partition, part, buffer_id, n, x, y FROM pack_int ORDER BY buffer_id;
-- the same rows and labels, each row once
SELECT count(*) AS rows, count(DISTINCT x) AS distinct_rows,
       bool_and(x[2] = 10 * x[1] AND x[3] = 100 * x[1]) AS rows_intact,
       bool_and(y = (x[1]::integer % 3)::real) AS labels_follow_rows
  FROM (SELECT x[3 * i + 1 : 3 * i + 3] AS x, y[i + 1] AS y
          FROM pack_int, generate_series(0, n - 1) i) s;
-- the registered dataset
SELECT id = :pack_int_id AS returned_id, packed, source, features, label, task, n_features, n_targets,
       classes, label_type, normalization, n_rows, n_buffers, buffer_rows, partitions, seed, reference
  FROM pgdl.datasets WHERE packed = 'pack_int'::regclass;

-- the packed table's shape: columns, key, storage, partitions
SELECT attrelid::regclass AS relation, attname, format_type(atttypid, atttypmod) AS type, attnotnull, attstorage
  FROM pg_attribute
 WHERE attrelid IN ('pack_int'::regclass, 'pack_int_p0'::regclass, 'pack_int_p1'::regclass) AND attnum > 0
 ORDER BY attrelid::regclass::text, attnum;
SELECT c.relkind, pg_get_partkeydef(c.oid) AS partition_key,
       (SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = c.oid AND contype = 'p') AS primary_key
  FROM pg_class c WHERE c.oid = 'pack_int'::regclass;
SELECT inhrelid::regclass AS partition, pg_get_expr(p.relpartbound, p.oid) AS bound
  FROM pg_inherits JOIN pg_class p ON p.oid = inhrelid
 WHERE inhparent = 'pack_int'::regclass ORDER BY 1;

-- the same seed gives the same table; another seed another order of the same rows
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_int_again', buffer_rows => 3, partitions => 2) > 0 AS packed;
SELECT (SELECT string_agg(format('%s %s %s %s %s', part, buffer_id, n, x, y), '; ' ORDER BY buffer_id) FROM pack_int)
     = (SELECT string_agg(format('%s %s %s %s %s', part, buffer_id, n, x, y), '; ' ORDER BY buffer_id) FROM pack_int_again)
       AS same_seed_same_table;
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_int_seed7', buffer_rows => 3, partitions => 2, seed => 7) > 0 AS packed;
SELECT buffer_id, n, x, y FROM pack_int_seed7 ORDER BY buffer_id;
SELECT (SELECT string_agg(x::text, ' ' ORDER BY buffer_id) FROM pack_int)
    <> (SELECT string_agg(x::text, ' ' ORDER BY buffer_id) FROM pack_int_seed7) AS other_seed_other_order,
       (SELECT array_agg(v ORDER BY v) FROM pack_int, unnest(x) v)
     = (SELECT array_agg(v ORDER BY v) FROM pack_int_seed7, unnest(x) v) AS same_values;
-- one buffer, one partition: the whole shuffled order
SELECT pgdl.pack('pack_src', 'id', 'lab', 'pack_order', buffer_rows => 10, partitions => 1) > 0 AS packed;
SELECT part, buffer_id, n, x AS shuffled_ids, y FROM pack_order;

-- a real[] column, scaled
SELECT pgdl.pack('pack_src', 'f4', 'lab', 'pack_f4', buffer_rows => 4, partitions => 3, scale => 0.5) > 0 AS packed;
SELECT part, buffer_id, n, x, y FROM pack_f4 ORDER BY buffer_id;
SELECT n_features, normalization, n_buffers FROM pgdl.datasets WHERE packed = 'pack_f4'::regclass;

-- a list of numeric columns (smallint, double precision, numeric) and a text label:
-- classes sorted by text (ant, cat, dog)
SELECT pgdl.pack('pack_src', 'a, b,c', 'name', 'pack_cols', buffer_rows => 5, partitions => 2) > 0 AS packed;
SELECT part, buffer_id, n, x, y FROM pack_cols ORDER BY buffer_id;
SELECT features, label, task, n_features, classes, label_type FROM pgdl.datasets WHERE packed = 'pack_cols'::regclass;

-- arrays of every numeric type
CREATE TABLE pack_arrays (s smallint[], b bigint[], d double precision[], n numeric[], lab integer);
INSERT INTO pack_arrays VALUES ('{1,-2}', '{3000000000,-4}', '{0.25,1e-3}', '{1.5,-2.125}', 1),
                               ('{5,6}', '{7,8}', '{9,10}', '{11,12}', 0);
SELECT pgdl.pack('pack_arrays', 's', 'lab', 'pack_arrays_s', partitions => 1) > 0 AS packed;
SELECT pgdl.pack('pack_arrays', 'b', 'lab', 'pack_arrays_b', partitions => 1) > 0 AS packed;
SELECT pgdl.pack('pack_arrays', 'd', 'lab', 'pack_arrays_d', partitions => 1) > 0 AS packed;
SELECT pgdl.pack('pack_arrays', 'n', 'lab', 'pack_arrays_n', partitions => 1) > 0 AS packed;
SELECT 's' AS col, x, y FROM pack_arrays_s UNION ALL SELECT 'b', x, y FROM pack_arrays_b
 UNION ALL SELECT 'd', x, y FROM pack_arrays_d UNION ALL SELECT 'n', x, y FROM pack_arrays_n;

-- a double precision label: regression, one target per row
SELECT pgdl.pack('pack_src', 'a', 'target', 'pack_reg', buffer_rows => 4, partitions => 1) > 0 AS packed;
SELECT part, buffer_id, n, x, y, bool_and(y[i] = 1.5 * x[i]) AS target_follows_feature
  FROM pack_reg, generate_series(1, n) i GROUP BY part, buffer_id, n, x, y ORDER BY buffer_id;
SELECT task, n_features, n_targets, classes, label_type FROM pgdl.datasets WHERE packed = 'pack_reg'::regclass;

-- standardize: per feature (x - mean) / std, std over all rows (divided by n); a constant feature keeps std 1
CREATE TABLE pack_std (v real[], k integer);
INSERT INTO pack_std VALUES ('{1,5,7}', 0), ('{2,5,7}', 1), ('{3,5,7}', 0), ('{4,5,7}', 1);
SELECT pgdl.pack('pack_std', 'v', 'k', 'pack_std_out', buffer_rows => 4, partitions => 1, standardize => true) > 0 AS packed;
SELECT normalization FROM pgdl.datasets WHERE packed = 'pack_std_out'::regclass;
SELECT x, y FROM pack_std_out;
SELECT round(avg(x[3 * i + 1])::numeric, 6) AS mean_0, round(stddev_pop(x[3 * i + 1])::numeric, 6) AS std_1,
       array_agg(DISTINCT x[3 * i + 2]) AS constant_to_0
  FROM pack_std_out, generate_series(0, n - 1) i;

-- features packed as they are (no scale, no standardize) of very different scales give a NOTICE: the
-- largest max |x| of a non-constant feature above 1000 or above 100 times the smallest (here 4000 and 0.05,
-- as in sklearn's breast cancer set); the constant feature (7) has no scale of its own
CREATE TABLE pack_scales (v real[], wide real[], big integer[], k integer);
INSERT INTO pack_scales VALUES ('{1,0.01,7}', '{500,0.01}', '{1990,20}', 0), ('{2,0.05,7}', '{2,0.05}', '{2001,40}', 1),
							   ('{4000,0.03,7}', '{3,0.02}', '{2024,60}', 0), ('{3,0.02,7}', '{4,0.03}', '{2010,80}', 1);
SELECT pgdl.pack('pack_scales', 'v', 'k', 'pack_scales_raw', partitions => 1) > 0 AS notice;
SELECT pgdl.pack('pack_scales', 'wide', 'k', 'pack_scales_wide', partitions => 1) > 0 AS notice_ratio_only;
SELECT pgdl.pack('pack_scales', 'big', 'k', 'pack_scales_big', partitions => 1) > 0 AS notice_large_only;
SELECT pgdl.pack('pack_scales', 'v', 'k', 'pack_scales_std', partitions => 1, standardize => true) > 0 AS no_notice_standardized,
       pgdl.pack('pack_scales', 'v', 'k', 'pack_scales_scaled', partitions => 1, scale => 0.001) > 0 AS no_notice_scaled,
       pgdl.pack('pack_scales', 'v', 'k', 'pack_scales_ref', partitions => 1, reference => 'pack_scales_raw') > 0 AS no_notice_reference,
       pgdl.pack('pack_std', 'v', 'k', 'pack_std_raw', partitions => 1) > 0 AS no_notice_similar_scales;

-- a schema-qualified, quoted output name, a quoted column name, a source outside the search path;
-- integer classes sorted as numbers (-3, 9, 10)
CREATE SCHEMA pack_schema;
CREATE TABLE pack_schema.src ("Pixel Values" double precision[], label bigint);
INSERT INTO pack_schema.src VALUES ('{0.5,1.5}', 10), ('{2.5,3.5}', -3), ('{4.5,5.5}', 9);
SELECT pgdl.pack('pack_schema.src', '"Pixel Values"', 'Label', 'pack_schema."Packed Set"',
                 buffer_rows => 1, partitions => 3) > 0 AS packed;
SELECT tableoid::regclass AS partition, part, buffer_id, n, x, y FROM pack_schema."Packed Set" ORDER BY buffer_id;
SELECT packed, source, features, label, classes, label_type FROM pgdl.datasets
 WHERE packed = 'pack_schema."Packed Set"'::regclass;

-- a view as the source, rows with NULLs skipped (a NOTICE counts them)
CREATE TABLE pack_nulls (f integer[], lab text);
INSERT INTO pack_nulls VALUES ('{1,2}', 'x'), (NULL, 'y'), ('{3,NULL}', 'y'), ('{5,6}', NULL), ('{7,8}', 'y');
CREATE VIEW pack_nulls_view AS SELECT * FROM pack_nulls;
SELECT pgdl.pack('pack_nulls_view', 'f', 'lab', 'pack_skipped', buffer_rows => 8, partitions => 1, nulls => 'skip') > 0 AS packed;
SELECT n, x, y FROM pack_skipped;
SELECT source, n_rows, classes FROM pgdl.datasets WHERE packed = 'pack_skipped'::regclass;

-- a reference: the test set gets the training set's classes and normalization
CREATE TABLE pack_test_src (f integer[], lab integer);
INSERT INTO pack_test_src VALUES ('{2,4,8}', 2), ('{1,1,1}', 2), ('{0,0,0}', 0);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_train_std', buffer_rows => 5, partitions => 2, standardize => true) AS train_id \gset
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_test', buffer_rows => 5, partitions => 1,
                 reference => 'pack_train_std') AS test_id \gset
SELECT t.reference = :train_id AS reference_recorded, t.classes = r.classes AS same_classes,
       t.normalization = r.normalization AS same_normalization, t.n_rows, t.classes
  FROM pgdl.datasets t, pgdl.datasets r WHERE t.id = :test_id AND r.id = :train_id;
-- features standardized with the training set's mean and std (mean 5.5, std 2.8722813 for feature 1)
SELECT n, x, y FROM pack_test;
-- a reference with more classes than the source: label 2 is class 2 although the source has no 1
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_test_int', buffer_rows => 5, partitions => 1,
                 reference => 'pack_int') > 0 AS packed;
SELECT x, y FROM pack_test_int;
-- a reference with a text label
CREATE TABLE pack_test_names (a smallint, b double precision, c numeric, name varchar);
INSERT INTO pack_test_names VALUES (1, 2, 3, 'dog'), (4, 5, 6, 'ant');
SELECT pgdl.pack('pack_test_names', 'a,b,c', 'name', 'pack_test_names_out', partitions => 1,
                 reference => 'pack_cols') > 0 AS packed;
SELECT x, y FROM pack_test_names_out;
SELECT classes, label_type FROM pgdl.datasets WHERE packed = 'pack_test_names_out'::regclass;

-- Fashion-MNIST-sized rows: 784 features, 600 rows in 5 buffers (the last of 88 rows), 4 partitions
CREATE TABLE pack_wide (image real[], label integer);
INSERT INTO pack_wide SELECT array_fill(i::real, ARRAY[784]), i % 10 FROM generate_series(0, 599) i;
SELECT pgdl.pack('pack_wide', 'image', 'label', 'pack_wide_out', scale => 1 / 255.0) > 0 AS packed;
SELECT part, count(*) AS buffers, sum(n) AS rows, min(array_length(x, 1)) AS min_x, max(array_length(x, 1)) AS max_x
  FROM pack_wide_out GROUP BY part ORDER BY part;
SELECT buffer_id, n, array_length(x, 1) AS x_length, array_length(y, 1) AS y_length
  FROM pack_wide_out WHERE buffer_id = 4;
SELECT bool_and(x[784 * i + 1] = x[784 * i + 784] AND y[i + 1] = (round(x[784 * i + 1] * 255)::integer % 10)::real) AS rows_intact
  FROM pack_wide_out, generate_series(0, n - 1) i;

-- ---------------------------------------------------------------------------
-- Errors: each leaves nothing behind (no output table, no partition, no dataset)
-- ---------------------------------------------------------------------------
SELECT count(*) AS datasets_before FROM pgdl.datasets \gset
\set nothing_left 'SELECT to_regclass(''pack_err'') IS NULL AS no_table, to_regclass(''pack_err_p0'') IS NULL AS no_partition, (SELECT count(*) FROM pgdl.datasets) = ' :datasets_before ' AS no_dataset'

-- missing columns
SELECT pgdl.pack('pack_src', 'nope', 'lab', 'pack_err');
:nothing_left;
SELECT pgdl.pack('pack_src', 'a, nope', 'lab', 'pack_err');
SELECT pgdl.pack('pack_src', 'f', 'nope', 'pack_err');
SELECT pgdl.pack('pack_src', 'ctid', 'lab', 'pack_err');
SELECT pgdl.pack('pack_src', 'a,,b', 'lab', 'pack_err');
SELECT pgdl.pack('pack_src', (SELECT string_agg('a', ',') FROM generate_series(1, 1601)), 'lab', 'pack_err');
SELECT pgdl.pack('pack_src', 'f', 'lab,', 'pack_err');
:nothing_left;

-- feature and label types
SELECT pgdl.pack('pack_src', 'name', 'lab', 'pack_err');
CREATE TABLE pack_bad_types (t text[], f integer[], g integer[], flag boolean, lab integer);
INSERT INTO pack_bad_types VALUES ('{a}', '{1}', '{2}', true, 1);
SELECT pgdl.pack('pack_bad_types', 't', 'lab', 'pack_err');
SELECT pgdl.pack('pack_bad_types', 'f, g', 'lab', 'pack_err');
SELECT pgdl.pack('pack_bad_types', 'f', 'flag', 'pack_err');
:nothing_left;

-- feature arrays: lengths, dimensions, empty
CREATE TABLE pack_ragged (f real[], lab integer);
INSERT INTO pack_ragged VALUES ('{1,2,3}', 0), ('{4,5,6}', 1), ('{7,8}', 0);
SELECT pgdl.pack('pack_ragged', 'f', 'lab', 'pack_err');
:nothing_left;
CREATE TABLE pack_2d (f real[], lab integer);
INSERT INTO pack_2d VALUES ('{{1,2},{3,4}}', 0);
SELECT pgdl.pack('pack_2d', 'f', 'lab', 'pack_err');
CREATE TABLE pack_empty_array (f real[], lab integer);
INSERT INTO pack_empty_array VALUES ('{}', 0);
SELECT pgdl.pack('pack_empty_array', 'f', 'lab', 'pack_err');
:nothing_left;

-- NULLs: each named, unless skipped
SELECT pgdl.pack('pack_nulls', 'f', 'lab', 'pack_err');
DELETE FROM pack_nulls WHERE f IS NULL;
SELECT pgdl.pack('pack_nulls', 'f', 'lab', 'pack_err');
DELETE FROM pack_nulls WHERE 3 = ANY (f);
SELECT pgdl.pack('pack_nulls', 'f', 'lab', 'pack_err');
CREATE TABLE pack_null_cols (a integer, b real, lab integer);
INSERT INTO pack_null_cols VALUES (1, 2, 0), (3, NULL, 1);
SELECT pgdl.pack('pack_null_cols', 'a,b', 'lab', 'pack_err');
:nothing_left;

-- empty sources
CREATE TABLE pack_no_rows (f real[], lab integer);
SELECT pgdl.pack('pack_no_rows', 'f', 'lab', 'pack_err');
CREATE TABLE pack_all_null (f real[], lab integer);
INSERT INTO pack_all_null VALUES (NULL, 1), ('{1}', NULL);
SELECT pgdl.pack('pack_all_null', 'f', 'lab', 'pack_err', nulls => 'skip');
:nothing_left;

-- non-finite values
CREATE TABLE pack_nonfinite (f real[], d double precision, n numeric, ok real, target real, lab integer);
INSERT INTO pack_nonfinite VALUES ('{1,2}', 1, 1, 1, 1, 0), ('{3,NaN}', 'Infinity', 'NaN', 2, 'NaN', 1);
SELECT pgdl.pack('pack_nonfinite', 'f', 'lab', 'pack_err');
SELECT pgdl.pack('pack_nonfinite', 'd', 'lab', 'pack_err');
SELECT pgdl.pack('pack_nonfinite', 'n', 'lab', 'pack_err');
SELECT pgdl.pack('pack_nonfinite', 'ok', 'target', 'pack_err');
UPDATE pack_nonfinite SET d = 1e300 WHERE lab = 1;
SELECT pgdl.pack('pack_nonfinite', 'd', 'lab', 'pack_err');
:nothing_left;

-- output names
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_int');
CREATE TABLE pack_err_p1 ();
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', partitions => 2);
DROP TABLE pack_err_p1;
SELECT pgdl.pack('pack_src', 'f', 'lab', 'no_such_schema.pack_err');
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err_' || repeat('x', 52), partitions => 4);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'a.b.c.d');
:nothing_left;

-- sizes
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', buffer_rows => 0);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', buffer_rows => 65537);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', partitions => 0);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', partitions => 1025);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', buffer_rows => 3, partitions => 5);
CREATE TABLE pack_huge_row (f real[], lab integer);
INSERT INTO pack_huge_row VALUES (array_fill(0::real, ARRAY[2048]), 0);
SELECT pgdl.pack('pack_huge_row', 'f', 'lab', 'pack_err', buffer_rows => 65536, partitions => 1);
:nothing_left;

-- normalization and nulls options
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', scale => 0.5, standardize => true);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', scale => 0);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', scale => 'NaN');
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', scale => 1e300);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', partitions => 1, scale => 1e36);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', nulls => 'ignore');
SELECT pgdl.pack(NULL, 'f', 'lab', 'pack_err');
SELECT pgdl.pack('pack_src', 'f', 'lab', NULL);
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', seed => NULL);
:nothing_left;

-- references
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_err', reference => 'pack_src');
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_err', reference => 'pack_train_std', scale => 2);
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_err', reference => 'pack_train_std', standardize => true);
INSERT INTO pack_test_src VALUES ('{9,9,9}', 7);
SELECT pgdl.pack('pack_test_src', 'f', 'lab', 'pack_err', partitions => 1, reference => 'pack_train_std');
SELECT pgdl.pack('pack_test_names', 'a,b,c', 'name', 'pack_err', partitions => 1, reference => 'pack_int');
SELECT pgdl.pack('pack_src', 'f4', 'lab', 'pack_err', reference => 'pack_int');
SELECT pgdl.pack('pack_src', 'a,b', 'lab', 'pack_err', reference => 'pack_int');
SELECT pgdl.pack('pack_src', 'f', 'target', 'pack_err', reference => 'pack_int');
SELECT pgdl.pack('pack_src', 'a', 'lab', 'pack_err', reference => 'pack_reg');
:nothing_left;

-- the error of one pack rolls back with its transaction; an earlier pack in it too
BEGIN;
SELECT pgdl.pack('pack_src', 'f', 'lab', 'pack_err', partitions => 1) > 0 AS packed;
SELECT pgdl.pack('pack_ragged', 'f', 'lab', 'pack_err2');
ROLLBACK;
:nothing_left;

-- the function's declaration
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel, p.prorettype::regtype,
       pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc p WHERE p.oid = 'pgdl.pack'::regproc;
