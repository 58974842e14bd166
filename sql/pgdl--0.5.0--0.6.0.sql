-- pgdl 0.5.0 to 0.6.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.6.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.6.0'" to load this file. \quit

-- ---- devices: pgdl.cuda_devices(), pgdl.cuda_status() lists devices ----
CREATE FUNCTION pgdl.cuda_devices(OUT ordinal integer, OUT device text, OUT name text,
		OUT compute_capability text, OUT total_mb double precision, OUT free_mb double precision,
		OUT driver text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_cuda_devices'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_devices() IS
	'the CUDA devices this server sees (none without CUDA): the name pgdl.device and "device" take, model, compute capability, total and free memory, driver; creates no CUDA context';

COMMENT ON FUNCTION pgdl.cuda_status() IS
	'whether CUDA devices can be used: "available: " and each device (name, compute capability, memory) and the driver, or the reason they cannot; creates no CUDA context';
