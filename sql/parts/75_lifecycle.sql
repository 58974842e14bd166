-- The extension's life: checkpoints of finished runs, runs in flight, DROP EXTENSION.

-- Checkpoints are for pgdl.resume; a finished run keeps the last pgdl.keep_checkpoints of each of its
-- models (pruned when it finishes), and this prunes those of earlier runs.
CREATE FUNCTION pgdl.cleanup_checkpoints(keep integer DEFAULT NULL, run bigint DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_cleanup_checkpoints' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.cleanup_checkpoints(integer, bigint) IS
	'deletes all but the last `keep` checkpoints (default pgdl.keep_checkpoints; -1 keeps all) of each model of the caller''s runs not in flight (or of one run), keeping at least the last of a run that did not finish so that it can be resumed; returns how many';

CREATE FUNCTION pgdl.run_in_progress(run bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'pgdl_run_in_progress' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.run_in_progress(bigint) IS
	'whether a pgdl.fit_multiple or pgdl.resume of the run is in flight: its leader or one of its workers is alive';

-- DROP EXTENSION pgdl takes its schemas, catalog and caches, and leaves the packed tables, which are
-- their owners' tables: it says which.  ddl_command_start, since by sql_drop pgdl.datasets is gone;
-- the C function reads the statement, so that it speaks only when pgdl is dropped.
CREATE FUNCTION pgdl.on_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'pgdl_on_drop_extension' LANGUAGE C;
REVOKE EXECUTE ON FUNCTION pgdl.on_drop_extension() FROM PUBLIC;
COMMENT ON FUNCTION pgdl.on_drop_extension() IS
	'event trigger: a NOTICE at DROP EXTENSION pgdl that lists the packed tables it leaves';
CREATE EVENT TRIGGER pgdl_drop_extension ON ddl_command_start WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION pgdl.on_drop_extension();
