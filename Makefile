# pgdl -- deep learning as SQL.  PGXS build; see README.md.

EXTENSION   = pgdl
EXTVERSION  = 0.7.0
MODULE_big  = pgdl

PG_CONFIG  ?= /usr/lib/postgresql/15/bin/pg_config
BLAS_CFLAGS ?= $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS  ?= $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH  ?= -gencode arch=compute_75,code=sm_75 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# --fmad=false: multiply and add rounded apart, as on the CPU, so the two backends agree
NVCC_FLAGS ?= -O3 -std=c++17 --fmad=false $(CUDA_ARCH) -Xcompiler -fPIC,-Wall,-Wextra -Ikernels

NN_SRCS     = $(sort $(wildcard src/nn/*.c)) $(sort $(wildcard kernels/cpu/*.c))
# the glue: src/pgdl.c and one folder per subsystem (docs/architecture.md); src/nn is the engine
GLUE_SRCS   = src/pgdl.c $(sort $(filter-out src/nn/%,$(wildcard src/*/*.c)))

ifeq ($(WITH_CUDA),1)
CUDA_OBJS   = kernels/cuda/backend_cuda.o
CUDA_LIBS   = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
PG_CPPFLAGS += -DPGDL_WITH_CUDA
# PGXS would want LLVM bitcode for the .cu object too; there is none to make.
override with_llvm = no
else
# the stub answers with the fake device of cuda_fake.c when PGDL_FAKE_CUDA is set (tests only)
CUDA_OBJS   = kernels/cuda/cuda_stub.o kernels/cuda/cuda_fake.o
CUDA_LIBS   =
endif

# ONNX (src/models/onnx_import.c, onnx_export.c) reads and writes protobuf through protobuf-c, with C code that
# protoc-c generates at build time from the onnx.proto that Debian's libonnx-dev ships.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
ONNX_GEN    = build/onnx
ONNX_OBJS   = $(ONNX_GEN)/onnx.pb-c.o

OBJS        = $(GLUE_SRCS:.c=.o) $(NN_SRCS:.c=.o) $(ONNX_OBJS) $(CUDA_OBJS)
# The current version's script is assembled from sql/parts; earlier versions' scripts (frozen as they
# were released), the upgrade scripts between versions and their control files are installed as they are.
DATA_built  = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA        = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql)) \
			  $(wildcard extension/$(EXTENSION)--*.control)
