-- pgdl.add_node's refusals that need no node: NULL arguments, a table that is not packed, another role's
-- table, a server that is not there, a packed table whose partitions are still here (it runs no copy then).
-- (Moving partitions onto a new node, the placement rule, the old copies dropped, and fit_multiple
-- over the result: regress/t/024_distribute_ops.pl.)
SET client_min_messages = warning;
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER an_srv FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '/nonexistent', dbname 'none');
CREATE TABLE an_rows AS SELECT i, ARRAY[i::real, (i % 7)::real] AS x, (i % 2) AS y FROM generate_series(1, 40) i;
SELECT pgdl.pack('an_rows', 'x', 'y', 'an_packed', buffer_rows => 10, partitions => 2, seed => 1);
-- an error's SQLSTATE and message, or 'ok'
CREATE FUNCTION an_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT q, an_try(q) FROM unnest(ARRAY[
  $q$SELECT pgdl.add_node(NULL, 'an_srv')$q$,
  $q$SELECT pgdl.add_node('an_packed', NULL)$q$,
  $q$SELECT pgdl.add_node('an_rows', 'an_srv')$q$,
  $q$SELECT pgdl.add_node('an_packed', 'nowhere')$q$,
  $q$SELECT pgdl.add_node('an_packed', 'an_srv')$q$]) q;

SELECT pgdl.add_node(NULL, 'an_srv');
SELECT pgdl.add_node('an_packed', NULL);
SELECT pgdl.add_node(NULL, NULL);
SELECT pgdl.add_node('an_rows', 'an_srv');
SELECT pgdl.add_node('an_packed', 'nowhere');
SELECT pgdl.add_node('an_packed', repeat('x', 10000));
SELECT pgdl.add_node('an_packed', 'an_srv');
-- another role's table is refused before any server is looked at, as pgdl.distribute refuses it
CREATE ROLE an_other;
GRANT USAGE ON SCHEMA pgdl TO an_other;
GRANT SELECT ON an_packed TO an_other;
GRANT USAGE ON FOREIGN SERVER an_srv TO an_other;
SET ROLE an_other;
SELECT q, an_try(q) FROM unnest(ARRAY[
  $q$SELECT pgdl.add_node('an_packed', 'an_srv')$q$,
  $q$SELECT pgdl.distribute('an_packed', ARRAY['an_srv'])$q$]) q;
RESET ROLE;
-- nothing moved: every partition is still here
SELECT count(*) FROM an_packed;
SELECT count(*) FROM pg_foreign_table f JOIN pg_inherits i ON i.inhrelid = f.ftrelid
 WHERE i.inhparent = 'an_packed'::regclass;

DELETE FROM pgdl.datasets WHERE packed = 'an_packed'::regclass;
DROP TABLE an_rows, an_packed;
DROP FUNCTION an_try(text);
REVOKE USAGE ON SCHEMA pgdl FROM an_other;
DROP SERVER an_srv CASCADE;
DROP ROLE an_other;
