-- Inference: predictions for one example or a table, evaluation on a packed
-- table, and a model's weights in and out as arrays.
--
-- Every function that takes a model takes it three ways: by id (bigint, a row of
-- pgdl.models), by name (text) or as an engine blob (bytea, e.g. the result of
-- pgdl.train or pgdl.model_from_weights).  The three overloads share one C
-- function.  Stored models normalize raw features with their dataset; a blob has
-- no dataset: its features are used as given and its classes are indices.
--
-- x is double precision[] so that every array of numbers reaches one overload: real[], integer[], bigint[],
-- smallint[] and numeric[] convert to it implicitly, and an unknown literal ('{1,2,3}') resolves to it.  A
-- real[] overload beside it would make integer[] and numeric[] ambiguous (neither array type is preferred).
-- The C side converts to real, a finite value beyond real's range an error (22003).
--
-- A network on a row costs what a few hundred rows of a scan do: COST 1000 (of cpu_operator_cost) says so,
-- so that the planner runs the per-row functions after ORDER BY ... LIMIT and filters, not before.

-- pgdl.predict

CREATE FUNCTION pgdl.predict(model bigint, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model bytea, x double precision[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[]) IS
	'outputs of stored model (by id) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(text, double precision[]) IS
	'outputs of stored model (by name) for one example: class probabilities (cross_entropy), sigmoids (binary_cross_entropy) or values (mse)';
COMMENT ON FUNCTION pgdl.predict(bytea, double precision[]) IS
	'outputs of a model blob for one example (features not normalized): class probabilities, sigmoids or values';

-- pgdl.predict_class

CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x double precision[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[]) IS
	'most likely class of one example under stored classifier (by id), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[]) IS
	'most likely class of one example under stored classifier (by name), as the label value of its dataset';
COMMENT ON FUNCTION pgdl.predict_class(bytea, double precision[]) IS
	'most likely class of one example under a classifier blob, as the class index (a blob has no dataset)';

-- pgdl.predict_class(model, x, label_type): the class in label_type's type (see predict.md)

CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bytea, x double precision[], label_type anyelement) RETURNS anyelement
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_as'
	LANGUAGE C STABLE PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], anyelement) IS
	'most likely class of one example under stored classifier (by id), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], anyelement) IS
	'most likely class of one example under stored classifier (by name), as a value of label_type''s type (pass NULL::integer for integer labels)';
COMMENT ON FUNCTION pgdl.predict_class(bytea, double precision[], anyelement) IS
	'most likely class index of one example under a classifier blob, as a value of label_type''s type';

-- pgdl.predict, pgdl.predict_class with categorical values (datasets packed with categorical => ...)

CREATE FUNCTION pgdl.predict(model bigint, x double precision[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], categories text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[], text[]) IS
	'outputs of stored model (by id) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, double precision[], text[]) IS
	'outputs of stored model (by name) for one example of raw numeric features and categorical values, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], text[]) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features and categorical values';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], text[]) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features and categorical values';

-- ... and with token sequences (datasets packed with sequence => ...): sequences is a JSON array, one
-- array of tokens (or null) per sequence column, e.g. jsonb_build_array(tokens)

CREATE FUNCTION pgdl.predict(model bigint, x double precision[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict(model text, x double precision[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_predict'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model bigint, x double precision[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.predict_class(model text, x double precision[], categories text[], sequences jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_predict_class_categories'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;

COMMENT ON FUNCTION pgdl.predict(bigint, double precision[], text[], jsonb) IS
	'outputs of stored model (by id) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict(text, double precision[], text[], jsonb) IS
	'outputs of stored model (by name) for one example of raw numeric features, categorical values and token sequences, mapped by its dataset''s vocabularies';
COMMENT ON FUNCTION pgdl.predict_class(bigint, double precision[], text[], jsonb) IS
	'most likely class under stored classifier (by id) of one example of raw numeric features, categorical values and token sequences';
COMMENT ON FUNCTION pgdl.predict_class(text, double precision[], text[], jsonb) IS
	'most likely class under stored classifier (by name) of one example of raw numeric features, categorical values and token sequences';

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

CREATE FUNCTION pgdl.predict_batch(model bigint, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model text, source regclass, id_column text, features_column text,
								   batch_size integer DEFAULT 256)
	RETURNS TABLE (id bigint, class text, probability real)
	LANGUAGE sql STABLE PARALLEL RESTRICTED COST 500 ROWS 1000
	AS $$ SELECT (r).id, (r).class, (r).probability
	        FROM (SELECT pgdl.predict_batch_rows(model, 'regclass', source::pg_catalog.oid::pg_catalog.text, id_column, features_column, batch_size,
	                                             NULL::pg_catalog.text) AS r) s $$;
CREATE FUNCTION pgdl.predict_batch(model bytea, source regclass, id_column text, features_column text,
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

-- pgdl.evaluate: a network over a whole packed table, COST 100000 (that of some hundred per-row predictions)

CREATE FUNCTION pgdl.evaluate(model bigint, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;
CREATE FUNCTION pgdl.evaluate(model text, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;
CREATE FUNCTION pgdl.evaluate(model bytea, packed regclass,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000;

COMMENT ON FUNCTION pgdl.evaluate(bigint, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(text, regclass) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over every buffer of a packed table';
COMMENT ON FUNCTION pgdl.evaluate(bytea, regclass) IS
	'mean loss and accuracy (NULL for mse) of a model blob over every buffer of a packed table';

-- pgdl.evaluate_targets: per target of a model with several (multi-label, several regression outputs)

CREATE FUNCTION pgdl.evaluate_targets(model bigint, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model text, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;
CREATE FUNCTION pgdl.evaluate_targets(model bytea, packed regclass)
	RETURNS TABLE (target integer, loss double precision, accuracy double precision, n bigint,
				   "precision" double precision, recall double precision, f1 double precision,
				   roc_auc double precision, average_precision double precision,
				   rmse double precision, mae double precision, r2 double precision)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_targets'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 10;

COMMENT ON FUNCTION pgdl.evaluate_targets(bigint, regclass) IS
	'per target of stored model (by id) over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.evaluate_targets(text, regclass) IS
	'per target of stored model (by name) over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.evaluate_targets(bytea, regclass) IS
	'per target of a model blob over a packed table: mean loss (binary cross-entropy or squared error), and as scikit-learn scores it: for binary_cross_entropy accuracy, precision, recall, F1, ROC and PR AUC; for mse RMSE, MAE, R²';

-- pgdl.model_weights, pgdl.model_from_weights

CREATE FUNCTION pgdl.model_weights(model bigint)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.model_weights(model text)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.model_weights(model bytea)
	RETURNS TABLE (layer integer, name text, shape integer[], "values" real[])
	AS 'MODULE_PATHNAME', 'pgdl_model_weights'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.model_weights(bigint) IS
	'parameter tensors of stored model (by id) in order, named and shaped as in PyTorch''s state_dict';
COMMENT ON FUNCTION pgdl.model_weights(text) IS
	'parameter tensors of stored model (by name) in order, named and shaped as in PyTorch''s state_dict';
COMMENT ON FUNCTION pgdl.model_weights(bytea) IS
	'parameter tensors of a model blob in order, named and shaped as in PyTorch''s state_dict';

CREATE FUNCTION pgdl.model_from_weights(spec jsonb, params real[], buffers real[] DEFAULT NULL,
										seed bigint DEFAULT 42)
	RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_model_from_weights'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.model_from_weights(jsonb, real[], real[], bigint) IS
	'model blob from a spec and its parameters (and batchnorm running statistics), concatenated in pgdl.model_weights order';
