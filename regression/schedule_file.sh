#!/bin/sh
# A pipeline schedule from a file (parallel.schedule = 'file', docs/pipeline.md
# "A schedule from a file"): 1F1B written out, a schedule no generator makes
# (GPipe on rank 0, 1F1B on rank 1) and an interleaved one with grouped
# computes each train to the same bits as pp = 1 (every step's loss and grad
# norm, the final checkpoint); triad schedule draws a file; and a file that
# deadlocks, is malformed, misses a rank or an action, breaks micro-batch
# order, or names chunks or micro-batches that do not exist is refused before
# launch with the file, the line and the reason.  Files with weight
# gradients (W, zero bubble: zb-h1 written out, an interleaved one deferring
# every W) train to the same bits too and are drawn and checked the same
# way: a W before its B, twice, or weight gradients out of micro-batch order
# are refused.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="train.steps=4 train.micro_batch_size=2 io.save_final=.true."
f="$scratch/sched"
mkdir -p "$f"
printf '%s\n' "# 1F1B on 2 ranks, 4 micro-batches" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3" \
    "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" > "$f/1f1b.txt"
printf '%s\n' "rank 1: F0 B0 F1 B1 F2 B2 F3 B3   # 1F1B here" "" "rank 0: F0 F1 F2 F3 B0 B1 B2 B3   # GPipe here" \
    > "$f/mixed.txt"
# interleaved on 2 ranks x 2 chunks, steady forward and backward grouped
printf '%s\n' "rank 0: F0c0 F1c0 F0c1 F1c1 F2c0+B0c1 F3c0+B1c1 F2c1+B0c0 F3c1+B1c0 B2c1 B3c1 B2c0 B3c0" \
    "rank 1: F0c0 F1c0 F0c1+B0c1 F1c1+B1c1 F2c0+B0c0 F3c0+B1c0 F2c1+B2c1 F3c1+B3c1 B2c0 B3c0" > "$f/inter.txt"

triad_run 1 "$deck" $common io.run_dir="'$scratch/ref'"
ok $? "the reference: pp = 1"
triad_run 1 "$deck" $common model.n_layer=4 io.run_dir="'$scratch/ref4'"
ok $? "the reference for 4 layers: pp = 1"
# same NAME RUN REF [overrides]: a run of schedule = 'file' on 2 ranks, then its every
# step's loss and grad norm and its final checkpoint bitwise equal to REF's
same() {
    name=$1 run=$2 ref=$3
    shift 3
    triad_run 2 "$deck" $common parallel.pp=2 parallel.schedule="'file'" "$@" io.run_dir="'$scratch/$run'"
    st=$?
    out=$([ $st -eq 0 ] && compare_runs "$scratch/$run" "$scratch/$ref" 0 loss grad_norm 2>&1 &&
          "$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$(ls "$scratch/$run"/ckpt_*.h5 | tail -1)" \
              "$(ls "$scratch/$ref"/ckpt_*.h5 | tail -1)" 0 2>&1)
    rc=$?
    ok $rc "$name: bitwise equal to pp = 1 (every step's loss and grad norm, the final parameters; exit $st)"
    [ $rc -eq 0 ] || { echo "$out" | tail -5 | diag; tail -5 "$scratch/last.out" | diag; }
}
same "1F1B from a file on pp = 2" f1f1b ref parallel.schedule_file="'$f/1f1b.txt'"
same "GPipe on rank 0, 1F1B on rank 1, from a file" mixed ref parallel.schedule_file="'$f/mixed.txt'"
same "interleaved (2 chunks a rank, grouped computes) from a file" inter ref4 model.n_layer=4 \
    parallel.virtual_stages=2 parallel.schedule_file="'$f/inter.txt'"

