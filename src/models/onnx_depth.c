/*
 * onnx_depth.c -- the depth scan of ONNX bytes: protobuf-c unpacks a message
 * field by calling itself, with no bound on the depth, so a file of a few
 * megabytes that nests TypeProto in TypeProto 200,000 times ends the backend
 * with SIGSEGV.  The scan walks the bytes first, with a stack of its own of
 * fixed size, and refuses nesting beyond PGDL_ONNX_MAX_DEPTH.
 *
 * It descends exactly where protobuf-c does: into the fields of onnx.proto
 * whose type is a message (the table below), when their wire type is
 * length-delimited.  It reads the wire format as protobuf-c 1.4's
 * protobuf_c_message_unpack does (tags of at most 5 bytes, the same 32-bit
 * field number, varints of at most 10, length prefixes of at most 5 and at
 * most INT_MAX), so that each message it steps into is the one protobuf-c
 * unpacks, over the same bytes.  Whatever it cannot walk, protobuf-c refuses
 * as well (it scans a message's fields before unpacking any of them), so
 * refusing it here costs no valid file and leaves nothing unwalked behind.
 *
 * A singular message field that comes again is merged into the first by
 * protobuf-c, which copies what the two hold: N of them in one message cost
 * about N^2 copies (40,000 took 4.8 s, which no cancel stops: protobuf-c checks
 * for none).  No tool writes one twice; the scan refuses more than
 * PGDL_ONNX_MAX_MERGES in one message, which keeps the merges' cost within a
 * few times the bytes.
 *
 * onnx_import.c checks this table against protoc-c's descriptors, once per
 * backend: a newer onnx.proto with a message field this table lacks is a
 * build that refuses every import, not an unbounded one.
 */
#include <limits.h>
#include <string.h>

#include "models/onnx_depth.h"

enum
{
	M_MODEL,
	M_GRAPH,
	M_NODE,
	M_ATTRIBUTE,
	M_TENSOR,
	M_SEGMENT,
	M_SPARSE_TENSOR,
	M_VALUE_INFO,
	M_TYPE,
	M_TYPE_TENSOR,
	M_TYPE_SEQUENCE,
	M_TYPE_MAP,
	M_TYPE_OPTIONAL,
	M_TYPE_SPARSE_TENSOR,
	M_SHAPE,
	M_DIMENSION,
	M_FUNCTION,
	M_TRAINING_INFO,
	M_STRING_STRING,
	M_OPSET_ID,
	M_TENSOR_ANNOTATION,
	N_MESSAGES
};

#define SINGULAR		0
#define REPEATED		1

typedef struct MessageField
{
	uint32_t	number;
	uint8_t		type;			/* an M_ */
	uint8_t		repeated;		/* REPEATED, or SINGULAR: a second one is merged into the first */
} MessageField;

typedef struct Message
{
	const char *name;
	MessageField fields[8];		/* those that hold a message; the rest is { 0 } */
} Message;

