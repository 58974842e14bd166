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
	standardize_target boolean DEFAULT false)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer, text, integer, text, boolean) IS
	'packs a table''s features (numeric, categorical columns as vocabulary ids, token sequences as padded ids and a length) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- The vocabularies of categorical and sequence columns, one row per value.  A categorical column's id 0
-- (not listed) is any value not seen when packing, and NULL; a sequence column's id 0 is padding and id 1
-- an unseen or NULL token.  feature: the first (1-based) of the floats of the example vector that carry
-- the column, a sequence's L ids and then its length.  security_invoker: a role sees the vocabularies of
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
	SELECT e.col, e.position, w.length, sum(coalesce(w.length::bigint + 1, 1)) OVER () AS total,
		   sum(coalesce(w.length::bigint + 1, 1)) OVER (ORDER BY e.position) - coalesce(w.length::bigint + 1, 1) AS before
	  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.categorical) = 'array' THEN d.categorical END)
		   WITH ORDINALITY AS e(col, position)
	 CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(e.col -> 'length') = 'number'
									 THEN (e.col ->> 'length')::numeric END AS n) l
	 CROSS JOIN LATERAL (SELECT CASE WHEN l.n = trunc(l.n) AND l.n BETWEEN 0 AND 2147483647
									 THEN l.n::integer END AS length) w) c
 CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(c.col -> 'values') = 'array'
												   THEN c.col -> 'values' END) WITH ORDINALITY AS v(value, id);
COMMENT ON VIEW pgdl.vocabulary IS
	'the vocabulary of each categorical and sequence column of the datasets the caller may read: value and its id (categorical: id 0 is unseen or NULL; sequence: id 0 is padding, id 1 unseen or NULL), the first feature of the example vector that carries the column, and a sequence''s length L';
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
