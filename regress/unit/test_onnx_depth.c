/*
 * test_onnx_depth.c -- the depth scan of ONNX bytes (src/models/onnx_depth.c), which
 * runs before protobuf-c unpacks: each recursive path of onnx.proto is refused
 * one level past the bound and 200,000 levels deep, and passes at the bound;
 * bytes, strings and unknown fields are stepped over, never descended into;
 * wire data protobuf-c cannot read is refused.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx_depth.h"
#include "unit.h"

typedef struct Bytes
{
	uint8_t    *data;
	size_t		len;
} Bytes;

static size_t
varint(uint8_t *out, uint64_t v)
{
	size_t		n = 0;

	while (v >= 0x80)
	{
		if (out)
			out[n] = (uint8_t) (v | 0x80);
		v >>= 7;
		n++;
	}
	if (out)
		out[n] = (uint8_t) v;
	return n + 1;
}

static const Bytes no_leaf = {NULL, 0};
static int	tag_width = 1;		/* > 1: tags written overlong, padded to this many bytes */

/* A length-delimited field's tag: its bytes, minimal or padded to tag_width. */
static size_t
tag(uint8_t *out, uint32_t field)
{
	uint32_t	v = field << 3 | 2;
	size_t		n = varint(NULL, v);

	if (tag_width <= (int) n)
		return varint(out, v);
	if (out)
	{
		for (int i = 0; i < tag_width - 1; i++)
			out[i] = (uint8_t) ((v >> (7 * i)) & 0x7f) | 0x80;
		out[tag_width - 1] = (uint8_t) (v >> (7 * (tag_width - 1)));
	}
	return tag_width;
}

/*
 * A ModelProto whose messages nest through the fields `outer`, then `levels`
 * more around `cycle`, each length-delimited, the innermost holding `leaf`:
 * sizes inside-out first, then the headers outside-in, in O(levels).
 */
static Bytes
nested(const uint32_t *outer, int n_outer, const uint32_t *cycle, int n_cycle, int levels, Bytes leaf)
{
	int			n = n_outer + levels;
	uint32_t   *field = malloc(sizeof(uint32_t) * (n + 1));
	size_t	   *size = malloc(sizeof(size_t) * (n + 1));
	Bytes		b;
	size_t		at = 0;

	for (int i = 0; i < n; i++)
		field[i] = i < n_outer ? outer[i] : cycle[(i - n_outer) % n_cycle];
	size[n] = leaf.len;
	for (int i = n - 1; i >= 0; i--)
		size[i] = tag(NULL, field[i]) + varint(NULL, size[i + 1]) + size[i + 1];
	b.len = size[0];
	b.data = malloc(b.len + 1);
	for (int i = 0; i < n; i++)
	{
		at += tag(b.data + at, field[i]);
		at += varint(b.data + at, size[i + 1]);
	}
	if (leaf.len)
		memcpy(b.data + at, leaf.data, leaf.len);
	free(field);
	free(size);
	return b;
}

/* ModelProto.graph > GraphProto.input > ValueInfoProto.type: a TypeProto at depth 3 */
static const uint32_t to_type[] = {7, 11, 2};
/* ModelProto.graph > GraphProto.node > NodeProto.attribute: an AttributeProto at depth 3 */
static const uint32_t to_attribute[] = {7, 1, 5};

static const struct
{
	const char *name;
	const uint32_t *outer;
	uint32_t	cycle[3];
	int			n_cycle;
}			paths[] = {
	{"TypeProto.sequence_type.elem_type", to_type, {4, 1}, 2},
	{"TypeProto.map_type.value_type", to_type, {5, 2}, 2},
	{"TypeProto.optional_type.elem_type", to_type, {9, 1}, 2},
	{"AttributeProto.g.node.attribute", to_attribute, {6, 1, 5}, 3},
	{"AttributeProto.graphs.node.attribute", to_attribute, {11, 1, 5}, 3},
};

static PgdlOnnxScan
scan(Bytes b, size_t *where)
{
	size_t		w = SIZE_MAX;
	PgdlOnnxScan r = pgdl_onnx_scan(b.data, b.len, &w);

	if (where)
		*where = w;
	free(b.data);
	return r;
}

