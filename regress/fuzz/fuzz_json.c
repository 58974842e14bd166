/*
 * fuzz_json.c -- a stand-in for PostgreSQL's jsonb, enough for spec_json.c:
 * JSON text in (as jsonb_in takes it, after the server has checked it is
 * UTF-8), the container lookups and the iterator out, and JsonbValueToJsonb
 * for what pushJsonbValue (fuzz_jsonb_build.c) builds, with jsonb's semantics
 * (see fuzz_pg.h).  Numbers are fuzz_numeric.c's.  Containers are not jsonb's
 * on-disk format: a JsonbContainer here is its header (count and flags, so the
 * JsonContainer* macros work) and the index of a node.
 * Not covered: searching an array (findJsonbValueFromContainer with
 * JB_FARRAY aborts), datetime values, jsonb's size limits on a document.
 */
#include "postgres.h"

#include <limits.h>
#include <stdio.h>

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "fuzz_pg.h"

#define MAX_DEPTH	64			/* deeper documents are refused, as stack depth would */

typedef struct FakeContainer
{
	uint32		header;
	uint32		node;
} FakeContainer;

typedef struct FakeJsonb
{
	int32		vl_len_;
	FakeContainer root;
} FakeJsonb;

typedef struct JNode
{
	enum jbvType type;			/* jbvNull, jbvString, jbvNumeric, jbvBool, jbvArray, jbvObject */
	char	   *str;			/* string */
	int			len;
	bool		boolean;
	Numeric		num;
	FakeContainer *cont;		/* arrays and objects */
	uint32	   *kids;			/* array: elements; object: key, value, key, ... sorted, unique */
	int			n;				/* elements or pairs */
} JNode;

/* Every node parsed since fuzz_jsonb_reset (malloc'd; what they point to is in the arena). */
static JNode *nodes;
static int	n_nodes,
			cap_nodes;

typedef struct Parser
{
	const char *p;
	const char *end;
	int			depth;
} Parser;

static int	parse_value(Parser *ps);

static int
new_node(enum jbvType type)
{
	if (n_nodes == cap_nodes)
	{
		cap_nodes = cap_nodes ? 2 * cap_nodes : 256;
		nodes = realloc(nodes, cap_nodes * sizeof(JNode));
		if (nodes == NULL)
			abort();
	}
	memset(&nodes[n_nodes], 0, sizeof(JNode));
	nodes[n_nodes].type = type;
	return n_nodes++;
}

