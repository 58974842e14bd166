-- A pgdl.fit_multiple or pgdl.resume whose worker waits for a lock that the calling
-- transaction holds is a deadlock the lock manager cannot see (the leader waits on a
-- latch, not a lock): it ends within about deadlock_timeout with an error, never hangs.
-- statement_timeout turns a regression into a failure rather than a hung suite.
SET client_min_messages = warning;
SET statement_timeout = '60s';
-- every epoch's checkpoint is kept: the run below is turned back into one cancelled after its first epoch
SET pgdl.keep_checkpoints = -1;

CREATE TABLE lk_rows AS
SELECT i, ARRAY[sin(i), cos(i)]::real[] AS x, i % 2 AS label FROM generate_series(1, 64) i;
SELECT pgdl.pack('lk_rows', 'x', 'label', 'lk_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.add_architecture('lk_arch', '{"input": [2], "layers": [{"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.grid_search('lk_set', ARRAY['lk_arch'], '{"lr": [0.1, 0.2], "batch_size": 8}') AS configs;
SELECT count(*) AS models FROM pgdl.fit_multiple('lk_packed', 'lk_set', 2, workers => 1, name_prefix => 'lk');
SELECT max(id) AS lk_run FROM pgdl.runs WHERE kind = 'fit_multiple' \gset
-- the run as if it had been cancelled after its first epoch
DELETE FROM pgdl.models WHERE run = :lk_run;
DELETE FROM pgdl.checkpoints WHERE run = :lk_run AND epoch = 2;
DELETE FROM pgdl.run_metrics WHERE run = :lk_run AND epoch = 2;
UPDATE pgdl.runs SET status = 'cancelled' WHERE id = :lk_run;

-- the run's row updated, then resumed: worker 0 would wait to mark it running
BEGIN;
UPDATE pgdl.runs SET status = 'cancelled' WHERE id = :lk_run;
SELECT count(*) FROM pgdl.resume(:lk_run, 1);
ROLLBACK;
-- the run's row locked
BEGIN;
SELECT count(*) AS locked FROM (SELECT 1 FROM pgdl.runs WHERE id = :lk_run FOR UPDATE) r;
SELECT count(*) FROM pgdl.resume(:lk_run, 1);
ROLLBACK;
-- its first epoch deleted: the worker would wait to write that epoch's metrics again
BEGIN;
DELETE FROM pgdl.checkpoints WHERE run = :lk_run;
DELETE FROM pgdl.run_metrics WHERE run = :lk_run;
SELECT count(*) FROM pgdl.resume(:lk_run, 1);
ROLLBACK;
-- the packed table locked: the worker would wait to read it
SELECT max(id) AS lk_last FROM pgdl.runs \gset
BEGIN;
LOCK TABLE lk_packed IN ACCESS EXCLUSIVE MODE;
SELECT count(*) FROM pgdl.fit_multiple('lk_packed', 'lk_set', 1, workers => 1, name_prefix => 'lk_new');
ROLLBACK;
-- (its worker had recorded the run)
DELETE FROM pgdl.runs WHERE id > :lk_last;

-- nothing was lost: the run resumes, in a transaction of its own
SELECT count(*) AS models, bool_and(epochs = 2) AS second_epoch FROM pgdl.resume(:lk_run, 1);
SELECT status FROM pgdl.runs WHERE id = :lk_run;

DROP TABLE lk_packed, lk_rows;
DELETE FROM pgdl.models WHERE run = :lk_run;
DELETE FROM pgdl.runs WHERE id = :lk_run;
DELETE FROM pgdl.configs WHERE set_name = 'lk_set';
DELETE FROM pgdl.architectures WHERE name = 'lk_arch';
RESET statement_timeout;
RESET pgdl.keep_checkpoints;