# the held-out loss runs the file's forwards alone: the same numbers as pp = 1
ev="train.eval_every=2 train.eval_batches=2 data.kind='text' data.path='$top_srcdir/LICENSE' data.val_path='$top_srcdir/README.md' model.vocab_size=256"
triad_run 1 "$deck" $common $ev io.run_dir="'$scratch/ev1'" &&
    triad_run 2 "$deck" $common $ev parallel.pp=2 parallel.schedule="'file'" parallel.schedule_file="'$f/mixed.txt'" \
        io.run_dir="'$scratch/ev2'" &&
    "$PYTHON3" - "$scratch/ev1/metrics.h5" "$scratch/ev2/metrics.h5" << 'PY'
import sys, h5py
a, b = (h5py.File(p, "r")["eval/loss"][:] for p in sys.argv[1:])
sys.exit(0 if len(a) == 2 and list(a) == list(b) else "held-out losses %s and %s" % (list(a), list(b)))
PY
ok $? "the held-out loss under the file's schedule (its forwards alone) equals pp = 1's, bit for bit"

"$TRIAD" schedule "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 parallel.schedule="'file'" \
    parallel.schedule_file="'$f/mixed.txt'" > "$scratch/pic" 2>&1 &&
    grep -q '^rank 0  F0 F1 F2 ' "$scratch/pic" && grep -q '^peak in flight (mb, chunk) per rank: 4 1' "$scratch/pic"
ok $? "triad schedule draws the file's schedule (rank 0's four forwards first, its peak 4)"
"$TRIAD" plan "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 parallel.schedule="'file'" \
    parallel.schedule_file="'$f/mixed.txt'" > "$scratch/plan" 2>&1
ok $? "triad plan plans it"

# zero bubble from a file: zb-h1 on 2 ranks (each B's W after it, rank 1 deferring one), and an
# interleaved file whose W's wait for the cool-down, one grouped with a backward
printf '%s\n' "rank 0: F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3" "rank 1: F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3" > "$f/zb.txt"
"$TRIAD" schedule "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 parallel.schedule="'file'" \
    parallel.schedule_file="'$f/zb.txt'" > "$scratch/pic" 2>&1 &&
    grep -q '^rank 1  .  F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3' "$scratch/pic" &&
    grep -q '^bubble fraction 1/13 ' "$scratch/pic" && grep -q '^peak of pending weight gradients (W) per rank: 1 2' "$scratch/pic"
st=$?
ok $st "triad schedule draws a file with W's (zb-h1 on 2 ranks: bubble 1/13, rank 1 defers one W)"
[ $st -eq 0 ] || head -12 "$scratch/pic" | diag
printf '%s\n' "rank 0: F0c0 F1c0 F0c1 F1c1 F2c0+B0c1 F3c0+B1c1 F2c1+B0c0 F3c1+B1c0 B2c1 B3c1 B2c0 B3c0+W0c1 W1c1 W2c1 W3c1 W0c0 W1c0 W2c0 W3c0" \
    "rank 1: F0c0 F1c0 F0c1+B0c1 F1c1+B1c1 F2c0+B0c0 F3c0+B1c0 F2c1+B2c1 F3c1+B3c1 B2c0 B3c0" > "$f/interw.txt"
"$TRIAD" check "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 model.n_layer=4 parallel.virtual_stages=2 \
    parallel.schedule="'file'" parallel.schedule_file="'$f/interw.txt'" > "$scratch/check" 2>&1
ok $? "an interleaved file whose rank 0 defers every W to its end passes triad check"
same "zb-h1 from a file (B and W split)" fzb ref parallel.schedule_file="'$f/zb.txt'"
same "interleaved from a file, rank 0's W's all at its end" finterw ref4 model.n_layer=4 parallel.virtual_stages=2 \
    parallel.schedule_file="'$f/interw.txt'"

