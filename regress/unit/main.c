/* main.c -- runs the registered engine tests; see unit.h. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#define MAX_TESTS 1024

typedef struct UnitCase
{
	const char *name;
	UnitFn		fn;
} UnitCase;

static UnitCase cases[MAX_TESTS];
static int	n_cases;
static int	current_failures;
static const char *current_skip;	/* the running test's reason it cannot run here; NULL: it ran */

const char *unit_fixture_dir = "regress/unit/fixtures";
bool		unit_fast = false;

void
unit_register(const char *name, UnitFn fn)
{
	if (n_cases == MAX_TESTS)
	{
		fprintf(stderr, "too many unit tests\n");
		exit(2);
	}
	cases[n_cases].name = name;
	cases[n_cases].fn = fn;
	n_cases++;
}

void
unit_fail(const char *file, int line, const char *fmt,...)
{
	va_list		ap;

	/* Report the first few failures of a test; one is enough to fail it. */
	if (current_failures++ < 5)
	{
		fprintf(stdout, "    %s:%d: ", file, line);
		va_start(ap, fmt);
		vfprintf(stdout, fmt, ap);
		va_end(ap);
		fputc('\n', stdout);
	}
}

void
unit_skip(const char *why)
{
	current_skip = why;
}

static int
compare_cases(const void *a, const void *b)
{
	return strcmp(((const UnitCase *) a)->name, ((const UnitCase *) b)->name);
}

int
main(int argc, char **argv)
{
	int			passed = 0,
				failed = 0,
				skipped = 0;
	const char *filter = argc > 2 ? argv[2] : NULL;
	const char *fast = getenv("PGDL_UNIT_FAST");

	if (argc > 1)
		unit_fixture_dir = argv[1];
	unit_fast = fast != NULL && strcmp(fast, "0") != 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	qsort(cases, n_cases, sizeof(UnitCase), compare_cases);

	for (int i = 0; i < n_cases; i++)
	{
		if (filter && strstr(cases[i].name, filter) == NULL)
			continue;
		current_failures = 0;
		current_skip = NULL;
		cases[i].fn();
		if (current_failures == 0 && current_skip != NULL)
		{
			printf("skip   %s (%s)\n", cases[i].name, current_skip);
			skipped++;
		}
		else if (current_failures == 0)
		{
			printf("ok     %s\n", cases[i].name);
			passed++;
		}
		else
		{
			printf("FAILED %s (%d failed checks)\n", cases[i].name, current_failures);
			failed++;
		}
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed == 0 ? 0 : 1;
}
