#!/bin/sh
# Pipelines beyond the numbers: the timeline of a tp 2 x dp 2 x pp 2 run,
# its bubble report, checkpoints resharded across pipeline layouts, and
# `triad schedule`.  (That every schedule at pp = 2, 4, 8 and interleaved
# reproduces one rank bit for bit, and the 3D grid the serial run, is the
# regression suite's: cases pp2_*, pp4_*, pp8_1f1b, grid3d and their twins.)
# The zero-bubble schedules are drawn here; they train once the executor
# runs their W's.
. "$(dirname "$0")/lib.sh"

common="model.n_layer=8 train.steps=20 train.batch_size=8 train.micro_batch_size=1 train.lr=3d-3"

# the full grid: tp 2 x dp 2 x pp 2 on 8 ranks
triad_run 8 "$DECKS/tiny.nml" $common parallel.tp=2 parallel.pp=2 io.save_final=.true. io.trace=.true. \
    io.run_dir="'$scratch/3d'"
st=$?
ok $st "tp 2 x dp 2 x pp 2 on 8 ranks"
[ $st -eq 0 ] || diag < "$scratch/last.out"
grep -q "world 8 = tp 2 x dp 2 x pp 2" "$scratch/last.out"
ok $? "the grid is reported"
grep -q "pipeline bubble: predicted 20.0% (1f1b, pp 2, v 1, m 4); measured idle" "$scratch/last.out"
ok $? "the measured idle is reported next to the predicted bubble"

# the timeline: valid JSON, a process per rank, every step, every F and B, and the communication of
# every communicator as spans with their bytes
"$PYTHON3" - "$scratch/3d/trace.json" "$scratch/3d/metrics.h5" > "$scratch/trace.cmp" 2>&1 <<'PY'
import json, sys, collections, h5py
ev = json.load(open(sys.argv[1]))["traceEvents"]
with h5py.File(sys.argv[2]) as f:
    totals = f["comm/bytes"][:].sum(axis=1)  # rank 0's run totals, rows world tp dp pp embed
procs = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
spans = [e for e in ev if e["ph"] == "X"]
fb = collections.Counter((e["pid"], e["cat"]) for e in spans if e["cat"] in ("F", "B"))
steps = collections.Counter(e["pid"] for e in spans if e["cat"] == "step")
comm = collections.defaultdict(float)
for e in spans:
    if e["cat"].startswith("comm "):
        comm[(e["pid"], e["args"]["communicator"])] += e["args"]["bytes"]
ok = procs == set(range(8)) and all(fb[(r, k)] == 20 * 4 for r in range(8) for k in ("F", "B"))
ok = ok and all(steps[r] == 20 for r in range(8))
ok = ok and all(comm[(r, g)] > 0 for r in range(8) for g in ("tp", "dp", "pp"))
ok = ok and any(e["cat"] == "recv wait (idle)" for e in spans) and any(e["cat"] == "send" for e in spans)
ok = ok and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
ok = ok and all(comm[(0, g)] == totals[i] for i, g in enumerate(("world", "tp", "dp", "pp", "embed")))
print("# %d events; rank 0 moved %s bytes" % (len(ev), {g: int(comm[(0, g)]) for g in ("tp", "dp", "pp")}))
sys.exit(0 if ok else 1)
PY
ok $? "trace.json: a process per rank, 20 steps and 80 forwards and backwards on each, tp/dp/pp communication spans whose bytes add up to metrics.h5's /comm totals, sends and idle waits"
diag < "$scratch/trace.cmp"

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
"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=4 parallel.pp=2 parallel.cp=2 train.micro_batch_size=2 world=4 \
    > "$scratch/sched.out" 2>&1
grep -q "micro-batches per replica (dp = 1); cp = 2 ranks run each stage's actions together" "$scratch/sched.out" &&
    grep -q "rank 1  .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3" "$scratch/sched.out"
ok $? "triad schedule with cp = 2: the stages' picture (4 micro-batches on dp = 1), the cp ranks running it together"
# the zero-bubble schedules: zb-h1 (rank r defers r W's), zbv's V (rank 3 turns chunk 0 into chunk 1)
"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=4 parallel.pp=4 train.micro_batch_size=1 parallel.schedule="'zb-h1'" \
    > "$scratch/sched.out" 2>&1
grep -q "W = weight gradient" "$scratch/sched.out" && grep -q "^rank 3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 F4" "$scratch/sched.out" &&
    grep -q "^bubble fraction 1/9 " "$scratch/sched.out" && grep -q "per rank: 1 2 3 4" "$scratch/sched.out"
ok $? "triad schedule draws zb-h1 (8 micro-batches on 4 stages): W's deferred, the bubble 1/9 against 1F1B's 3/11"
"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=8 parallel.pp=4 parallel.virtual_stages=2 train.micro_batch_size=1 \
    parallel.schedule=zbv > "$scratch/sched.out" 2>&1
grep -q "^rank 3  .    .    .    F0c0 F0c1 F1c0 F1c1" "$scratch/sched.out" &&
    grep -q "^by formula (p-1)/(3\*2m+p-1), the least any schedule can have = 3/51" "$scratch/sched.out" &&
    grep -q "^peak in flight (mb, chunk) per rank: 8 8 8 8" "$scratch/sched.out"
ok $? "triad schedule draws zbv: the V's turn on rank 3, the least bubble 3/51, 2pp half stages on every rank"
"$TRIAD" check "$DECKS/tiny.nml" model.n_layer=8 parallel.pp=4 world=4 parallel.schedule=zbv > "$scratch/sched.out" 2>&1
[ $? -eq 1 ] && grep -q "schedule = 'zbv' runs two chunks" "$scratch/sched.out"
ok $? "zbv without virtual_stages = 2 is refused with the reason"
"$TRIAD" schedule "$DECKS/tiny.nml" model.n_layer=8 parallel.pp=2 parallel.virtual_stages=2 parallel.schedule=interleaved train.batch_size=5 train.micro_batch_size=1 > "$scratch/sched.out" 2>&1
[ $? -eq 1 ] && grep -q "multiple" "$scratch/sched.out"
ok $? "interleaving 5 micro-batches on 2 stages is refused with the reason"
done_testing
