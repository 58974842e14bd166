#!/bin/bash
# bench/gemm_libs.sh -- make bench-gemm-libs: OpenBLAS against BLIS on the networks' products, one thread
# each (bench/gemm_libs.c); BLIS as it detects the CPU, then, on a CPU with AVX-512, with its Skylake-X
# kernels (BLIS_ARCH_TYPE=skx: BLIS 0.9 does not know every CPU that has AVX-512).
set -euo pipefail
bin=$1
export OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "== BLIS as it detects the CPU"
"$bin"
if grep -qw avx512f /proc/cpuinfo; then
	echo "== BLIS_ARCH_TYPE=skx"
	BLIS_ARCH_TYPE=skx "$bin"
fi
