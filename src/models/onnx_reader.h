/*
 * onnx_reader.h -- the ONNX reader's state, shared by its six files and
 * kept inside models/: onnx_import.c (bytes, attributes, tensors, the walk
 * over the nodes, the graph's ends, the SQL function), onnx_import_layers.c
 * (each operator read into a layer), onnx_import_graph.c (the values
 * between nodes, and the nodes that join or split branches: Add, Concat,
 * Slice), onnx_import_seq.c (integer ids, embeddings, GRU, and the shape
 * arithmetic torch writes around them), onnx_patterns.c (subgraphs that
 * are one layer: GELU's Erf, LayerNorm decomposed) and onnx_attention.c
 * (torch's multi-head attention, node by node).
 */
#ifndef PGDL_ONNX_READER_H
#define PGDL_ONNX_READER_H

#include "spec/spec.h"
#include "models/models.h"

#define ONNX_MIN_OPSET		7
#define ONNX_MAX_OPSET		21		/* newer opsets may change what an op means */
#define ONNX_MAX_NODES		4096
#define ONNX_MAX_TENSORS	4096
#define ONNX_MAX_HELD		7		/* dims of a value held flat, the batch apart */

/*
 * A tensor of the graph that a node writes (or the graph's input): which
 * layer's output it is and how pgdl holds it.  Nodes that make no layer
 * (Identity, a Reshape within an example, the normalization) give their
 * output the value of their input.
 */
/*
 * What a value is.  Most are a layer's output; around a sequence layer torch
 * writes values that are no layer's: the graph's integer ids, the shape
 * arithmetic that makes a GRU's initial state, a view of a sequence time
 * first, and the GRU's outputs before a Squeeze or Gather takes them
 * (onnx_import_seq.c reads them).
 */
typedef enum OnnxValueKind
{
	ONNX_VALUE_TENSOR = 0,		/* a layer's output (or the spec's input) as shape says */
	ONNX_VALUE_IDS,				/* the graph's INT64 input [batch, steps]: ids for an embedding */
	ONNX_VALUE_SHAPE,			/* an INT64 vector known when reading: dims holds it, the batch as ONNX_DIM_BATCH */
	ONNX_VALUE_ZEROS,			/* zeros of the shape in dims (ConstantOfShape): a GRU's initial state */
	ONNX_VALUE_TIME_FIRST,		/* a sequence layer's output transposed to [steps, batch, features] */
	ONNX_VALUE_GRU_STATE,		/* a GRU's Y_h [1, batch, units]: the last state, before its first axis goes */
	ONNX_VALUE_GRU_STEPS,		/* a GRU's Y [steps, 1, batch, units]: every step's state */
	/* torch's multi-head attention, time first (onnx_attention.c), in the order it computes them */
	ONNX_VALUE_ATT_PROJ,		/* x W', [L, B, 3E], before the in-projection's bias */
	ONNX_VALUE_ATT_QKV,			/* the in-projection, [L, B, 3E] */
	ONNX_VALUE_ATT_PART,		/* q, k or v (part): [L, B, E] */
	ONNX_VALUE_ATT_HEADS,		/* a part reshaped [L, B * heads, E / heads] */
	ONNX_VALUE_ATT_Q,			/* q, [B * heads, L, d] */
	ONNX_VALUE_ATT_QS,			/* q scaled by 1 / sqrt(d) */
	ONNX_VALUE_ATT_KT,			/* k, [B * heads, d, L] */
	ONNX_VALUE_ATT_V,			/* v, [B * heads, L, d] */
	ONNX_VALUE_ATT_SCORES,		/* q k', [B * heads, L, L] */
	ONNX_VALUE_ATT_PROBS,		/* their softmax over the last axis */
	ONNX_VALUE_ATT_CTX,			/* probs v, [B * heads, L, d] */
	ONNX_VALUE_ATT_CTX_TF,		/* [L, B * heads, d] */
	ONNX_VALUE_ATT_FLAT,		/* [L * B, E] */
	ONNX_VALUE_ATT_OUT_FLAT,	/* the out-projection, [L * B, E] */
	ONNX_VALUE_ATT_OUT_TF		/* [L, B, E]: a Transpose back makes the attention layer */
} OnnxValueKind;

