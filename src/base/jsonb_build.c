/*
 * jsonb_build.c -- building jsonb one value at a time, after
 * pushJsonbValue(state, WJB_BEGIN_OBJECT or WJB_BEGIN_ARRAY): what every folder
 * writes its jsonb with (specs, configurations, metrics, plans).  Numbers are
 * the shortest decimal that reads back as the same float4 or float8, so a
 * value stored as jsonb equals the float it came from.  Built, never printed
 * and parsed back.
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "base/base.h"

void
pgdl_jsonb_put_key(JsonbParseState **state, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	(void) pushJsonbValue(state, WJB_KEY, &k);
}

/* A key and its value; or an array's element when key is NULL. */
void
pgdl_jsonb_put_value(JsonbParseState **state, const char *key, JsonbValue *v)
{
	if (key == NULL)
		(void) pushJsonbValue(state, WJB_ELEM, v);
	else
	{
		pgdl_jsonb_put_key(state, key);
		(void) pushJsonbValue(state, WJB_VALUE, v);
	}
}

static void
put_decimal(JsonbParseState **state, const char *key, const char *text)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(text),
														ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	pgdl_jsonb_put_value(state, key, &v);
}

void
pgdl_jsonb_put_string(JsonbParseState **state, const char *key, const char *value)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) value;
	v.val.string.len = strlen(value);
	pgdl_jsonb_put_value(state, key, &v);
}

void
pgdl_jsonb_put_int(JsonbParseState **state, const char *key, int64 value)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(value);
	pgdl_jsonb_put_value(state, key, &v);
}

/*
 * As the shortest decimal that reads back as the same float: 0.1, not
 * 0.100000001.  Stored configurations are UNIQUE on this form, so a value
 * that is not finite here is a bug, not an input.
 */
void
pgdl_jsonb_put_float4(JsonbParseState **state, const char *key, float value)
{
	char		text[FLOAT_SHORTEST_DECIMAL_LEN];

	if (!isfinite(value))
		elog(ERROR, "pgdl: \"%s\" is %g, which jsonb cannot hold", key ? key : "element", (double) value);
	float_to_shortest_decimal_buf(value, text);
	put_decimal(state, key, text);
}

/*
 * The shortest decimal that reads back as the same double, so that a model's
 * metrics equal its run's float8 columns.  JSON has no NaN or infinity: they
 * are null.
 */
void
pgdl_jsonb_put_float8(JsonbParseState **state, const char *key, double value)
{
	char		text[DOUBLE_SHORTEST_DECIMAL_LEN];

	if (!isfinite(value))
	{
		JsonbValue	v;

		v.type = jbvNull;
		pgdl_jsonb_put_value(state, key, &v);
		return;
	}
	double_to_shortest_decimal_buf(value, text);
	put_decimal(state, key, text);
}

void
pgdl_jsonb_put_bool(JsonbParseState **state, const char *key, bool value)
{
	JsonbValue	v;

	v.type = jbvBool;
	v.val.boolean = value;
	pgdl_jsonb_put_value(state, key, &v);
}
