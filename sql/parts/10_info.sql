-- What this build is and what it can run on.

CREATE FUNCTION pgdl.version() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_version'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.version() IS
	'pgdl''s version and build: engine model format, BLAS library, CUDA support';

CREATE FUNCTION pgdl.cpu_info() RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_cpu_info'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cpu_info() IS
	'the instruction set pgdl''s CPU kernels use in this session ("isa": pgdl.cpu_isa, "setting", capped by the CPU''s best, "cpu") and OpenBLAS''s kernels ("blas_core"), as runs and models record them';

CREATE FUNCTION pgdl.cuda_status() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_cuda_status'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_status() IS
	'whether CUDA devices can be used: "available: " and each device (name, compute capability, memory) and the driver, or the reason they cannot; creates no CUDA context';

CREATE FUNCTION pgdl.cuda_devices(OUT ordinal integer, OUT device text, OUT name text,
		OUT compute_capability text, OUT total_mb double precision, OUT free_mb double precision,
		OUT driver text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_cuda_devices'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_devices() IS
	'the CUDA devices this server sees (none without CUDA): the name pgdl.device and "device" take, model, compute capability, total and free memory, driver; creates no CUDA context';
