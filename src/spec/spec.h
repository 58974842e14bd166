/*
 * spec/spec.h -- the description language: jsonb <-> the engine's specs and
 * training configurations (spec_json.c) with the ONNX operators' names it
 * shares with import and export, and the names and shapes of a layer's
 * tensors as PyTorch's state_dict has them (tensors.c).
 */
#ifndef PGDL_SPEC_H
#define PGDL_SPEC_H

#include "base/base.h"

/*
 * A configuration's transfer learning keys, as given and checked for type;
 * their ranges depend on the base model, which transfer.c looks up.
 */
typedef struct PgdlTransferKeys
{
	char	   *base_name;		/* "base_model" as a name, or NULL */
	int64		base_id;		/* "base_model" as an id, when base_name is NULL */
	bool		freeze_given;
	char	   *freeze_layer;	/* "freeze" as a layer name, or NULL */
	int32		freeze_count;	/* "freeze" as a number of layers: -1 if not a whole number of 0 .. NN_MAX_LAYERS */
	JsonbContainer *head;		/* "head": an array of layers, or NULL */
} PgdlTransferKeys;

/* Errors are ereport(ERROR)s that name the layer and the field at fault. */
extern void pgdl_spec_from_jsonb(Jsonb *spec, NnSpec *out);
extern Jsonb *pgdl_spec_to_jsonb(const NnSpec *spec);
/* Refuses the transfer learning keys; the _transfer form ignores them (see pgdl_transfer_keys_from_jsonb). */
extern void pgdl_config_from_jsonb(Jsonb *config, PgdlTrainConfig *out);
extern void pgdl_config_from_jsonb_transfer(Jsonb *config, PgdlTrainConfig *out);
extern Jsonb *pgdl_config_to_jsonb(const PgdlTrainConfig *config);
/* Whether optimizer `type` uses a configuration key (one that is not an optimizer's setting: true). */
extern bool pgdl_optimizer_uses_key(NnOptType type, const char *key);
/*
 * "warm_start": the model (name, or id when name is NULL) a configuration starts from where the shapes
 * fit; false when it names none.  Checked for type only: transfer.c resolves it (pgdl_model_start).
 */
extern bool pgdl_warm_start_key(Jsonb *config, char **name, int64 *id);
/* canonical (pgdl_config_to_jsonb's) with the "warm_start" of the configuration as given, if any */
extern Jsonb *pgdl_config_with_warm_start(Jsonb *canonical, Jsonb *given);
/* Does a configuration name base_model, freeze or head? */
extern bool pgdl_config_has_transfer(Jsonb *config);
/* The transfer keys of a configuration as an object, or NULL when it has none. */
extern Jsonb *pgdl_transfer_keys(Jsonb *config);
/* The transfer keys of a configuration that has some; base_model is required. */
extern void pgdl_transfer_keys_from_jsonb(Jsonb *config, PgdlTransferKeys *out);
/* A head's spec: "head"'s layers on inputs of shape `in`, with the base model's loss. */
extern void pgdl_head_spec_from_jsonb(JsonbContainer *layers, const NnShape *in, NnLoss loss, float delta,
									  NnSpec *out);
/* An input the model cannot take (an embedding's ids) as an error naming the layer. */
extern void pgdl_check_model_input(const NnModel *m, const float *x, int n);
/* The value of key in a jsonb object, or NULL. */
extern JsonbValue *pgdl_jsonb_key(JsonbContainer *obj, const char *key);


/*
 * ONNX operators, in one table (spec_json.c): every operator whose name pgdl
 * reads or writes.  Those that are a layer carry its type: the description
 * language takes their names as layer types ("Gemm" as "dense"), and export
 * writes each layer of that type as that operator.  The others are ONNX import's
 * and export's only: what a MatMul, Reshape or Pad, the normalization's Mul, Sub
 * and Div or a trailing Softmax become (or an Add after a MatMul) is import's
 * own reading, in onnx_import.c; the names come from here all the same.
 */
