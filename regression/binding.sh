#!/bin/sh
# binding.sh -- a rank whose OpenMP threads would share a core is warned
# about at start-up, with the launcher option that fixes it, and a rank
# bound right is not; the peak line's "N cores" is what the threads get
# (src/grid/binding.c, docs/performance.md "Threads and cores").
. "$(dirname "$0")/lib.sh"

runs=0
run() { # run THREADS [launcher words ...] -- triad on the tiny deck, output in $scratch/last.out
    threads=$1 runs=$((runs + 1))
    shift
    "$@" "$TRIAD" "$DECKS/tiny.nml" train.steps=4 train.threads="$threads" io.run_dir="'$scratch/run$runs'" \
        > "$scratch/last.out" 2>&1
}
check() { # check STATUS DESCRIPTION -- ok, and the run's messages when not
    ok "$1" "$2"
    [ "$1" -eq 0 ] || grep "warning\|error\|peak" "$scratch/last.out" | diag
}
cores_of_peak() { sed -n 's/^peak (rank 0): nominal [0-9.]* GFLOP\/s (\([0-9.]*\) cores x .*/\1/p' "$scratch/last.out"; }
warned() { grep -q "OpenMP threads" "$scratch/last.out"; }

set -- $("$PYTHON3" -c "import os; print(*sorted(os.sched_getaffinity(0)))")
c0=$1 c1=${2:-}

# any launcher: the affinity set by taskset
run 2 $MPIEXEC -n 1 taskset -c "$c0"
[ $? -eq 0 ] && grep -q "warning: rank 0 (on [^)]*): 2 OpenMP threads on 1 core (1 hardware thread: CPU $c0): the threads share it" \
    "$scratch/last.out" && grep -q "srun --cpus-per-task=2" "$scratch/last.out" && [ "$(cores_of_peak)" = 1.00 ]
check $? "2 threads on one CPU (taskset): warned, the fix named, the peak counts 1.00 cores"
grep "^warning" "$scratch/last.out" | diag
if [ -n "$c1" ]; then
    run 2 $MPIEXEC -n 1 taskset -c "$c0,$c1"
    [ $? -eq 0 ] && ! warned && [ "$(cores_of_peak)" = 2.00 ]
    check $? "2 threads on two cores: no warning, 2.00 cores"
    # the start-up rate measured again after the last step, beside the first
    start=$(sed -n 's/^peak (rank 0): .*, measured sgemm \([0-9.]*\) GFLOP\/s.*/\1/p' "$scratch/last.out")
    again=$(sed -n 's/^sgemm at the end of the run (rank 0): \([0-9.]*\) GFLOP\/s, at start-up \([0-9.]*\) (\([-+][0-9.]*\)%)$/\1 \2 \3/p' \
        "$scratch/last.out")
    [ -n "$start" ] && [ -n "$again" ] && set -- $again && [ "$2" = "$start" ] &&
        awk -v e="$1" -v s="$2" -v c="$3" 'BEGIN { d = 100 * (e / s - 1) - c; t = 0.06 + 10 / s; exit !(e > 0 && d < t && d > -t) }'
    check $? "the sgemm rate measured again after the last step, beside the start-up one and its change"
    runs=$((runs + 1))
    "$MPIEXEC" -n 1 taskset -c "$c0,$c1" "$TRIAD" "$DECKS/tiny.nml" train.steps=4 train.threads=2 train.peak_gflops=100 \
        io.run_dir="'$scratch/run$runs'" > "$scratch/last.out" 2>&1
    [ $? -eq 0 ] && grep -q "^peak (rank 0): 100.0 GFLOP/s from the deck" "$scratch/last.out" &&
        ! grep -q "at the end of the run" "$scratch/last.out"
    check $? "train.peak_gflops given: no rate measured, at start-up or at the end"
    # two ranks bound to the same core
    run 1 $MPIEXEC -n 2 taskset -c "$c0"
    [ $? -eq 0 ] && grep -q "warning: ranks 0-1 (2 ranks on 1 node, .*): 2 OpenMP threads in all on 1 of the node's [0-9]* cores: the ranks' bindings overlap" \
        "$scratch/last.out" && [ "$(cores_of_peak)" = 0.50 ]
    check $? "two ranks of 1 thread bound to one core: one warning for the node, each rank counts 0.50 cores"
else
    skip "one CPU only: no way to bind right"
    skip "(two ranks on distinct cores)"
    skip "(the rate measured again)"
    skip "(the peak from the deck)"
fi

# Open MPI's mpirun: its own binding (a plain mpirun -n 1 binds the rank to one core)
if $MPIEXEC --version 2>&1 | grep -q "Open MPI" && [ -n "$c1" ]; then
    run 2 $MPIEXEC -n 1 --bind-to core
    [ $? -eq 0 ] && grep -q "warning: rank 0 (on [^)]*): 2 OpenMP threads on 1 core" "$scratch/last.out" &&
        grep -q "mpirun --map-by slot:PE=2" "$scratch/last.out" && grep -q -- "--bind-to none" "$scratch/last.out"
    check $? "mpirun --bind-to core, 2 threads: warned, naming --map-by slot:PE=2 and --bind-to none"
    run 2 $MPIEXEC -n 1 --map-by slot:PE=2
    [ $? -eq 0 ] && ! warned && [ "$(cores_of_peak)" = 2.00 ]
    check $? "mpirun --map-by slot:PE=2: no warning, 2.00 cores"
    run 1 $MPIEXEC -n 2 --bind-to core
    [ $? -eq 0 ] && ! warned && [ "$(cores_of_peak)" = 1.00 ]
    check $? "2 ranks of 1 thread, each bound to its own core: no warning, 1.00 cores each"
    run 2 $MPIEXEC -n 2 --bind-to core
    [ $? -eq 0 ] && [ "$(grep -c "OpenMP threads" "$scratch/last.out")" -eq 1 ] &&
        grep -q "warning: ranks 0-1 (2 ranks on 1 node, [^)]*): 2 OpenMP threads each on 1 core" "$scratch/last.out"
    check $? "2 ranks of 2 threads, each bound to one core: one line for both ranks"
else
    for i in 1 2 3 4; do skip "MPIEXEC is not Open MPI's mpirun, or one CPU only"; done
fi
done_testing
