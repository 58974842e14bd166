/*
 * pgdl.h -- what the PostgreSQL glue (the .c files in src/) shares.
 *
 * The engine (src/nn, kernels/) has its own headers and no PostgreSQL ones.
 */
#ifndef PGDL_H
#define PGDL_H

/* Keep in step with extension/pgdl.control; regress/sql/pgdl.sql checks it. */
#define PGDL_VERSION		"0.1.0"

/* guc.c */
extern int	pgdl_blas_threads;

extern void pgdl_guc_init(void);

/* pgdl.c */

/*
 * Every SQL-callable function calls this before it uses the engine.  It brings
 * the engine in line with this session's settings (pgdl.blas_threads), lazily:
 * _PG_init may run in the postmaster (shared_preload_libraries), and a BLAS
 * thread pool started there can hang the backends forked from it.
 */
extern void pgdl_engine_prepare(void);

#endif							/* PGDL_H */
