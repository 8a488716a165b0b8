#!/bin/sh
# The matmul tests again through the BLAS fallback (TRIAD_GEMM=blas: every
# product through cblas_sgemm), so the path a machine without AVX-512 takes
# is tested too.
. "$(dirname "$0")/lib.sh"
TRIAD_GEMM=blas exec "$top_builddir/regression/unit/test_gemm"