EXTRA_CLEAN = $(DATA_built) build kernels/cuda/*.o

SHLIB_LINK += $(BLAS_LIBS) $(CUDA_LIBS) -lprotobuf-c -lm
# libpq: a coordinator reaches its nodes (src/cluster/remote.c), as postgres_fdw does
SHLIB_LINK_INTERNAL = $(libpq)
PG_CPPFLAGS += -I$(srcdir)/src -I$(srcdir)/kernels -I$(ONNX_GEN) -I$(libpq_srcdir) $(BLAS_CFLAGS)
PG_CFLAGS   += -O3 -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

# automl last: its rounds make runs, models and configurations whose ids and counts the others would see
REGRESS      = $(filter-out automl,$(patsubst regress/sql/%.sql,%,$(sort $(wildcard regress/sql/*.sql)))) automl
REGRESS_OPTS = --inputdir=regress --outputdir=regress --load-extension=$(EXTENSION)
PROVE_TESTS  = $(sort $(wildcard regress/t/*.pl))
EXTRA_CLEAN += tmp_check

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# TAP tests (PostgreSQL::Test::Cluster; run as a non-root user).  A target of its
# own rather than TAP_TESTS = 1, which would add them to installcheck (pg_regress
# may run as root, PostgreSQL::Test::Cluster may not) and defines no
# prove_installcheck target under PGXS.
prove_installcheck:
	rm -rf '$(CURDIR)'/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
	  PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
	  $(PROVE) $(PG_PROVE_FLAGS) $(PROVE_FLAGS) $(PROVE_TESTS)

.PHONY: prove_installcheck

# The control file lives in extension/; PGXS installs $(EXTENSION).control from the top.
all: $(EXTENSION).control
$(EXTENSION).control: extension/$(EXTENSION).control
	cp $< $@
EXTRA_CLEAN += $(EXTENSION).control

# The install script is assembled from its parts in sql/parts, in name order.
$(DATA_built): $(sort $(wildcard sql/parts/*.sql))
	cat $^ > $@

$(ONNX_GEN)/onnx.pb-c.c $(ONNX_GEN)/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(ONNX_GEN)
	protoc-c --c_out=$(ONNX_GEN) --proto_path=$(dir $(ONNX_PROTO)) $<

kernels/cuda/backend_cuda.o: kernels/cuda/backend_cuda.cu kernels/backend.h kernels/rows.h kernels/cuda/cuda_backend.h
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# ---------------------------------------------------------------------------
# The engine alone: unit tests and benchmarks, no server.
# ---------------------------------------------------------------------------
NN_CC      ?= $(CC)
# -fno-math-errno: sqrtf and friends set no errno, so the loops around them vectorize
NN_CFLAGS  ?= -O3 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fno-strict-aliasing -fno-math-errno
NN_CPPFLAGS = -Isrc -Ikernels $(BLAS_CFLAGS)
UNIT_SRCS   = $(sort $(wildcard regress/unit/*.c))
PYTHON     ?= /usr/bin/python3
# a CUDA build of the engine lives apart, so the two never mix objects
VARIANT_SUFFIX = $(if $(filter 1,$(WITH_CUDA)),-cuda,)
REL        = build/release$(VARIANT_SUFFIX)
ASAN       = build/asan$(VARIANT_SUFFIX)

ifeq ($(WITH_CUDA),1)
build/%/cuda.o: kernels/cuda/backend_cuda.cu kernels/backend.h kernels/rows.h kernels/cuda/cuda_backend.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@
NN_LIBS = $(CUDA_LIBS)
else
build/%/cuda.o: kernels/cuda/cuda_stub.c kernels/backend.h kernels/cuda/cuda_fake.h
	@mkdir -p $(dir $@)
	$(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) $(VARIANT_CFLAGS) -c $< -o $@
NN_LIBS =
endif

# the fake device (kernels/cuda/cuda_fake.h) is in every engine build: the unit tests train on it
build/%/cuda_fake.o: kernels/cuda/cuda_fake.c kernels/cuda/cuda_fake.h kernels/backend.h
	@mkdir -p $(dir $@)
	$(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) $(VARIANT_CFLAGS) -c $< -o $@

build/%/nn.a: $(NN_SRCS) $(wildcard src/nn/*.h kernels/*.h kernels/cpu/*.h) build/%/cuda.o build/%/cuda_fake.o
	@mkdir -p $(dir $@)/obj
	for f in $(NN_SRCS); do \
	  $(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) $(VARIANT_CFLAGS) -c $$f -o $(dir $@)/obj/$$(echo $$f | tr / _ | sed 's/\.c$$/.o/') || exit 1; \
	done
	rm -f $@ && ar rcs $@ $(dir $@)/obj/*.o build/$*/cuda.o build/$*/cuda_fake.o

# glue that includes no PostgreSQL header, tested with the engine: the ONNX depth scan, the evaluation metrics,
# the search spaces' draws and TPE
UNIT_GLUE   = src/models/onnx_depth.c src/train/metrics.c src/hopper/tpe.c

