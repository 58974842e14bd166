-- Configuration sets for model selection: rows of pgdl.configs (table in 20_catalog.sql), written by hand or
-- by pgdl.grid_search and pgdl.random_search, for pgdl.fit_multiple.

CREATE FUNCTION pgdl.configs_validate() RETURNS trigger
	AS 'MODULE_PATHNAME', 'pgdl_configs_validate' LANGUAGE C;
REVOKE EXECUTE ON FUNCTION pgdl.configs_validate() FROM PUBLIC;
COMMENT ON FUNCTION pgdl.configs_validate() IS
	'trigger: checks a pgdl.configs row (a non-empty set name, a valid training configuration) and stores its configuration in canonical form';
CREATE TRIGGER configs_validate BEFORE INSERT OR UPDATE ON pgdl.configs
	FOR EACH ROW EXECUTE FUNCTION pgdl.configs_validate();

CREATE FUNCTION pgdl.grid_search(set_name text, architectures text[], params jsonb) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_grid_search' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.grid_search(text, text[], jsonb) IS
	'adds to a configuration set every combination of the values in params (arrays are tried, scalars fixed) for each architecture; returns how many configurations were new';

CREATE FUNCTION pgdl.random_search(set_name text, architectures text[], space jsonb, n integer,
		seed bigint DEFAULT 42) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_random_search' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.random_search(text, text[], jsonb, integer, bigint) IS
	'adds to a configuration set n samples of a search space (choice, uniform, log_uniform, int, or fixed values per key), each with an architecture drawn from the list; deterministic for a seed; returns how many configurations were new';
