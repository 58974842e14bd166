-- pgdl 0.4.0 to 0.5.0 (ALTER EXTENSION pgdl UPDATE): models in and out (ONNX import and export) and a
-- model zoo (pgdl.zoo, pgdl.similar_models, warm starts).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.5.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.5.0'" to load this file. \quit

-- ---- Lineage beyond training: an imported model's source, a warm start's model ----
ALTER TABLE pgdl.models ADD COLUMN origin jsonb;

-- ---- ONNX export ----
-- pgdl.export_onnx

CREATE FUNCTION pgdl.export_onnx(model bigint, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.export_onnx(model text, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pgdl.export_onnx(model bytea, with_normalization boolean DEFAULT true) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_export_onnx'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION pgdl.export_onnx(bigint, boolean) IS
	'stored model (by id) as an ONNX file: the network, its dataset''s normalization (unless with_normalization is false) and the output transform of pgdl.predict';
COMMENT ON FUNCTION pgdl.export_onnx(text, boolean) IS
	'stored model (by name) as an ONNX file: the network, its dataset''s normalization (unless with_normalization is false) and the output transform of pgdl.predict';
COMMENT ON FUNCTION pgdl.export_onnx(bytea, boolean) IS
	'model blob as an ONNX file (features as given, classes as indices): the network and the output transform of pgdl.predict';

-- ---- ONNX import ----
CREATE FUNCTION pgdl.import_onnx(name text, onnx bytea, dataset regclass DEFAULT NULL, loss text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_import_onnx'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.import_onnx(text, bytea, regclass, text) IS
	'stores an ONNX model (a chain of Gemm, MatMul+Add, Conv, pooling, BatchNormalization, activations, Dropout, Flatten) as a new pgdl model, optionally tied to a packed dataset; returns its id';
