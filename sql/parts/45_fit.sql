-- pgdl.fit: one configuration trained for epochs over a packed table.

CREATE FUNCTION pgdl.fit(source regclass, architecture text, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL,
		holdout integer DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, text, jsonb, integer, regclass, text, integer) IS
	'trains a stored architecture on a packed table for some epochs (validating on another packed table if given, or, with holdout, training on every partition but that one and validating on it: one fold of pgdl.fit_multiple(..., folds => true)); stores the model in pgdl.models and returns its id';

CREATE FUNCTION pgdl.fit(source regclass, spec jsonb, config jsonb DEFAULT '{}',
		epochs integer DEFAULT 10, validation regclass DEFAULT NULL, name text DEFAULT NULL,
		holdout integer DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_spec' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit(regclass, jsonb, jsonb, integer, regclass, text, integer) IS
	'trains a network given as a jsonb spec on a packed table (with holdout, on every partition but that one, validated on it); stores the model in pgdl.models and returns its id';
