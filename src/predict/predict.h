/*
 * predict/predict.h -- inference in SQL: what predict_batch.c and the
 * explanations (explain.c, importance.c) share with the per-row functions of
 * predict.c.
 */
#ifndef PGDL_PREDICT_H
#define PGDL_PREDICT_H

#include "utils/array.h"
#include "utils/jsonb.h"

#include "catalog/catalog.h"

extern void pgdl_predict_check_classifier(const NnModel *m, const char *function);
extern int64 pgdl_predict_first_nonfinite(const float *x, int64 n);
extern void pgdl_predict_check_finite(const float *raw, const float *x, int64 n, const char *what);
extern void pgdl_predict_check_outputs(const float *z, int64 k, const char *what);
extern char *pgdl_predict_class_name(const PgdlDataset *ds, int index);
/* x's features checked against the model, normalized as its dataset's, checked finite (`what`: x's name) */
extern const float *pgdl_predict_prepare_features(const NnModel *m, const PgdlDataset *ds, const float *x,
												  int64 length, float *dst, const char *what);
/* x had NULL elements (has_nulls): an error unless the dataset imputes them (`what`: x's name) */
extern void pgdl_predict_check_nulls(const PgdlDataset *ds, bool has_nulls, const char *what);
/* raw numeric features, categorical values and token sequences (NULL: none) as the dataset's example vector */
extern float *pgdl_predict_encode_inputs(const PgdlDataset *ds, const float *xraw, int64 length,
										 ArrayType *categories, Jsonb *sequences, const char *function);
/* explain.c: each of a dataset's in features' names where pack knew them, else NULL (ds NULL: all NULL) */
extern char **pgdl_feature_names(const PgdlDataset *ds, int64 in);
extern Datum pgdl_predict_label_as(const char *label, Oid type, Oid label_type, FmgrInfo *input, Oid ioparam);

#endif							/* PGDL_PREDICT_H */
