-- Training as an aggregate: state = model + optimizer state, transition = the
-- minibatch steps of one packed buffer, combine = average weighted by examples.

CREATE FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea, jsonb) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_transition' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_transition' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_combine(internal, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_combine' LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION pgdl.train_serial(internal) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_train_serial' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.train_deserial(bytea, internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'pgdl_train_deserial' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.train_final(internal) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_train_final' LANGUAGE C PARALLEL SAFE;

CREATE AGGREGATE pgdl.train(x real[], y real[], n integer, model bytea, config jsonb) (
	SFUNC = pgdl.train_transition,
	STYPE = internal,
	COMBINEFUNC = pgdl.train_combine,
	SERIALFUNC = pgdl.train_serial,
	DESERIALFUNC = pgdl.train_deserial,
	FINALFUNC = pgdl.train_final,
	PARALLEL = SAFE
);
CREATE AGGREGATE pgdl.train(x real[], y real[], n integer, model bytea) (
	SFUNC = pgdl.train_transition,
	STYPE = internal,
	COMBINEFUNC = pgdl.train_combine,
	SERIALFUNC = pgdl.train_serial,
	DESERIALFUNC = pgdl.train_deserial,
	FINALFUNC = pgdl.train_final,
	PARALLEL = SAFE
);

COMMENT ON FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea, jsonb) IS
	'pgdl.train transition: the minibatch steps of one packed buffer';
COMMENT ON FUNCTION pgdl.train_transition(internal, real[], real[], integer, bytea) IS
	'pgdl.train transition: the minibatch steps of one packed buffer, with the model''s own optimizer';
COMMENT ON FUNCTION pgdl.train_combine(internal, internal) IS
	'pgdl.train combine: average of two models weighted by the examples each has seen';
COMMENT ON FUNCTION pgdl.train_serial(internal) IS 'pgdl.train state to bytea, for parallel aggregation';
COMMENT ON FUNCTION pgdl.train_deserial(bytea, internal) IS 'pgdl.train state from bytea, for parallel aggregation';
COMMENT ON FUNCTION pgdl.train_final(internal) IS 'pgdl.train final: the trained model blob';
COMMENT ON AGGREGATE pgdl.train(real[], real[], integer, bytea, jsonb) IS
	'trains model (a blob) on packed buffers (x, y, n) with a training configuration; returns the trained blob';
COMMENT ON AGGREGATE pgdl.train(real[], real[], integer, bytea) IS
	'trains model (a blob) on packed buffers (x, y, n) with the optimizer stored in the model (or SGD defaults)';
