#!/bin/sh
# pp_bubble.sh -- measured pipeline idle against the schedule's predicted
# bubble (p-1)/(v*m+p-1) for gpipe, 1f1b and interleaved (v = 2) at pp = 4,
# m = 4, 8, 16 micro-batches of one sequence; one thread per rank.  A small
# vocabulary keeps the last stage (LM head) from outweighing the others.
# On a 2-core machine the 4 ranks share the cores: read the idle fractions
# as an upper bound (a rank waiting for its neighbour also waits for a core).
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
PP=${PP:-4}
printf '%-12s %4s %10s %20s\n' schedule m predicted "measured min/avg/max"
for sched in gpipe 1f1b interleaved; do
    v=1; [ $sched = interleaved ] && v=2
    for m in 4 8 16; do
        out=$(mpirun -n $PP --oversubscribe --bind-to none ./triad bench/small.nml model.n_layer=8 model.seq_len=128 model.vocab_size=256 \
              parallel.pp=$PP parallel.schedule=$sched parallel.virtual_stages=$v train.batch_size=$m \
              train.micro_batch_size=1 train.steps=6 train.threads=1 io.run_dir="'run/bench_pp'" io.overwrite=.true. 2>&1) || { echo "$out"; exit 1; }
        line=$(echo "$out" | grep "pipeline bubble:")
        pred=$(echo "$line" | sed -n 's/.*predicted \([0-9.]*%\).*/\1/p')
        meas=$(echo "$line" | sed -n 's/.*min \([0-9.]*%\) avg \([0-9.]*%\) max \([0-9.]*%\).*/\1 \2 \3/p')
        printf '%-12s %4d %10s %20s\n' "$sched" "$m" "$pred" "$meas"
    done
done