build/%/unit_tests: $(UNIT_SRCS) $(UNIT_GLUE) $(wildcard regress/unit/*.h) src/models/onnx_depth.h src/train/metrics.h src/hopper/tpe.h build/%/nn.a
	$(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) $(VARIANT_CFLAGS) -Iregress/unit $(UNIT_SRCS) $(UNIT_GLUE) build/$*/nn.a $(BLAS_LIBS) $(NN_LIBS) -lm -o $@

regress/unit/fixtures/.stamp: regress/unit/gen_parity.py
	@mkdir -p regress/unit/fixtures
	$(PYTHON) $< regress/unit/fixtures
	touch $@

# scikit-learn's values for test_metrics.c (a stamp of its own: neither generator reruns for the other)
regress/unit/fixtures/.stamp-metrics: regress/unit/gen_metrics.py
	@mkdir -p regress/unit/fixtures
	$(PYTHON) $< regress/unit/fixtures
	touch $@

fixtures: regress/unit/fixtures/.stamp regress/unit/fixtures/.stamp-metrics

# make unit: every engine test.  make unit-asan: the same under AddressSanitizer
# (UBSan too), with the slow exhaustive checks trimmed.
unit: $(REL)/unit_tests fixtures
	$(REL)/unit_tests regress/unit/fixtures

unit-asan: VARIANT_CFLAGS = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
unit-asan: $(ASAN)/unit_tests fixtures
	ASAN_OPTIONS=detect_leaks=1 PGDL_UNIT_FAST=1 $(ASAN)/unit_tests regress/unit/fixtures

build/release/engine_bench: bench/engine.c bench/fmnist.h build/release/nn.a
	$(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) -Ibench bench/engine.c build/release/nn.a $(BLAS_LIBS) $(NN_LIBS) -lz -lm -o $@

# the CUDA backend's sgemm rate (make WITH_CUDA=1 build/release-cuda/gpu_peak), for bench/gpu.sh
$(REL)/gpu_peak: bench/gpu_peak.c $(REL)/nn.a
	$(NN_CC) $(NN_CPPFLAGS) $(NN_CFLAGS) bench/gpu_peak.c $(REL)/nn.a $(BLAS_LIBS) $(NN_LIBS) -lm -o $@

# The house rules of docs/architecture.md: includes in the folders' order, functions of at most 100 lines,
# every source and script named in architecture.md (CI's layout stage).
check-layout:
	$(PYTHON) regress/layout.py

# OpenBLAS against BLIS on the networks' products (libblis-dev); not linked into pgdl
build/release/gemm_libs: bench/gemm_libs.c
	@mkdir -p $(@D)
	$(NN_CC) -O2 -g -Wall -I/usr/include/x86_64-linux-gnu $(filter -I%,$(NN_CPPFLAGS)) bench/gemm_libs.c $(BLAS_LIBS) -l:libblis.so.4 -lm -lpthread -o $@

bench-gemm-libs: build/release/gemm_libs
	bench/gemm_libs.sh build/release/gemm_libs

bench-engine: build/release/engine_bench
	bench/engine.sh build/release/engine_bench

# The reference MLP in fp32 and "precision": "bf16" (AVX512_BF16), pgdl's engine and PyTorch's autocast (about 2 minutes).
bench-bf16: build/release/engine_bench
	bench/bf16.sh build/release/engine_bench

# SQL path vs engine vs PyTorch, and pack time; needs pgdl installed (make install).
bench-sql: build/release/engine_bench
	bench/sql.sh build/release/engine_bench

# Model selection: fit_multiple with 1 and 2 workers vs PyTorch after a psycopg export (about 9 minutes).
bench-mop:
	bench/mop.sh

# Many small models at once: 8 MLPs of 64-128-10 fit_multiple'd fused vs pgdl.fuse_models off (about 1 minute).
bench-fused:
	bench/fused.sh

# Two roles' selections on one server's queue of pgdl workers: one after the other vs submitted together.
bench-jobs:
	bench/jobs.sh

# Several servers: fit_multiple on one server with 1 worker vs a coordinator with 2 nodes of 1 worker each,
# all on this machine, and a projection to more nodes (about 6 minutes).
bench-cluster:
	bench/cluster.sh

# Transfer learning: 8 heads on a frozen CNN base, fit_multiple with and without feature caches (about 2 minutes).
bench-cache:
	bench/cache.sh

# Inference: per-row pgdl.predict_class vs pgdl.predict_batch on the 10,000 test images, MLP and CNN, the MLP
# against PyTorch, and 1,000,000 rows serially vs 2 parallel workers (about 1 minute).
bench-predict:
	bench/predict.sh

# The model zoo: one pgdl.similar_models query over 10,000 stored models against Python (about 1 minute).
bench-zoo:
	bench/zoo.sh

# Throughput prediction: pgdl.calibrate, then pgdl.estimate against pgdl.fit for 13 networks and
# explain_fit_multiple against a fit_multiple run, three passes, each after its own calibration (about 6 minutes).
bench-estimate:
	bench/estimate.sh

# One pgdl.fit on 1 and 2 cores ("threads"), MLP and CNN, best of 3 (about 4 minutes on an idle machine).
bench-fit:
	bench/fit.sh

# A ResNet-style CNN against the reference CNN on Fashion-MNIST at equal training time (about 10 minutes).
bench-resnet:
	bench/resnet.sh

# On an NVIDIA GPU: the CUDA build, its unit tests, sgemm, pgdl.fit on the device vs the CPU, fit_multiple (about 5 minutes).
bench-gpu:
	bench/gpu.sh

# pgdl.pack spilled (16 MB) vs in memory on the 60,000 training images, then ROWS (default 2,000,000) rows with
# 256 MB: rows/s and peak RSS (the large run takes a while: ROWS=0 skips it).
bench-pack:
	bench/pack.sh

# pgdl.automl (60 s) against a default MLP on scikit-learn's four bundled sets, 3 seeds (about 14 minutes).
bench-automl:
	bench/automl.sh

.PHONY: check-layout unit unit-asan fixtures bench-engine bench-gemm-libs bench-bf16 bench-sql bench-mop bench-fused bench-jobs bench-cluster bench-cache bench-predict bench-zoo bench-estimate bench-gpu bench-pack bench-fit bench-resnet bench-automl

# The engine is built with its own flags in pgdl.so too: PostgreSQL's -fwrapv and
# -fno-omit-frame-pointer cost the CNN nearly a third of its speed through pgdl.fit.
$(NN_SRCS:.c=.o): override CFLAGS = $(NN_CFLAGS) -fPIC

# PGXS tracks no header dependencies; rebuild every object when a header changes.
$(OBJS): $(wildcard src/*/*.h kernels/*.h kernels/cpu/*.h kernels/cuda/*.h) $(ONNX_GEN)/onnx.pb-c.h

# ---------------------------------------------------------------------------
# Fuzzing: libFuzzer targets built with Debian's clang (regress/fuzz).
# make fuzz runs each for FUZZ_SECONDS; make fuzz-smoke is CI's short run.
# ---------------------------------------------------------------------------
FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 300
FUZZ_SMOKE_SECONDS ?= 15
FUZZ_TARGETS   = blob spec packed onnx
FUZZ           = build/fuzz
FUZZ_SAN       = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# sections per function, so that the link drops packed.c's SPI code the targets never call
FUZZ_CFLAGS    = -O1 -g -std=gnu11 -fno-strict-aliasing -fno-math-errno -Wno-unknown-pragmas \
                 -ffunction-sections -fdata-sections $(FUZZ_SAN)
# PostgreSQL was built with gcc: clang ignores its gnu_printf format attributes
FUZZ_CPPFLAGS  = -Isrc -Ikernels -Iregress/fuzz -I$(ONNX_GEN) -I$(includedir_server) -D_GNU_SOURCE $(BLAS_CFLAGS) -Wno-ignored-attributes
FUZZ_LDFLAGS   = -Wl,--gc-sections -Wl,-z,start-stop-gc
# float_to_shortest_decimal_buf, StringInfo, pg_toupper: PostgreSQL's own, from its static libraries
FUZZ_PG_LIBS   = $(pkglibdir)/libpgcommon_shlib.a $(pkglibdir)/libpgport_shlib.a
FUZZ_BINS      = $(addprefix $(FUZZ)/fuzz_,$(FUZZ_TARGETS))
FUZZ_HEADERS   = $(wildcard regress/fuzz/*.h src/*/*.h kernels/*.h) $(ONNX_GEN)/onnx.pb-c.h

FUZZ_COVERAGE  = -fsanitize=fuzzer-no-link
# Numeric loops (the layers, the kernels, the targets' own data): tracing their
# comparisons took 2/3 of the time and guides nothing.
FUZZ_NO_CMP    = $(wildcard kernels/cpu/*.c) src/nn/layers.c regress/fuzz/fuzz_engine.c
$(patsubst %.c,$(FUZZ)/obj/%.o,$(FUZZ_NO_CMP)): FUZZ_COVERAGE += -fno-sanitize-coverage=trace-cmp

$(FUZZ)/obj/%.o: %.c $(FUZZ_HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_COVERAGE) -c $< -o $@

# The engine, objects of its own (its flags, the sanitizers, coverage), linked in whole.
FUZZ_NN_OBJS   = $(patsubst %.c,$(FUZZ)/obj/%.o,$(NN_SRCS) kernels/cuda/cuda_stub.c kernels/cuda/cuda_fake.c)
$(FUZZ)/nn.a: $(FUZZ_NN_OBJS)
	rm -f $@ && ar rcs $@ $^

FUZZ_COMMON    = $(FUZZ)/obj/regress/fuzz/fuzz_engine.o
FUZZ_PG_STUBS  = $(FUZZ)/obj/regress/fuzz/fuzz_pg.o

$(FUZZ)/fuzz_blob: $(FUZZ)/obj/regress/fuzz/fuzz_blob.o $(FUZZ_COMMON) $(FUZZ)/nn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_LDFLAGS) $^ $(BLAS_LIBS) -lm -o $@

$(FUZZ)/fuzz_spec: $(FUZZ)/obj/regress/fuzz/fuzz_spec.o $(FUZZ)/obj/regress/fuzz/fuzz_json.o \
		$(FUZZ)/obj/regress/fuzz/fuzz_jsonb_build.o $(FUZZ)/obj/regress/fuzz/fuzz_numeric.o \
		$(FUZZ)/obj/src/spec/spec_json.o $(FUZZ)/obj/src/spec/rank_metric.o $(FUZZ)/obj/src/base/messages.o \
		$(FUZZ)/obj/src/base/devices.o \
		$(FUZZ)/obj/src/base/jsonb_build.o $(FUZZ_PG_STUBS) $(FUZZ_COMMON) $(FUZZ)/nn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_LDFLAGS) $^ $(FUZZ_PG_LIBS) $(BLAS_LIBS) -lm -o $@

$(FUZZ)/fuzz_packed: $(FUZZ)/obj/regress/fuzz/fuzz_packed.o $(FUZZ)/obj/src/data/packed.o \
		$(FUZZ)/obj/src/base/arrays.o $(FUZZ_PG_STUBS) $(FUZZ_COMMON) $(FUZZ)/nn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_LDFLAGS) $^ $(FUZZ_PG_LIBS) $(BLAS_LIBS) -lm -o $@

# the ONNX reader (src/models/onnx_import*.c) and the protobuf-c code generated from onnx.proto
$(FUZZ)/fuzz_onnx: $(FUZZ)/obj/regress/fuzz/fuzz_onnx.o $(FUZZ)/obj/src/models/onnx_import.o \
		$(FUZZ)/obj/src/models/onnx_import_layers.o $(FUZZ)/obj/src/models/onnx_import_graph.o \
		$(FUZZ)/obj/src/models/onnx_import_seq.o $(FUZZ)/obj/src/models/onnx_patterns.o \
		$(FUZZ)/obj/src/models/onnx_attention.o $(FUZZ)/obj/src/models/onnx_depth.o \
		$(FUZZ)/obj/$(ONNX_GEN)/onnx.pb-c.o $(FUZZ)/obj/src/models/model_exchange.o $(FUZZ)/obj/src/spec/tensors.o \
		$(FUZZ)/obj/regress/fuzz/fuzz_json.o $(FUZZ)/obj/regress/fuzz/fuzz_jsonb_build.o \
		$(FUZZ)/obj/regress/fuzz/fuzz_numeric.o $(FUZZ)/obj/src/spec/spec_json.o $(FUZZ)/obj/src/base/messages.o \
		$(FUZZ)/obj/src/base/devices.o $(FUZZ)/obj/src/base/jsonb_build.o $(FUZZ_PG_STUBS) $(FUZZ_COMMON) $(FUZZ)/nn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_LDFLAGS) $^ $(FUZZ_PG_LIBS) $(BLAS_LIBS) -lprotobuf-c -lpthread -lm -o $@

$(FUZZ)/gen_corpus: regress/fuzz/gen_corpus.c regress/fuzz/gen_onnx.c $(ONNX_GEN)/onnx.pb-c.c $(FUZZ)/nn.a \
		regress/fuzz/gen_onnx.h $(ONNX_GEN)/onnx.pb-c.h
	$(FUZZ_CC) $(NN_CPPFLAGS) -I$(ONNX_GEN) $(FUZZ_CFLAGS) $(filter %.c %.a,$^) $(BLAS_LIBS) -lprotobuf-c -lm -o $@

fuzz-build: $(FUZZ_BINS) $(FUZZ)/gen_corpus

fuzz: fuzz-build
	regress/fuzz/run.sh $(FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	regress/fuzz/run.sh --smoke $(FUZZ) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

# Rewrites the committed seed corpus from regress/fuzz/gen_corpus.c.
fuzz-corpus: $(FUZZ)/gen_corpus
	rm -rf regress/fuzz/corpus
	$(FUZZ)/gen_corpus regress/fuzz/corpus

.PHONY: fuzz fuzz-build fuzz-smoke fuzz-corpus
