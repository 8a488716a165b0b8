#!/bin/sh
# The Python tools a user runs on triad's files, given damaged or awkward
# input: a clear error (no traceback) and status 1, never a silent wrong
# result, and nothing left half-written.
#  * make_tokens.py: a prefix that has shards is refused (the new ones would
#    mix with the old under the deck's glob); a full disk (a small tmpfs)
#    leaves no shard, temporary or folder of the run; a device as input is
#    refused, a pipe read to its end; a full stdout is said (an error for
#    --info); --ints takes decimal ids (a byte-order mark, 010) and names the
#    line and item of one that is not, a 5000-digit one included.
#  * ckpt_info.py --verify: a stored deck edited after the write (its
#    checksum no longer the deck's: triad refuses to restart from it), a
#    step that is not a number, a group where a tensor belongs: each named,
#    status 1; weights without /optim: a note.
#  * plot_metrics.py: a /eval whose columns have different lengths (a file
#    read mid-flush) is plotted over the rows they share, and so is a run of
#    1 or 3 tasks scored; -o without an extension a PNG; an output it cannot
#    write, a format matplotlib does not write, a zero size or resolution:
#    errors naming the option or the path.  A byte of /metrics/loss changed
#    after the write fails its chunk's checksum: plot_metrics.py names the
#    series, and a restart moves the file aside (metrics.h5.damaged.1); a
#    byte changed in rows the restart drops anyway does not stop it.
. "$(dirname "$0")/lib.sh"

MT="$PYTHON3 $top_srcdir/tools/make_tokens.py"
CI="$PYTHON3 $top_srcdir/tools/ckpt_info.py"
PM="$PYTHON3 $top_srcdir/tools/plot_metrics.py"
no_traceback() { ! grep -q "Traceback" "$1"; }

# make_tokens.py
head -c 5000 /dev/urandom > "$scratch/five.dat"
head -c 2000 /dev/urandom > "$scratch/two.dat"
$MT --shard-tokens 1000 "$scratch/five.dat" "$scratch/d/x" > "$scratch/out" 2>&1 &&
    $MT --shard-tokens 1000 "$scratch/two.dat" "$scratch/d/x" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "already holds 5 shard(s) of that prefix" "$scratch/out" &&
    [ "$(ls "$scratch/d" | wc -l)" -eq 5 ] && no_traceback "$scratch/out"
ok $? "make_tokens.py into a prefix that has 5 shards: refused, the 5 left as they were"
grep error "$scratch/out" | diag
printf '\357\273\2771 2 010\n3,4 0x10\n' > "$scratch/ids.txt"
$MT --ints "$scratch/ids.txt" "$scratch/i/x" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "ids.txt: line 2, item 3 ('0x10') is not a decimal integer" "$scratch/out"
ok $? "make_tokens.py --ints: a byte-order mark and 010 taken, 0x10 refused with its line and item"
$MT /dev/null "$scratch/n/x" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "/dev/null is a device or a socket, not a file" "$scratch/out"
ok $? "make_tokens.py of a device: refused"
"$PYTHON3" -c "print('1 ' + '9' * 5000)" > "$scratch/long_int.txt"
$MT --ints "$scratch/long_int.txt" "$scratch/li/x" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "line 1, item 2 is 9999.*, outside \[0, 65535\]" "$scratch/out" && no_traceback "$scratch/out"
ok $? "make_tokens.py --ints of a 5000-digit number: out of range, no traceback"
mkfifo "$scratch/pipe"
head -c 3000 "$scratch/five.dat" > "$scratch/pipe" &
$MT "$scratch/pipe" "$scratch/p/x" > "$scratch/out" 2>&1 && grep -q "wrote 1 shard(s), 3000 tokens" "$scratch/out"
ok $? "make_tokens.py reads a pipe to its end (as <(zcat book.gz) gives one)"
wait
$MT --shard-tokens 1000 "$scratch/five.dat" "$scratch/f/y" > /dev/full 2> "$scratch/err"
[ $? -eq 0 ] && grep -q "warning: the output could not all be written to stdout: .* (the shards are written)" \
    "$scratch/err" && [ "$(ls "$scratch/f" | wc -l)" -eq 5 ] && no_traceback "$scratch/err"
ok $? "make_tokens.py with a full stdout: the shards written, the lost summary said (a warning: they are its product)"
$MT --info "$scratch/f/y_*.bin" > /dev/full 2> "$scratch/err"
[ $? -eq 1 ] && grep -q "error: the output could not all be written to stdout" "$scratch/err"
ok $? "make_tokens.py --info with a full stdout: status 1 (its output is its product)"
mnt="$scratch/small"
mkdir -p "$mnt"
if mount -t tmpfs -o size=64k tmpfs "$mnt" 2> "$scratch/mount.err"; then
    trap 'umount "$mnt" 2> /dev/null; rm -rf "$scratch"' EXIT
    head -c 100000 /dev/urandom > "$scratch/big.dat"
    $MT --shard-tokens 10000 "$scratch/big.dat" "$mnt/a/z" > "$scratch/out" 2>&1
    [ $? -eq 1 ] && grep -q "No space left on device; nothing of them is left" "$scratch/out" &&
        [ -z "$(ls "$mnt")" ] && no_traceback "$scratch/out"
    ok $? "make_tokens.py on a full disk: status 1, no shard, temporary or folder of the run left"
    grep error "$scratch/out" | diag
    umount "$mnt"
