-- pgdl.node_feature_cache on one server (what a node runs for its coordinator): a cache made, stamped
-- and reused, refreshed when its packed table changes, rebuilt for other frozen layers of the same depth,
-- read by pgdl.train_partitions in place of the frozen layers (the same bytes), never for a table with
-- row-level security, the caller's only; every error.  (Nodes and a coordinator: regress/t/023_node_cache.pl.)
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE FUNCTION nc_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

CREATE TABLE nc_points AS
SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x, i % 3 AS label
  FROM generate_series(1, 120) i, generate_series(1, 6) j GROUP BY i;
SELECT pgdl.pack('nc_points', 'x', 'label', 'nc_packed', buffer_rows => 20, partitions => 2, seed => 3) IS NOT NULL AS packed;
-- frozen layers as a coordinator sends them (a blob), two of the same depth with other weights, and a head
CREATE TABLE nc_blobs AS
SELECT 'a' AS name, pgdl.init_model('{"input": [6], "layers": [{"type": "dense", "units": 8}, {"type": "relu"}]}',
                                    '{"seed": 5}') AS blob
UNION ALL
SELECT 'b', pgdl.init_model('{"input": [6], "layers": [{"type": "dense", "units": 8}, {"type": "relu"}]}', '{"seed": 6}')
UNION ALL
SELECT 'c', pgdl.init_model('{"input": [6], "layers": [{"type": "dense", "units": 4}]}', '{"seed": 7}')
UNION ALL
SELECT 'wide', pgdl.init_model('{"input": [5], "layers": [{"type": "dense", "units": 8}]}', '{"seed": 7}')
UNION ALL
SELECT 'head', pgdl.init_model('{"input": [8], "layers": [{"type": "dense", "units": 3}], "loss": "cross_entropy"}',
                               '{"seed": 1}');
CREATE FUNCTION nc_blob(n text) RETURNS bytea LANGUAGE sql AS $$ SELECT blob FROM nc_blobs WHERE name = n $$;
-- the head trained on both partitions through frozen layers a, as an md5 of the model it returns
CREATE FUNCTION nc_train() RETURNS text LANGUAGE sql AS $$
  SELECT md5(model) || ' ' || examples FROM pgdl.train_partitions(nc_blob('head'), '{"lr": 0.1, "batch_size": 10}',
                                                                  'nc_packed', '{0,1}', 2, nc_blob('a')) $$;
-- the caches in pgdl_cache: name pattern and rows
CREATE FUNCTION nc_caches() RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(regexp_replace(c.relname, '^node_[0-9]+_k([0-9]+)_[0-9a-f]{8}_[0-9]+$', 'node_OID_k\1_HASH_ROLE') || ':' ||
                  (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM pgdl_cache.%I', c.relname),
                                                       false, true, '')))[1]::text, ' ' ORDER BY c.relname), 'none')
    FROM pg_class c WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relkind = 'r' AND c.relname LIKE 'node\_%' $$;

SELECT nc_train() AS recomputed \gset
-- no cache yet: it would be materialized
SELECT action, bytes, regexp_replace(cache, '^node_[0-9]+_k([0-9]+)_[0-9a-f]{8}_[0-9]+$', 'node_OID_k\1_HASH_ROLE') AS cache
  FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed');
SELECT nc_caches();
-- built: one row per buffer, stamped; then reused
SELECT action, bytes > 0 AS stored FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true);
SELECT nc_caches();
SELECT action FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true);
-- train_partitions reads it: the same bytes as recomputing ...
SELECT nc_train() = :'recomputed' AS same_bytes;
-- ... and it does read it: zeroed features give another model
DO $$ BEGIN
  EXECUTE (SELECT format('UPDATE pgdl_cache.%I SET x = array_fill(0::real, ARRAY[array_length(x, 1)])', cache)
             FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed'));
END $$;
SELECT nc_train() <> :'recomputed' AS reads_the_cache;
-- the packed table changes (another version): refresh, and the bytes are right again
UPDATE nc_packed SET n = n;
SELECT action FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed');
SELECT nc_train() = :'recomputed' AS stale_not_read;
SELECT action FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true);
SELECT nc_train() = :'recomputed' AS refreshed_same_bytes;
SELECT action FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed');
-- other frozen layers of the same depth: rebuild, which drops the cache of a; another depth is another cache
SELECT action FROM pgdl.node_feature_cache(nc_blob('b'), 'nc_packed', true);
SELECT nc_caches();
SELECT action FROM pgdl.node_feature_cache(nc_blob('c'), 'nc_packed', true);
SELECT nc_caches();
-- a table with row-level security is never cached
ALTER TABLE nc_packed ENABLE ROW LEVEL SECURITY;
SELECT action, bytes FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true);
SELECT nc_train() = :'recomputed' AS rls_recomputed;
ALTER TABLE nc_packed DISABLE ROW LEVEL SECURITY;

-- the caller's only: another role reads no cache, and may not cache a table it may not read
CREATE ROLE nc_other;
GRANT SELECT ON nc_blobs TO nc_other;
SET ROLE nc_other;
SELECT regexp_replace(nc_try(format('SELECT count(*) FROM pgdl_cache.%I', c.relname)), 'node_\S+', 'node_...') AS other_reads
  FROM pg_class c WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relname LIKE 'node\_%' ORDER BY 1 LIMIT 1;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true)$$) AS other_builds;
RESET ROLE;
-- a relation of the cache's name that is not the caller's cache is refused, and left as it is
DO $$ BEGIN
  EXECUTE (SELECT format('CREATE TABLE pgdl_cache.%I (part integer, buffer_id integer, n integer, x real[], y real[]);'
                         ' ALTER TABLE pgdl_cache.%I OWNER TO nc_other', cache, cache)
             FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed'));
END $$;
SELECT regexp_replace(nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', true)$$),
                      'node_\S+"', 'node_..."') AS planted;
DO $$ BEGIN
  EXECUTE (SELECT format('DROP TABLE pgdl_cache.%I', cache) FROM pgdl.node_feature_cache(nc_blob('c'), 'nc_packed'));
END $$;
SELECT count(*) AS planted_left FROM pg_class c
 WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relowner = 'nc_other'::regrole;

-- errors
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(NULL, 'nc_packed')$$) AS null_prefix;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), NULL)$$) AS null_packed;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_packed', NULL)$$) AS null_build;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), 'nc_points')$$) AS not_packed;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('a'), 0)$$) AS no_relation;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache('\x00'::bytea, 'nc_packed')$$) AS bad_blob;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(substring(nc_blob('a') for 40), 'nc_packed')$$) AS cut_blob;
SELECT nc_try($$SELECT * FROM pgdl.node_feature_cache(nc_blob('wide'), 'nc_packed', true)$$) AS wrong_inputs;
SELECT nc_caches();

-- clean up: the caches, then the rest
DO $$ BEGIN
  EXECUTE (SELECT string_agg(format('DROP TABLE pgdl_cache.%I', c.relname), '; ') FROM pg_class c
            WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relkind = 'r' AND c.relname LIKE 'node\_%');
END $$;
DROP FUNCTION nc_try(text), nc_blob(text), nc_train(), nc_caches();
DROP TABLE nc_blobs, nc_packed, nc_points;
DROP ROLE nc_other;
