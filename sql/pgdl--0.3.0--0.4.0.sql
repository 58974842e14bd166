-- pgdl 0.3.0 to 0.4.0 (ALTER EXTENSION pgdl UPDATE): for the clients at the other end of libpq
-- (progress of every long call, typed predictions, streaming predict_batch, BI views).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.4.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.4.0'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Typed predictions, inference as a query (sql/parts/50_predict.sql): predict_class with a label_type;
-- predict_batch from a table, a query or a cursor, streaming, as inlinable SQL over predict_batch_rows
-- (the regclass forms replaced in place); COST on evaluate.
-- ---------------------------------------------------------------------------
-- pgdl.predict_class(model, x, label_type): the class in label_type's type (see predict.md)

CREATE FUNCTION pgdl.predict_class(model bigint, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x real[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, real[], anyelement) IS
	'most likely class of one example under stored classifier (by id), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(text, real[], anyelement) IS
	'most likely class of one example under stored classifier (by name), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(bytea, real[], anyelement) IS
	'most likely class index of one example under a classifier blob, as a value of label_type''s type';

-- pgdl.predict_batch
--
-- pgdl.predict_batch_rows does the work, one row per call, fetching batch_size rows of the source at a
-- time; each pgdl.predict_batch is an SQL function that calls it in a select list, so that PostgreSQL
-- inlines it into the caller's query and LIMIT stops it after the batches it read (a C function in FROM is
-- run to its end).  Not STRICT, or it would not be inlined: NULL arguments give no rows, as STRICT would.
-- COST is per row returned: a share of a batched forward pass.  PARALLEL RESTRICTED: a cursor lives in the
-- session that declared it.

CREATE FUNCTION pgdl.predict_batch_rows(model bigint, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;
CREATE FUNCTION pgdl.predict_batch_rows(model text, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;
CREATE FUNCTION pgdl.predict_batch_rows(model bytea, source_kind text, source text, id_column text,
										features_column text, batch_size integer, label_type anyelement,
										OUT id bigint, OUT class anyelement, OUT probability real)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_predict_batch_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 500 ROWS 1000;

COMMENT ON FUNCTION pgdl.predict_batch_rows(bigint, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (by id) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';
COMMENT ON FUNCTION pgdl.predict_batch_rows(text, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (by name) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';
COMMENT ON FUNCTION pgdl.predict_batch_rows(bytea, text, text, text, text, integer, anyelement) IS
	'what pgdl.predict_batch (blob) returns, one row per call; source_kind is the type of its source: text, regclass or refcursor';

CREATE OR REPLACE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE OR REPLACE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE OR REPLACE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, regclass, text, text, integer) IS
	'class and its probability for every row of a table under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, regclass, text, text, integer) IS
	'class index and its probability for every row of a table under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source text, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, text, text, text, integer) IS
	'class and its probability for every row of a table, view or query under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, text, text, text, integer) IS
	'class and its probability for every row of a table, view or query under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, text, text, text, integer) IS
	'class index and its probability for every row of a table, view or query under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, cursor refcursor, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, refcursor, text, text, integer) IS
	'class and its probability for every row of an open cursor under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, refcursor, text, text, integer) IS
	'class and its probability for every row of an open cursor under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, refcursor, text, text, integer) IS
	'class index and its probability for every row of an open cursor under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, regclass, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, regclass, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, regclass, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of a table under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source text, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'text', source, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, text, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table, view or query under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, text, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of a table, view or query under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, text, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of a table, view or query under a classifier blob, batch_size rows per forward pass';

CREATE FUNCTION pgdl.predict_batch(model bigint, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, cursor refcursor, id_column text, features_column text,
								   batch_size integer, label_type anyelement)
	RETURNS TABLE (id bigint, class anyelement, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'refcursor', cursor::pg_catalog.text, id_column, features_column, batch_size,
	                                             label_type) AS r) s $$;

COMMENT ON FUNCTION pgdl.predict_batch(bigint, refcursor, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of an open cursor under stored classifier (by id), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(text, refcursor, text, text, integer, anyelement) IS
	'class as label_type''s type and its probability for every row of an open cursor under stored classifier (by name), batch_size rows per forward pass';
COMMENT ON FUNCTION pgdl.predict_batch(bytea, refcursor, text, text, integer, anyelement) IS
	'class index as label_type''s type and its probability for every row of an open cursor under a classifier blob, batch_size rows per forward pass';

ALTER FUNCTION pgdl.evaluate(bigint, regclass) COST 100000;
ALTER FUNCTION pgdl.evaluate(text, regclass) COST 100000;
ALTER FUNCTION pgdl.evaluate(bytea, regclass) COST 100000;
ALTER FUNCTION pgdl.cache_features(bigint, integer, integer, text, real[], integer) COST 50000;
ALTER FUNCTION pgdl.features_batch(bigint, integer, regclass) COST 50000;
ALTER FUNCTION pgdl.features_batch(text, integer, regclass) COST 50000;
