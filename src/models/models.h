/*
 * models/models.h -- models in and out: what ONNX import (onnx_import.c) and
 * export (onnx_export.c) share, and deployments (deployments.c):
 * the names pgdl gives a graph's input and output and the metadata it writes,
 * so that a model pgdl exported is recognized when it comes back.  The
 * operators' names are spec/spec.h's (PgdlOnnxOp), which the description
 * language reads too.
 *
 * The protobuf types (Onnx__ModelProto, ...) are protoc-c's, generated at build
 * time from Debian's onnx.proto (see the Makefile).
 */
#ifndef PGDL_MODELS_H
#define PGDL_MODELS_H

#include "onnx.pb-c.h"
#include "models/onnx_depth.h"

#define PGDL_ONNX_OPSET			13		/* the opset pgdl writes; imports take 7 or later */
#define PGDL_ONNX_IR_VERSION	7		/* IR version of opset 13 */
#define PGDL_ONNX_OPSET_17		17		/* what export writes where a layernorm needs LayerNormalization */
#define PGDL_ONNX_IR_VERSION_17	8		/* IR version of opset 17 */
#define PGDL_ONNX_INPUT			"input"
#define PGDL_ONNX_OUTPUT		"output"
#define PGDL_ONNX_BATCH_DIM		"batch"	/* the symbolic first dimension of input and output */

/* metadata_props keys pgdl writes (values are JSON) */
#define PGDL_ONNX_META_CLASSES		"pgdl.classes"			/* ["T-shirt", ...], index i = class i */
#define PGDL_ONNX_META_LOSS			"pgdl.loss"				/* "cross_entropy", "mse", ... */
#define PGDL_ONNX_META_NORMALIZATION "pgdl.normalization"	/* the dataset's, when folded in as nodes */
#define PGDL_ONNX_META_MODEL		"pgdl.model"			/* {"id": ..., "name": ...} exported from */
#define PGDL_ONNX_META_TARGET_NORMALIZATION "pgdl.target_normalization"	/* the dataset's, undone as the last nodes */

/*
 * ---- export (onnx_export.c) ----
 * Names of what pgdl.export_onnx adds around the network's layers ("layer<i>",
 * initializers "layer<i>.weight", ...), so that an import can strip them:
 * the dataset's normalization in front (x * scale, or (x - mean) / std, with
 * PGDL_ONNX_META_NORMALIZATION), and what pgdl.predict makes of the outputs
 * behind (softmax for cross_entropy, sigmoid for binary_cross_entropy).
 */
