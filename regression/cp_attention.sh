#!/bin/sh
# Ring attention over real MPI ranks against attention over the whole
# sequence (regression/unit/test_cp on 4 ranks: cp = 2 and 4, multi-head and
# grouped-query heads).
. "$(dirname "$0")/lib.sh"
exec $MPIEXEC -n 4 "$top_builddir/regression/unit/test_cp"