typedef enum PgdlOnnxOp
{
	PGDL_ONNX_NONE = 0,			/* no operator pgdl knows */
	/* layers */
	PGDL_ONNX_GEMM,
	PGDL_ONNX_CONV,
	PGDL_ONNX_MAXPOOL,
	PGDL_ONNX_AVERAGEPOOL,
	PGDL_ONNX_GLOBALAVERAGEPOOL,
	PGDL_ONNX_FLATTEN,
	PGDL_ONNX_RELU,
	PGDL_ONNX_LEAKYRELU,
	PGDL_ONNX_SIGMOID,
	PGDL_ONNX_TANH,
	PGDL_ONNX_DROPOUT,
	PGDL_ONNX_BATCHNORMALIZATION,
	PGDL_ONNX_GELU,
	PGDL_ONNX_LAYERNORMALIZATION,
	PGDL_ONNX_ADD,
	PGDL_ONNX_CONCAT,
	PGDL_ONNX_SOFTMAX,
	PGDL_ONNX_GRU,
	PGDL_ONNX_SLICE,
	/* import's and export's only */
	PGDL_ONNX_MATMUL,
	PGDL_ONNX_RESHAPE,
	PGDL_ONNX_LOGSOFTMAX,
	PGDL_ONNX_PAD,
	PGDL_ONNX_IDENTITY,
	PGDL_ONNX_CONSTANT,
	PGDL_ONNX_MUL,
	PGDL_ONNX_SUB,
	PGDL_ONNX_DIV,
	PGDL_ONNX_ISNAN,
	PGDL_ONNX_WHERE,
	PGDL_ONNX_GATHER,
	PGDL_ONNX_CAST,
	PGDL_ONNX_ERF,
	PGDL_ONNX_TRANSPOSE,
	PGDL_ONNX_REDUCEMEAN,
	PGDL_ONNX_SQUEEZE,
	PGDL_ONNX_SHAPE,
	PGDL_ONNX_UNSQUEEZE,
	PGDL_ONNX_CONSTANTOFSHAPE,
	PGDL_ONNX_POW,
	PGDL_ONNX_SQRT,
	PGDL_ONNX_OP_MAX			/* keep last */
} PgdlOnnxOp;

/* The operator of an ONNX node's op_type, PGDL_ONNX_NONE when pgdl knows none by that name. */
extern PgdlOnnxOp pgdl_onnx_op_from_name(const char *name);
/* The operator's name as ONNX spells it ("Gemm"). */
extern const char *pgdl_onnx_op_name(PgdlOnnxOp op);
/* The layer type the operator is, 0 for import's and export's only. */
extern NnLayerType pgdl_onnx_op_layer(PgdlOnnxOp op);
/* The operator a layer type is, PGDL_ONNX_NONE for a layer ONNX has no operator for. */
extern PgdlOnnxOp pgdl_onnx_layer_op(NnLayerType type);

#define PGDL_TENSOR_MAX_DIMS	4
#define PGDL_LAYER_MAX_TENSORS	4

/* tensors.c: one parameter tensor of a layer, named and shaped as PyTorch's state_dict has it. */
typedef struct PgdlTensor
{
	int			layer;
	const char *name;			/* the state_dict suffix: "weight", "bias", "running_mean", ... */
	int			ndim;
	int			shape[PGDL_TENSOR_MAX_DIMS];
	int64		offset;			/* in the model's params, or in its buffers */
	bool		buffer;			/* a running statistic, not a trained parameter */
} PgdlTensor;

/* The tensors of layer i into t[PGDL_LAYER_MAX_TENSORS], in state_dict order; how many. */
extern int	pgdl_layer_tensors(const NnModel *m, int i, PgdlTensor *t);
extern int64 pgdl_tensor_size(const PgdlTensor *t);

/*
 * rank_metric.c: the validation metrics that rank models and that early
 * stopping watches.  parse takes a name (or monitor's validation_loss and
 * validation_accuracy); arg parses or raises 22023 listing the names;
 * check_task raises 22023 when the metric does not suit the dataset's task.
 */
extern bool pgdl_rank_metric_parse(const char *name, PgdlRankMetric *out);
extern PgdlRankMetric pgdl_rank_metric_arg(const char *what, const char *name);
extern const char *pgdl_rank_metric_name(PgdlRankMetric m);
extern bool pgdl_rank_metric_higher_better(PgdlRankMetric m);
extern bool pgdl_rank_metric_needs_scores(PgdlRankMetric m);
extern char *pgdl_rank_metric_list(void);	/* palloc'd, comma-separated */
extern void pgdl_rank_metric_check_task(PgdlRankMetric m, bool classification, const char *what);

#endif							/* PGDL_SPEC_H */
