#!/bin/sh
# zero_memory.sh -- what each ZeRO stage saves, measured side by side in one
# run: a 60M-parameter GPT-2 (L8 C768 T64, vocabulary 4096) on dp = 4 ranks,
# AdamW in fp32, zero_stage 0, 1, 2 and 3, each with a checkpoint at the end
# (the file is written slice by slice: nothing is gathered).  Per stage:
# the largest rank's peak resident set (the run's own /memory/peak_rss,
# getrusage), the plan's peak beside it (/memory/planned_peak), and the
# ratio to zero_stage 0 beside DeepSpeed's formula for the model states
# (fp32 AdamW: 16 psi; ZeRO-1 8 psi + 8 psi/dp; ZeRO-2 4 psi + 12 psi/dp; ZeRO-3 16 psi/dp),
# the rest of the rank (activations, workspace, runtime) counted as
# zero_stage 0 measures it.  Memory is measured here, never in a test.
#   bench/zero_memory.sh                   dp = 4
#   DP=8 bench/zero_memory.sh              another dp (ranks on this node)
#   STAGES='0 2' bench/zero_memory.sh      some stages only (0 must be among them)
set -u
cd "$(dirname "$0")/.."
DP=${DP:-4}
STAGES=${STAGES:-0 1 2 3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero_memory.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
model="model.n_layer=8 model.d_model=768 model.n_head=12 model.seq_len=64 model.vocab_size=4096"
common="train.steps=3 train.warmup_steps=0 train.batch_size=$((4 * DP)) train.micro_batch_size=4 train.peak_gflops=100
        io.save_final=.true. io.overwrite=.true."

for z in $STAGES; do
    mpirun -n "$DP" --oversubscribe --bind-to none ./triad bench/gpt2_124m.nml $model $common \
        parallel.dp="$DP" parallel.zero_stage="$z" io.run_dir="'$tmp/z$z'" > "$tmp/z$z.out" 2>&1 ||
        { tail -n 20 "$tmp/z$z.out"; exit 1; }
done

/usr/bin/python3 - "$tmp" "$DP" $STAGES <<'PY'
import sys, h5py
tmp, dp, stages = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
MiB = 2.0 ** 20
rows = {}
for z in stages:
    with h5py.File("%s/z%d/metrics.h5" % (tmp, z)) as f:
        rss, plan = f["memory/peak_rss"][:], f["memory/planned_peak"][:]
    with h5py.File("%s/z%d/ckpt_3.h5" % (tmp, z)) as f:
        psi = sum(d.size for d in [f["model"][k] for k in f["model"]] if isinstance(d, h5py.Dataset))
        psi += sum(o.size for g in f["model"] if isinstance(f["model"][g], h5py.Group)
                   for o in f["model"][g].values())
    r = int(rss.argmax())
    rows[z] = (rss[r], plan[r], psi)
states = {0: 16.0, 1: 8.0 + 8.0 / dp, 2: 4.0 + 12.0 / dp, 3: 16.0 / dp}
base, _, psi = rows[0]
rest = base - 16 * psi          # what is not model state, as zero_stage 0 measures it
print("GPT-2 L8 C768 T64 V4096: %.1f M parameters, dp = %d, fp32 AdamW" % (psi / 1e6, dp))
print("%-12s %10s %10s %9s %10s %12s" % ("zero_stage", "RSS MiB", "plan MiB", "plan err", "vs stage 0", "formula"))
for z in stages:
    rss, plan, _ = rows[z]
    formula = (rest + states[z] * psi) / base
    print("%-12d %10.1f %10.1f %+8.1f%% %10.3f %12.3f" % (z, rss / MiB, plan / MiB, 100 * (plan / rss - 1), rss / base,
                                                         formula))
print("formula: (zero_stage 0's RSS - 16 psi + the stage's model states) / zero_stage 0's RSS")
PY
