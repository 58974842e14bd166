/*
 * fuzz_numeric.c -- a stand-in for PostgreSQL's numeric, enough for
 * spec_json.c and the jsonb stand-in (fuzz_json.c).
 *
 * Covered, with numeric.c's semantics and messages:
 *   - numeric_in's syntax (PostgreSQL 15: spaces around, a sign, digits with
 *     a point, an exponent; NaN, Infinity, inf), typmod -1 only;
 *   - int64_to_numeric;
 *   - numeric_float8: through the decimal text as float8in reads it, "out of
 *     range for type double precision" where that overflows or underflows;
 *   - numeric_int8: rounded half away from zero, "bigint out of range".
 * numeric_in refuses, as make_result does, what numeric cannot hold (a
 * base-10000 weight beyond int16, a display scale beyond 16383 digits).
 * Not covered: arithmetic, comparison, numeric_out (the value keeps the text
 * it was read from, not numeric's normal form), typmods.
 * A Numeric here is not numeric's varlena: it is only ever passed by pointer.
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "fmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

#include "fuzz_pg.h"

#define NUMERIC_DSCALE_MAX	0x3FFF	/* numeric.c's */

typedef struct FakeNumeric
{
	double		value;			/* as float8in reads text */
	bool		out_of_range;	/* beyond float8: numeric_float8 refuses it */
	bool		special;		/* NaN or an infinity */
	char	   *text;			/* trimmed, as given */
} FakeNumeric;

static bool
digits(const char **p)
{
	const char *start = *p;

	while (**p >= '0' && **p <= '9')
		(*p)++;
	return *p > start;
}

static bool
word(const char **p, const char *w)
{
	size_t		len = strlen(w);

	if (pg_strncasecmp(*p, w, len) != 0)
		return false;
	*p += len;
	return true;
}

/* numeric_in's grammar between the spaces; sets *special for NaN and the infinities. */
static bool
numeric_syntax(const char *p, const char *end, bool *special)
{
	bool		signed_ = *p == '+' || *p == '-';
	bool		any;

	*special = word(&p, "NaN");
	if (!*special)
	{
		p += signed_;
		*special = word(&p, "Infinity") || word(&p, "inf");
	}
	if (*special)
		return p == end;
	any = digits(&p);
	if (*p == '.')
	{
		p++;
		any |= digits(&p);
	}
	if (!any)
		return false;
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!digits(&p))
			return false;
	}
	return p == end;
}

/*
 * make_result's check: numeric keeps its base-10000 weight in an int16 and its
 * display scale in 14 bits (set_var_from_str refuses exponents beyond INT_MAX/2
 * before that).
 */
static bool
numeric_fits(const char *p)
{
	long		n = 0,
				point = -1,
				first = -1,
				exponent = 0;

	for (; *p != '\0' && *p != 'e' && *p != 'E'; p++)
	{
		if (*p == '.')
			point = n;
		else if (*p >= '0' && *p <= '9')
		{
			if (first < 0 && *p != '0')
				first = n;
			n++;
		}
	}
	if (point < 0)
		point = n;
	if (*p != '\0')
	{
		errno = 0;
		exponent = strtol(p + 1, NULL, 10);
		if (errno == ERANGE || exponent >= INT_MAX / 2 || exponent <= -(INT_MAX / 2))
			return false;
	}
	if (n - point - exponent > NUMERIC_DSCALE_MAX)
		return false;
	if (first >= 0)
	{
		long		e10 = point - first - 1 + exponent;	/* of the leading digit */
		long		weight = e10 >= 0 ? e10 / 4 : -((-e10 + 3) / 4);

		if (weight > PG_INT16_MAX || weight < PG_INT16_MIN)
			return false;
	}
	return true;
}

