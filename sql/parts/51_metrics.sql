-- Evaluation over raw rows, and the metrics of scikit-learn (see metrics.md)

-- pgdl.evaluate over raw rows: a table, view or query, preprocessed as the model's training set was packed

CREATE FUNCTION pgdl.evaluate(model bigint, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;
CREATE FUNCTION pgdl.evaluate(model text, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;

COMMENT ON FUNCTION pgdl.evaluate(bigint, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.evaluate(text, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';
