-- Specs and configurations: validation, storage, cost.

CREATE FUNCTION pgdl.validate_spec(spec jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_validate_spec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.validate_spec(jsonb) IS
	'checks a network spec (errors name the layer and field) and returns it in canonical form, defaults filled in';

CREATE FUNCTION pgdl.validate_config(config jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'pgdl_validate_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.validate_config(jsonb) IS
	'checks a training configuration (optimizer, lr, batch_size, seed, ...) and returns it with defaults filled in';

CREATE FUNCTION pgdl.add_architecture(name text, spec jsonb) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_add_architecture' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.add_architecture(text, jsonb) IS
	'validates a network spec and stores it in pgdl.architectures under a name; returns its id';

CREATE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}', examples bigint DEFAULT NULL,
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint,
		OUT profile bigint, OUT basis text, OUT images_per_second double precision,
		OUT seconds_per_epoch double precision, OUT workers jsonb, OUT memory jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_estimate' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.estimate(jsonb, jsonb, bigint) IS
	'cost of a spec: parameters, FLOPs per example (forward; training), activation bytes per example, training memory for one batch, and the predicted pace from this server''s profile (pgdl.calibrate) or pgdl.cpu_gflops';

CREATE FUNCTION pgdl.estimate_layers(spec jsonb,
		OUT layer integer, OUT type text, OUT output_shape integer[], OUT parameters bigint,
		OUT flops_forward bigint, OUT flops_train bigint, OUT activation_bytes bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_estimate_layers' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 16;
COMMENT ON FUNCTION pgdl.estimate_layers(jsonb) IS
	'cost of a spec layer by layer: output shape, parameters, FLOPs per example, activation bytes per example';

CREATE FUNCTION pgdl.init_model(spec jsonb, config jsonb DEFAULT '{}') RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_init_model' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.init_model(jsonb, jsonb) IS
	'a new model blob for a spec, initialized from the configuration''s seed, with its optimizer: the starting point for the pgdl.train aggregate';
