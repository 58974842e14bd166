-- pgdl 0.5.0 to 0.6.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.6.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.6.0'" to load this file. \quit

-- ---- throughput prediction: pgdl.calibrate, pgdl.server_profiles, pgdl.estimate's pace ----
DROP FUNCTION pgdl.estimate(jsonb, jsonb);
CREATE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}', examples bigint DEFAULT NULL,
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint,
		OUT profile bigint, OUT basis text, OUT images_per_second double precision,
		OUT seconds_per_epoch double precision, OUT workers jsonb, OUT memory jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_estimate' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.estimate(jsonb, jsonb, bigint) IS
	'cost of a spec: parameters, FLOPs per example (forward; training), activation bytes per example, training memory for one batch, and the predicted pace from this server''s profile (pgdl.calibrate) or pgdl.cpu_gflops';
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
ALTER TABLE pgdl.run_metrics ADD COLUMN predicted_seconds double precision;
DROP FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer);
CREATE FUNCTION pgdl.explain_fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1)
	RETURNS TABLE ("group" integer, source regclass, base_model bigint, frozen_layers integer, configs integer,
				   action text, cache text, validation_cache text, staged_from text, gflops double precision,
				   storage_mb double precision, predicted_seconds double precision, reason text,
				   prefix_gflops_per_pass double precision, memory_mb double precision, basis text,
				   predictions jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_explain_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer) IS
	'the plan of pgdl.fit_multiple with the same arguments, without running it: per group of configurations sharing a frozen prefix, the feature cache to reuse, build, refresh or rebuild (or recompute), with predicted compute, storage, time and memory, and each configuration''s predicted pace';
