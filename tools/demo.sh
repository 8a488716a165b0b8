#!/bin/sh
# demo.sh -- the demo job: input/demo.nml on 8 MPI ranks (tp 2 x pp 2 x dp 2),
# one OpenMP thread each, output in run/demo/.
set -eu
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
# (a rerun moves the last demo's output aside: io.overwrite)
exec mpirun -n "${NP:-8}" --oversubscribe --bind-to none ./triad input/demo.nml io.overwrite=.true. "$@"
