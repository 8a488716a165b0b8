#!/bin/sh
# The memory planner (triad plan, src/plan/plan.c): its parameter, gradient,
# optimizer and activation bytes equal to the byte what runs allocate, and its
# traffic per step what they count, for several layouts; the 175B plan; a
# deck too large for its memory refused before training with the plan's
# advice; bad decks fail cleanly.  (Its peak against the measured resident
# set: bench/plan_vs_rss.sh; memory is never measured in a test.)
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="train.steps=3 train.warmup_steps=0 train.peak_gflops=1"

# layout NAME NP OVERRIDES...: plan and run; allocated bytes and step-2 traffic compared
layout() {
    name=$1; np=$2; shift 2
    "$TRIAD" plan "$deck" world="$np" $common "$@" > "$scratch/$name.plan" 2>&1
    ok $? "$name: triad plan"
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/$name'"
    st=$?
    ok $st "$name: runs on $np ranks"
    [ $st -eq 0 ] || { diag < "$scratch/last.out"; return; }
    # the plan's lines "  stage R: parameters P, gradients G, optimizer O, activations A bytes" against
    # metrics.h5's /memory/allocated row of each stage's first rank (tp 0, cp 0, dp 0: world rank R * tp * cp * dp)
    "$PYTHON3" - "$scratch/$name.plan" "$scratch/$name/metrics.h5" > "$scratch/$name.cmp" 2>&1 <<'PY'
import re, sys, h5py
text = open(sys.argv[1]).read()
tp, cp, dp = re.search(r"^plan for \d+ ranks = tp (\d+)(?: x cp (\d+))? x dp (\d+)", text, re.M).groups()
tp, cp, dp = int(tp), int(cp or 1), int(dp)
want = {int(r): [int(x) for x in v] for r, *v in
        re.findall(r"^  stage (\d+): parameters (\d+), gradients (\d+), optimizer (\d+), activations (\d+) bytes", text, re.M)}
with h5py.File(sys.argv[2], "r") as f:
    d = f["memory/allocated"]
    assert d.attrs["columns"].decode().split() == ["parameters", "gradients", "optimizer", "activations"]
    got = {r: [int(x) for x in d[r * tp * cp * dp]] for r in want}
for r in sorted(want):
    print(f"stage {r}: planned {want[r]}, allocated {got[r]}")
sys.exit(int(not want or want != got))
PY
    st=$?
    [ $st -eq 0 ] || diag < "$scratch/$name.cmp"
    ok $st "$name: planned parameter, gradient, optimizer and activation bytes equal the allocated, every stage"
    want=$(sed -n 's/^  stage 0 traffic per step: tp \([0-9]*\), dp \([0-9]*\), pp \([0-9]*\), embed [0-9]*, cp \([0-9]*\)[ ,].*/\1 \2 \3 \4/p' "$scratch/$name.plan")
    "$PYTHON3" - "$scratch/$name/metrics.h5" $want <<'PY'
import sys, h5py
with h5py.File(sys.argv[1]) as f:
    got = [f["metrics/comm_%s_bytes" % g][1] for g in ("tp", "dp", "pp", "cp")]
want = [float(x) for x in sys.argv[2:]]
print("# step 2, rank 0: counted tp dp pp cp", got, "planned", want)
sys.exit(int(len(want) != 4 or got != want))
PY
    ok $? "$name: planned traffic per step (tp, dp, pp, cp) equals the bytes counted on rank 0"
}
layout one       1
layout tp2       2 parallel.tp=2
layout tp2sp     2 parallel.tp=2 parallel.sequence_parallel=.true.
layout pp2       2 parallel.pp=2 train.micro_batch_size=2
layout dp2zero   2 parallel.zero_stage=1
layout 3d        8 parallel.tp=2 parallel.pp=2 train.micro_batch_size=2
layout 3dfull    8 parallel.tp=2 parallel.pp=2 train.micro_batch_size=2 train.recompute=full
layout selective 1 train.recompute=selective
moe="model.arch='llama' model.n_kv_head=2 model.n_expert=4 model.moe_ffn_hidden=24 model.n_shared_expert=1"
layout moe       2 $moe
layout moetpsp   4 $moe parallel.tp=2 parallel.sequence_parallel=.true.
layout moeep     4 $moe parallel.ep=2
layout moezbv   2 $moe parallel.pp=2 parallel.virtual_stages=2 parallel.schedule=zbv model.n_layer=4 train.micro_batch_size=1
layout moecp    4 $moe parallel.cp=2 parallel.ep=2 train.recompute=full
layout moeep4pp  8 $moe parallel.ep=4 parallel.pp=2 train.micro_batch_size=1 train.recompute=full
# ZeRO under expert parallelism: the dense tensors' shares over dp, the experts' over edp (their traffic off dp's)
for z in 1 2 3; do layout moeepzero$z 4 $moe parallel.ep=2 parallel.zero_stage=$z train.precision=bf16; done
# leading dense blocks: layers of two sizes (ZeRO's layer buffers and gathers), the MoE traffic of the MoE layers
# alone, and a first stage of dense blocks (no experts on it)
dense="model.moe_dense_layers=1 model.ffn_hidden=40"
layout moedensez3 4 $moe $dense parallel.ep=2 parallel.zero_stage=3 train.recompute=full
layout moedensepp 8 $moe $dense parallel.ep=2 parallel.pp=2 parallel.zero_stage=2 parallel.tp=2 train.micro_batch_size=1
layout bf16pp    2 parallel.pp=2 train.micro_batch_size=2 train.precision=bf16 train.pack_activations=.true.
layout bf16unpk  2 parallel.pp=2 train.micro_batch_size=2 train.precision=bf16 train.pack_activations=.false.
llama="model.arch=llama model.n_kv_head=2"
layout llama     1 $llama
layout llama3d   8 $llama parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true. train.micro_batch_size=2
layout llamazero 2 $llama parallel.zero_stage=2 train.micro_batch_size=2 train.recompute=selective train.precision=bf16
layout fp16zero  2 parallel.zero_stage=1 train.precision=fp16 train.recompute=selective
layout inter     2 parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 model.n_layer=4 train.micro_batch_size=2
layout zero3     2 parallel.zero_stage=3 train.micro_batch_size=2
layout zero3grid 8 parallel.tp=2 parallel.pp=2 parallel.zero_stage=3 parallel.sequence_parallel=.true. train.micro_batch_size=1 train.precision=bf16 train.pack_activations=.true.
layout cp2       2 parallel.cp=2
layout cpgrid    8 parallel.cp=2 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true. train.micro_batch_size=2 train.recompute=full
layout cpllama   4 $llama parallel.cp=4 parallel.zero_stage=3 train.precision=bf16
layout zero3int  4 parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2 model.n_layer=4 parallel.zero_stage=3 train.micro_batch_size=1 train.recompute=full
# zero bubble: the activations include what pending weight gradients keep (recomputed layers: their inputs too)
layout zbh1      2 parallel.pp=2 parallel.schedule=zb-h1 train.micro_batch_size=1
layout zbh2full  2 parallel.pp=2 parallel.schedule=zb-h2 train.micro_batch_size=1 train.recompute=full train.recompute_layers=1 model.n_layer=4
layout zbvgrid   8 parallel.pp=2 parallel.tp=2 parallel.sequence_parallel=.true. parallel.schedule=zbv parallel.virtual_stages=2 model.n_layer=4 train.micro_batch_size=1 train.precision=bf16
layout zbvllama  4 $llama parallel.pp=2 parallel.schedule=zbv parallel.virtual_stages=2 model.n_layer=4 parallel.zero_stage=2 train.micro_batch_size=1
layout zbh1z3    4 parallel.pp=2 parallel.schedule=zb-h1 parallel.zero_stage=3 train.micro_batch_size=1 train.recompute=full

