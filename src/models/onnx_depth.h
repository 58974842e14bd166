/*
 * onnx_depth.h -- the depth scan of ONNX bytes (onnx_depth.c): how deeply
 * protobuf-c would nest its unpacking of a ModelProto, found before it runs.
 *
 * No PostgreSQL header: the unit tests and the fuzz target call the scan as the
 * server does.
 */
#ifndef PGDL_ONNX_DEPTH_H
#define PGDL_ONNX_DEPTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The most messages nested below the ModelProto.  protobuf's own parsers (C++,
 * and upb under Python's onnx package) stop at 100 too, so every file ONNX
 * Runtime or onnx.load can read passes.  A plain model nests 6 deep
 * (GraphProto > ValueInfoProto > TypeProto > Tensor > TensorShapeProto >
 * Dimension); each subgraph of an If or Loop adds 3 (NodeProto >
 * AttributeProto > GraphProto), so 100 leaves room for 30 subgraphs one inside
 * another.  protobuf-c takes some 1.7 KB of stack a level: 100 levels are
 * under 200 KB, the 8 MB of a backend's stack about 5,000.
 */
#define PGDL_ONNX_MAX_DEPTH		100
/* occurrences of one singular message field in one message: protobuf-c merges each into the last */
#define PGDL_ONNX_MAX_MERGES	4

typedef enum PgdlOnnxScan
{
	PGDL_ONNX_SCAN_OK,
	PGDL_ONNX_SCAN_TOO_DEEP,	/* messages nested beyond PGDL_ONNX_MAX_DEPTH */
	PGDL_ONNX_SCAN_MALFORMED,	/* wire data protobuf-c refuses too */
	PGDL_ONNX_SCAN_MERGES		/* a singular message field more than PGDL_ONNX_MAX_MERGES times in one message */
} PgdlOnnxScan;

/*
 * Walks the bytes as protobuf-c unpacks them into an onnx.ModelProto, without
 * recursion, into every field of onnx.proto that holds a message; strings,
 * bytes (raw_data) and unknown fields are stepped over.  On a refusal, *where
 * is the byte offset at fault.
 */
extern PgdlOnnxScan pgdl_onnx_scan(const uint8_t *data, size_t len, size_t *where);

/*
 * The scan's copy of onnx.proto, for checking it against the descriptors that
 * protoc-c generated: its messages by full name ("onnx.ModelProto", index 0),
 * and for a message and field number, the index of the field's message type,
 * or -1 where the field holds no message.
 */
extern int	pgdl_onnx_scan_n_messages(void);
extern const char *pgdl_onnx_scan_message_name(int message);
extern int	pgdl_onnx_scan_n_fields(int message);
extern int	pgdl_onnx_scan_field_message(int message, uint32_t field);
extern bool pgdl_onnx_scan_field_repeated(int message, uint32_t field);

#endif							/* PGDL_ONNX_DEPTH_H */
