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
	max_categories integer DEFAULT 10000)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass, text, integer) IS
	'packs a table''s features (numeric, and categorical columns as vocabulary ids) and labels (a class, or one or several targets) into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';

-- The vocabularies of categorical columns, one row per value: id 0 (not listed) is any value not seen
-- when packing, and NULL.  security_invoker: a role sees the vocabularies of the datasets it may read.
CREATE VIEW pgdl.vocabulary WITH (security_invoker = true) AS
SELECT d.id AS dataset, d.packed, c.position::integer AS position, c.col ->> 'column' AS "column",
	   (d.n_features - jsonb_array_length(d.categorical) + c.position)::integer AS feature,
	   v.id::integer AS id, v.value
  FROM pgdl.datasets d
 CROSS JOIN LATERAL jsonb_array_elements(d.categorical) WITH ORDINALITY AS c(col, position)
 CROSS JOIN LATERAL jsonb_array_elements_text(c.col -> 'values') WITH ORDINALITY AS v(value, id)
 WHERE jsonb_typeof(d.categorical) = 'array';
COMMENT ON VIEW pgdl.vocabulary IS
	'the vocabulary of each categorical column of the datasets the caller may read: value and its id (id 0 is unseen or NULL), and which feature of the example vector carries it';
GRANT SELECT ON pgdl.vocabulary TO PUBLIC;

CREATE FUNCTION pgdl.encode(packed regclass, x real[], categories text[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_encode'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.encode(regclass, real[], text[]) IS
	'the example vector of a dataset with categorical columns: raw numeric features x, then the id of each categorical value (0 when unseen or NULL); what pgdl.predict and predict_batch take';
