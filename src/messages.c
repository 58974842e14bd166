/*
 * messages.c -- user text in error messages.
 *
 * Pure: no catalog, no SPI, nothing of the server but palloc and the database
 * encoding, so that the fuzz targets link it as it is (regress/fuzz).
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "pgdl.h"

/*
 * A string a user gave (a name, a key, a mode), as an error message may echo
 * it: whole when short, else its first max_bytes (cut between characters),
 * "..." and its length.  A 10 MB name then costs the error and the server log
 * a line, not 10 MB.
 */
const char *
pgdl_clip_for_error(const char *s, int max_bytes)
{
	size_t		len;

	if (s == NULL)
		return "(null)";
	len = strlen(s);
	if (len <= (size_t) max_bytes)
		return s;
	return psprintf("%.*s... (%zu bytes)", pg_mbcliplen(s, max_bytes, max_bytes), s, len);
}
