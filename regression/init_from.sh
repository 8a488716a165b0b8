#!/bin/sh
# init_from: weights read from a /model-only HDF5 file reproduce a run that
# started from the same weights (here: the initialisation of another seed).
. "$(dirname "$0")/lib.sh"

triad_run 1 "$DECKS/tiny.nml" train.steps=0 train.seed=7 io.save_final=.true. io.run_dir="'$scratch/init'"
ok $? "a 0-step run writes the initial weights"
h5copy -i "$scratch/init/ckpt_0.h5" -o "$scratch/model.h5" -s /model -d /model
ok $? "h5copy extracts /model into its own file"

triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=7 io.run_dir="'$scratch/seed7'"
ok $? "reference run from seed 7"
triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=99 io.init_from="'$scratch/model.h5'" io.run_dir="'$scratch/from'"
st=$?
ok $st "run with seed 99 and init_from the seed-7 weights"
[ $st -eq 0 ] || diag < "$scratch/last.out"
compare_runs "$scratch/from" "$scratch/seed7" 0 loss grad_norm | diag
compare_runs "$scratch/from" "$scratch/seed7" 0 loss grad_norm > /dev/null
ok $? "per-step losses and grad norms are bitwise identical"

# the same weights rewritten by another tool: chunked and compressed, big-endian
# floats and doubles (read through HDF5, which converts; their checksums still checked)
"$PYTHON3" - "$scratch/model.h5" "$scratch/other.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1]) as src, h5py.File(sys.argv[2], "w") as dst:
    for k, v in src.attrs.items():
        dst.attrs[k] = v
    def copy(name, obj):
        if isinstance(obj, h5py.Dataset):
            d = dst.create_dataset(name, data=obj[()], dtype=">f4" if obj.ndim == 2 else "<f8",
                                   chunks=True, compression="gzip")
            for k, v in obj.attrs.items():
                d.attrs[k] = v
    src.visititems(copy)
PY
triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=99 io.init_from="'$scratch/other.h5'" \
    io.run_dir="'$scratch/other'" && compare_runs "$scratch/other" "$scratch/seed7" 0 loss grad_norm > /dev/null
ok $? "a model file of chunked, compressed big-endian floats and doubles gives the same losses bitwise"

# ZeRO-3: the model read straight into each rank's slice (the fp32 master weights), the rest gathered from it
triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=7 parallel.zero_stage=3 io.run_dir="'$scratch/z3seed7'" &&
    triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=99 parallel.zero_stage=3 \
        io.init_from="'$scratch/model.h5'" io.run_dir="'$scratch/z3from'" &&
    compare_runs "$scratch/z3from" "$scratch/z3seed7" 0 loss grad_norm > /dev/null
ok $? "ZeRO-3 on dp 2: init_from the seed-7 weights gives bitwise the seed-7 run's losses and grad norms"

triad_run 2 "$DECKS/tiny.nml" train.steps=10 train.seed=99 io.run_dir="'$scratch/seed99'"
compare_runs "$scratch/seed99" "$scratch/seed7" 0 loss > /dev/null
[ $? -ne 0 ]
ok $? "without init_from, seed 99 gives other losses (the comparison can fail)"

triad_run 1 "$DECKS/tiny.nml" train.steps=3 io.init_from="'$scratch/nonexistent.h5'" io.run_dir="'$scratch/bad'"
st=$?
[ $st -eq 1 ] && grep -q "init_from" "$scratch/last.out"
ok $? "a missing init_from file is a clear error with status 1"
triad_run 1 "$DECKS/tiny.nml" train.steps=3 model.d_model=64 io.init_from="'$scratch/model.h5'" io.run_dir="'$scratch/bad'"
st=$?
[ $st -eq 1 ] && grep -q "has shape" "$scratch/last.out"
ok $? "a shape mismatch names the dataset and both shapes"
done_testing