/* /usr/include/onnx/onnx.proto (IR version 8): each message's fields of a message type. */
static const Message messages[N_MESSAGES] = {
	[M_MODEL] = {"onnx.ModelProto", {{7, M_GRAPH, SINGULAR}, {8, M_OPSET_ID, REPEATED},
		{14, M_STRING_STRING, REPEATED}, {20, M_TRAINING_INFO, REPEATED}, {25, M_FUNCTION, REPEATED}}},
	[M_GRAPH] = {"onnx.GraphProto", {{1, M_NODE, REPEATED}, {5, M_TENSOR, REPEATED},
		{11, M_VALUE_INFO, REPEATED}, {12, M_VALUE_INFO, REPEATED}, {13, M_VALUE_INFO, REPEATED},
		{14, M_TENSOR_ANNOTATION, REPEATED}, {15, M_SPARSE_TENSOR, REPEATED}}},
	[M_NODE] = {"onnx.NodeProto", {{5, M_ATTRIBUTE, REPEATED}}},
	[M_ATTRIBUTE] = {"onnx.AttributeProto", {{5, M_TENSOR, SINGULAR}, {6, M_GRAPH, SINGULAR},
		{10, M_TENSOR, REPEATED}, {11, M_GRAPH, REPEATED}, {14, M_TYPE, SINGULAR}, {15, M_TYPE, REPEATED},
		{22, M_SPARSE_TENSOR, SINGULAR}, {23, M_SPARSE_TENSOR, REPEATED}}},
	[M_TENSOR] = {"onnx.TensorProto", {{3, M_SEGMENT, SINGULAR}, {13, M_STRING_STRING, REPEATED}}},
	[M_SEGMENT] = {"onnx.TensorProto.Segment"},
	[M_SPARSE_TENSOR] = {"onnx.SparseTensorProto", {{1, M_TENSOR, SINGULAR}, {2, M_TENSOR, SINGULAR}}},
	[M_VALUE_INFO] = {"onnx.ValueInfoProto", {{2, M_TYPE, SINGULAR}}},
	[M_TYPE] = {"onnx.TypeProto", {{1, M_TYPE_TENSOR, SINGULAR}, {4, M_TYPE_SEQUENCE, SINGULAR},
		{5, M_TYPE_MAP, SINGULAR}, {8, M_TYPE_SPARSE_TENSOR, SINGULAR}, {9, M_TYPE_OPTIONAL, SINGULAR}}},
	[M_TYPE_TENSOR] = {"onnx.TypeProto.Tensor", {{2, M_SHAPE, SINGULAR}}},
	[M_TYPE_SEQUENCE] = {"onnx.TypeProto.Sequence", {{1, M_TYPE, SINGULAR}}},
	[M_TYPE_MAP] = {"onnx.TypeProto.Map", {{2, M_TYPE, SINGULAR}}},
	[M_TYPE_OPTIONAL] = {"onnx.TypeProto.Optional", {{1, M_TYPE, SINGULAR}}},
	[M_TYPE_SPARSE_TENSOR] = {"onnx.TypeProto.SparseTensor", {{2, M_SHAPE, SINGULAR}}},
	[M_SHAPE] = {"onnx.TensorShapeProto", {{1, M_DIMENSION, REPEATED}}},
	[M_DIMENSION] = {"onnx.TensorShapeProto.Dimension"},
	[M_FUNCTION] = {"onnx.FunctionProto", {{7, M_NODE, REPEATED}, {9, M_OPSET_ID, REPEATED}}},
	[M_TRAINING_INFO] = {"onnx.TrainingInfoProto", {{1, M_GRAPH, SINGULAR}, {2, M_GRAPH, SINGULAR},
		{3, M_STRING_STRING, REPEATED}, {4, M_STRING_STRING, REPEATED}}},
	[M_STRING_STRING] = {"onnx.StringStringEntryProto"},
	[M_OPSET_ID] = {"onnx.OperatorSetIdProto"},
	[M_TENSOR_ANNOTATION] = {"onnx.TensorAnnotation", {{2, M_STRING_STRING, REPEATED}}},
};

#define WIRE_VARINT		0
#define WIRE_64BIT		1
#define WIRE_LENGTH		2
#define WIRE_32BIT		5

int
pgdl_onnx_scan_n_messages(void)
{
	return N_MESSAGES;
}

const char *
pgdl_onnx_scan_message_name(int message)
{
	return message >= 0 && message < N_MESSAGES ? messages[message].name : NULL;
}

int
pgdl_onnx_scan_n_fields(int message)
{
	int			n = 0;

	while (n < 8 && messages[message].fields[n].number != 0)
		n++;
	return n;
}

/* The index of a message field in messages[message].fields; -1 for any other field. */
static int
field_index(int message, uint32_t field)
{
	const MessageField *f = messages[message].fields;

	for (int i = 0; i < 8 && f[i].number != 0; i++)
		if (f[i].number == field)
			return i;
	return -1;
}

int
pgdl_onnx_scan_field_message(int message, uint32_t field)
{
	int			i = field_index(message, field);

	return i < 0 ? -1 : messages[message].fields[i].type;
}

bool
pgdl_onnx_scan_field_repeated(int message, uint32_t field)
{
	int			i = field_index(message, field);

	return i >= 0 && messages[message].fields[i].repeated == REPEATED;
}

