/*
 * unit.h -- a tiny test harness for the engine (no server).
 *
 *   UNIT_TEST(dense_gradient) { ... CHECK(x > 0); CHECK_NEAR(a, b, 1e-4); ... }
 *
 * Tests register themselves; main.c runs them in name order (or those whose name
 * contains argv[2]) and ends with "N passed, N failed, N skipped".  A test that
 * cannot run on this machine (no GPU) calls unit_skip(why) and returns: it is
 * reported as skipped, never as a pass.
 */
#ifndef PGDL_UNIT_H
#define PGDL_UNIT_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

typedef void (*UnitFn) (void);

extern void unit_register(const char *name, UnitFn fn);
extern void unit_fail(const char *file, int line, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));
/* The running test cannot run here: skipped (unless a check of it failed before), for this reason. */
extern void unit_skip(const char *why);
extern const char *unit_fixture_dir;	/* argv[1] */
extern bool unit_fast;			/* PGDL_UNIT_FAST=1: trim exhaustive loops (sanitizer runs) */

#define UNIT_TEST(name) \
	static void unit_test_##name(void); \
	__attribute__((constructor)) static void unit_register_##name(void) \
	{ unit_register(#name, unit_test_##name); } \
	static void unit_test_##name(void)

#define CHECK(cond) \
	do { if (!(cond)) unit_fail(__FILE__, __LINE__, "%s", #cond); } while (0)

#define CHECK_MSG(cond, ...) \
	do { if (!(cond)) unit_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)

#define CHECK_NEAR(a, b, tol) \
	do { double unit_a_ = (a), unit_b_ = (b); \
		 if (!(fabs(unit_a_ - unit_b_) <= (tol))) \
			unit_fail(__FILE__, __LINE__, "%s = %.9g, %s = %.9g, tolerance %g", \
					  #a, unit_a_, #b, unit_b_, (double) (tol)); } while (0)

#endif
