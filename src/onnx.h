/*
 * onnx.h -- what ONNX import (onnx_import.c) and export (onnx_export.c) share:
 * the names pgdl gives a graph's input and output and the metadata it writes,
 * so that a model pgdl exported is recognized when it comes back.
 *
 * The protobuf types (Onnx__ModelProto, ...) are protoc-c's, generated at build
 * time from Debian's onnx.proto (see the Makefile).
 */
#ifndef PGDL_ONNX_H
#define PGDL_ONNX_H

#include "onnx.pb-c.h"

#define PGDL_ONNX_OPSET			13		/* the opset pgdl writes; imports take 7 or later */
#define PGDL_ONNX_IR_VERSION	7		/* IR version of opset 13 */
#define PGDL_ONNX_INPUT			"input"
#define PGDL_ONNX_OUTPUT		"output"
#define PGDL_ONNX_BATCH_DIM		"batch"	/* the symbolic first dimension of input and output */

/* metadata_props keys pgdl writes (values are JSON) */
#define PGDL_ONNX_META_CLASSES		"pgdl.classes"			/* ["T-shirt", ...], index i = class i */
#define PGDL_ONNX_META_LOSS			"pgdl.loss"				/* "cross_entropy", "mse", ... */
#define PGDL_ONNX_META_NORMALIZATION "pgdl.normalization"	/* the dataset's, when folded in as nodes */
#define PGDL_ONNX_META_MODEL		"pgdl.model"			/* {"id": ..., "name": ...} exported from */

#endif							/* PGDL_ONNX_H */
