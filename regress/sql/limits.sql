-- pgdl.max_model_memory: a model, its optimizer state or its workspace for a
-- batch that would take more is refused before the engine allocates it, with
-- its size, which is pgdl.estimate's memory_bytes.
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS lim_first_run FROM pgdl.runs \gset

-- the error of a statement under the limit (NULL: it ran); sizes as N, so the
-- text stays put when the engine's structs change: the size itself is
-- compared with pgdl.estimate below
CREATE FUNCTION lim_error(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	detail text;
	hint text;
BEGIN
	EXECUTE query;
	RETURN NULL;
EXCEPTION WHEN program_limit_exceeded THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN concat_ws(E'\n', msg, 'DETAIL: ' || nullif(detail, ''), 'HINT: ' || nullif(hint, ''));
END $$;
CREATE FUNCTION lim_sqlstate(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE query;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;
CREATE FUNCTION lim_shown(error text) RETURNS text LANGUAGE sql AS $$
	SELECT regexp_replace(error, '\m[0-9]+\M(?! examples)', 'N', 'g')
$$;
CREATE FUNCTION lim_size(error text) RETURNS bigint LANGUAGE sql AS $$
	SELECT (regexp_match(error, 'needs ([0-9]+) bytes'))[1]::bigint
$$;

-- CRC-32 (IEEE), to forge a blob that passes the checksum
CREATE FUNCTION lim_crc32(b bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	crc bigint := 4294967295;
BEGIN
	FOR i IN 0 .. length(b) - 1 LOOP
		crc := crc # get_byte(b, i);
		FOR k IN 1 .. 8 LOOP
			crc := CASE WHEN crc & 1 = 1 THEN (crc >> 1) # 3988292384 ELSE crc >> 1 END;
		END LOOP;
	END LOOP;
	RETURN crc # 4294967295;
END $$;
CREATE FUNCTION lim_reseal(b bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	n int := length(b);
	crc bigint := lim_crc32(substring(b FROM 1 FOR n - 4));
BEGIN
	FOR i IN 0 .. 3 LOOP
		b := set_byte(b, n - 4 + i, ((crc >> (8 * i)) & 255)::int);
	END LOOP;
	RETURN b;
END $$;

CREATE TABLE lim_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label
  FROM generate_series(1, 256) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('lim_rows', 'x', 'label', 'lim_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('lim_rows', 'x', 'label', 'lim_valid', buffer_rows => 128, partitions => 1,
                 reference => 'lim_packed') > 0 AS packed;

-- a superuser's setting, in kB, 1GB by default
SELECT name, setting, unit, context, boot_val FROM pg_settings WHERE name = 'pgdl.max_model_memory';

\set small '{"input": [4], "layers": [{"type": "dense", "units": 4}]}'
\set medium '{"input": [4], "layers": [{"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 4}]}'
\set big '{"input": [4], "layers": [{"type": "dense", "units": 4096}, {"type": "relu"}, {"type": "dense", "units": 4}]}'
\set cfg16 '{"batch_size": 16, "seed": 2}'
\set cfg128 '{"batch_size": 128, "seed": 2}'

-- what the limit will be checked against: the model, then its workspace grows with the batch
SELECT s.name, e.batch_size, e.memory_bytes > 262144 AS over_256kb
  FROM (VALUES ('small', :'small'::jsonb), ('medium', :'medium'), ('big', :'big')) s(name, spec),
       (VALUES (:'cfg16'::jsonb), (:'cfg128')) c(cfg),
       LATERAL pgdl.estimate(s.spec, c.cfg) e
 ORDER BY s.name, e.batch_size;
SELECT a.memory_bytes < b.memory_bytes AS momentum_state_counted, b.memory_bytes < c.memory_bytes AS adam_state_counted
  FROM pgdl.estimate(:'medium', '{"optimizer": "sgd"}') a, pgdl.estimate(:'medium', '{"momentum": 0.9}') b,
       pgdl.estimate(:'medium', '{"optimizer": "adam"}') c;

-- made under the default limit: a big model, stored and as a blob, and a medium one
SELECT pgdl.fit('lim_packed', :'big'::jsonb, :'cfg16', 1, name => 'lim_big') > 0 AS fitted;
SELECT pgdl.fit('lim_packed', :'medium'::jsonb, :'cfg16', 1, name => 'lim_medium') > 0 AS fitted;
SELECT pgdl.init_model(:'big', :'cfg16') AS big_blob \gset
SELECT pgdl.init_model(:'medium', :'cfg16') AS medium_blob \gset

SET pgdl.max_model_memory = '256kB';

-- within the limit everything works as before
SELECT pgdl.fit('lim_packed', :'small'::jsonb, :'cfg16', 1) > 0 AS small_fits;
SELECT pgdl.fit('lim_packed', :'medium'::jsonb, :'cfg16', 1) > 0 AS medium_fits;
SELECT count(*) AS predicted FROM pgdl.predict_batch('lim_medium', 'lim_rows', 'i', 'x', 16);
SELECT pgdl.predict_class('lim_medium', ARRAY[0.9, 0.1, 0.2, 0.3]::real[]) IS NOT NULL AS predicted;
SELECT count(*) AS runs_after_fits, (SELECT count(*) FROM pgdl.models) AS models_after_fits FROM pgdl.runs \gset

-- pgdl.fit: a model over the limit, and a workspace for a batch over it; the size is the estimate's
SELECT lim_shown(lim_error($$SELECT pgdl.fit('lim_packed', '$$ || :'big' || $$'::jsonb, '$$ || :'cfg16' || $$', 1)$$)) AS fit_big;
SELECT lim_size(lim_error($$SELECT pgdl.fit('lim_packed', '$$ || :'big' || $$'::jsonb, '$$ || :'cfg16' || $$', 1)$$))
       = (SELECT memory_bytes FROM pgdl.estimate(:'big', :'cfg16')) AS size_is_estimate;
SELECT lim_shown(lim_error($$SELECT pgdl.fit('lim_packed', '$$ || :'medium' || $$'::jsonb, '$$ || :'cfg128' || $$', 1)$$)) AS fit_big_batch;
SELECT lim_size(lim_error($$SELECT pgdl.fit('lim_packed', '$$ || :'medium' || $$'::jsonb, '$$ || :'cfg128' || $$', 1)$$))
       = (SELECT memory_bytes FROM pgdl.estimate(:'medium', :'cfg128')) AS size_is_estimate;
-- refused before the run began: no run, no model
SELECT count(*) - :runs_after_fits AS new_runs, (SELECT count(*) FROM pgdl.models) - :models_after_fits AS new_models
  FROM pgdl.runs;

-- pgdl.init_model and pgdl.model_from_weights: the model and its optimizer state
SELECT lim_shown(lim_error($$SELECT pgdl.init_model('$$ || :'big' || $$')$$)) AS init_big;
SELECT lim_error($$SELECT pgdl.model_from_weights('$$ || :'big' || $$', array_fill(0::real, ARRAY[36868]))$$) IS NOT NULL
       AS from_weights_refused;

-- the pgdl.train aggregate: a blob over the limit, and a batch over it
SELECT lim_shown(lim_error($$SELECT pgdl.train(x, y, n, '$$ || :'big_blob' || $$'::bytea, '{"batch_size": 16}') FROM lim_packed$$))
       AS train_big;
SELECT lim_shown(lim_error($$SELECT pgdl.train(x, y, n, '$$ || :'medium_blob' || $$'::bytea, '{"batch_size": 128}') FROM lim_packed$$))
       AS train_big_batch;
SELECT length(pgdl.train(x, y, n, :'medium_blob'::bytea, '{"batch_size": 16}' ORDER BY buffer_id)) > 0 AS trains_within
  FROM lim_packed;

-- a stored model over the limit is refused when it is loaded, whatever the call
SELECT lim_shown(lim_error($$SELECT pgdl.predict_class('lim_big', ARRAY[0.9, 0.1, 0.2, 0.3]::real[])$$)) AS predict_big;
SELECT lim_error($$SELECT * FROM pgdl.evaluate('lim_big', 'lim_packed')$$) IS NOT NULL AS evaluate_refused;
SELECT lim_error($$SELECT pgdl.features('lim_big', 1, ARRAY[0.9, 0.1, 0.2, 0.3]::real[])$$) IS NOT NULL AS features_refused;

-- predict_batch with a batch whose workspace is over the limit, before any row is read
SELECT lim_shown(lim_error($$SELECT count(*) FROM pgdl.predict_batch('lim_medium', 'lim_rows', 'i', 'x', 128)$$))
       AS predict_big_batch;
-- evaluation runs a packed buffer at once: 128 rows are over the limit too
SELECT lim_shown(lim_error($$SELECT * FROM pgdl.evaluate('lim_medium', 'lim_valid')$$)) AS evaluate_big_buffer;
SELECT (pgdl.evaluate('lim_medium', 'lim_packed')).loss > 0 AS evaluates_small_buffers;

-- a forged blob that passes the checksum but claims a dense layer of 2^20 units:
-- refused for its size before anything is allocated
SELECT lim_reseal(overlay(:'medium_blob'::bytea PLACING '\x00001000'::bytea FROM 49)) AS forged \gset
SELECT lim_shown(lim_error($$SELECT pgdl.predict_class('$$ || :'forged' || $$'::bytea, ARRAY[1, 2, 3, 4]::real[])$$))
       AS forged_blob;
-- and cut short after its spec, with its length and checksum made to match
SELECT lim_reseal(overlay(overlay(substring(:'medium_blob'::bytea FROM 1 FOR 300) PLACING '\x00001000'::bytea FROM 49)
                          PLACING '\x2c01000000000000'::bytea FROM 13)) AS forged_short \gset
SELECT lim_shown(lim_error($$SELECT pgdl.predict_class('$$ || :'forged_short' || $$'::bytea, ARRAY[1, 2, 3, 4]::real[])$$))
       AS forged_short_blob;
-- with room for them, the reader finds them corrupt (they do not hold those parameters)
SET pgdl.max_model_memory = '1GB';
SELECT lim_sqlstate($$SELECT pgdl.predict_class('$$ || :'forged' || $$'::bytea, ARRAY[1, 2, 3, 4]::real[])$$)
       AS forged_blob_with_room,
       lim_sqlstate($$SELECT pgdl.predict_class('$$ || :'forged_short' || $$'::bytea, ARRAY[1, 2, 3, 4]::real[])$$)
       AS forged_short_blob_with_room;
SET pgdl.max_model_memory = '256kB';

-- fit_multiple: every configuration is checked before any worker starts
INSERT INTO pgdl.configs (set_name, config, architecture)
SELECT 'lim_set', c, pgdl.add_architecture('lim_' || n, s)
  FROM (VALUES ('small', :'small'::jsonb, :'cfg16'::jsonb), ('big', :'big', :'cfg16')) v(n, s, c);
SELECT lim_shown(lim_error($$SELECT * FROM pgdl.fit_multiple('lim_packed', 'lim_set', 1, workers => 1)$$))
       AS fit_multiple_big;
SELECT count(*) - :runs_after_fits AS new_runs FROM pgdl.runs;
-- workers apply the leader's limit: a validation buffer over it is refused in the worker
DELETE FROM pgdl.configs WHERE set_name = 'lim_set';
INSERT INTO pgdl.configs (set_name, config, architecture)
VALUES ('lim_set', :'cfg16', pgdl.add_architecture('lim_medium_arch', :'medium'));
SELECT lim_shown(lim_error($$SELECT * FROM pgdl.fit_multiple('lim_packed', 'lim_set', 1, 'lim_valid', workers => 1)$$))
       AS fit_multiple_validation;
SELECT count(*) AS trained FROM pgdl.fit_multiple('lim_packed', 'lim_set', 1, 'lim_packed', workers => 1);
-- the refused run is failed (the run settler marks it, once the call's transaction has ended), and
-- resumable until a superuser allows it
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM pgdl.runs WHERE kind = 'fit_multiple' AND status = 'running');
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT status, count(*) FROM pgdl.runs WHERE kind = 'fit_multiple' GROUP BY status ORDER BY status;
RESET pgdl.max_model_memory;
SELECT count(*) AS resumed FROM pgdl.resume((SELECT max(id) FROM pgdl.runs WHERE kind = 'fit_multiple' AND status = 'failed'));
SELECT count(*) AS runs_left_running FROM pgdl.runs WHERE status = 'running';

-- an ordinary role can neither raise nor lower it, unless granted
CREATE ROLE regress_lim_user;
SET ROLE regress_lim_user;
SET pgdl.max_model_memory = '2GB';
SET pgdl.max_model_memory = '64kB';
SHOW pgdl.max_model_memory;
RESET ROLE;
GRANT SET ON PARAMETER pgdl.max_model_memory TO regress_lim_user;
SET ROLE regress_lim_user;
SET pgdl.max_model_memory = '2GB';
SHOW pgdl.max_model_memory;
RESET pgdl.max_model_memory;
RESET ROLE;
REVOKE SET ON PARAMETER pgdl.max_model_memory FROM regress_lim_user;
DROP ROLE regress_lim_user;

-- pgdl.estimate reports the memory the check uses: a model refused at 256kB is allowed at its estimate
SELECT memory_bytes AS big_bytes FROM pgdl.estimate(:'big', :'cfg16') \gset
SELECT set_config('pgdl.max_model_memory', ((:big_bytes + 1023) / 1024)::text || 'kB', false) IS NOT NULL AS set;
SELECT pgdl.fit('lim_packed', :'big'::jsonb, :'cfg16', 1) > 0 AS fits_at_its_estimate;
SELECT set_config('pgdl.max_model_memory', (:big_bytes / 1024 - 1)::text || 'kB', false) IS NOT NULL AS set;
SELECT lim_error($$SELECT pgdl.fit('lim_packed', '$$ || :'big' || $$'::jsonb, '$$ || :'cfg16' || $$', 1)$$) IS NOT NULL
       AS refused_just_below;
RESET pgdl.max_model_memory;

-- leave nothing behind for the other tests
DELETE FROM pgdl.models WHERE run > :lim_first_run;
DELETE FROM pgdl.runs WHERE id > :lim_first_run;
DELETE FROM pgdl.architectures WHERE name LIKE 'lim\_%';
DELETE FROM pgdl.datasets WHERE packed IN ('lim_packed'::regclass, 'lim_valid'::regclass);
DROP TABLE lim_packed, lim_valid, lim_rows;
DROP FUNCTION lim_error(text), lim_sqlstate(text), lim_shown(text), lim_size(text), lim_crc32(bytea), lim_reseal(bytea);
