-- ONNX in and out (docs/reference/onnx.md): pgdl.import_onnx reads an ONNX model into a new row of
-- pgdl.models (src/onnx_import.c).

CREATE FUNCTION pgdl.import_onnx(name text, onnx bytea, dataset regclass DEFAULT NULL, loss text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_import_onnx'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.import_onnx(text, bytea, regclass, text) IS
	'stores an ONNX model (a chain of Gemm, MatMul+Add, Conv, pooling, BatchNormalization, activations, Dropout, Flatten) as a new pgdl model, optionally tied to a packed dataset; returns its id';
