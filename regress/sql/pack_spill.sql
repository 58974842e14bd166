-- pgdl.pack in bounded memory: features beyond maintenance_work_mem go through
-- temporary files (an external shuffle), and the packed table is the same,
-- byte for byte, whatever the memory.  Tables are named pack_spill_*.

-- 6,000 rows of 100 features (2.4 MB of float4), text labels; every 500th row has a NULL label
CREATE TABLE pack_spill_src (id integer, f real[], lab text);
INSERT INTO pack_spill_src
SELECT i, ARRAY(SELECT ((i * 31 + j * 17) % 97 + j / 8.0)::real FROM generate_series(1, 100) j),
       CASE WHEN i % 500 = 0 THEN NULL ELSE (ARRAY['ant', 'bee', 'cat', 'dog'])[1 + (i * 7) % 4] END
  FROM generate_series(1, 6000) i;

-- the bytes of a packed table, buffer after buffer
CREATE FUNCTION pack_spill_md5(t regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE h text;
BEGIN
  EXECUTE format('SELECT md5(string_agg(int4send(part) || int4send(n) || array_send(x) || array_send(y), ''''::bytea'
                 ' ORDER BY buffer_id)) FROM %s', t) INTO h;
  RETURN h;
END $$;

-- the temporary files this database made since the last call (counted when the statistics are flushed)
CREATE FUNCTION pack_spill_temp_files() RETURNS bigint LANGUAGE sql
  RETURN (SELECT temp_files FROM pg_stat_database WHERE datname = current_database());
SELECT pack_spill_temp_files() AS t0 \gset

-- in memory (64 MB): no temporary file
SET maintenance_work_mem = '64MB';
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_mem', buffer_rows => 100, partitions => 3,
                 seed => 11, standardize => true, nulls => 'skip') > 0 AS packed;
SELECT pg_stat_force_next_flush();
SELECT pack_spill_temp_files() - :t0 AS temporary_files;

-- spilled (1 MB, the least maintenance_work_mem can be): the run, then 3 buckets of about 1 MB
SET maintenance_work_mem = '1MB';
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_disk', buffer_rows => 100, partitions => 3,
                 seed => 11, standardize => true, nulls => 'skip') > 0 AS packed;
SELECT pg_stat_force_next_flush();
SELECT pack_spill_temp_files() - :t0 AS temporary_files;

-- the same bytes, the same dataset row
SELECT pack_spill_md5('pack_spill_mem') = pack_spill_md5('pack_spill_disk') AS same_bytes,
       (SELECT count(*) FROM pack_spill_mem) AS buffers;
SELECT m.normalization = d.normalization AS same_normalization, m.classes = d.classes AS same_classes,
       m.n_rows = d.n_rows AS same_rows, d.n_rows, d.n_buffers
  FROM pgdl.datasets m, pgdl.datasets d
 WHERE m.packed = 'pack_spill_mem'::regclass AND d.packed = 'pack_spill_disk'::regclass;

-- the statistics against SQL's over the kept rows (float8; stored as float4: within a few ulp)
WITH stored AS (
  SELECT j, (normalization->'mean'->>(j - 1))::float8 AS mean, (normalization->'std'->>(j - 1))::float8 AS std
    FROM pgdl.datasets, generate_series(1, 100) j WHERE packed = 'pack_spill_disk'::regclass),
     sql AS (
  SELECT j, avg(f[j]::float8) AS mean, stddev_pop(f[j]::float8) AS std
    FROM pack_spill_src, generate_series(1, 100) j WHERE lab IS NOT NULL GROUP BY j)
SELECT bool_and(abs(stored.mean - sql.mean) <= 1e-6 * abs(sql.mean)) AS mean_matches,
       bool_and(abs(stored.std - sql.std) <= 1e-6 * sql.std) AS std_matches
  FROM stored JOIN sql USING (j);

-- every kept row once, standardized with the stored statistics, its label following it
WITH ds AS (SELECT normalization AS nz FROM pgdl.datasets WHERE packed = 'pack_spill_disk'::regclass),
     packed AS (
  SELECT x[100 * i + 1] AS x1, y[i + 1] AS y FROM pack_spill_disk, generate_series(0, n - 1) i),
     source AS (
  SELECT ((f[1] - (nz->'mean'->>0)::real) / (nz->'std'->>0)::real)::real AS x1,
         (array_position(ARRAY['ant', 'bee', 'cat', 'dog'], lab) - 1)::real AS y
    FROM pack_spill_src, ds WHERE lab IS NOT NULL)
SELECT (SELECT count(*) FROM packed) AS rows,
       (SELECT array_agg((x1, y) ORDER BY x1, y) FROM packed)
     = (SELECT array_agg((x1, y) ORDER BY x1, y) FROM source) AS same_rows;

-- another seed spilled is another order of the same rows; the same seed again, the same bytes
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_seed12', buffer_rows => 100, partitions => 3,
                 seed => 12, standardize => true, nulls => 'skip') > 0 AS packed;
SELECT pack_spill_md5('pack_spill_seed12') <> pack_spill_md5('pack_spill_disk') AS other_order;

-- scale, a test set packed with a reference, integer labels (a view) and a regression target:
-- the same bytes in memory and spilled
CREATE VIEW pack_spill_view AS SELECT f, id % 7 AS k, id / 3.0 AS t FROM pack_spill_src WHERE lab IS NOT NULL;
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_scale_disk', buffer_rows => 256, partitions => 2,
                 scale => 0.5, nulls => 'skip') > 0 AS packed;
SELECT pgdl.pack('pack_spill_view', 'f', 'k', 'pack_spill_int_disk', seed => 5) > 0 AS packed;
SELECT pgdl.pack('pack_spill_view', 'f', 't', 'pack_spill_reg_disk', seed => 5) > 0 AS packed;
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_ref_disk', buffer_rows => 64, partitions => 1,
                 nulls => 'skip', reference => 'pack_spill_mem') > 0 AS packed;
SET maintenance_work_mem = '64MB';
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_scale_mem', buffer_rows => 256, partitions => 2,
                 scale => 0.5, nulls => 'skip') > 0 AS packed;
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_ref_mem', buffer_rows => 64, partitions => 1,
                 nulls => 'skip', reference => 'pack_spill_mem') > 0 AS packed;
SELECT pgdl.pack('pack_spill_view', 'f', 'k', 'pack_spill_int_mem', seed => 5) > 0 AS packed;
SELECT pgdl.pack('pack_spill_view', 'f', 't', 'pack_spill_reg_mem', seed => 5) > 0 AS packed;
SELECT pack_spill_md5('pack_spill_scale_mem') = pack_spill_md5('pack_spill_scale_disk') AS same_scaled,
       pack_spill_md5('pack_spill_ref_mem') = pack_spill_md5('pack_spill_ref_disk') AS same_referenced,
       pack_spill_md5('pack_spill_int_mem') = pack_spill_md5('pack_spill_int_disk') AS same_integer_labels,
       pack_spill_md5('pack_spill_reg_mem') = pack_spill_md5('pack_spill_reg_disk') AS same_regression;
SELECT (SELECT classes FROM pgdl.datasets WHERE packed = 'pack_spill_int_disk'::regclass) AS classes,
       (SELECT sum(n) FROM pack_spill_int_disk) AS rows;
DROP VIEW pack_spill_view CASCADE;

-- an error after spilling began (a NaN in the last row) names the row, and leaves no temporary file
SET maintenance_work_mem = '1MB';
INSERT INTO pack_spill_src VALUES (6001, array_fill('NaN'::real, ARRAY[100]), 'ant');
SELECT pgdl.pack('pack_spill_src', 'f', 'lab', 'pack_spill_err', nulls => 'skip');
SELECT count(*) AS temporary_files FROM pg_ls_tmpdir();
SELECT to_regclass('pack_spill_err') IS NULL AS no_table;
RESET maintenance_work_mem;

DROP TABLE pack_spill_src;
DROP FUNCTION pack_spill_md5(regclass), pack_spill_temp_files();