/* A field's tag, as protobuf-c's parse_tag_and_wiretype reads it: its length, or 0 when malformed. */
static size_t
read_tag(const uint8_t *at, size_t rem, uint32_t *number, int *wire)
{
	size_t		max = rem < 5 ? rem : 5;
	uint32_t	n = (at[0] & 0x7f) >> 3;
	unsigned	shift = 4;

	if ((at[0] & 0xf8) == 0)	/* field number 0 */
		return 0;
	*wire = at[0] & 7;
	if ((at[0] & 0x80) == 0)
	{
		*number = n;
		return 1;
	}
	for (size_t i = 1; i < max; i++)
	{
		/* bits past 32 drop, as they do in protobuf-c's uint32_t */
		n |= (uint32_t) (at[i] & 0x7f) << shift;
		shift += 7;
		if ((at[i] & 0x80) == 0)
		{
			*number = n;
			return i + 1;
		}
	}
	return 0;
}

/*
 * The length of a field's value after its tag, prefix included, as protobuf-c
 * scans it; 0 when malformed.  *prefix: a length-delimited value's prefix.
 */
static size_t
value_length(const uint8_t *at, size_t rem, int wire, size_t *prefix)
{
	size_t		max;
	size_t		len = 0;

	*prefix = 0;
	switch (wire)
	{
		case WIRE_VARINT:
			max = rem < 10 ? rem : 10;
			for (size_t i = 0; i < max; i++)
				if ((at[i] & 0x80) == 0)
					return i + 1;
			return 0;
		case WIRE_64BIT:
			return rem >= 8 ? 8 : 0;
		case WIRE_32BIT:
			return rem >= 4 ? 4 : 0;
		case WIRE_LENGTH:
			max = rem < 5 ? rem : 5;
			for (size_t i = 0; i < max; i++)
			{
				len |= ((size_t) at[i] & 0x7f) << (7 * i);
				if ((at[i] & 0x80) == 0)
				{
					if (len > INT_MAX || i + 1 + len > rem)
						return 0;
					*prefix = i + 1;
					return i + 1 + len;
				}
			}
			return 0;
		default:				/* groups (3, 4) and 6, 7: protobuf-c takes none */
			return 0;
	}
}

PgdlOnnxScan
pgdl_onnx_scan(const uint8_t *data, size_t len, size_t *where)
{
	/* the messages open around the cursor: [0] is the ModelProto */
	struct
	{
		size_t		end;
		int			type;
		uint8_t		seen[8];	/* how often each singular message field came */
	}			open[PGDL_ONNX_MAX_DEPTH + 1];
	int			depth = 0;
	size_t		at = 0;

	open[0].end = len;
	open[0].type = M_MODEL;
	memset(open[0].seen, 0, sizeof(open[0].seen));
	for (;;)
	{
		size_t		rem = open[depth].end - at;
		size_t		tag_len,
					value_len,
					prefix;
		uint32_t	number = 0;
		int			wire = 0;
		int			index;
		const MessageField *field;

		if (rem == 0)
		{
			if (depth == 0)
				return PGDL_ONNX_SCAN_OK;
			depth--;
			continue;
		}
		*where = at;
		tag_len = read_tag(data + at, rem, &number, &wire);
		if (tag_len == 0)
			return PGDL_ONNX_SCAN_MALFORMED;
		at += tag_len;
		value_len = value_length(data + at, rem - tag_len, wire, &prefix);
		if (value_len == 0)
			return PGDL_ONNX_SCAN_MALFORMED;
		index = field_index(open[depth].type, number);
		/* a message field of another wire type protobuf-c refuses, without descending */
		if (index < 0 || wire != WIRE_LENGTH)
		{
			at += value_len;
			continue;
		}
		field = &messages[open[depth].type].fields[index];
		if (field->repeated == SINGULAR && ++open[depth].seen[index] > PGDL_ONNX_MAX_MERGES)
			return PGDL_ONNX_SCAN_MERGES;
		if (depth == PGDL_ONNX_MAX_DEPTH)
			return PGDL_ONNX_SCAN_TOO_DEEP;
		depth++;
		open[depth].end = at + value_len;
		open[depth].type = field->type;
		memset(open[depth].seen, 0, sizeof(open[depth].seen));
		at += prefix;
	}
}
