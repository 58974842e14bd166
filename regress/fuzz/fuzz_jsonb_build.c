/*
 * fuzz_jsonb_build.c -- a stand-in for pushJsonbValue (jsonb_util.c), with
 * which spec_json.c builds jsonb (its pgdl_jsonb_put_* builders).
 *
 * Covered, as jsonb_util.c does it: the parse state's stack of open arrays
 * and objects; a closed container becomes its parent's element or value; an
 * object's pairs are sorted in jsonb's key order (shorter first, then
 * bytewise) and of equal keys the last pushed wins; a jbvBinary element or
 * value (a container read from another jsonb) is unpacked through the
 * iterator, a raw scalar as its one scalar; the limits on elements and pairs.
 * JsonbValueToJsonb (fuzz_json.c) turns the result into the jsonb stand-in's
 * containers, which fuzz_json.c's readers read.
 * Not covered: jbvDatetime values, and the assertions jsonb_util.c makes only
 * in assert-enabled builds (a WJB_KEY that is not a string is refused here
 * too, with an ERROR, rather than trusted).
 */
#include "postgres.h"

#include <stdlib.h>

#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "fuzz_pg.h"

#define JSONB_MAX_ELEMS (Min(MaxAllocSize / sizeof(JsonbValue), JB_CMASK))
#define JSONB_MAX_PAIRS (Min(MaxAllocSize / sizeof(JsonbPair), JB_CMASK))

static JsonbParseState *
push_state(JsonbParseState **pstate)
{
	JsonbParseState *ns = palloc(sizeof(JsonbParseState));

	ns->next = *pstate;
	return ns;
}

static void
append_key(JsonbParseState *pstate, JsonbValue *key)
{
	JsonbValue *object = &pstate->contVal;

	if (key == NULL || key->type != jbvString || object->type != jbvObject)
		elog(ERROR, "jsonb key is not a string inside an object");
	if (object->val.object.nPairs >= JSONB_MAX_PAIRS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb object pairs exceeds the maximum allowed (%zu)",
						JSONB_MAX_PAIRS)));
	if (object->val.object.nPairs >= pstate->size)
	{
		pstate->size *= 2;
		object->val.object.pairs = repalloc(object->val.object.pairs, sizeof(JsonbPair) * pstate->size);
	}
	object->val.object.pairs[object->val.object.nPairs].key = *key;
	object->val.object.pairs[object->val.object.nPairs].order = object->val.object.nPairs;
}

static void
append_value(JsonbParseState *pstate, JsonbValue *value)
{
	JsonbValue *object = &pstate->contVal;

	if (object->type != jbvObject)
		elog(ERROR, "jsonb value outside an object");
	object->val.object.pairs[object->val.object.nPairs++].value = *value;
}

static void
append_element(JsonbParseState *pstate, JsonbValue *elem)
{
	JsonbValue *array = &pstate->contVal;

	if (array->type != jbvArray)
		elog(ERROR, "jsonb element outside an array");
	if (array->val.array.nElems >= JSONB_MAX_ELEMS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("number of jsonb array elements exceeds the maximum allowed (%zu)",
						JSONB_MAX_ELEMS)));
	if (array->val.array.nElems >= pstate->size)
	{
		pstate->size *= 2;
		array->val.array.elems = repalloc(array->val.array.elems, sizeof(JsonbValue) * pstate->size);
	}
	array->val.array.elems[array->val.array.nElems++] = *elem;
}

/* jsonb's key order; of equal keys the one pushed later first, so that it is the one kept. */
static int
pair_order(const void *a, const void *b)
{
	const JsonbPair *pa = a,
			   *pb = b;
	int			la = pa->key.val.string.len,
				lb = pb->key.val.string.len;
	int			c;

	if (la != lb)
		return la < lb ? -1 : 1;
	c = memcmp(pa->key.val.string.val, pb->key.val.string.val, la);
	if (c != 0)
		return c;
	return pa->order > pb->order ? -1 : 1;
}

static bool
same_key(const JsonbPair *a, const JsonbPair *b)
{
	return a->key.val.string.len == b->key.val.string.len &&
		memcmp(a->key.val.string.val, b->key.val.string.val, a->key.val.string.len) == 0;
}

static void
uniqueify_object(JsonbValue *object)
{
	JsonbPair  *pairs = object->val.object.pairs;
	int			n = object->val.object.nPairs,
				kept = 0;

	if (n <= 1)
		return;
	qsort(pairs, n, sizeof(JsonbPair), pair_order);
	for (int i = 1; i < n; i++)
		if (!same_key(&pairs[i], &pairs[kept]))
			pairs[++kept] = pairs[i];
	object->val.object.nPairs = kept + 1;
}

static JsonbValue *
push_scalar(JsonbParseState **pstate, JsonbIteratorToken seq, JsonbValue *scalarVal)
{
	JsonbValue *result = NULL;

	switch (seq)
	{
		case WJB_BEGIN_ARRAY:
			*pstate = push_state(pstate);
			result = &(*pstate)->contVal;
			result->type = jbvArray;
			result->val.array.nElems = 0;
			result->val.array.rawScalar = scalarVal != NULL && scalarVal->val.array.rawScalar;
			(*pstate)->size = scalarVal != NULL && scalarVal->val.array.nElems > 0 ?
				scalarVal->val.array.nElems : 4;
			result->val.array.elems = palloc(sizeof(JsonbValue) * (*pstate)->size);
			break;
		case WJB_BEGIN_OBJECT:
			*pstate = push_state(pstate);
			result = &(*pstate)->contVal;
			result->type = jbvObject;
			result->val.object.nPairs = 0;
			(*pstate)->size = 4;
			result->val.object.pairs = palloc(sizeof(JsonbPair) * (*pstate)->size);
			break;
		case WJB_KEY:
			append_key(*pstate, scalarVal);
			break;
		case WJB_VALUE:
			append_value(*pstate, scalarVal);
			break;
		case WJB_ELEM:
			append_element(*pstate, scalarVal);
			break;
		case WJB_END_OBJECT:
			uniqueify_object(&(*pstate)->contVal);
			/* fall through */
		case WJB_END_ARRAY:
			result = &(*pstate)->contVal;
			*pstate = (*pstate)->next;
			if (*pstate != NULL)
			{
				if ((*pstate)->contVal.type == jbvArray)
					append_element(*pstate, result);
				else
					append_value(*pstate, result);
			}
			break;
		default:
			elog(ERROR, "unrecognized jsonb sequential processing token");
	}
	return result;
}

JsonbValue *
pushJsonbValue(JsonbParseState **pstate, JsonbIteratorToken seq, JsonbValue *jbval)
{
	JsonbIterator *it;
	JsonbValue *res = NULL;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (jbval == NULL || (seq != WJB_ELEM && seq != WJB_VALUE) || jbval->type != jbvBinary)
		return push_scalar(pstate, seq, jbval);

	/* a container read from another jsonb: its pieces, one at a time */
	it = JsonbIteratorInit(jbval->val.binary.data);
	if (JsonContainerIsScalar(jbval->val.binary.data) && *pstate != NULL)
	{
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_BEGIN_ARRAY);
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_ELEM);
		res = push_scalar(pstate, seq, &v);
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_END_ARRAY);
		return res;
	}
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
		res = push_scalar(pstate, tok,
						  tok < WJB_BEGIN_ARRAY || (tok == WJB_BEGIN_ARRAY && v.val.array.rawScalar) ? &v : NULL);
	return res;
}