/* An attention layer being read: its input and weights as torch.nn.MultiheadAttention holds them. */
typedef struct OnnxAttention
{
	int			src;			/* the layer whose sequence it attends over */
	NnShape		shape;			/* that sequence, [L, E] */
	int64		heads;			/* 0 until a Reshape says */
	float	   *in_w;			/* in_proj_weight [3E, E] */
	float	   *in_b;			/* in_proj_bias [3E] */
	float	   *out_w;			/* out_proj.weight [E, E] */
	float	   *out_b;			/* out_proj.bias [E] */
} OnnxAttention;

#define ONNX_DIM_BATCH		(-1)
#define ONNX_MAX_SHAPE		8	/* values of a SHAPE, dims of a ZEROS */

typedef struct OnnxValue
{
	const char *name;
	OnnxValueKind kind;
	int			n_dims;			/* SHAPE: its values; ZEROS: its dims */
	int64		dims[ONNX_MAX_SHAPE];
	int			src;			/* the layer whose output it is, -1: the spec's input */
	NnShape		shape;			/* one example */
	/*
	 * A value pgdl has no shape for (a rank-3 input [batch, steps, features],
	 * a Reshape's output) is held flat, in ONNX's order: its dims but the
	 * batch's, until a Flatten; 0 dims: the value is as shape says.
	 */
	int			n_held;
	int64		held[ONNX_MAX_HELD];
	/* a rank-1 value [batch], one number per example: pgdl's flat [batch, 1], for elementwise operators only */
	bool		rank1;
	bool		open_matmul;	/* a MatMul's output: an Add may give its bias */
	OnnxAttention *att;			/* the ONNX_VALUE_ATT_* kinds: the attention, and which of q, k, v (part) */
	int			part;
	bool		closed;			/* a MatMul's output whose bias an Add took: no other node may read it */
	int			uses;			/* nodes that read it */
} OnnxValue;

typedef struct Reader
{
	const Onnx__GraphProto *g;
	int64		opset;
	const PgdlOnnxArgs *args;
	NnSpec	   *spec;
	/* each layer's weights, in pgdl_layer_tensors order, and their lengths */
	const float *tensor[NN_MAX_LAYERS][PGDL_LAYER_MAX_TENSORS];
	int64		length[NN_MAX_LAYERS][PGDL_LAYER_MAX_TENSORS];
	/* Constant nodes read so far: their output names and values */
	const char **const_name;
	const Onnx__TensorProto **const_value;
	int			n_consts;
	/* the values the nodes read so far wrote, the graph's input first */
	OnnxValue  *values;
	int			n_values;
	int			index;			/* of the node being read, for errors */
	const Onnx__NodeProto *node;
	/* the node's data input (its first, or an Add's other than the bias), as onnx_take_input found it */
	OnnxValue  *in;
	const char *value;			/* its name */
	bool	   *consumed;		/* nodes read already: Constants first, then those a pattern took in */
	int			src;			/* the layer the node's output comes from: its input's, or the layer it made */
	NnShape		shape;			/* its shape, one example; a layer's output once add_layer made one */
	int			n_held;
	int64		held[ONNX_MAX_HELD];
	bool		rank1;			/* as OnnxValue's */
	int64		batch;			/* the input's fixed batch size, or 0 when symbolic */
	bool		open_matmul;	/* the node's output is a MatMul's (the value it writes) */
	/* the kind of value the node writes and its dims (onnx_import_seq.c); outputs_done: it wrote them all */
	OnnxValueKind out_kind;
	int			out_n_dims;
	int64		out_dims[ONNX_MAX_SHAPE];
	bool		outputs_done;
	OnnxAttention *out_att;		/* with out_kind an ONNX_VALUE_ATT_* kind */
	int			out_part;
	int			sigmoid_node;	/* node index of the last layer when it is a Sigmoid, else -1 */
	bool		group_softmax;	/* the last layer is a (Log)Softmax over groups of an example (read_softmax) */
	int			norm_state;		/* leading normalization: 0 may come, 1 after Sub, 2 past */
	bool		meta_normalization;
	bool		meta_target;	/* PGDL_ONNX_META_TARGET_NORMALIZATION: the last nodes undo it */
	int			target_state;	/* 0 before, 1 after its Mul, 2 after its Add (the last node) */
	NnLoss		loss;			/* set by a trailing Softmax or LogSoftmax */
	const char *loss_from;		/* PgdlOnnxModel's */
	NnLoss		meta_loss;		/* PGDL_ONNX_META_LOSS's, when it names a loss; else 0 */
} Reader;

