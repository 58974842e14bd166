-- pgdl.pack: a table to shuffled minibatch buffers in a LIST-partitioned table (see docs/reference/pack.md).

CREATE FUNCTION pgdl.pack(
	source regclass,
	features text,
	label text,
	output text,
	buffer_rows integer DEFAULT 128,
	partitions integer DEFAULT 4,
	seed bigint DEFAULT 42,
	scale double precision DEFAULT NULL,
	standardize boolean DEFAULT false,
	nulls text DEFAULT 'error',
	reference regclass DEFAULT NULL,
	categorical text DEFAULT NULL,
	max_categories integer DEFAULT 10000,
	sequence text DEFAULT NULL,
	max_length integer DEFAULT NULL,
	weight text DEFAULT NULL,
	standardize_target boolean DEFAULT false,
	impute text DEFAULT NULL,
	impute_value double precision DEFAULT NULL,
	scaling text DEFAULT NULL,
	one_hot text DEFAULT NULL)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer, text, integer, text, boolean, text, double precision, text, text) IS
	'packs a table''s features (numeric, missing ones imputed with an indicator, scaled; categorical columns as vocabulary ids or one-hot, token sequences as padded ids and a length) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- The vocabularies of categorical and sequence columns, one row per value.  A categorical column's id 0
-- (not listed) is any value not seen when packing, and NULL; a sequence column's id 0 is padding and id 1
-- an unseen or NULL token.  feature: the first (1-based) of the floats of the example vector that carry
-- the column, a sequence's L ids and then its length, a one-hot column's values (id i at feature + i - 1).  security_invoker: a role sees the vocabularies of
-- the datasets it may read.  The rows are their owners' to write: a "length" that is not a length counts
-- as none, "values" that are not an array as none, and a feature past the integers is NULL, so that one
-- role's row does not fail every reader's query.
CREATE VIEW pgdl.vocabulary WITH (security_invoker = true) AS
SELECT d.id AS dataset, d.packed, c.position::integer AS position, c.col ->> 'column' AS "column",
	   CASE WHEN d.n_features - c.total + c.before + 1 BETWEEN -2147483648 AND 2147483647
			THEN (d.n_features - c.total + c.before + 1)::integer END AS feature,
	   (v.id + CASE WHEN c.length IS NULL THEN 0 ELSE 1 END)::integer AS id, v.value,
	   c.length
  FROM pgdl.datasets d
 CROSS JOIN LATERAL (
	SELECT e.col, e.position, w.length, sum(w.width) OVER () AS total,
		   sum(w.width) OVER (ORDER BY e.position) - w.width AS before
	  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.categorical) = 'array' THEN d.categorical END)
		   WITH ORDINALITY AS e(col, position)
	 CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.col -> 'length') = 'number'
									 THEN (e.col ->> 'length')::numeric END AS n) l
	 CROSS JOIN LATERAL (SELECT CASE WHEN l.n = trunc(l.n) AND l.n BETWEEN 0 AND 2147483647
									 THEN l.n::integer END AS length) m
	 CROSS JOIN LATERAL (SELECT m.length,
								CASE WHEN m.length IS NOT NULL THEN m.length::bigint + 1
									 WHEN e.col -> 'one_hot' = 'true' AND jsonb_typeof(e.col -> 'values') = 'array'
									 THEN jsonb_array_length(e.col -> 'values') ELSE 1 END AS width) w) c
 CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(c.col -> 'values') = 'array'
												   THEN c.col -> 'values' END) WITH ORDINALITY AS v(value, id);
COMMENT ON VIEW pgdl.vocabulary IS
	'the vocabulary of each categorical and sequence column of the datasets the caller may read: value and its id (categorical: id 0 is unseen or NULL; sequence: id 0 is padding, id 1 unseen or NULL), the first feature of the example vector that carries the column (a one-hot column''s id i at feature + i - 1), and a sequence''s length L';
GRANT SELECT ON pgdl.vocabulary TO PUBLIC;

