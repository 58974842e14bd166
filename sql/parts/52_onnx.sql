-- Models in and out as ONNX files (docs/reference/onnx.md).
--
-- pgdl.export_onnx writes a model as an ONNX ModelProto (opset 13, float32) that computes what
-- pgdl.predict returns: the network in inference mode, then softmax (cross_entropy) or sigmoid
-- (binary_cross_entropy).  A stored model's dataset normalization is folded in as the graph's first
-- nodes unless with_normalization is false; the classes, the loss and the model's id and name go into the
-- file's metadata.  pgdl.import_onnx reads such a file (pgdl's or another framework's) into a new row of
-- pgdl.models (src/models/onnx_import.c), and recognizes what export added around the network.

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

-- pgdl.import_onnx

CREATE FUNCTION pgdl.import_onnx(name text, onnx bytea, dataset regclass DEFAULT NULL, loss text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_import_onnx'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.import_onnx(text, bytea, regclass, text) IS
	'stores an ONNX model (a chain of Gemm, MatMul+Add, Conv, pooling, BatchNormalization, activations, Dropout, Flatten) as a new pgdl model, optionally tied to a packed dataset; returns its id';
