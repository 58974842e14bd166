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
	reference regclass DEFAULT NULL)
RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_pack'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pgdl.pack(regclass, text, text, text, integer, integer, bigint, double precision, boolean, text, regclass) IS
	'packs a table''s features and labels into shuffled minibatch buffers in a new LIST-partitioned table and registers it in pgdl.datasets; returns the dataset id';
