/*
 * predict/predict.h -- inference in SQL: what predict_batch.c shares with the
 * per-row functions of predict.c.
 */
#ifndef PGDL_PREDICT_H
#define PGDL_PREDICT_H

#include "catalog/catalog.h"

extern void pgdl_predict_check_classifier(const NnModel *m, const char *function);
extern int64 pgdl_predict_first_nonfinite(const float *x, int64 n);
extern void pgdl_predict_check_finite(const float *raw, const float *x, int64 n, const char *what);
extern void pgdl_predict_check_outputs(const float *z, int64 k, const char *what);
extern char *pgdl_predict_class_name(const PgdlDataset *ds, int index);
extern Datum pgdl_predict_label_as(const char *label, Oid type, Oid label_type, FmgrInfo *input, Oid ioparam);

#endif							/* PGDL_PREDICT_H */
