#!/bin/sh
# Pipeline parallelism: every schedule at pp = 2, 4, 8 (and interleaved
# virtual stages) reproduces pp = 1 bit for bit; the full 3D grid matches the
# serial run; checkpoints reshard across pipeline layouts; the timeline.
. "$(dirname "$0")/lib.sh"

# 8 layers, 8 micro-batches of one sequence per step; lr 3e-3 keeps 20 steps
# of this deep toy model out of the chaotic regime, where any rounding
# difference (other layouts sum in another order) grows without bound
common="model.n_layer=8 train.steps=20 train.batch_size=8 train.micro_batch_size=1 train.lr=3d-3"
triad_run 1 "$DECKS/tiny.nml" $common io.save_final=.true. io.run_dir="'$scratch/pp1'"
ok $? "pp = 1 reference"

bitwise() {   # NAME NP OVERRIDES...
    name=$1; np=$2; shift 2
    triad_run "$np" "$DECKS/tiny.nml" $common io.run_dir="'$scratch/$name'" "$@"
    st=$?
    ok $st "$name runs on $np ranks"
    [ $st -eq 0 ] || { diag < "$scratch/last.out"; return; }
    compare_runs "$scratch/$name" "$scratch/pp1" 0 loss grad_norm > /dev/null
    ok $? "$name: per-step loss and grad norm bitwise identical to pp = 1 over 20 steps"
}
bitwise 1f1b_pp2 2 parallel.pp=2
bitwise 1f1b_pp4 4 parallel.pp=4
bitwise 1f1b_pp8 8 parallel.pp=8
bitwise gpipe_pp4 4 parallel.pp=4 parallel.schedule=gpipe
bitwise interleaved_pp2_v2 2 parallel.pp=2 parallel.virtual_stages=2 parallel.schedule=interleaved
bitwise interleaved_pp4_v2 4 parallel.pp=4 parallel.virtual_stages=2 parallel.schedule=interleaved

# the full grid: tp 2 x dp 2 x pp 2 on 8 ranks against the serial run
triad_run 8 "$DECKS/tiny.nml" $common parallel.tp=2 parallel.pp=2 io.save_final=.true. io.trace=.true. \
    io.run_dir="'$scratch/3d'"
st=$?
ok $st "tp 2 x dp 2 x pp 2 on 8 ranks"
[ $st -eq 0 ] || diag < "$scratch/last.out"
grep -q "world 8 = tp 2 x dp 2 x pp 2" "$scratch/last.out"
ok $? "the grid is reported"
compare_runs "$scratch/3d" "$scratch/pp1" 1e-5 loss grad_norm | diag
compare_runs "$scratch/3d" "$scratch/pp1" 1e-5 loss > /dev/null
ok $? "3D: per-step losses within 1e-5 relative of the serial run over 20 steps"
"$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$scratch/3d/ckpt_20.h5" "$scratch/pp1/ckpt_20.h5" 1e-4 1e-2 > /dev/null
ok $? "3D: parameters after the run within 1e-4 of the serial run's"
grep -q "pipeline bubble: predicted 20.0% (1f1b, pp 2, v 1, m 4); measured idle" "$scratch/last.out"
ok $? "the measured idle is reported next to the predicted bubble"

# the timeline: valid JSON, one track per rank, every F and B of every step
"$PYTHON3" - "$scratch/3d/trace.json" <<'PY'
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {e["tid"] for e in ev if e["ph"] == "M"}
fb = collections.Counter((e["tid"], e["cat"]) for e in ev if e["ph"] == "X" and e["cat"] in ("F", "B"))
ok = tracks == set(range(8)) and all(fb[(r, k)] == 20 * 4 for r in range(8) for k in ("F", "B"))
ok = ok and any(e.get("cat") == "recv wait (idle)" for e in ev) and any(e.get("cat") == "send" for e in ev)
sys.exit(0 if ok else 1)
PY
ok $? "trace.json: one track per rank, 80 forwards and 80 backwards on each (4 per step), sends and idle waits"

# reshard: the 2 x 2 x 2 checkpoint continues at 1 x 1 x 1 and at tp 1 x dp 2 x pp 4
triad_run 1 "$DECKS/tiny.nml" model.n_layer=8 train.steps=5 train.lr=3d-3 io.init_from="'$scratch/3d/ckpt_20.h5'" io.run_dir="'$scratch/r1'"
ok $? "the 2 x 2 x 2 checkpoint read at 1 x 1 x 1"
triad_run 8 "$DECKS/tiny.nml" model.n_layer=8 train.steps=5 train.lr=3d-3 parallel.pp=4 io.init_from="'$scratch/3d/ckpt_20.h5'" io.run_dir="'$scratch/r8'"
ok $? "the 2 x 2 x 2 checkpoint read at tp 1 x dp 2 x pp 4"
compare_runs "$scratch/r8" "$scratch/r1" 1e-5 loss > /dev/null
ok $? "both continue with the same losses (1e-5)"

"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=4 parallel.pp=4 train.micro_batch_size=2 > "$scratch/sched.out" 2>&1
grep -q "rank 3  .  .  .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3" "$scratch/sched.out" && grep -q "bubble fraction 3/7" "$scratch/sched.out"
ok $? "triad schedule prints the 4-stage, 4-micro-batch 1F1B picture and its bubble"
"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=8 parallel.pp=2 parallel.virtual_stages=2 parallel.schedule=interleaved train.batch_size=5 train.micro_batch_size=1 > "$scratch/sched.out" 2>&1
[ $? -eq 1 ] && grep -q "multiple" "$scratch/sched.out"
ok $? "interleaving 5 micro-batches on 2 stages is refused with the reason"
done_testing