#define PGDL_ONNX_NODE_NORMALIZE_MUL	"pgdl_normalize_mul"	/* input * scale */
#define PGDL_ONNX_NODE_NORMALIZE_SUB	"pgdl_normalize_sub"	/* input - mean */
#define PGDL_ONNX_NODE_NORMALIZE_DIV	"pgdl_normalize_div"	/* (input - mean) / std */
#define PGDL_ONNX_NORMALIZE_SCALE		"pgdl_normalize.scale"	/* a scalar */
#define PGDL_ONNX_NORMALIZE_MEAN		"pgdl_normalize.mean"	/* shaped as one example: [F] or [C, H, W] */
#define PGDL_ONNX_NORMALIZE_STD			"pgdl_normalize.std"
/* imputation (pack's impute), before the normalization; its indicators after it, concatenated */
#define PGDL_ONNX_NODE_IMPUTE_ISNAN		"pgdl_impute_isnan"		/* IsNaN(input) */
#define PGDL_ONNX_NODE_IMPUTE_WHERE		"pgdl_impute_where"		/* Where(isnan, values, input) */
#define PGDL_ONNX_IMPUTE_VALUES			"pgdl_impute.values"	/* shaped as one example */
#define PGDL_ONNX_NODE_IMPUTE_GATHER	"pgdl_impute_gather"	/* Gather(isnan, indicators, axis = 1) */
#define PGDL_ONNX_IMPUTE_INDICATORS		"pgdl_impute.indicators"	/* int64 [k]: 0-based features */
#define PGDL_ONNX_NODE_IMPUTE_CAST		"pgdl_impute_cast"		/* Cast(to = FLOAT) */
#define PGDL_ONNX_NODE_IMPUTE_CONCAT	"pgdl_impute_concat"	/* Concat(normalized, indicators, axis = 1) */
#define PGDL_ONNX_META_IMPUTATION		"pgdl.imputation"		/* the dataset's, when folded in as nodes */
#define PGDL_ONNX_NODE_IDS				"pgdl_ids"				/* Slice of the input: the categorical columns' ids */
#define PGDL_ONNX_NODE_NUMERIC			"pgdl_numeric"			/* Slice of the input: the numeric features */
#define PGDL_ONNX_NODE_IDS_CONCAT		"pgdl_ids_concat"		/* Concat(preprocessed numeric, ids, axis = 1) */
#define PGDL_ONNX_META_CATEGORICAL		"pgdl.categorical"		/* the dataset's vocabularies, when the file takes ids */
#define PGDL_ONNX_NODE_SOFTMAX			"pgdl_softmax"			/* Softmax(axis = 1), cross_entropy */
#define PGDL_ONNX_NODE_SIGMOID			"pgdl_sigmoid"			/* Sigmoid, binary_cross_entropy */
#define PGDL_ONNX_NODE_OUTPUT_FLATTEN	"pgdl_output_flatten"	/* a network that ends in [batch, C, H, W] */
#define PGDL_ONNX_NODE_OUTPUT_IDENTITY	"pgdl_output_identity"	/* a graph with no other node */
/* standardized targets (pack's standardize_target) back to target units, behind the network: z * std + mean */
#define PGDL_ONNX_NODE_TARGET_MUL		"pgdl_target_mul"
#define PGDL_ONNX_NODE_TARGET_ADD		"pgdl_target_add"
#define PGDL_ONNX_TARGET_STD			"pgdl_target.std"		/* [n_targets] */
#define PGDL_ONNX_TARGET_MEAN			"pgdl_target.mean"
/* ---- import (onnx_import.c) ---- */

#include "catalog/catalog.h"

/* What pgdl.import_onnx's arguments say besides the bytes. */
typedef struct PgdlOnnxArgs
{
	const PgdlDataset *dataset;	/* NULL: none given */
	NnLoss		loss;			/* the loss argument; 0: none given */
	NnLoss		default_loss;	/* when neither the graph's last node nor `loss` decides */
} PgdlOnnxArgs;

/* A model read from ONNX bytes. */
typedef struct PgdlOnnxModel
{
	NnModel    *model;			/* freed with CurrentMemoryContext */
	const Onnx__ModelProto *proto;	/* in CurrentMemoryContext */
	int64		opset;			/* of the default domain */
	const char *classes;		/* PGDL_ONNX_META_CLASSES's value, or NULL */
	const char *loss_from;		/* what chose the loss: "softmax", "sigmoid", "argument", "metadata", "dataset", "default" */
} PgdlOnnxModel;

/*
 * Reads ONNX bytes into a model of pgdl's layers, or raises an error naming
 * the node at fault (ERRCODE_FEATURE_NOT_SUPPORTED for what pgdl cannot
 * represent, ERRCODE_INVALID_PARAMETER_VALUE or ERRCODE_DATA_CORRUPTED for
 * malformed bytes).  Allocates in CurrentMemoryContext; runs no query.
 */
extern void pgdl_onnx_read(const uint8 *data, size_t len, const PgdlOnnxArgs *args, PgdlOnnxModel *out);

/*
 * ---- deployments (deployments.c) ----
 * A selection's winner deployed as `name` (pgdl.deploy) only when it beats the
 * model the name serves on r, both scored now on the validation table vds;
 * a NOTICE says which was kept and why.  The outcome's form says whether
 * the name serves the candidate afterwards, the model it served before (0:
 * none) and both scores (NaN where not scored).
 */
typedef struct PgdlDeployOutcome
{
	bool		serves;
	int64		previous;
	double		score;
	double		previous_score;
} PgdlDeployOutcome;

extern void pgdl_deploy_if_better(const char *name, int64 candidate, const PgdlDataset *vds, PgdlRankMetric r);
extern void pgdl_deploy_if_better_outcome(const char *name, int64 candidate, const PgdlDataset *vds,
										  PgdlRankMetric r, PgdlDeployOutcome *out);

#endif							/* PGDL_MODELS_H */