# refused NAME FILE PATTERN: triad check of the file fails, status 1, PATTERN in the error
refused() {
    printf '%s\n' "$2" "$3" > "$f/bad.txt"
    "$TRIAD" check "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 parallel.schedule="'file'" \
        parallel.schedule_file="'$f/bad.txt'" > "$scratch/bad.out" 2>&1
    st=$?
    [ $st -eq 1 ] && grep -qF -- "$4" "$scratch/bad.out"
    ok $? "$1: refused before launch (status $st): $4"
    [ $st -eq 1 ] && grep -qF -- "$4" "$scratch/bad.out" || head -3 "$scratch/bad.out" | diag
}
refused "a deadlock" "rank 0: F0 B0 F1 B1 F2 B2 F3 B3" "rank 1: F0 F1 B0 B1 F2 F3 B2 B3" \
    "the simulator refuses it: deadlock with rendezvous sends"
refused "a token" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 X2 F3 B3" \
    "bad.txt:2: 'X2' is no compute"
refused "a missing rank" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3" "" "rank 1 has no line"
refused "a rank twice" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3" "rank 0: F0 B0 F1 B1 F2 B2 F3 B3" \
    "bad.txt:2: rank 0 has a line already (line 1)"
refused "backwards out of order" "rank 0: F0 F1 B1 F2 B0 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0: B1 comes before B0: each chunk's backwards run in micro-batch order"
refused "a backward before its forward" "rank 0: F0 B0 B1 F1 F2 B2 F3 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0: B1 comes before F1: a backward needs its forward first"
refused "a missing backward" "rank 0: F0 F1 B0 F2 B1 F3 B2" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0 never runs B3"
refused "a compute twice" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0: B3 appears twice"
refused "a micro-batch past the step's" "rank 0: F0 F1 B0 F2 B1 F3 B2 B3 F4" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "'F4': micro-batch 4, but a step has 4 per replica (0 to 3)"
refused "a chunk without virtual stages" "rank 0: F0c1 F1 B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "'F0c1': chunk 1, but virtual_stages = 1"
refused "a group ending in +" "rank 0: F0 F1+ B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "a group ends with '+'"
refused "no 'rank R:'" "0: F0 F1 B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "bad.txt:1: a line starts with 'rank R:'"
refused "a W before its B" "rank 0: F0 F1 W0 B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "bad.txt:1: rank 0: W0 comes before B0: a weight gradient needs its backward (the input gradient) first"
refused "a W twice" "rank 0: F0 F1 B0 W0 F2 B1 W0 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "bad.txt:1: rank 0: W0 appears twice"
refused "weight gradients out of order" "rank 0: F0 F1 B0 B1 W1 W0 F2 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0: W1 adds the weight gradient of micro-batch 1 before that of micro-batch 0"
refused "a fused backward before an earlier W" "rank 0: F0 F1 B0 B1 W0 F2 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "rank 0: B1 (no W follows it: the fused backward) adds the weight gradient of micro-batch 1 before that of micro-batch 0"
refused "a token that is no compute" "rank 0: F0 F1 B0 X0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "write F<micro-batch>, B<micro-batch> or W<micro-batch>"
refused "a micro-batch number of 10 digits" "rank 0: F0 F4294967297 B0 F2 B1 F3 B2 B3" "rank 1: F0 B0 F1 B1 F2 B2 F3 B3" \
    "'F4294967297': the micro-batch number after 'F' has more than 9 digits"
"$TRIAD" check "$deck" world=2 parallel.pp=2 train.micro_batch_size=2 parallel.schedule="'file'" \
    parallel.schedule_file="'$f/absent.txt'" > "$scratch/bad.out" 2>&1
[ $? -eq 1 ] && grep -q "absent.txt': cannot read it (No such file or directory)" "$scratch/bad.out"
ok $? "a schedule_file that is not there: refused, named"
"$TRIAD" check "$deck" world=2 parallel.pp=2 parallel.schedule_file="'$f/1f1b.txt'" > "$scratch/bad.out" 2>&1
[ $? -eq 1 ] && grep -q "is set, but schedule = '1f1b'" "$scratch/bad.out"
ok $? "schedule_file without schedule = 'file': refused, never silently ignored"
done_testing
