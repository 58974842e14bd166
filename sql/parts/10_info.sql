-- What this build is and what it can run on.

CREATE FUNCTION pgdl.version() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_version'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.version() IS
	'pgdl''s version and build: engine model format, BLAS library, CUDA support';

CREATE FUNCTION pgdl.cuda_status() RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_cuda_status'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.cuda_status() IS
	'whether the CUDA backend can be used in this session: "available: <device>", or the reason it cannot';