CREATE FUNCTION pgdl.encode(packed regclass, x real[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_encode'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.encode(regclass, real[], text[]) IS
	'the example vector of a dataset with categorical columns: raw numeric features x, then the id of each categorical value (0 when unseen or NULL); what pgdl.predict and predict_batch take';

CREATE FUNCTION pgdl.encode(packed regclass, x real[], categories text[], sequences jsonb) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_encode'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.encode(regclass, real[], text[], jsonb) IS
	'the example vector of a dataset with categorical and sequence columns: raw numeric features x, the id of each categorical value, then each sequence (a JSON array of tokens in sequences) as its L ids, padded or cut, and its length';

-- pgdl.split: a table's rows into <prefix>_train, <prefix>_validation (and <prefix>_test) tables, created
-- as the caller (see docs/reference/pack.md#split).  A row's place is decided by a hash of its text and
-- the seed (its text as the SET clauses make it), so the same seed gives the same rows whatever the
-- physical order or the session's settings; stratify => a column keeps
-- each of its values' share in every part, within one row.  Pack <prefix>_train, then the others with
-- reference => it: one preprocessing.
CREATE FUNCTION pgdl.split(source regclass, output_prefix text, validation real DEFAULT 0.2,
						   test real DEFAULT 0.0, seed bigint DEFAULT 42, stratify text DEFAULT NULL)
RETURNS TABLE (part text, relation regclass, n_rows bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	-- a row's text, which its place is a hash of, the same in every session
	SET extra_float_digits = 1 SET datestyle = 'ISO, YMD' SET intervalstyle = 'postgres' SET timezone = 'UTC'
	SET bytea_output = 'hex' AS
$$
DECLARE
	names text[];
	schema_name text;
	base text;
	parts text[];
	lower_bound text[];
	upper_bound text[];
	quoted text;
	strat text := '';
	sql text;
	kept bigint;
BEGIN
	IF source IS NULL OR output_prefix IS NULL OR validation IS NULL OR test IS NULL OR seed IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'source, output_prefix, validation, test and seed must not be NULL';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = source) THEN
		RAISE EXCEPTION USING ERRCODE = '42P01', MESSAGE = pg_catalog.format('relation with OID %s does not exist', source::oid);
	END IF;
	IF NOT (validation >= 0 AND test >= 0 AND validation + test > 0 AND validation + test < 1) THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('validation (%s) and test (%s) must be shares of the rows, together above 0 and below 1',
										validation, test),
			DETAIL = 'Each is the share of the rows its table gets, from 0 to 1; the training table gets the rest.';
	END IF;
	names := pg_catalog.parse_ident(output_prefix);
	IF pg_catalog.array_length(names, 1) > 2 THEN
		RAISE EXCEPTION USING ERRCODE = '42601',
			MESSAGE = pg_catalog.format('improper output_prefix "%s"', pg_catalog.left(output_prefix, 64)),
			HINT = 'Give a table name, or a schema and a table name.';
	END IF;
	schema_name := CASE WHEN pg_catalog.array_length(names, 1) = 2 THEN names[1] ELSE pg_catalog.current_schema() END;
	base := names[pg_catalog.array_length(names, 1)];
	IF schema_name IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '3F000', MESSAGE = 'no schema has been selected to create in';
	END IF;
	-- each class's (or the table's) rows in hash order: the first round(n * test) are test, the next
	-- round(n * validation) validation, the rest train
	parts := '{train}';
	lower_bound := '{t + v}';
	upper_bound := '{n}';
	IF validation > 0 THEN
		parts := parts || 'validation'::text;
		lower_bound := lower_bound || 't'::text;
		upper_bound := upper_bound || 't + v'::text;
	END IF;
	IF test > 0 THEN
		parts := parts || 'test'::text;
		lower_bound := lower_bound || '0'::text;
		upper_bound := upper_bound || 't'::text;
	END IF;
	FOREACH quoted IN ARRAY parts LOOP
		IF pg_catalog.octet_length(base || '_' || quoted) > 63 THEN
			RAISE EXCEPTION USING ERRCODE = '42622',
				MESSAGE = pg_catalog.format('output_prefix "%s" is too long', pg_catalog.left(base, 64)),
				DETAIL = pg_catalog.format('Table "%s_%s" would be longer than 63 bytes.', pg_catalog.left(base, 64), quoted);
		END IF;
		IF pg_catalog.to_regclass(pg_catalog.quote_ident(schema_name) || '.' || pg_catalog.quote_ident(base || '_' || quoted)) IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = '42P07',
				MESSAGE = pg_catalog.format('relation "%s.%s_%s" already exists', schema_name, base, quoted),
				HINT = 'Drop it, or give another output_prefix.';
		END IF;
	END LOOP;
	IF stratify IS NOT NULL THEN
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = stratify
						  AND a.attnum > 0 AND NOT a.attisdropped) THEN
			RAISE EXCEPTION USING ERRCODE = '42703',
				MESSAGE = pg_catalog.format('column "%s" of stratify does not exist in %s', pg_catalog.left(stratify, 64), source);
		END IF;
		strat := 'PARTITION BY pgdl_row.' || pg_catalog.quote_ident(stratify);
	END IF;
	FOR i IN 1 .. pg_catalog.array_length(parts, 1) LOOP
		quoted := pg_catalog.quote_ident(schema_name) || '.' || pg_catalog.quote_ident(base || '_' || parts[i]);
		sql := pg_catalog.format(
			'CREATE TABLE %s AS SELECT (r.pgdl_row).* FROM ('
			' SELECT pgdl_row, pg_catalog.row_number() OVER w AS rn,'
			'  pg_catalog.round(pg_catalog.count(*) OVER c * %s::float8) AS t,'
			'  pg_catalog.round(pg_catalog.count(*) OVER c * %s::float8) AS v,'
			'  pg_catalog.count(*) OVER c AS n'
			'  FROM %s pgdl_row'
			'  WINDOW c AS (%s), w AS (%s ORDER BY pg_catalog.hashtextextended(pgdl_row::text, %s))) r'
			' WHERE r.rn > %s AND r.rn <= %s',
			quoted, test, validation, source, strat, strat, seed, lower_bound[i], upper_bound[i]);
		EXECUTE sql;
		GET DIAGNOSTICS kept = ROW_COUNT;
		IF kept = 0 THEN
			RAISE EXCEPTION USING ERRCODE = '22023',
				MESSAGE = pg_catalog.format('split leaves %s without rows', quoted),
				DETAIL = pg_catalog.format('%s has too few rows for validation %s and test %s.', source, validation, test),
				HINT = 'Split a larger table, or give a larger share.';
		END IF;
		part := parts[i];
		relation := quoted::regclass;
		n_rows := kept;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.split(regclass, text, real, real, bigint, text) IS
	'splits a table''s rows by a seeded hash into new tables <prefix>_train, <prefix>_validation and (test > 0) <prefix>_test, optionally stratified by a column; pack the training table, then the others with reference => it';
