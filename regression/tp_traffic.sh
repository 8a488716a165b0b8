#!/bin/sh
# Tensor-parallel traffic and resharding.  (That tp = 2, 4, tp 2 x dp 2 and
# sequence parallelism at tp = 2 and 4 reproduce the serial run is the
# regression suite's: cases tp2, tp4, tp2_dp2, tp2_sp, tp4_sp and their
# twin.)  Here: the TP bytes each run counts against the analytic volume,
# and a checkpoint written at tp 2 x dp 2 read back at tp = 1 and 4.
. "$(dirname "$0")/lib.sh"

common="train.steps=20 train.batch_size=8 train.micro_batch_size=2 io.save_final=.true."
run() {   # NAME NP OVERRIDES...
    name=$1; np=$2; shift 2
    triad_run "$np" "$DECKS/tiny.nml" $common io.run_dir="'$scratch/$name'" "$@"
    st=$?
    ok $st "$name runs on $np ranks"
    [ $st -eq 0 ] || diag < "$scratch/last.out"
}
run tp2 2 parallel.tp=2
run tp4 4 parallel.tp=4
run tp2dp2 4 parallel.tp=2
run tp2sp 2 parallel.tp=2 parallel.sequence_parallel=.true.
run tp4sp 4 parallel.tp=4 parallel.sequence_parallel=.true.

# Counted TP bytes against the analytic volume (payload sizes; fp32).
# Per micro-batch of N = B*T rows: 2 all-reduces of N*C per layer forward
# and 2 backward, one each for the embedding and the final LayerNorm, and
# 3N floats of cross-entropy statistics; per step the squared norms of the
# 4 + 12L logical tensors (doubles) for the gradient norm.  With
# sequence parallelism every N*C all-reduce becomes an all-gather plus a
# reduce-scatter, and the LayerNorm gradients (4L+2)C are all-reduced once.
# After the last step the consistency check all-gathers over tp one 8-byte
# hash per entry of the parameter table (23: model.h's P_WTE ... P_EXPPROJW),
# counted in the run's totals, not in a step's row.
"$PYTHON3" - "$scratch" <<'PY'
import sys, h5py
L, C, T, mb, nmb, steps = 2, 32, 16, 2, 4, 20
N = mb * T
def counted(run):
    with h5py.File(f"{sys.argv[1]}/{run}/metrics.h5") as f:
        rows = f["comm"].attrs["rows"].decode().split(); cols = f["comm"].attrs["columns"].decode().split()
        b = f["comm/bytes"][()]
        per_step = f["metrics/comm_tp_bytes"][()]
    tp = b[rows.index("tp")]
    return {op: tp[i] for i, op in enumerate(cols)}, per_step
bad = 0
for run, sp, tp in (("tp2", 0, 2), ("tp4", 0, 4), ("tp2sp", 1, 2), ("tp4sp", 1, 4)):
    got, per_step = counted(run)
    hashes = 23 * 8 * tp
    act = (4 * L + 2) * N * C * 4 * nmb
    norms = 8 * (4 + 12 * L)
    ce = 3 * N * 4 * nmb
    if sp:
        want = {"all-reduce": steps * (ce + norms + (4 * L + 2) * C * 4), "all-gather": steps * act, "reduce-scatter": steps * act}
    else:
        want = {"all-reduce": steps * (act + ce + norms), "all-gather": 0, "reduce-scatter": 0}
    want["all-gather"] += hashes
    for op, w in want.items():
        g = got[op]
        print(f"# {run}: {op:15s} counted {g:12.0f} B, analytic {w:12.0f} B")
        bad |= g != w
    bad |= abs(per_step.sum() - (sum(want.values()) - hashes)) > 0.5
sys.exit(int(bad))
PY
ok $? "TP bytes per collective equal the analytic volume, per run and summed over the per-step rows"

# Reshard through the checkpoint: the tp = 2 x dp = 2 weights at tp = 1 and 4.
triad_run 1 "$DECKS/tiny.nml" train.steps=5 io.init_from="'$scratch/tp2dp2/ckpt_20.h5'" io.run_dir="'$scratch/re1'"
ok $? "tp = 2 x dp = 2 checkpoint read at tp = 1"
triad_run 4 "$DECKS/tiny.nml" train.steps=5 parallel.tp=4 io.init_from="'$scratch/tp2dp2/ckpt_20.h5'" io.run_dir="'$scratch/re4'"
ok $? "tp = 2 x dp = 2 checkpoint read at tp = 4"
compare_runs "$scratch/re4" "$scratch/re1" 1e-5 loss > /dev/null
ok $? "both continue with the same losses (1e-5)"
done_testing
