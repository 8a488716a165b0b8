#!/bin/sh
# diag.profile_ops: every device operation timed.  The table lists the
# operations the steps ran (the products, matmuls and attention, with
# their GFLOP/s), its seconds
# and the time outside them add up to the step total, it is the same on a
# device MPI cannot read (each operation waited for), and the run's numbers
# are bitwise those of the run without it.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="train.steps=6 model.arch='llama' model.n_kv_head=2"

# table OUT: the profile's rows "name avg calls gflops" and the step total, checked
table() {
    "$PYTHON3" - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
step = float(re.search(r"^  step total +\S+ +(\S+)", text, re.M).group(1))
part = text.split("device operations over", 1)[1].split("communication (", 1)[0]
rows = {}
outside = None
for line in part.splitlines()[2:]:
    f = line.split()
    if not f:
        continue
    if line.strip().startswith("(outside"):
        outside = float(f[-2])
        continue
    rows[f[0]] = (float(f[2]), int(f[5]), float(f[6]) if len(f) > 6 else None)
# (the CPU table's step multiplies through matmul_*_rounded, llama's qkv through matmul_forward)
need = ["matmul_forward", "matmul_forward_rounded", "matmul_backward_rounded", "rmsnorm_forward",
        "rmsnorm_backward", "attention_forward", "attention_backward", "swiglu_forward", "swiglu_backward",
        "rope_forward", "crossentropy_backward", "adamw_update"]
missing = [n for n in need if n not in rows or rows[n][1] <= 0]
assert not missing, "missing rows: %s" % missing
products = [n for n in rows if n.startswith("matmul") or n.startswith("attention_")]
assert all(rows[n][2] for n in products), "a product without GFLOP/s: %s" % [n for n in products if not rows[n][2]]
others = [n for n, r in rows.items() if n not in products and r[2] is not None]
assert not others, "GFLOP/s on an operation that is no product: %s" % others
total = sum(r[0] for r in rows.values()) + outside
assert abs(total - step) <= 1e-3 * max(1, step) + 5e-4 * len(rows), "rows %.4f + outside != step %.4f" % (total, step)
print("%d operations, %.4f s of %.4f s in them" % (len(rows), total - outside, step))
PY
}

triad_run 1 "$deck" $common io.run_dir="'$scratch/plain'"
st=$?
triad_run 1 "$deck" $common diag.profile_ops=.true. io.run_dir="'$scratch/prof'"
st2=$?
: > "$scratch/table.out"
[ $st -eq 0 ] && [ $st2 -eq 0 ] && cp "$scratch/last.out" "$scratch/prof.out" &&
    table "$scratch/prof.out" > "$scratch/table.out" 2>&1
st=$? # (table's own status: not a pipe's)
diag < "$scratch/table.out"
ok $st "one rank: every operation of the step in the table, products with GFLOP/s, adding up to the step total"
grep -A4 "device operations over" "$scratch/prof.out" | diag
compare_runs "$scratch/prof" "$scratch/plain" 0 > /dev/null
ok $? "the profiled run's losses are bitwise those of the plain run"

triad_run 2 "$deck" $common parallel.tp=2 diag.profile_ops=.true. diag.stage_through_host=.true. \
    io.run_dir="'$scratch/staged'"
st=$?
: > "$scratch/table.out"
[ $st -eq 0 ] && cp "$scratch/last.out" "$scratch/staged.out" &&
    table "$scratch/staged.out" > "$scratch/table.out" 2>&1 && grep -q "seconds over 2 ranks" "$scratch/staged.out"
st=$?
diag < "$scratch/table.out"
ok $st "tp 2 on a device MPI cannot read (each operation waited for): the table over both ranks adds up"
compare_runs "$scratch/staged" "$scratch/plain" 1e-5 > /dev/null
ok $? "and it trains as the plain run (within 1e-5: tp 2 sums in another order)"

# bf16 with packed activations: each stored layer is packed after its
# forward and unpacked before its backward, except the last layer, whose
# activations the scratch still holds when its backward follows (its packing
# deferred, then dropped).  With L layers, L - 1 packs and unpacks a step:
# 3 layers' calls twice 2 layers' (with all L of them packed: 3/2).
calls() { # calls of operation $1 in profile $2
    sed -n "s/^  $1 .* \([0-9][0-9]*\) *\$/\1/p" "$2" | head -1
}
for L in 2 3; do
    triad_run 1 "$deck" train.steps=4 model.n_layer=$L train.precision="'bf16'" train.pack_activations=.true. diag.profile_ops=.true. \
        io.run_dir="'$scratch/bf16_$L'" && cp "$scratch/last.out" "$scratch/bf16_$L.out"
done
p2=$(calls lp_pack "$scratch/bf16_2.out") u2=$(calls lp_unpack "$scratch/bf16_2.out")
p3=$(calls lp_pack "$scratch/bf16_3.out") u3=$(calls lp_unpack "$scratch/bf16_3.out")
diag "lp_pack calls: $p2 (2 layers), $p3 (3 layers); lp_unpack: $u2, $u3"
[ -n "$p2" ] && [ -n "$p3" ] && [ "$p2" -gt 0 ] && [ "$p2" = "$u2" ] && [ "$p3" = "$u3" ] && [ "$p3" -eq $((2 * p2)) ]
ok $? "bf16: the last layer's activations neither packed nor unpacked (L - 1 layers' calls a step: 3 layers 2x 2 layers')"
done_testing
