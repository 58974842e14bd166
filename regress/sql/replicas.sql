-- pgdl.distribute's replicas: the refusals that need no node (NULL, below 1, more than the servers named,
-- a server named twice), the two-argument call still there, and the catalog of replicas.
-- (Copies made, checksummed and recorded, and a run that goes on when a node is lost: regress/t/026_replicas.pl.)
SET client_min_messages = warning;
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER rp_a FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '/nonexistent', dbname 'none');
CREATE SERVER rp_b FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '/nonexistent', dbname 'none');
CREATE TABLE rp_rows AS SELECT i, ARRAY[i::real, (i % 7)::real] AS x, (i % 2) AS y FROM generate_series(1, 40) i;
SELECT pgdl.pack('rp_rows', 'x', 'y', 'rp_packed', buffer_rows => 10, partitions => 2, seed => 1) IS NOT NULL AS packed;
SELECT pg_get_function_arguments('pgdl.distribute'::regproc);

SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], replicas => NULL);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], replicas => 0);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], replicas => -1);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], replicas => 3);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], replicas => 2147483647);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b', 'rp_a'], replicas => 2);
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_b'], NULL);
SELECT pgdl.distribute(NULL, ARRAY['rp_a'], 1);
-- a server named twice is today's behaviour with one copy: the refusal is only for replicas; here the
-- node is not there, so the call fails on connecting (the two-argument call, as before)
SELECT pgdl.distribute('rp_packed', ARRAY['rp_a', 'rp_a']);
-- nothing moved or recorded
SELECT count(*) FROM rp_packed;
SELECT count(*) FROM pgdl.partition_replicas WHERE packed = 'rp_packed'::regclass;

-- the catalog: one row per copy beyond the foreign table's, by partition and order
\d pgdl.partition_replicas
\set VERBOSITY terse
INSERT INTO pgdl.partition_replicas (packed, part, replica, server, remote_schema, remote_table, checksum)
VALUES ('rp_packed', 0, 0, 'rp_b', 'public', 'rp_packed_p0', '5:x');
INSERT INTO pgdl.partition_replicas (packed, part, replica, server, remote_schema, remote_table, checksum)
VALUES ('rp_packed', -1, 1, 'rp_b', 'public', 'rp_packed_p0', '5:x');

-- only an owner of the packed table records a replica: another role's runs would trust it
CREATE ROLE rp_other;
GRANT USAGE ON SCHEMA pgdl TO rp_other;
GRANT SELECT ON rp_packed TO rp_other;
SET ROLE rp_other;
INSERT INTO pgdl.partition_replicas (packed, part, replica, server, remote_schema, remote_table, checksum)
VALUES ('rp_packed', 0, 1, 'rp_b', 'public', 'rp_packed_p0', '5:x');
SELECT count(*) FROM pgdl.partition_replicas;
RESET ROLE;
\set VERBOSITY default
DELETE FROM pgdl.datasets WHERE packed = 'rp_packed'::regclass;
DROP TABLE rp_rows, rp_packed;
DROP SERVER rp_a, rp_b CASCADE;
REVOKE USAGE ON SCHEMA pgdl FROM rp_other;
DROP ROLE rp_other;