else
    skip "cannot mount a tmpfs to fill ($(head -n 1 "$scratch/mount.err"))"
fi

# ckpt_info.py
triad_run 1 "$DECKS/tiny.nml" train.steps=2 train.warmup_steps=0 io.save_final=.true. io.run_dir="'$scratch/run'"
ok $? "a checkpoint to look at"
ck="$scratch/run/ckpt_2.h5"
$CI --verify "$ck" > "$scratch/out" 2>&1
ok $? "ckpt_info.py --verify of the run's checkpoint: ok"
"$PYTHON3" - "$ck" "$scratch" << 'PY'
import shutil, sys, h5py
ck, d = sys.argv[1:]
def edit(name, fn):
    shutil.copy(ck, f"{d}/{name}.h5")
    with h5py.File(f"{d}/{name}.h5", "r+") as f:
        fn(f)
def deck(f):
    v = f.attrs["deck"]
    del f.attrs["deck"]
    f.attrs["deck"] = v.replace(b"seed", b"sEed")
def step(f):
    del f.attrs["step"]
    f.attrs["step"] = "abc"
def group(f):
    del f["model/lnf_w"]
    f.create_group("model/lnf_w")
edit("deck", deck)
edit("optim", lambda f: f.__delitem__("optim"))
edit("step", step)
edit("group", group)
PY
bad_ckpt() { # bad_ckpt NAME PATTERN WHAT
    $CI --verify "$scratch/$1.h5" > "$scratch/out" 2>&1
    [ $? -eq 1 ] && grep -q "$2" "$scratch/out" && no_traceback "$scratch/out"
    ok $? "ckpt_info.py --verify: $3"
    grep error "$scratch/out" | diag
}
bad_ckpt deck "its stored deck is not the text its checksum was made of" "a stored deck edited after the write"
$CI "$scratch/optim.h5" > "$scratch/out" 2>&1 && grep -q "note: no /optim: io.init_from takes these weights" "$scratch/out"
ok $? "ckpt_info.py of weights without /optim: a note (init_from takes them, a restart does not), status 0"
bad_ckpt step "its step attribute is 'abc', not an integer" "a step that is not a number"
bad_ckpt group "/model/lnf_w is a group, not a dataset" "a group where a tensor belongs"
$CI --deck "$scratch/deck.h5" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "its stored deck is not the text its checksum was made of" "$scratch/out"
ok $? "ckpt_info.py --deck of an edited deck: refused, not printed as the run's"

# plot_metrics.py
"$PYTHON3" - "$scratch/run/metrics.h5" "$scratch/m.h5" << 'PY'
import shutil, sys, numpy as np, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    g = f.require_group("eval")
    g["step"] = np.array([1, 2, 3], dtype=np.int64)
    g["loss"] = np.array([4.0, 3.5])  # (one row behind: a file read mid-flush)
PY
$PM "$scratch/m.h5" -o "$scratch/p.png" > "$scratch/out" 2>&1 && [ -s "$scratch/p.png" ] && no_traceback "$scratch/out"
ok $? "plot_metrics.py of a /eval one row short in loss: plotted over the rows its columns share"
for n in 1 3; do # (the tasks' accuracies beside the loss: a dict of them, not one series)
    "$PYTHON3" - "$scratch/run/metrics.h5" "$scratch/t$n.h5" "$n" << 'PY'
import shutil, sys, numpy as np, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    for k in range(int(sys.argv[3])):
        g = f.require_group(f"eval/task{k}")
        g["step"] = np.array([1, 2], dtype=np.int64)
        g["acc"] = np.array([0.25, 0.5])
        g["acc_norm"] = np.array([0.25, 0.75])
PY
    $PM "$scratch/t$n.h5" -o "$scratch/t$n.png" > "$scratch/out" 2>&1 && [ -s "$scratch/t$n.png" ] &&
        $PM "$scratch/t$n.h5" --list > "$scratch/out" 2>&1 && grep -q accuracy "$scratch/out"
    ok $? "plot_metrics.py of a run with $n task(s) scored: plotted and listed"