/* NULL with *overflow false where the syntax is wrong, true where numeric cannot hold it. */
static Numeric
parse(const char *text, size_t len, bool *overflow)
{
	const char *end = text + len;
	FakeNumeric *num;
	bool		special;

	*overflow = false;
	while (text < end && isspace((unsigned char) *text))
		text++;
	while (end > text && isspace((unsigned char) end[-1]))
		end--;
	num = palloc0(sizeof(FakeNumeric));
	num->text = pnstrdup(text, end - text);
	if (strlen(num->text) != (size_t) (end - text) ||
		!numeric_syntax(num->text, num->text + (end - text), &special))
		return NULL;
	if (!special && !numeric_fits(num->text))
	{
		*overflow = true;
		return NULL;
	}
	errno = 0;
	num->value = strtod(num->text, NULL);	/* strtod reads NaN and the infinities too */
	num->special = special;
	/* float8in refuses overflow and underflow to zero; denormals pass */
	num->out_of_range = !special && errno == ERANGE && (num->value == 0.0 || isinf(num->value));
	if (num->value == 0.0)
		num->value = 0.0;		/* numeric has no -0 */
	return (Numeric) num;
}

Numeric
fuzz_numeric_parse(const char *text, size_t len)
{
	bool		overflow;

	return parse(text, len, &overflow);
}

const char *
fuzz_numeric_text(Numeric num)
{
	return ((FakeNumeric *) num)->text;
}

Datum
numeric_in(PG_FUNCTION_ARGS)
{
	char	   *text = PG_GETARG_CSTRING(0);
	int32		typmod = PG_GETARG_INT32(2);
	Numeric		num;
	bool		overflow;

	if (typmod != -1)
	{
		fprintf(stderr, "fuzz_numeric: numeric_in with a typmod is not implemented in the stand-in\n");
		abort();
	}
	num = parse(text, strlen(text), &overflow);
	if (num == NULL && overflow)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value overflows numeric format")));
	if (num == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s: \"%s\"", "numeric", text)));
	PG_RETURN_NUMERIC(num);
}

Numeric
int64_to_numeric(int64 val)
{
	char		text[32];

	snprintf(text, sizeof(text), INT64_FORMAT, val);
	return fuzz_numeric_parse(text, strlen(text));
}

Datum
numeric_float8(PG_FUNCTION_ARGS)
{
	FakeNumeric *num = (FakeNumeric *) PG_GETARG_POINTER(0);

	if (num->out_of_range)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("\"%s\" is out of range for type double precision", num->text)));
	PG_RETURN_FLOAT8(num->value);
}

/*
 * The exact decimal, rounded half away from zero, into *result; false when
 * it does not fit.  The text has passed numeric_syntax and is no NaN or
 * infinity.
 */
static bool
decimal_to_int64(const char *p, int64 *result)
{
	bool		negative = *p == '-';
	char	   *ds = palloc(strlen(p) + 1);	/* the digits, the point left out */
	int			n = 0,
				first = 0;
	long		point = -1,		/* digits before the point, once seen */
				exponent = 0;
	uint64		magnitude = 0;

	for (; *p != '\0' && *p != 'e' && *p != 'E'; p++)
	{
		if (*p == '.')
			point = n;
		else if (*p >= '0' && *p <= '9')
			ds[n++] = *p;
	}
	if (point < 0)
		point = n;
	if (*p != '\0')
	{
		/* beyond this the answer is known: out of range, or rounds to 0 */
		exponent = strtol(p + 1, NULL, 10);
		exponent = Max(Min(exponent, 1000000), -1000000);
	}
	while (first < n && ds[first] == '0')
		first++;
	*result = 0;
	if (first == n)
		return true;			/* zero */
	point += exponent - first;	/* digits of ds + first before the point */
	if (point > 19)
		return false;			/* at least 10^19 */
	for (long i = 0; i < point; i++)
	{
		int			d = first + i < n ? ds[first + i] - '0' : 0;

		if (magnitude > (PG_UINT64_MAX - d) / 10)
			return false;
		magnitude = magnitude * 10 + d;
	}
	if (point >= 0 && first + point < n && ds[first + point] >= '5')
		magnitude++;
	if (magnitude > (uint64) PG_INT64_MAX + negative)
		return false;
	*result = negative ? (int64) (0 - magnitude) : (int64) magnitude;
	return true;
}

Datum
numeric_int8(PG_FUNCTION_ARGS)
{
	FakeNumeric *num = (FakeNumeric *) PG_GETARG_POINTER(0);
	int64		result;

	if (num->special)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg(isnan(num->value) ? "cannot convert NaN to %s" : "cannot convert infinity to %s",
						"bigint")));
	if (!decimal_to_int64(num->text, &result))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range")));
	PG_RETURN_INT64(result);
}
