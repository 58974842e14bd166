/*
 * fuzz_pg.c -- stand-ins for the PostgreSQL backend functions that pgdl's glue
 * calls, for the fuzz targets (see fuzz_pg.h).  Each palloc is a malloc of its
 * own, so AddressSanitizer sees every overrun.
 */
#include "postgres.h"

#include <stdarg.h>
#include <stdio.h>

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "fuzz_pg.h"

jmp_buf		fuzz_error_jmp;
bool		fuzz_error_armed;
char		fuzz_error_message[1024];
int			fuzz_error_code;

/* ---- memory: one arena, freed after each input ---- */

typedef struct Chunk
{
	struct Chunk *prev,
			   *next;
	Size		size;
	Size		pad;			/* keeps the user's pointer MAXALIGNed */
} Chunk;

static Chunk arena = {&arena, &arena, 0, 0};

static void *
arena_alloc(Size size, bool zero)
{
	Chunk	   *c;

	if (!AllocSizeIsValid(size))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c = zero ? calloc(1, sizeof(Chunk) + size) : malloc(sizeof(Chunk) + size);
	if (c == NULL)
		abort();
	c->size = size;
	c->next = arena.next;
	c->prev = &arena;
	arena.next->prev = c;
	arena.next = c;
	return c + 1;
}

static void
arena_unlink(Chunk *c)
{
	c->prev->next = c->next;
	c->next->prev = c->prev;
}

void
fuzz_arena_reset(void)
{
	while (arena.next != &arena)
	{
		Chunk	   *c = arena.next;

		arena_unlink(c);
		free(c);
	}
}

void *
palloc(Size size)
{
	return arena_alloc(size, false);
}

void *
palloc0(Size size)
{
	return arena_alloc(size, true);
}

void *
palloc_extended(Size size, int flags)
{
	return arena_alloc(size, (flags & MCXT_ALLOC_ZERO) != 0);
}

void
pfree(void *pointer)
{
	Chunk	   *c = (Chunk *) pointer - 1;

	arena_unlink(c);
	free(c);
}

void *
repalloc(void *pointer, Size size)
{
	Chunk	   *c = (Chunk *) pointer - 1;
	void	   *p = arena_alloc(size, false);

	memcpy(p, pointer, Min(size, c->size));
	pfree(pointer);
	return p;
}

char *
pstrdup(const char *in)
{
	return pnstrdup(in, strlen(in));
}

char *
pnstrdup(const char *in, Size len)
{
	char	   *out;

	len = strnlen(in, len);
	out = palloc(len + 1);
	memcpy(out, in, len);
	out[len] = '\0';
	return out;
}

/* shmem.c's: overflow is an ERROR */
Size
add_size(Size s1, Size s2)
{
	if (s1 + s2 < s1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("requested shared memory size overflows size_t")));
	return s1 + s2;
}

Size
mul_size(Size s1, Size s2)
{
	if (s1 != 0 && s2 != 0 && (s1 * s2) / s2 != s1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("requested shared memory size overflows size_t")));
	return s1 * s2;
}

/* ---- ereport: ERROR longjmps back to the target ---- */

static int	error_level;

bool
errstart(int elevel, const char *domain)
{
	error_level = elevel;
	fuzz_error_code = elevel >= ERROR ? ERRCODE_INTERNAL_ERROR : 0;
	fuzz_error_message[0] = '\0';
	return elevel >= ERROR;		/* nothing below ERROR is shown */
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (error_level < ERROR)
		return;
	if (!fuzz_error_armed)
	{
		fprintf(stderr, "ERROR outside a call the target guards (%s:%d): %s\n",
				filename, lineno, fuzz_error_message);
		abort();
	}
	fuzz_error_armed = false;
	longjmp(fuzz_error_jmp, 1);
}

int
errcode(int sqlerrcode)
{
	fuzz_error_code = sqlerrcode;
	return 0;
}

static void
format_message(char *buf, size_t size, const char *fmt, va_list ap)
{
	vsnprintf(buf, size, fmt, ap);
}

#define FORMAT_INTO(buf) \
	do { \
		va_list		ap; \
		va_start(ap, fmt); \
		format_message(buf, sizeof(buf), fmt, ap); \
		va_end(ap); \
	} while (0)

int
errmsg(const char *fmt,...)
{
	FORMAT_INTO(fuzz_error_message);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	FORMAT_INTO(fuzz_error_message);
	return 0;
}

/* Details and hints are formatted too (a bad format is a finding) and dropped. */
int
errdetail(const char *fmt,...)
{
	char		buf[1024];

	FORMAT_INTO(buf);
	return 0;
}

int
errdetail_internal(const char *fmt,...)
{
	char		buf[1024];

	FORMAT_INTO(buf);
	return 0;
}

int
errhint(const char *fmt,...)
{
	char		buf[1024];

	FORMAT_INTO(buf);
	return 0;
}

/* ---- fmgr ---- */

Datum
DirectFunctionCall1Coll(PGFunction func, Oid collation, Datum arg1)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, collation, NULL, NULL);
	fcinfo->args[0].value = arg1;
	fcinfo->args[0].isnull = false;
	result = (*func) (fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "function %p returned NULL", (void *) func);
	return result;
}

Datum
DirectFunctionCall3Coll(PGFunction func, Oid collation, Datum arg1, Datum arg2, Datum arg3)
{
	LOCAL_FCINFO(fcinfo, 3);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 3, collation, NULL, NULL);
	fcinfo->args[0].value = arg1;
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = arg2;
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = arg3;
	fcinfo->args[2].isnull = false;
	result = (*func) (fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "function %p returned NULL", (void *) func);
	return result;
}

/* Nothing the targets build is toasted. */
struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	return datum;
}

/* ---- arrays (as arrayfuncs.c and arrayutils.c compute them) ---- */

int
ArrayGetNItems(int ndim, const int *dims)
{
	int64		n = 1;

	if (ndim <= 0)
		return 0;
	for (int i = 0; i < ndim; i++)
	{
		if (dims[i] < 0)
			elog(ERROR, "array size exceeds the maximum allowed");
		n *= dims[i];
		if (n > (int64) MaxArraySize)
			elog(ERROR, "array size exceeds the maximum allowed");
	}
	return (int) n;
}

bool
array_contains_nulls(ArrayType *array)
{
	int			nelems;
	bits8	   *bitmap;
	int			bitmask;

	if (!ARR_HASNULL(array))
		return false;
	nelems = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	bitmap = ARR_NULLBITMAP(array);
	while (nelems >= 8)
	{
		if (*bitmap != 0xFF)
			return true;
		bitmap++;
		nelems -= 8;
	}
	bitmask = 1;
	while (nelems > 0)
	{
		if ((*bitmap & bitmask) == 0)
			return true;
		bitmask <<= 1;
		nelems--;
	}
	return false;
}

/* ---- encoding: mbutils.c's pg_mbcliplen, for a UTF-8 database ---- */

int
pg_mbcliplen(const char *mbstr, int len, int limit)
{
	int			clen = 0;

	while (len > 0 && *mbstr)
	{
		int			l = pg_encoding_mblen(PG_UTF8, mbstr);

		if (clen + l > limit)
			break;
		clen += l;
		if (clen == limit)
			break;
		len -= l;
		mbstr += l;
	}
	return clen;
}
