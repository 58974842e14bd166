-- This server's measured pace (pgdl.calibrate), from which pgdl.estimate and pgdl.explain_fit_multiple
-- predict.  A profile is a measurement of a machine, not user data: everybody reads it, nobody but
-- pgdl.calibrate writes it (the table belongs to the extension's owner and grants only SELECT), and pg_dump
-- leaves it out (a restored catalog lives on another server, which calibrates anew).  Calibrating again adds
-- a newer row; the newest row of this server (system identifier and host name) is used.

CREATE TABLE pgdl.server_profiles (
	id bigserial PRIMARY KEY,
	created timestamptz NOT NULL DEFAULT now(),
	system_identifier bigint NOT NULL,		-- pg_control_system().system_identifier of the server measured
	hostname text NOT NULL,
	cores integer NOT NULL,
	workers integer NOT NULL,				-- that ran at once to measure concurrency (1: not measured)
	seconds double precision NOT NULL,		-- the calibration's wall time
	measurements jsonb NOT NULL				-- {"version", "points": [{kind, size, batch, seconds}], "concurrency"}
);
COMMENT ON TABLE pgdl.server_profiles IS
	'measurements of this server by pgdl.calibrate (per layer kind, shape class, batch size and worker count), for pgdl.estimate';
GRANT SELECT ON pgdl.server_profiles TO PUBLIC;

CREATE FUNCTION pgdl.calibrate(seconds double precision DEFAULT 40, workers integer DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_calibrate' LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgdl.calibrate(double precision, integer) IS
	'measures this server''s training pace for about `seconds` (alone and with `workers` at once, default min(cores, pgdl.max_workers)) and stores a new profile in pgdl.server_profiles; returns its id';
REVOKE EXECUTE ON FUNCTION pgdl.calibrate(double precision, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgdl.calibrate(double precision, integer) TO pgdl_admin;