UNIT_TEST(onnx_depth_bounds_every_recursive_path)
{
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++)
	{
		int			at_bound = PGDL_ONNX_MAX_DEPTH - 3;
		size_t		where;
		Bytes		deep = nested(paths[p].outer, 3, paths[p].cycle, paths[p].n_cycle, 200000, no_leaf);
		PgdlOnnxScan r;

		CHECK_MSG(deep.len > 600000, "%s: %zu bytes", paths[p].name, deep.len);
		r = scan(deep, &where);
		CHECK_MSG(r == PGDL_ONNX_SCAN_TOO_DEEP, "%s, 200,000 levels: %d", paths[p].name, (int) r);
		/* refused where level 101 opens: 100 headers of at most 4 bytes each before it */
		CHECK_MSG(where >= PGDL_ONNX_MAX_DEPTH * 2 && where <= PGDL_ONNX_MAX_DEPTH * 4,
				  "%s: refused at byte %zu", paths[p].name, where);
		r = scan(nested(paths[p].outer, 3, paths[p].cycle, paths[p].n_cycle, at_bound, no_leaf), NULL);
		CHECK_MSG(r == PGDL_ONNX_SCAN_OK, "%s, %d deep: %d", paths[p].name, PGDL_ONNX_MAX_DEPTH, (int) r);
		r = scan(nested(paths[p].outer, 3, paths[p].cycle, paths[p].n_cycle, at_bound + 1, no_leaf), NULL);
		CHECK_MSG(r == PGDL_ONNX_SCAN_TOO_DEEP, "%s, %d deep: %d", paths[p].name, PGDL_ONNX_MAX_DEPTH + 1, (int) r);
	}
}

/* Deep nesting inside a bytes field, a string or an unknown field is data, not messages. */
UNIT_TEST(onnx_depth_steps_over_bytes_and_unknown_fields)
{
	static const uint32_t seq[] = {4, 1};
	/* graph > initializer > TensorProto.raw_data (9); graph > name (2); ModelProto field 99 */
	static const uint32_t raw_data[] = {7, 5, 9};
	static const uint32_t name[] = {7, 2};
	static const uint32_t unknown[] = {99};
	static const uint32_t unknown_in_type[] = {7, 11, 2, 3};	/* TypeProto 3: no such field */
	Bytes		inner = nested(NULL, 0, seq, 2, 5000, no_leaf);

	CHECK(scan(nested(raw_data, 3, NULL, 1, 0, inner), NULL) == PGDL_ONNX_SCAN_OK);
	CHECK(scan(nested(name, 2, NULL, 1, 0, inner), NULL) == PGDL_ONNX_SCAN_OK);
	CHECK(scan(nested(unknown, 1, NULL, 1, 0, inner), NULL) == PGDL_ONNX_SCAN_OK);
	CHECK(scan(nested(unknown_in_type, 4, NULL, 1, 0, inner), NULL) == PGDL_ONNX_SCAN_OK);
	/* the same bytes where a message belongs are messages: ModelProto's 5000 levels start at depth 0 */
	CHECK(scan(inner, NULL) == PGDL_ONNX_SCAN_OK);	/* TypeProto's fields 4 and 1 mean nothing to ModelProto */
	inner = nested(NULL, 0, seq, 2, 5000, no_leaf);
	CHECK(scan(nested(to_type, 3, NULL, 1, 0, inner), NULL) == PGDL_ONNX_SCAN_TOO_DEEP);
	free(inner.data);
	/* a message field of another wire type is protobuf-c's to refuse: nothing to descend into */
	{
		uint8_t		graph_as_varint[] = {7 << 3 | 0, 0x05, 8 << 3 | 5, 1, 2, 3, 4, 5 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8};

		CHECK(scan((Bytes) {memcpy(malloc(sizeof(graph_as_varint)), graph_as_varint, sizeof(graph_as_varint)),
							sizeof(graph_as_varint)}, NULL) == PGDL_ONNX_SCAN_OK);
	}
	CHECK(pgdl_onnx_scan((const uint8_t *) "", 0, &(size_t) {0}) == PGDL_ONNX_SCAN_OK);
}

