/*
 * fuzz_pg.h -- what the fuzz targets that compile pgdl's glue (the .c files in src) need of
 * PostgreSQL, which lives in the postgres executable and cannot be linked here.
 *
 * fuzz_pg.c stands in for the few backend functions the glue calls: palloc and
 * friends over one arena freed after each input, ereport that longjmps back to
 * the target at ERROR, the fmgr call helpers, two array helpers and
 * pg_mbcliplen (a UTF-8 database).
 * fuzz_json.c stands in for jsonb: a JSON text parser, the container lookups
 * and iterator spec_json.c reads with, and JsonbValueToJsonb, with jsonb's
 * semantics (the last of duplicate keys wins, keys in jsonb's order, a scalar
 * at the top level is a one-element raw-scalar array); fuzz_jsonb_build.c
 * stands in for pushJsonbValue, fuzz_numeric.c for numeric_in,
 * int64_to_numeric, numeric_float8 and numeric_int8.  Each file says at its
 * top what it covers and what it does not.
 */
#ifndef PGDL_FUZZ_PG_H
#define PGDL_FUZZ_PG_H

#include <setjmp.h>

#include "utils/jsonb.h"
#include "utils/numeric.h"

/*
 * A target calls the glue as
 *     if (setjmp(fuzz_error_jmp) != 0) return false;    (an ERROR was raised)
 *     fuzz_error_armed = true; call(); fuzz_error_armed = false;
 * An ERROR raised while not armed aborts: the target did not expect one.
 */
extern jmp_buf fuzz_error_jmp;
extern bool fuzz_error_armed;
extern char fuzz_error_message[1024];	/* errmsg of the last ERROR */
extern int	fuzz_error_code;

/* Frees everything palloc handed out since the last reset. */
extern void fuzz_arena_reset(void);

/* JSON text to a jsonb stand-in in the arena; NULL where jsonb_in would refuse it. */
extern Jsonb *fuzz_jsonb_parse(const char *text, size_t len);
/* Forget every document parsed so far; call with fuzz_arena_reset. */
extern void fuzz_jsonb_reset(void);

/* Numeric text (numeric_in's syntax) to a numeric stand-in; NULL where numeric_in would refuse it. */
extern Numeric fuzz_numeric_parse(const char *text, size_t len);
/* The text a numeric stand-in was read from. */
extern const char *fuzz_numeric_text(Numeric num);

#endif
