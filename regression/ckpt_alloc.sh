#!/bin/sh
# A checkpoint written and read on 2 ranks while memory runs out on one of
# them (regression/unit/test_ckpt_alloc: each of that rank's allocations
# refused in turn; every rank must end each run with the result or the
# error, none waiting in a collective the other left).
. "$(dirname "$0")/lib.sh"
exec timeout 900 $MPIEXEC -n 2 "$top_builddir/regression/unit/test_ckpt_alloc"