static void
skip_space(Parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool
literal(Parser *ps, const char *word)
{
	size_t		len = strlen(word);

	if ((size_t) (ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0)
		return false;
	ps->p += len;
	return true;
}

static int
hex4(Parser *ps)
{
	int			v = 0;

	if (ps->end - ps->p < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		char		c = *ps->p++;

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static int
put_utf8(char *out, unsigned int cp)
{
	if (cp < 0x80)
		return out[0] = (char) cp, 1;
	if (cp < 0x800)
		return out[0] = (char) (0xC0 | cp >> 6), out[1] = (char) (0x80 | (cp & 0x3F)), 2;
	if (cp < 0x10000)
		return out[0] = (char) (0xE0 | cp >> 12), out[1] = (char) (0x80 | ((cp >> 6) & 0x3F)),
			out[2] = (char) (0x80 | (cp & 0x3F)), 3;
	out[0] = (char) (0xF0 | cp >> 18);
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

/* A \u escape after the backslash and 'u'; jsonb refuses \u0000 and lone surrogates. */
static int
unicode_escape(Parser *ps, char *out)
{
	int			cp = hex4(ps);

	if (cp <= 0)
		return -1;
	if (cp >= 0xDC00 && cp <= 0xDFFF)
		return -1;
	if (cp >= 0xD800 && cp <= 0xDBFF)
	{
		int			lo;

		if (!literal(ps, "\\u") || (lo = hex4(ps)) < 0xDC00 || lo > 0xDFFF)
			return -1;
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	}
	return put_utf8(out, (unsigned int) cp);
}

static int
parse_string(Parser *ps)
{
	const char *start = ++ps->p;	/* after the quote */
	char	   *out = palloc(ps->end - start + 1);	/* escapes never grow the text */
	int			len = 0,
				node;

	for (;;)
	{
		unsigned char c;

		if (ps->p >= ps->end)
			return -1;
		c = (unsigned char) *ps->p++;
		if (c == '"')
			break;
		if (c < 0x20)
			return -1;
		if (c != '\\')
		{
			out[len++] = (char) c;
			continue;
		}
		if (ps->p >= ps->end)
			return -1;
		switch (*ps->p++)
		{
			case '"': out[len++] = '"'; break;
			case '\\': out[len++] = '\\'; break;
			case '/': out[len++] = '/'; break;
			case 'b': out[len++] = '\b'; break;
			case 'f': out[len++] = '\f'; break;
			case 'n': out[len++] = '\n'; break;
			case 'r': out[len++] = '\r'; break;
			case 't': out[len++] = '\t'; break;
			case 'u':
				{
					int			k = unicode_escape(ps, out + len);

					if (k < 0)
						return -1;
					len += k;
					break;
				}
			default:
				return -1;
		}
	}
	out[len] = '\0';
	node = new_node(jbvString);
	nodes[node].str = out;
	nodes[node].len = len;
	return node;
}

static bool
digits(Parser *ps)
{
	const char *start = ps->p;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		ps->p++;
	return ps->p > start;
}

/* JSON's number grammar; the value is numeric's (fuzz_numeric.c). */
static int
parse_number(Parser *ps)
{
	const char *start = ps->p;
	int			node;

	if (*ps->p == '-')
		ps->p++;
	if (ps->p < ps->end && *ps->p == '0')
		ps->p++;
	else if (!digits(ps))
		return -1;
	if (ps->p < ps->end && *ps->p == '.')
	{
		ps->p++;
		if (!digits(ps))
			return -1;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E'))
	{
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digits(ps))
			return -1;
	}
	node = new_node(jbvNumeric);
	/* JSON's numbers are numeric's syntax; jsonb_in refuses those numeric cannot hold */
	nodes[node].num = fuzz_numeric_parse(start, ps->p - start);
	return nodes[node].num != NULL ? node : -1;
}

static int
container_node(enum jbvType type, uint32 *kids, int n)
{
	int			node = new_node(type);

	nodes[node].kids = kids;
	nodes[node].n = n;
	nodes[node].cont = palloc(sizeof(FakeContainer));
	nodes[node].cont->header = (uint32) n | (type == jbvObject ? JB_FOBJECT : JB_FARRAY);
	nodes[node].cont->node = (uint32) node;
	return node;
}

static int
parse_array(Parser *ps)
{
	uint32	   *kids = NULL;
	int			n = 0,
				cap = 0;

	ps->p++;
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == ']')
	{
		ps->p++;
		return container_node(jbvArray, NULL, 0);
	}
	for (;;)
	{
		int			v = parse_value(ps);

		if (v < 0)
			return -1;
		if (n == cap)
		{
			cap = cap ? 2 * cap : 8;
			kids = kids ? repalloc(kids, cap * sizeof(uint32)) : palloc(cap * sizeof(uint32));
		}
		kids[n++] = (uint32) v;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',')
			ps->p++;
		else if (ps->p < ps->end && *ps->p == ']')
			break;
		else
			return -1;
	}
	ps->p++;
	return container_node(jbvArray, kids, n);
}

typedef struct Pair
{
	uint32		key,
				value,
				order;
} Pair;

/* jsonb's key order: shorter first, then bytewise; equal keys in input order. */
static int
pair_cmp(const void *a, const void *b)
{
	const Pair *pa = a,
			   *pb = b;
	const JNode *ka = &nodes[pa->key],
			   *kb = &nodes[pb->key];
	int			c;

	if (ka->len != kb->len)
		return ka->len < kb->len ? -1 : 1;
	c = memcmp(ka->str, kb->str, ka->len);
	if (c != 0)
		return c;
	return pa->order < pb->order ? -1 : pa->order > pb->order;
}

static int
object_node(Pair *pairs, int n)
{
	uint32	   *kids = palloc(Max(n, 1) * 2 * sizeof(uint32));
	int			unique = 0;

	qsort(pairs, n, sizeof(Pair), pair_cmp);
	for (int i = 0; i < n; i++)
	{
		/* the last of equal keys wins */
		if (i + 1 < n && nodes[pairs[i].key].len == nodes[pairs[i + 1].key].len &&
			memcmp(nodes[pairs[i].key].str, nodes[pairs[i + 1].key].str, nodes[pairs[i].key].len) == 0)
			continue;
		kids[2 * unique] = pairs[i].key;
		kids[2 * unique + 1] = pairs[i].value;
		unique++;
	}
	return container_node(jbvObject, kids, unique);
}

static int
parse_object(Parser *ps)
{
	Pair	   *pairs = NULL;
	int			n = 0,
				cap = 0;

	ps->p++;
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == '}')
	{
		ps->p++;
		return object_node(NULL, 0);
	}
	for (;;)
	{
		int			k,
					v;

		skip_space(ps);
		if (ps->p >= ps->end || *ps->p != '"' || (k = parse_string(ps)) < 0)
			return -1;
		skip_space(ps);
		if (ps->p >= ps->end || *ps->p++ != ':')
			return -1;
		if ((v = parse_value(ps)) < 0)
			return -1;
		if (n == cap)
		{
			cap = cap ? 2 * cap : 8;
			pairs = pairs ? repalloc(pairs, cap * sizeof(Pair)) : palloc(cap * sizeof(Pair));
		}
		pairs[n].key = (uint32) k;
		pairs[n].value = (uint32) v;
		pairs[n].order = (uint32) n;
		n++;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',')
			ps->p++;
		else if (ps->p < ps->end && *ps->p == '}')
			break;
		else
			return -1;
	}
	ps->p++;
	return object_node(pairs, n);
}

static int
parse_value(Parser *ps)
{
	int			node = -1;

	skip_space(ps);
	if (ps->p >= ps->end || ++ps->depth > MAX_DEPTH)
		return -1;
	switch (*ps->p)
	{
		case '{':
			node = parse_object(ps);
			break;
		case '[':
			node = parse_array(ps);
			break;
		case '"':
			node = parse_string(ps);
			break;
		case 't':
		case 'f':
			{
				bool		value = *ps->p == 't';

				if (literal(ps, value ? "true" : "false"))
				{
					node = new_node(jbvBool);
					nodes[node].boolean = value;
				}
				break;
			}
		case 'n':
			if (literal(ps, "null"))
				node = new_node(jbvNull);
			break;
		default:
			if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
				node = parse_number(ps);
			break;
	}
	ps->depth--;
	return node;
}

/* The jsonb whose root is node root: a scalar becomes a one-element raw-scalar array. */
static Jsonb *
jsonb_of(int root)
{
	FakeJsonb  *jb;

	if (nodes[root].type != jbvArray && nodes[root].type != jbvObject)
	{
		uint32	   *kids = palloc(sizeof(uint32));

		kids[0] = (uint32) root;
		root = container_node(jbvArray, kids, 1);
		nodes[root].cont->header |= JB_FSCALAR;
	}
	jb = palloc(sizeof(FakeJsonb));
	SET_VARSIZE(jb, sizeof(FakeJsonb));
	jb->root = *nodes[root].cont;
	return (Jsonb *) jb;
}

Jsonb *
fuzz_jsonb_parse(const char *text, size_t len)
{
	Parser		ps = {text, text + len, 0};
	int			root;

	/* the server checks text against the encoding (UTF-8 here) before any input function sees it */
	if (len > INT_MAX || pg_encoding_verifymbstr(PG_UTF8, text, (int) len) != (int) len)
		return NULL;
	root = parse_value(&ps);
	skip_space(&ps);
	if (root < 0 || ps.p != ps.end)
		return NULL;
	return jsonb_of(root);
}

void
fuzz_jsonb_reset(void)
{
	n_nodes = 0;
}

/* ---- what spec_json.c calls ---- */

static JNode *
container(JsonbContainer *c)
{
	uint32		node = ((FakeContainer *) c)->node;

	if (node >= (uint32) n_nodes || nodes[node].cont == NULL)
		abort();				/* not one of ours */
	return &nodes[node];
}

static void
node_value(uint32 node, JsonbValue *v)
{
	JNode	   *jn = &nodes[node];

	memset(v, 0, sizeof(*v));
	v->type = jn->type;
	switch (jn->type)
	{
		case jbvString:
			v->val.string.val = jn->str;
			v->val.string.len = jn->len;
			break;
		case jbvNumeric:
			v->val.numeric = jn->num;
			break;
		case jbvBool:
			v->val.boolean = jn->boolean;
			break;
		case jbvArray:
		case jbvObject:
			v->type = jbvBinary;
			v->val.binary.data = (JsonbContainer *) jn->cont;
			v->val.binary.len = sizeof(FakeContainer);
			break;
		default:
			break;
	}
}

static JsonbValue *
copy_value(uint32 node)
{
	JsonbValue *v = palloc(sizeof(JsonbValue));

	node_value(node, v);
	return v;
}

JsonbValue *
findJsonbValueFromContainer(JsonbContainer *c, uint32 flags, JsonbValue *key)
{
	JNode	   *jn = container(c);

	if ((flags & JB_FARRAY) && jn->type == jbvArray)
	{
		fprintf(stderr, "fuzz_json: array search is not implemented in the jsonb stand-in\n");
		abort();
	}
	if (!(flags & JB_FOBJECT) || jn->type != jbvObject || key->type != jbvString)
		return NULL;
	for (int i = 0; i < jn->n; i++)
	{
		JNode	   *k = &nodes[jn->kids[2 * i]];

		if (k->len == key->val.string.len && memcmp(k->str, key->val.string.val, k->len) == 0)
			return copy_value(jn->kids[2 * i + 1]);
	}
	return NULL;
}

JsonbValue *
getIthJsonbValueFromContainer(JsonbContainer *c, uint32 i)
{
	JNode	   *jn = container(c);

	if (jn->type != jbvArray)
		elog(ERROR, "not a jsonb array");
	if (i >= (uint32) jn->n)
		return NULL;
	return copy_value(jn->kids[i]);
}

/* The iterator keeps its node's index in curDataOffset. */
static JsonbIterator *
iterator_for(JsonbContainer *c, JsonbIterator *parent)
{
	JNode	   *jn = container(c);
	JsonbIterator *it = palloc0(sizeof(JsonbIterator));

	it->container = c;
	it->nElems = (uint32) jn->n;
	it->isScalar = JsonContainerIsScalar(c);
	it->curDataOffset = ((FakeContainer *) c)->node;
	it->state = jn->type == jbvArray ? JBI_ARRAY_START : JBI_OBJECT_START;
	it->parent = parent;
	return it;
}

JsonbIterator *
JsonbIteratorInit(JsonbContainer *c)
{
	return iterator_for(c, NULL);
}

static JsonbIterator *
pop_iterator(JsonbIterator *it)
{
	JsonbIterator *parent = it->parent;

	pfree(it);
	return parent;
}

/* jsonb_util.c's walk: keys and values alternate; nested containers are entered unless skipNested. */
JsonbIteratorToken
JsonbIteratorNext(JsonbIterator **it, JsonbValue *val, bool skipNested)
{
	JNode	   *jn;

	if (*it == NULL)
		return WJB_DONE;
	for (;;)
	{
		JsonbIterator *cur = *it;

		jn = &nodes[cur->curDataOffset];
		switch (cur->state)
		{
			case JBI_ARRAY_START:
				val->type = jbvArray;
				val->val.array.nElems = (int) cur->nElems;
				val->val.array.rawScalar = cur->isScalar;
				cur->state = JBI_ARRAY_ELEM;
				return WJB_BEGIN_ARRAY;
			case JBI_ARRAY_ELEM:
				if (cur->curIndex >= (int) cur->nElems)
				{
					*it = pop_iterator(cur);
					return WJB_END_ARRAY;
				}
				node_value(jn->kids[cur->curIndex++], val);
				if (val->type == jbvBinary && !skipNested)
				{
					*it = iterator_for(val->val.binary.data, cur);
					continue;
				}
				return WJB_ELEM;
			case JBI_OBJECT_START:
				val->type = jbvObject;
				val->val.object.nPairs = (int) cur->nElems;
				cur->state = JBI_OBJECT_KEY;
				return WJB_BEGIN_OBJECT;
			case JBI_OBJECT_KEY:
				if (cur->curIndex >= (int) cur->nElems)
				{
					*it = pop_iterator(cur);
					return WJB_END_OBJECT;
				}
				node_value(jn->kids[2 * cur->curIndex], val);
				cur->state = JBI_OBJECT_VALUE;
				return WJB_KEY;
			case JBI_OBJECT_VALUE:
				cur->state = JBI_OBJECT_KEY;
				node_value(jn->kids[2 * cur->curIndex++ + 1], val);
				if (val->type == jbvBinary && !skipNested)
				{
					*it = iterator_for(val->val.binary.data, cur);
					continue;
				}
				return WJB_VALUE;
		}
	}
}

Datum
jsonb_in(PG_FUNCTION_ARGS)
{
	char	   *text = PG_GETARG_CSTRING(0);
	Jsonb	   *jb = fuzz_jsonb_parse(text, strlen(text));

	if (jb == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type json")));
	PG_RETURN_JSONB_P(jb);
}

/* ---- what spec_json.c's builders call: a JsonbValue tree into the containers above ---- */

static int	value_node(const JsonbValue *v);

static int
array_value_node(const JsonbValue *v)
{
	int			n = v->val.array.nElems;
	uint32	   *kids = palloc(Max(n, 1) * sizeof(uint32));
	int			node;

	for (int i = 0; i < n; i++)
		kids[i] = (uint32) value_node(&v->val.array.elems[i]);
	node = container_node(jbvArray, kids, n);
	if (v->val.array.rawScalar)
		nodes[node].cont->header |= JB_FSCALAR;
	return node;
}

/* convertJsonbObject writes the pairs in the order pushJsonbValue left them: sorted, unique. */
static int
object_value_node(const JsonbValue *v)
{
	int			n = v->val.object.nPairs;
	uint32	   *kids = palloc(Max(n, 1) * 2 * sizeof(uint32));

	for (int i = 0; i < n; i++)
	{
		const JsonbValue *k = &v->val.object.pairs[i].key;

		if (k->type != jbvString)
			elog(ERROR, "jsonb object key is not a string");
		if (i > 0)
		{
			const JsonbValue *prev = &v->val.object.pairs[i - 1].key;

			if (prev->val.string.len > k->val.string.len ||
				(prev->val.string.len == k->val.string.len &&
				 memcmp(prev->val.string.val, k->val.string.val, k->val.string.len) >= 0))
			{
				fprintf(stderr, "fuzz_json: object keys not sorted and unique, as pushJsonbValue leaves them\n");
				abort();
			}
		}
		kids[2 * i] = (uint32) value_node(k);
		kids[2 * i + 1] = (uint32) value_node(&v->val.object.pairs[i].value);
	}
	return container_node(jbvObject, kids, n);
}

/* convertJsonbValue's cases; the jsonb owns copies of the strings. */
static int
value_node(const JsonbValue *v)
{
	int			node;
	char	   *str;

	switch (v->type)
	{
		case jbvNull:
			return new_node(jbvNull);
		case jbvBool:
			node = new_node(jbvBool);
			nodes[node].boolean = v->val.boolean;
			return node;
		case jbvNumeric:
			node = new_node(jbvNumeric);
			nodes[node].num = v->val.numeric;	/* never changed after numeric_in: shared */
			return node;
		case jbvString:
			str = palloc(v->val.string.len + 1);
			memcpy(str, v->val.string.val, v->val.string.len);
			str[v->val.string.len] = '\0';
			node = new_node(jbvString);
			nodes[node].str = str;
			nodes[node].len = v->val.string.len;
			return node;
		case jbvArray:
			return array_value_node(v);
		case jbvObject:
			return object_value_node(v);
		case jbvDatetime:
			fprintf(stderr, "fuzz_json: datetime values are not implemented in the jsonb stand-in\n");
			abort();
		default:
			elog(ERROR, "unknown type of jsonb container to convert");
	}
	return -1;					/* not reached */
}

Jsonb *
JsonbValueToJsonb(JsonbValue *val)
{
	FakeJsonb  *jb;

	if (IsAJsonbScalar(val) || val->type == jbvArray || val->type == jbvObject)
		return jsonb_of(value_node(val));
	/* a container already: copied as it is */
	Assert(val->type == jbvBinary);
	(void) container(val->val.binary.data);
	jb = palloc(sizeof(FakeJsonb));
	SET_VARSIZE(jb, sizeof(FakeJsonb));
	jb->root = *(FakeContainer *) val->val.binary.data;
	return (Jsonb *) jb;
}
