/*
 * gen_onnx.h -- gen_corpus's ONNX seeds (gen_onnx.c), kept apart because they
 * need protobuf-c and the generated onnx.pb-c.h, which the engine-only seeds do not.
 */
#ifndef PGDL_GEN_ONNX_H
#define PGDL_GEN_ONNX_H

#include <stddef.h>

typedef void (*GenWriteFn) (const char *target, const char *name, const void *data, size_t len);

/* Writes the seeds of fuzz_onnx as target "onnx". */
extern void gen_onnx_corpus(GenWriteFn write);

/* The value the seeds' tensor `name` holds at element i (fuzz_onnx's dataset mirrors "mean" and "std"). */
#define GEN_ONNX_VALUE(name_len, i) ((float) ((int) (((i) * 7 + (name_len)) % 11) - 5) / 8.0f)

#endif
