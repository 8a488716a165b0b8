#!/bin/sh
# overlap_bench.sh -- how much of the data-parallel gradient all-reduce hides
# behind the backward: the small config (L=4 C=256 T=256 V=4096) on 2 ranks
# (dp = 2, one thread each, 4 micro-batches), reduction after the backward
# against buckets started during the last micro-batch's backward.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
printf '%-8s %10s %14s %16s\n' overlap "ms/step" "dp reduce ms" "hidden in bwd ms"
for ov in .false. .true.; do
    out=$(mpirun -n 2 --bind-to core ./triad bench/small.nml train.batch_size=8 train.micro_batch_size=1 \
          train.steps=8 train.threads=1 parallel.overlap_grad_reduce=$ov parallel.bucket_mb=4 io.run_dir="'run/bench_ov'" io.overwrite=.true. 2>&1) \
        || { echo "$out"; exit 1; }
    step=$(echo "$out" | awk '$1 == "step" && $2 == "total" { print $4 }')
    dpr=$(echo "$out" | awk '$1 == "dp" && $2 == "reduce" { print $4 }')
    hid=$(echo "$out" | sed -n 's/.*in flight during backward \([0-9.]*\) s.*/\1/p')
    printf '%-8s %10.1f %14.1f %16s\n' "$ov" "$(awk "BEGIN{print 1000*$step/8}")" "$(awk "BEGIN{print 1000*$dpr/8}")" \
        "$( [ -n "$hid" ] && awk "BEGIN{print 1000*$hid/8}" || echo -)"
done
