#!/bin/sh
# The held-out loss (train.eval_every, data.val_path): the training numbers
# are bitwise the same with and without it, on one rank and on pp 2 x dp 2
# (interleaved), under ZeRO-3 and on cp 2 x pp 2; the held-out loss is the same on every layout (1e-5);
# metrics.h5's /eval holds one row per evaluation, and a restart drops the
# rows after its step; decks that ask for it wrongly are refused; a stop
# (SIGUSR1) during an evaluation gives it up at the next batch and stops
# with a checkpoint, instead of waiting for all of it.  (Its
# value against PyTorch: regression/llama_pytorch.sh.)
. "$(dirname "$0")/lib.sh"

corpus="$top_srcdir/regression/cases/data/corpus.txt"
deck="$DECKS/tiny.nml"
common="model.n_layer=4 model.vocab_size=256 data.kind='text' data.path='$corpus' train.steps=12 train.batch_size=8
train.micro_batch_size=2 io.checkpoint_every=6"
ev="data.val_path='$corpus' train.eval_every=4 train.eval_batches=2"
evals() { "$PYTHON3" -c "import h5py, sys; f = h5py.File(sys.argv[1] + '/metrics.h5');
print(' '.join('%d:%.9g' % (s, l) for s, l in zip(f['eval/step'][:], f['eval/loss'][:])))" "$1"; }
# same_evals A B: two runs' three held-out losses (evals' lists) within 1e-5
same_evals() { "$PYTHON3" -c "import sys; a = [float(x.split(':')[1]) for x in sys.argv[1].split()];
b = [float(x.split(':')[1]) for x in sys.argv[2].split()];
sys.exit(not (len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))))" "$1" "$2"; }

for lay in "1" "4 parallel.pp=2 parallel.virtual_stages=2 parallel.schedule=interleaved" \
           "4 parallel.pp=2 parallel.zero_stage=3" "4 parallel.pp=2 parallel.cp=2"; do
    set -- $lay
    np=$1; shift
    name=$(echo "$np $*" | tr -c 'a-z0-9\n' '_')
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/plain$name'"
    triad_run "$np" "$deck" $common $ev "$@" io.run_dir="'$scratch/eval$name'"
    st=$?
    grep -q "step 4: validation loss" "$scratch/last.out" && grep -q "| val loss " "$scratch/last.out"
    ok $? "$np rank(s) $*: the held-out loss in the log and the progress line"
    [ $st -eq 0 ] && compare_runs "$scratch/eval$name" "$scratch/plain$name" 0 loss grad_norm > /dev/null
    ok $? "$np rank(s) $*: training losses and gradient norms bitwise the same with evaluation"
done
one=$(evals "$scratch/eval1_")
[ "$(echo "$one" | wc -w)" -eq 3 ] && echo "$one" | grep -q "^4:.* 8:.* 12:"
ok $? "/eval has the steps 4, 8 and 12 ($one)"
four=$(evals "$scratch/eval4_parallel_pp_2_parallel_virtual_stages_2_parallel_schedule_interleaved")
same_evals "$one" "$four"
ok $? "the held-out losses on pp 2 x dp 2 (interleaved) equal one rank's within 1e-5 ($four)"
z3=$(evals "$scratch/eval4_parallel_pp_2_parallel_zero_stage_3")
same_evals "$one" "$z3"
ok $? "the held-out losses under ZeRO-3 (pp 2 x dp 2: the layers gathered for the forwards) equal one rank's ($z3)"
cp2=$(evals "$scratch/eval4_parallel_pp_2_parallel_cp_2")
same_evals "$one" "$cp2"
ok $? "the held-out losses on cp 2 x pp 2 (ring attention in the forwards) equal one rank's ($cp2)"

# a restart at step 6 drops nothing before it and redoes 8 and 12
mkdir -p "$scratch/rs" && cp "$scratch/eval1_/ckpt_6.h5" "$scratch/eval1_/metrics.h5" "$scratch/rs/"
triad_run 1 "$deck" $common $ev io.restart=auto io.run_dir="'$scratch/rs'"
[ $? -eq 0 ] && [ "$(evals "$scratch/rs")" = "$one" ]
ok $? "restarted at step 6: /eval holds 4, 8, 12 once each, the same values"

# decks that ask for it wrongly
triad_run 1 "$deck" train.eval_every=5
[ $? -eq 1 ] && grep -q "eval_every = 5 needs held-out data, but data.val_path is empty" "$scratch/last.out"
ok $? "eval_every without val_path is refused"
triad_run 1 "$deck" $common data.val_path="'$scratch/none.txt'" train.eval_every=4 io.run_dir="'$scratch/bad'"
[ $? -eq 1 ] && grep -q "data.val_path" "$scratch/last.out" && grep -q "none.txt" "$scratch/last.out"
ok $? "a val_path that does not exist is refused, naming it"
head -c 100 "$corpus" > "$scratch/short.txt"
triad_run 1 "$deck" $common data.val_path="'$scratch/short.txt'" train.eval_every=4 io.run_dir="'$scratch/bad2'"
[ $? -eq 1 ] && grep -q "not one of the 1 global batches of batch_size = 8" "$scratch/last.out"
ok $? "held-out data shorter than one global batch is refused with the counts"
grep "error" "$scratch/last.out" | diag

# a stop during an evaluation: 16 held-out batches of 0.5 s each (diag.slow_rank),
# every second step; SIGUSR1 to this test's mpirun once step 1 is logged (the
# signal lands in step 2's forward, 0.5 s, or the evaluation after it)
stop_when "$scratch/stop.out" "^step  *1/" 2 "$deck" $common data.val_path="'$corpus'" train.eval_every=2 \
    train.eval_batches=16 train.steps=100 diag.slow_rank=0 diag.slow_seconds=0.5 io.log_every=1 io.run_dir="'$scratch/stop'"
st=$?
grep "validation\|stopping" "$scratch/stop.out" | diag
[ $st -eq 3 ] && grep -q "step 2: validation given up after [0-2]\.[0-9]* s: a stop was asked" "$scratch/stop.out" &&
    ! grep -q "step 2: validation loss" "$scratch/stop.out" &&
    grep -q "stopping at step 2 (signal); writing a checkpoint" "$scratch/stop.out" &&
    grep -q "checkpoint $scratch/stop/ckpt_2.h5 written and verified" "$scratch/stop.out" &&
    [ "$("$PYTHON3" -c "import h5py, sys; f = h5py.File(sys.argv[1]); print(len(f['eval/step']) if 'eval' in f else 0)" "$scratch/stop/metrics.h5")" = 0 ]
ok $? "SIGUSR1 during an 8 s evaluation: given up, no /eval row, checkpoint of step 2, status 3 (got $st)"
done_testing
