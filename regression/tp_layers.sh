#!/bin/sh
# Every tensor-parallel layer against its serial twin (regression/unit/test_tp
# on 4 ranks: tp = 2 and 4, with and without sequence parallelism).
. "$(dirname "$0")/lib.sh"
exec $MPIEXEC -n 4 "$top_builddir/regression/unit/test_tp"