/* errors: a node's (naming it and its op_type) or the model's; both ERROR */
extern void onnx_node_error(Reader *r, int code, const char *fmt,...) pg_attribute_printf(3, 4) pg_attribute_noreturn();
extern void onnx_model_error(int code, const char *fmt,...) pg_attribute_printf(2, 3) pg_attribute_noreturn();

#define UNSUPPORTED(r, ...) onnx_node_error((r), ERRCODE_FEATURE_NOT_SUPPORTED, __VA_ARGS__)
#define MALFORMED(r, ...) onnx_node_error((r), ERRCODE_INVALID_PARAMETER_VALUE, __VA_ARGS__)

extern const char *onnx_checked_text(const char *s, const char *what);

/* the node's attributes (onnx_import.c) */
extern const Onnx__AttributeProto *onnx_attr(Reader *r, const char *name, Onnx__AttributeProto__AttributeType type);
extern int64 onnx_attr_int(Reader *r, const char *name, int64 dflt);
extern float onnx_attr_float(Reader *r, const char *name, float dflt);
extern int64 onnx_attr_ints_same(Reader *r, const char *name, int count, int64 dflt);
extern bool onnx_attr_string_is(Reader *r, const char *name, const char *value);
extern int64 onnx_auto_pad(Reader *r, int64 kernel, int64 stride, int64 pads);

/* tensors and constants (onnx_import.c) */
extern void onnx_tensor_check_stored(Reader *r, const Onnx__TensorProto *t, int type, const char *type_name);
extern float *onnx_tensor_floats(Reader *r, const Onnx__TensorProto *t, int64 *count);
extern int64 *onnx_tensor_int64s(Reader *r, const Onnx__TensorProto *t, int64 limit, int64 *count);
extern const Onnx__TensorProto *onnx_find_const(Reader *r, const char *name);
extern const Onnx__TensorProto *onnx_const_input(Reader *r, size_t i, bool optional);
extern float *onnx_const_vector(Reader *r, size_t i, int64 expected, bool broadcast);
extern float onnx_const_scalar(Reader *r, size_t i);

/* layers (onnx_import_layers.c) */
extern NnLayerSpec *onnx_new_layer(Reader *r, NnLayerType type);
extern void onnx_add_layer(Reader *r, const float *w, int64 w_len, const float *b, int64 b_len);
extern void onnx_need_flat(Reader *r);
extern int	onnx_value_dims(Reader *r, int64 dims[ONNX_MAX_HELD + 1]);
extern void onnx_to_groups(Reader *r, int64 rows);
extern void onnx_from_groups(Reader *r, const int64 *dims, int rank);
extern void onnx_read_op(Reader *r, PgdlOnnxOp op);

/* ids, shapes and sequences (onnx_import_seq.c) */
extern bool onnx_value_op(Reader *r, PgdlOnnxOp op);

extern int64 *onnx_int64s_input(Reader *r, size_t i, const char *name, int64 opset, int64 *n);

/* torch's multi-head attention (onnx_attention.c): an ONNX_VALUE_ATT_* value's next node */
extern void onnx_read_attention(Reader *r, PgdlOnnxOp op);
extern void onnx_attention_start(Reader *r);
extern int	onnx_attention_dims(const OnnxValue *v, int64 *dims);
extern int64 onnx_shape_scalar(Reader *r, size_t i);

/* subgraphs that are one layer: gelu, layernorm decomposed (onnx_patterns.c) */
extern bool onnx_read_pattern(Reader *r, PgdlOnnxOp op);

/* values and branches (onnx_import_graph.c) */
extern OnnxValue *onnx_find_value(Reader *r, const char *name);
extern void onnx_take_input(Reader *r, PgdlOnnxOp op);
extern void onnx_put_output(Reader *r);
extern OnnxValue *onnx_put_value(Reader *r, const char *name);
extern bool onnx_read_join(Reader *r, PgdlOnnxOp op);
extern void onnx_read_slice(Reader *r);
extern void onnx_read_gather(Reader *r);

#endif							/* PGDL_ONNX_READER_H */