# train.pack_activations unset: packed only where that lowers the peak and the peak with fp32 containers
# is more than 3/4 of the memory, the rule applied to the largest stage's (in a run: the largest of the
# ranks' peaks over their memory), every rank alike. Two stages of 4 layers, stage 1 (the head's) the
# larger: with a memory between the stages' unpacked peaks / 0.75, stage 0 alone would keep its fp32
# containers, but stage 1's peak decides, so both pack (allocated as the packed plan, every stage).
auto="parallel.pp=2 train.micro_batch_size=2 train.precision=bf16 model.vocab_size=8192 model.seq_len=64 model.n_layer=8"
for pk in false true; do
    "$TRIAD" plan "$deck" world=2 $common $auto train.pack_activations=.$pk. > "$scratch/auto_$pk.plan" 2>&1
done
peaks() { sed -n 's/^  stage \([01]\) peak: \([0-9]*\) bytes$/\2/p' "$1" | tr '\n' ' '; }
set -- $(peaks "$scratch/auto_false.plan") $(peaks "$scratch/auto_true.plan")
gb=$("$PYTHON3" -c "import sys; u0, u1, p0, p1 = map(int, sys.argv[1:5]); assert u0 < u1 and p0 < u0 and p1 < u1
print('%.9f' % ((u0 + u1) / 2 / 0.75 / 2**30))" "$@")
ok $? "pack_activations: with fp32 containers stage 1's peak is the larger, and packing lowers both ($*)"
"$TRIAD" plan "$deck" world=2 $common $auto > "$scratch/auto.plan" 2>&1 &&
    grep -q "^train.pack_activations unset: .false., the stored layers in fp32 containers: the planned peak with fp32 containers is [0-9.]*% of a rank's memory ([0-9.]*% packed), within 3/4$" "$scratch/auto.plan" &&
    grep -q "^precision: bf16 parameters .* (stored layers in fp32 containers)" "$scratch/auto.plan"
ok $? "pack_activations unset, memory to spare: triad plan picks fp32 containers and says why"
"$TRIAD" plan "$deck" world=2 $common $auto train.memory_gb=$gb > "$scratch/auto_small.plan" 2>&1 &&
    grep -q "^train.pack_activations unset: .true., the stored layers packed in 16 bits: the planned peak with fp32 containers is [0-9.]*% of a rank's memory ([0-9.]*% packed), more than 3/4$" "$scratch/auto_small.plan" &&
    grep -q "^precision: bf16 parameters .* (stored layers packed in 16 bits)" "$scratch/auto_small.plan" &&
    grep -q "^FITS" "$scratch/auto_small.plan"
ok $? "pack_activations unset, memory_gb = $gb: triad plan packs (the largest stage needs it), and fits"
"$TRIAD" plan "$deck" $common train.precision=bf16 > "$scratch/auto_one.plan" 2>&1 &&
    grep -q "^train.pack_activations unset: .false., the stored layers in fp32 containers: packed, the planned peak would not be lower" "$scratch/auto_one.plan"
ok $? "pack_activations unset, one stage of 2 layers: fp32 containers, packing would not lower the peak"
"$TRIAD" plan "$deck" $common train.precision=bf16 train.pack_activations=.true. > "$scratch/auto_set.plan" 2>&1 &&
    "$TRIAD" plan "$deck" $common > "$scratch/auto_fp32.plan" 2>&1 &&
    ! grep -q "pack_activations unset" "$scratch/auto_set.plan" "$scratch/auto_fp32.plan"
ok $? "pack_activations set, or an fp32 run: no choice made or printed"
triad_run 2 "$deck" $common $auto train.memory_gb=$gb io.run_dir="'$scratch/auto_run'"
ok $? "pack_activations unset, memory_gb = $gb: the run trains"
grep -q "^train.pack_activations unset: .true., the stored layers packed in 16 bits: the planned peak with fp32 containers is [0-9.]*% of a rank's memory ([0-9.]*% packed), more than 3/4 (memory: train.memory_gb)$" "$scratch/last.out" &&
    grep -q "^  pack_activations *= .true.$" "$scratch/last.out"
ok $? "the run: rank 0's stage alone would keep fp32 containers, stage 1's peak decides, so both pack; the effective deck says .true."
# rank 0 holds more than its stage (metrics.h5): with memory between the two, triad plan and the run choose
# alike (the run's rank 0 weighs its own peak, as plan_check and triad plan do)
one="train.micro_batch_size=2 train.precision=bf16 model.vocab_size=8192 model.seq_len=64 model.n_layer=8"
"$TRIAD" plan "$deck" world=2 $common $one train.pack_activations=.false. > "$scratch/r0_false.plan" 2>&1
gb0=$("$PYTHON3" - "$scratch/r0_false.plan" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
u = int(re.search(r"stage 0 peak: (\d+) bytes", t).group(1))
r = int(re.search(r"rank 0 peak: (\d+) bytes", t).group(1))
assert r > u
print("%.9f" % ((u + r) / 2 / 0.75 / 2**30))
PY
)
"$TRIAD" plan "$deck" world=2 $common $one train.memory_gb=$gb0 > "$scratch/r0.plan" 2>&1
triad_run 2 "$deck" $common $one train.memory_gb=$gb0 train.steps=1 io.run_dir="'$scratch/r0_run'"
st=$?
planned=$(sed -n 's/^train.pack_activations unset: \(\.[a-z]*\.\),.*/\1/p' "$scratch/r0.plan")
ran=$(sed -n 's/^train.pack_activations unset: \(\.[a-z]*\.\),.*/\1/p' "$scratch/last.out" | head -1)
[ $st -eq 0 ] && [ "$planned" = .true. ] && [ "$ran" = .true. ]
ok $? "memory_gb = $gb0, between stage 0's peak and rank 0's: triad plan packs ($planned) and so does the run ($ran)"
"$PYTHON3" - "$scratch/auto_true.plan" "$scratch/auto_run/metrics.h5" <<'PY'
import re, sys, h5py
want = [[int(x) for x in v] for v in re.findall(r"^  stage \d: parameters (\d+), gradients (\d+), optimizer (\d+), "
                                                  r"activations (\d+) bytes", open(sys.argv[1]).read(), re.M)]
with h5py.File(sys.argv[2], "r") as f:
    got = [[int(x) for x in row] for row in f["memory/allocated"][:]]
print("# packed plan", want, "allocated", got)
sys.exit(int(len(want) != 2 or got != want))
PY
ok $? "the run allocated each stage's packed plan"
"$TRIAD" check "$deck" train.precision=bf16 > "$scratch/auto_check.out" 2>&1 &&
    grep -q "^  ! pack_activations: unset, derived at start-up$" "$scratch/auto_check.out"
ok $? "triad check: an unset pack_activations stays unset in the effective deck (a comment)"

# the bubble of each schedule on the grid, and the advice to take a zero-bubble one
"$TRIAD" plan "$deck" world=2 $common parallel.pp=2 train.micro_batch_size=1 model.n_layer=4 > "$scratch/zb.plan" 2>&1
grep -q "^pipeline schedules on this grid" "$scratch/zb.plan" && grep -q "^  zbv  *2 " "$scratch/zb.plan" &&
    grep -q "^  1f1b  *1 .*(this deck)" "$scratch/zb.plan" && grep -q "^advice: the bubble costs .*schedule = 'z" "$scratch/zb.plan"
st=$?
ok $st "triad plan compares every schedule on the grid (bubble, activations, peak) and advises a zero-bubble one"
[ $st -eq 0 ] || sed -n '/^pipeline schedules/,/^advice/p' "$scratch/zb.plan" | diag

# What rank 0 holds beyond its stage: the tokenizer's parse (10 x its file),
# MPI-IO's aggregation of the largest dataset a checkpoint writes (tp x the
# largest a rank reads back, at most 32 MiB), metrics.h5 (2.5 MiB on more
# than one rank); its peak is stage 0's + those, and the plan's when larger.
"$PYTHON3" -c "print('{\"model\": {\"type\": \"BPE\"}, \"pad\": \"' + 'x' * 2000000 + '\"}')" > "$scratch/tok.json"
r0() { # r0 NAME WORLD OVERRIDES...: the plan's rank 0 against its stage 0, in python's terms
    name=$1 world=$2
    shift 2
    "$TRIAD" plan "$deck" world="$world" $common "$@" > "$scratch/$name.plan" 2>&1 &&
        "$PYTHON3" - "$scratch/$name.plan" "$(wc -c < "$scratch/tok.json")" "$world" "$@" <<'PY'
import re, sys
text, size, world, args = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
tp = int(re.search(r"= tp (\d+)", text).group(1))
stage = {int(r): int(b) for r, b in re.findall(r"stage (\d+) peak: (\d+) bytes", text)}
peak, rt, tok, io = map(int, re.search(r"rank 0 peak: (\d+) bytes \(runtime (\d+), tokenizer (\d+), MPI-IO (\d+)\)",
                                        text).groups())
table = text.split("memory per rank (")[1].split("  in flight")[0].splitlines()
unit = 2**30 if table[0].startswith("GiB") else 2**20
ckpt = [float(row.split()[-2]) * unit for row in table[2:]] if "ckpt check" in table[1] else [0]  # (its column)
want_tok = 10 * size if any(a.startswith("data.tokenizer=") for a in args) else 0
want_io = 0 if world == 1 or "io.save_final=.false." in args else min(32 << 20, tp * round(max(ckpt)))
want_rt = 5 << 19 if world > 1 else 0
ok = (tok == want_tok and abs(io - want_io) <= tp * unit * 0.005 and rt == want_rt and peak == stage[0] + rt + max(tok, io)
      and ("its peak" in text) == (peak > stage[0]))
print(f"# rank 0 {peak} = stage 0 {stage[0]} + runtime {rt} + max(tokenizer {tok}, MPI-IO {io}); wanted tokenizer "
      f"{want_tok}, MPI-IO {want_io}, runtime {want_rt}")
sys.exit(not ok)
PY
}
r0 r0_one 1 io.save_final=.true.
ok $? "rank 0's plan on 1 rank: its stage's, nothing more"
r0 r0_tok 4 parallel.tp=2 io.save_final=.true. data.tokenizer="'$scratch/tok.json'"
ok $? "rank 0's plan on 4 ranks, tp 2, with a tokenizer: + metrics.h5, + the larger of 10x the tokenizer and MPI-IO's buffer"
r0 r0_io 4 parallel.tp=2 io.save_final=.true.
ok $? "rank 0's plan on 4 ranks without a tokenizer: + metrics.h5 + MPI-IO's buffer (tp x the largest tensor read back)"
r0 r0_none 2 io.save_final=.false. io.checkpoint_every=0
ok $? "rank 0's plan on 2 ranks that write no checkpoint: + metrics.h5 only"

# GPT-3 175B on 64 GPUs: planned here, launched nowhere
out="$scratch/175b.plan"
"$TRIAD" plan "$top_srcdir/input/gpt3_175b_64gpu.nml" world=64 > "$out" 2>&1
ok $? "triad plan input/gpt3_175b_64gpu.nml world=64"
grep -q "174604259328 parameters (174.6 billion), 650.5 GiB in fp32 (698.4 GB)" "$out"
ok $? "175B: 174,604,259,328 parameters (V C + T C + L (12 C^2 + 13 C) + 2 C), 698 GB in fp32"
grep -q "plan for 64 ranks = tp 8 x dp 1 x pp 8" "$out" && grep -q "bubble: (p-1)/(v\*m+p-1) = 7/71" "$out"
ok $? "175B: the grid and the bubble 7/71"
grep -q "^DOES NOT FIT" "$out" && grep -q "recompute 'none' -> 'full' .* fits" "$out"
ok $? "175B: does not fit 80 GiB as it stands; recompute = 'full' is suggested and fits"
grep -q "^ZeRO-3 on the same 64 ranks" "$out" &&
    grep -q "tp 8 x dp 2 x pp 4, zero_stage 3, recompute 'full' .* fits" "$out" &&
    ! grep -q "tp 8 x dp 2 x pp 4, zero_stage 3  .* fits" "$out"
ok $? "175B: the ZeRO-3 grids of the same 64 ranks are planned; with full recomputation they fit"
"$PYTHON3" - "$out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
floats = sum(int(x) for x in re.findall(r"stage \d+: parameters (\d+)", text)) // 4
L, C, T, V, Vp, tp = 96, 12288, 2048, 50257, 51200, 8
logical = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
# every tp rank of a stage holds its shard of the split tensors and a whole copy of the replicated ones
# (wpe, LayerNorms, row-parallel biases: T C + L 6C + 2C); the tied wte is held by the first and the last
# stage, padded to Vp rows; each tensor is padded to 16 floats
want = logical + (Vp - V) * C + Vp * C + (tp - 1) * (T * C + L * 6 * C + 2 * C)
print(f"# tp x per-rank parameter floats {tp * floats}, logical {logical}, with copies and padding {want}")
sys.exit(int(not 0 <= tp * floats - want < tp * 8 * 16 * 16))
PY
ok $? "175B: the stages' parameter bytes add up to the 174.6e9 parameters (+ replicas, the second wte, padding)"

# Too little memory: refused before anything is allocated, with the advice
# (stdout and stderr apart: mpirun forwards each in chunks, and may interleave them mid-line)
$MPIEXEC -n 2 "$TRIAD" "$deck" $common parallel.tp=2 train.memory_gb=0.02 io.run_dir="'$scratch/small'" \
    > "$scratch/small.out" 2> "$scratch/small.err"
st=$?
[ $st -eq 1 ] && grep -q "error: not enough memory: the plan needs" "$scratch/small.err" &&
    grep -q "^suggestions" "$scratch/small.out" && grep -q "DOES NOT FIT" "$scratch/small.out" && [ ! -d "$scratch/small" ]
ok $? "memory_gb too small: exit status 1 before training, with the plan and its suggestions"

# A long sequence that does not fit: context parallelism is among the suggestions, re-planned
# (284 MiB per rank, 188.5 with cp = 2: the same in every build, since a CPU run
# never loads the CUDA libraries)
"$TRIAD" plan "$deck" world=2 model.seq_len=32768 train.batch_size=2 train.memory_gb=0.25 > "$scratch/long.plan" 2>&1
grep -q "^DOES NOT FIT" "$scratch/long.plan" && grep -q "^  cp 1 -> 2 (2 -> 4 ranks)  *[0-9.]* MiB  fits" "$scratch/long.plan"
ok $? "T = 32768 on 2 ranks in 0.25 GB: does not fit; cp 1 -> 2 on 4 ranks is suggested and fits"
cat "$scratch/small.out" "$scratch/small.err" | diag

# Bad decks fail cleanly
"$TRIAD" plan "$top_srcdir/regression/bad/heads_not_dividing.nml" > "$scratch/bad.out" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "error:" "$scratch/bad.out"
ok $? "triad plan of a bad deck: exit status 1 with the error"
"$TRIAD" plan "$deck" world=3 parallel.tp=2 > "$scratch/bad.out" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "3 ranks cannot be split" "$scratch/bad.out"
ok $? "triad plan world=3 with tp = 2: exit status 1, the world does not split"
"$TRIAD" plan "$deck" train.device=cuda > "$scratch/cuda.out" 2>&1 && grep -q "fit not checked" "$scratch/cuda.out"
ok $? "device = 'cuda' without memory_gb: planned, fit not checked"
"$TRIAD" plan "$deck" train.steps=5 world=4 > "$scratch/w4.out" 2>&1 && grep -q "^plan for 4 ranks" "$scratch/w4.out"
ok $? "world=N may follow other overrides"

# io.async_checkpoint's snapshot: a resident column of the rank's whole state
# (parameters, m, v: three times the parameter column; ZeRO-1: parameters and
# two slices), counted in the peak; absent without it
snap() { # snap OVERRIDES...: "params snapshot peak" of the first stage row, in MiB
    "$TRIAD" plan "$top_srcdir/input/gpt2_124m.nml" world=2 io.checkpoint_every=100 "$@" | awk '
        /^  stage / { for (i = 1; i <= NF; i++) col[$i] = i } # ("in flight" is two words in the header)
        /^  all / && !done { print $(col["params"] - 1), (col["snapshot"] ? $(col["snapshot"] - 1) : "-"), $NF; done = 1 }'
}
set -- $(snap io.async_checkpoint=.true. train.memory_gb=1000)
p=$1 s=$2 peak=$3
set -- $(snap train.memory_gb=1000)
awk -v p="$p" -v s="$s" -v a="$peak" -v b="$3" -v none="$2" 'BEGIN {
    exit !(none == "-" && s > 2.95 * p && s < 3.05 * p && a - b > s - 0.02 && a - b < s + 0.02) }'
ok $? "io.async_checkpoint: the plan's snapshot column is 3 x the parameters ($p, $s GiB), in the peak; absent without it"

# docs/moe.md's plan command, as printed there, from the source folder
cmd=$(sed -n 's/^\.\/triad plan \([^#]*\).*/\1/p' "$top_srcdir/docs/moe.md")
[ -n "$cmd" ] && (cd "$top_srcdir" && "$TRIAD" plan $cmd) > "$scratch/moe_doc.plan" 2>&1 &&
    grep -q "^FITS: " "$scratch/moe_doc.plan"
ok $? "docs/moe.md's command 'triad plan $cmd' runs as printed"

done_testing
