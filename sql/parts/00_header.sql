-- pgdl install script, assembled by make from sql/parts/*.sql in name order.

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pgdl" to load this file. \quit

-- The control file names schema pg_catalog, so that PostgreSQL does not make schema pgdl outside the
-- extension: the script makes it, a member, and DROP EXTENSION takes it.  Every object is named with
-- its schema, and every function that runs SQL sets its search_path or qualifies what it names.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'pgdl') THEN
		RAISE EXCEPTION 'schema "pgdl" already exists'
			USING ERRCODE = 'duplicate_schema',
				  DETAIL = 'pgdl makes its schema pgdl itself. DROP EXTENSION pgdl of pgdl 0.1.0 left an empty one behind.',
				  HINT = 'Drop it (DROP SCHEMA pgdl), or rename it if it holds tables of yours, then create the extension.';
	END IF;
END
$$;
CREATE SCHEMA pgdl;
COMMENT ON SCHEMA pgdl IS 'pgdl: deep learning as SQL (its functions and catalog)';
GRANT USAGE ON SCHEMA pgdl TO PUBLIC;