done
$PM "$scratch/run" -o "$scratch/noext" > "$scratch/out" 2>&1 && [ "$(head -c 4 "$scratch/noext" | od -An -c | tr -d ' ')" = "211PNG" ]
ok $? "plot_metrics.py -o a name without an extension: a PNG under that name"
bad_plot() { # bad_plot PATTERN WHAT ARGS...
    pattern=$1 what=$2
    shift 2
    $PM "$scratch/run" "$@" > "$scratch/out" 2>&1
    st=$?
    [ $st -ne 0 ] && grep -q -e "$pattern" "$scratch/out" && no_traceback "$scratch/out"
    ok $? "plot_metrics.py $what: status $st, said"
}
bad_plot "cannot write .*none/p.png: No such file or directory" "into a missing folder" -o "$scratch/none/p.png"
bad_plot "'txt' is not a format matplotlib writes" "-o p.txt" -o "$scratch/p.txt"
bad_plot "the resolution must be at least 1" "--dpi 0" -o "$scratch/p.png" --dpi 0
bad_plot "the width and height must be positive" "--size 0x0" -o "$scratch/p.png" --size 0x0
bad_plot "names none" "--quantities ," -o "$scratch/p.png" --quantities ,

# a byte of /metrics/loss changed after the write: each series' chunks carry
# HDF5's Fletcher-32, so the reader says so instead of plotting a wrong loss,
# and a restart moves the file aside instead of continuing it
flip_loss() { # flip_loss METRICS_H5 CHUNK: every series (/metrics, /eval) checksummed; a bit of /metrics/loss's
    "$PYTHON3" - "$1" "$2" << 'PY'    # chunk CHUNK (its fourth byte) flipped
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    series = [f["metrics"][k] for k in f["metrics"]] + [f["eval"][k] for k in (f["eval"] if "eval" in f else ())]
    assert all(d.fletcher32 for d in series), "a series without its checksum"
    at = f["metrics/loss"].id.get_chunk_info(int(sys.argv[2])).byte_offset + 3
with open(sys.argv[1], "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x10]))
PY
}
cp -r "$scratch/run" "$scratch/flip"
flip_loss "$scratch/flip/metrics.h5" 0 # (inside step 1's loss)
ok $? "every /metrics series carries its checksum; a byte of /metrics/loss flipped"
$PM "$scratch/flip" -o "$scratch/f.png" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "/metrics/loss fails its checksum" "$scratch/out" && no_traceback "$scratch/out" &&
    $PM "$scratch/flip" -o "$scratch/f.png" --quantities lr > "$scratch/out" 2>&1
ok $? "plot_metrics.py of a flipped byte in /metrics/loss: status 1 naming the series; --quantities lr still plots"
triad_run 1 "$DECKS/tiny.nml" train.steps=4 train.warmup_steps=0 io.restart="'auto'" io.run_dir="'$scratch/flip'"
[ $? -eq 0 ] && grep -q "metrics.h5 could not be continued (damaged: /metrics/loss cannot be read back" "$scratch/last.out" &&
    [ -f "$scratch/flip/metrics.h5.damaged.1" ] &&
    "$PYTHON3" -c "import h5py,sys; sys.exit(list(h5py.File(sys.argv[1])['metrics/step'][:]) != [3, 4])" \
        "$scratch/flip/metrics.h5"
ok $? "a restart beside that metrics.h5: moved aside naming /metrics/loss, a new one holds steps 3..4"
# a byte changed in rows a restart drops (steps after its checkpoint, in a
# chunk of their own: 256 rows a chunk): the file is continued, its other
# rows kept; and /eval's tables carry their checksums too
c="$top_srcdir/regression/cases/data/corpus.txt"
late="train.steps=260 train.warmup_steps=0 io.checkpoint_every=256 train.eval_every=100 train.eval_batches=1
      data.kind='text' data.path='$c' data.val_path='$c' model.vocab_size=256 io.run_dir='$scratch/late'"
triad_run 1 "$DECKS/tiny.nml" $late
ok $? "260 steps with a checkpoint at 256 and held-out losses"
cp "$scratch/late/metrics.h5" "$scratch/late.h5"
"$PYTHON3" -c "import h5py, sys; sys.exit(len(h5py.File(sys.argv[1])['eval/step']) != 3)" "$scratch/late.h5" &&
    flip_loss "$scratch/late/metrics.h5" 1 # (rows 256.., steps 257..260)
ok $? "every /metrics and /eval series carries its checksum; a byte of /metrics/loss flipped in steps 257..260"
triad_run 1 "$DECKS/tiny.nml" $late io.restart="'auto'"
[ $? -eq 0 ] && ! grep -q "could not be continued" "$scratch/last.out" && [ ! -e "$scratch/late/metrics.h5.damaged.1" ] &&
    "$PYTHON3" - "$scratch/late/metrics.h5" "$scratch/late.h5" << 'PY'
import sys, h5py
new, old = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert list(new["metrics/step"][:]) == list(range(1, 261))
assert (new["metrics/loss"][:256] == old["metrics/loss"][:256]).all()
assert list(new["eval/step"][:]) == [100, 200, 260]
PY
ok $? "the restart from step 256 continues that metrics.h5: steps 1..256 kept as they were, 257..260 written anew"
done_testing
