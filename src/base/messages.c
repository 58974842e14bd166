/*
 * messages.c -- user text in error messages.
 *
 * Pure: no catalog, no SPI, nothing of the server but palloc, ereport and the
 * database encoding, so that the fuzz targets link it as it is (regress/fuzz).
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "base/base.h"

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

/* "invalid WHAT at PATH", with detail: how every error in a spec or configuration reads. */
void
pgdl_report_invalid(const char *what, const char *path, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s at %s", what, path),
			 errdetail("%s", detail)));
}

int
pgdl_nn_data_errcode(const NnError *err)
{
	/* nn_model_check_input: an embedding's id that is not in its table */
	if (err->layer >= 0 && strcmp(err->field, "x") == 0)
		return ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
	return ERRCODE_DATA_EXCEPTION;
}

void
pgdl_report_nn_error(const char *what, const NnError *err)
{
	char		path[64];
	char		detail[300];

	if (err->layer >= 0)
		snprintf(path, sizeof(path), "layers[%d]%s%s", err->layer,
				 err->field[0] ? "." : "", err->field);
	else
		snprintf(path, sizeof(path), "%s", err->field[0] ? err->field : "top level");
	/*
	 * The engine says 'layers[2]: conv2d: "kernel" must be ...': the path is
	 * in errmsg already, and the rest reads as 'For conv2d, "kernel" must be
	 * ...'.
	 */
	{
		const char *msg = err->msg;
		const char *colon;

		if (strncmp(msg, "layers[", 7) == 0 && (colon = strstr(msg, "]: ")) != NULL)
			msg = colon + 3;
		colon = strstr(msg, ": ");
		if (colon && colon > msg && strchr(msg, ' ') > colon)
			snprintf(detail, sizeof(detail), "For %.*s, %s.", (int) (colon - msg), msg, colon + 2);
		else
		{
			snprintf(detail, sizeof(detail), "%s.", msg);
			detail[0] = pg_toupper((unsigned char) detail[0]);
		}
	}
	pgdl_report_invalid(what, path, detail);
}