/* Wire data protobuf-c cannot read is refused, where it goes wrong. */
UNIT_TEST(onnx_depth_refuses_what_protobuf_c_cannot_read)
{
	static const struct
	{
		const char *what;
		uint8_t		bytes[12];
		size_t		len;
		size_t		where;
	}			bad[] = {
		{"field number 0", {0x00, 0x00}, 2, 0},
		{"start group", {7 << 3 | 3}, 1, 0},
		{"end group", {7 << 3 | 4}, 1, 0},
		{"wire type 6", {7 << 3 | 6, 0}, 2, 0},
		{"wire type 7", {7 << 3 | 7, 0}, 2, 0},
		{"a tag of 6 bytes", {0xBA, 0x80, 0x80, 0x80, 0x80, 0x00}, 6, 0},
		{"a tag cut short", {0x08, 0x01, 0xBA}, 3, 2},
		{"an unterminated varint", {0x08, 0x80, 0x80}, 3, 0},
		{"a varint of 11 bytes", {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 12, 0},
		{"a fixed64 cut short", {0x09, 1, 2, 3}, 4, 0},
		{"a fixed32 cut short", {0x0D, 1, 2}, 3, 0},
		{"a length of 6 bytes", {0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 7, 0},
		{"a length past INT_MAX", {0x12, 0x80, 0x80, 0x80, 0x80, 0x08}, 6, 0},
		{"a graph longer than its model", {0x3A, 0x05, 0x0A, 0x00}, 4, 0},
		{"a node longer than its graph", {0x3A, 0x02, 0x0A, 0x05, 0x0A, 0x00, 0x00}, 7, 2},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		size_t		where = SIZE_MAX;
		PgdlOnnxScan r = pgdl_onnx_scan(bad[i].bytes, bad[i].len, &where);

		CHECK_MSG(r == PGDL_ONNX_SCAN_MALFORMED && where == bad[i].where,
				  "%s: %d at byte %zu", bad[i].what, (int) r, where);
	}
	/* a chain of 50 TypeProtos whose innermost length overruns: found 50 levels down */
	{
		static const uint32_t seq[] = {4, 1};
		uint8_t		overrun[] = {4 << 3 | 2, 0x7F};
		Bytes		b = nested(to_type, 3, seq, 2, 50, (Bytes) {overrun, sizeof(overrun)});
		size_t		where;

		CHECK(scan(b, &where) == PGDL_ONNX_SCAN_MALFORMED);
	}
}

/* Tags are read as protobuf-c reads them: an overlong encoding still names its field. */
UNIT_TEST(onnx_depth_reads_overlong_tags)
{
	static const uint32_t seq[] = {4, 1};

	tag_width = 3;
	CHECK(scan(nested(to_type, 3, seq, 2, PGDL_ONNX_MAX_DEPTH - 3, no_leaf), NULL) == PGDL_ONNX_SCAN_OK);
	CHECK(scan(nested(to_type, 3, seq, 2, PGDL_ONNX_MAX_DEPTH - 2, no_leaf), NULL) == PGDL_ONNX_SCAN_TOO_DEEP);
	tag_width = 5;
	CHECK(scan(nested(to_type, 3, seq, 2, 200000, no_leaf), NULL) == PGDL_ONNX_SCAN_TOO_DEEP);
	tag_width = 1;
}

/* The table: 21 messages of unique names, fields of unique numbers naming messages of the table. */
UNIT_TEST(onnx_depth_table_is_consistent)
{
	int			n = pgdl_onnx_scan_n_messages();
	int			type = -1;

	CHECK(n == 21);
	CHECK(strcmp(pgdl_onnx_scan_message_name(0), "onnx.ModelProto") == 0);
	CHECK(pgdl_onnx_scan_message_name(n) == NULL && pgdl_onnx_scan_message_name(-1) == NULL);
	for (int m = 0; m < n; m++)
	{
		int			n_fields = 0;

		if (strcmp(pgdl_onnx_scan_message_name(m), "onnx.TypeProto") == 0)
			type = m;
		for (int o = 0; o < m; o++)
			CHECK(strcmp(pgdl_onnx_scan_message_name(m), pgdl_onnx_scan_message_name(o)) != 0);
		for (uint32_t f = 0; f < 64; f++)
		{
			int			sub = pgdl_onnx_scan_field_message(m, f);

			CHECK(sub >= -1 && sub < n && (f != 0 || sub == -1));
			n_fields += sub >= 0;
		}
		/* every field number of onnx.proto's is below 64: each listed once */
		CHECK_MSG(n_fields == pgdl_onnx_scan_n_fields(m), "%s", pgdl_onnx_scan_message_name(m));
	}
	CHECK(type >= 0 && pgdl_onnx_scan_n_fields(type) == 5);
	CHECK(strcmp(pgdl_onnx_scan_message_name(pgdl_onnx_scan_field_message(0, 7)), "onnx.GraphProto") == 0);
	CHECK(pgdl_onnx_scan_field_message(0, 2) == -1);	/* producer_name */
}

/* `count` copies of field `number`, each an empty message, then `inside` */
static Bytes
repeated_empty(uint32_t number, int count, Bytes inside)
{
	uint8_t		key[10];		/* a varint of up to 64 bits */
	size_t		n = varint(key, number << 3 | 2);
	Bytes		b;

	b.len = (n + 1) * count + inside.len;
	b.data = malloc(b.len + 1);	/* + 1: never malloc(0) */
	for (int i = 0; i < count; i++)
	{
		memcpy(b.data + (n + 1) * i, key, n);
		b.data[(n + 1) * i + n] = 0;	/* the empty message's length */
	}
	if (inside.len)
		memcpy(b.data + (n + 1) * count, inside.data, inside.len);
	return b;
}

/*
 * A singular message field that comes again is merged by protobuf-c (copies, N^2 of them, uncancellable):
 * at most PGDL_ONNX_MAX_MERGES of it in one message; a repeated field, any number; the count is per message.
 */
UNIT_TEST(onnx_depth_bounds_merges_of_a_singular_field)
{
	size_t		where = 0;
	Bytes		graphs = repeated_empty(7, PGDL_ONNX_MAX_MERGES, no_leaf);	/* ModelProto.graph */
	Bytes		too_many = repeated_empty(7, PGDL_ONNX_MAX_MERGES + 1, no_leaf);
	Bytes		opsets = repeated_empty(8, 100000, no_leaf);	/* ModelProto.opset_import: repeated */

	CHECK(scan(graphs, &where) == PGDL_ONNX_SCAN_OK);
	CHECK(scan(too_many, &where) == PGDL_ONNX_SCAN_MERGES);
	CHECK(where == 2 * PGDL_ONNX_MAX_MERGES);
	CHECK(scan(opsets, &where) == PGDL_ONNX_SCAN_OK);
	CHECK(pgdl_onnx_scan_field_repeated(0, 8) && !pgdl_onnx_scan_field_repeated(0, 7));
	CHECK(!pgdl_onnx_scan_field_repeated(0, 2));	/* not a message field */
	/* the bound is per message: a node of three attributes, each with its g (singular) the most times */
	{
		static const uint32_t to_node[] = {7, 1};
		Bytes		attribute = repeated_empty(6, PGDL_ONNX_MAX_MERGES, no_leaf);	/* AttributeProto.g */
		uint8_t		head[16];
		size_t		h = varint(head, 5 << 3 | 2);	/* NodeProto.attribute */
		Bytes		one;
		Bytes		three;

		h += varint(head + h, attribute.len);
		one.len = h + attribute.len;
		one.data = malloc(one.len);
		memcpy(one.data, head, h);
		memcpy(one.data + h, attribute.data, attribute.len);
		three.len = one.len * 3;
		three.data = malloc(three.len);
		for (int i = 0; i < 3; i++)
			memcpy(three.data + one.len * i, one.data, one.len);
		CHECK(scan(nested(to_node, 2, NULL, 1, 0, three), NULL) == PGDL_ONNX_SCAN_OK);
		free(attribute.data);
		free(one.data);
		free(three.data);
	}
}
