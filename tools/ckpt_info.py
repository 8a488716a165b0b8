#!/usr/bin/python3
"""ckpt_info.py -- describe and check a triad checkpoint (run_dir/ckpt_<step>.h5).

  ckpt_info.py run/demo/ckpt_80.h5            format, step, tokens, the grid it
                                              was written with, the model shape,
                                              every dataset (shape, dtype)
  ckpt_info.py run/demo                       the newest ckpt_<step>.h5 in a run dir
  ckpt_info.py --stats ckpt.h5                also min / max / L2 norm per dataset
                                              (and NaN/Inf counts), reading all data
  ckpt_info.py --verify ckpt.h5               read all data and compare each
                                              dataset's checksum attribute
  ckpt_info.py --deck ckpt.h5                 print the deck stored in the file

The model shape is derived from the tensors (L from the h.<l> groups, C from
lnf_w, V from wte, T from wpe, or the deck's seq_len for the llama family);
the number of heads is not in any tensor shape and comes from the deck
attribute, and so do the tensors each layer must have (GPT-2's, or the
llama family's: dense, or a mixture of experts').  Exit status: 0 the file is a
readable triad checkpoint (and, with --verify/--stats, every checksum
matches); 1 it cannot be opened, is truncated or corrupted, lacks what triad
needs, or a checksum differs.  Needs h5py and numpy (/usr/bin/python3 on
Debian: python3-h5py python3-numpy).
"""

import argparse
import glob
import os
import re
import signal
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    sys.exit(f"ckpt_info.py: {e}: install python3-h5py and python3-numpy (or run /usr/bin/python3)")

LAYER_TENSORS = ("ln1_w", "ln1_b", "qkv_w", "qkv_b", "attproj_w", "attproj_b",
                 "ln2_w", "ln2_b", "fc_w", "fc_b", "fcproj_w", "fcproj_b")
TOP_TENSORS = ("wte", "wpe", "lnf_w", "lnf_b")
LLAMA_LAYER = ("ln1_w", "qkv_w", "attproj_w", "ln2_w")  # (no biases; the MLP below)
LLAMA_TOP = ("wte", "lnf_w")
CHUNK = 1 << 22  # elements read at a time for --stats/--verify

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


class Bad(Exception):
    """The file is not a usable triad checkpoint."""


def checksum_part(values, first_index):
    """src/io/ckpt_sum.c ckpt_partial_checksum over a flat run of float32 starting at
    logical element first_index: the sum mod 2^64 of splitmix64(index*golden ^ bits)."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    x = np.arange(first_index, first_index + bits.size, dtype=np.uint64) * GOLDEN ^ bits
    x ^= x >> np.uint64(30)
    x *= MIX1
    x ^= x >> np.uint64(27)
    x *= MIX2
    x ^= x >> np.uint64(31)
    return int(x.sum(dtype=np.uint64))


def fnv1a(h, data):
    """FNV-1a of bytes, continued from h: the checksum of the tokenizer's
    files kept under /tokenizer (uint8 datasets)."""
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def scan(ds, want_stats):
    """Read ds in row chunks: (checksum, min, max, norm, nonfinite).  A
    tensor's checksum is the float one above, a byte dataset's FNV-1a."""
    shape = ds.shape
    rows = shape[0] if shape else 1
    per_row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    step = max(1, CHUNK // max(per_row, 1))
    total, lo, hi, sq, bad = 0, np.inf, -np.inf, 0.0, 0
    if ds.dtype == np.uint8:
        total = 1469598103934665603
    for r in range(0, rows, step):
        try:
            block = ds[r:r + step] if shape else ds[()]
        except (OSError, RuntimeError, ValueError) as e:
            raise Bad(f"reading {ds.name} failed at row {r}: {e} (truncated or corrupted file?)")
        block = np.asarray(block)
        flat = block.reshape(-1)
        if flat.dtype == np.float32:
            total = (total + checksum_part(flat, r * per_row)) % (1 << 64)
        elif flat.dtype == np.uint8:
            total = fnv1a(total, flat.tobytes())
            continue
        if want_stats and flat.size:
            f64 = flat.astype(np.float64)
            finite = np.isfinite(f64)
            bad += int(flat.size - finite.sum())
            if finite.any():
                v = f64[finite]
                lo, hi = min(lo, v.min()), max(hi, v.max())
                sq += float(np.dot(v, v))
    return total, lo, hi, sq ** 0.5, bad


def attr_text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.dtype.kind in "SO":
        return "".join(x.decode() if isinstance(x, bytes) else str(x) for x in v.reshape(-1))
    return v.item() if isinstance(v, np.generic) else v


def deck_value(deck, group, key):
    """Value of key in &group of a namelist text (enough for the echoed deck)."""
    m = re.search(r"&%s\b(.*?)^\s*/" % group, deck, re.S | re.M | re.I)
    if not m:
        return None
    k = re.search(r"\b%s\s*=\s*([^,\n!]+)" % key, m.group(1), re.I)
    return k.group(1).strip().strip("'\"") if k else None


def deck_flag(deck, group, key, default):
    v = deck_value(deck, group, key)
    return default if v is None else v.strip(".").lower() in ("true", "t")


def deck_int(deck, group, key, default=0):
    try:
        return int(deck_value(deck, group, key))
    except (TypeError, ValueError):
        return default


def expected_tensors(deck, has_wpe, layers):
    """The /model datasets the stored deck's model has (docs/formats.md):
    (top-level names, {layer: names}).  GPT-2 for a file without a deck
    that has a position table, the llama family otherwise."""
    arch = deck_value(deck, "model", "arch") or ("gpt2" if has_wpe else "llama")
    llama = arch.lower() == "llama"
    top = list(LLAMA_TOP if llama else TOP_TENSORS)
    if not deck_flag(deck, "model", "tie_embeddings", True):
        top.append("lm_head")
    if not llama:
        return top, {l: LAYER_TENSORS for l in layers}
    E = deck_int(deck, "model", "n_expert")
    dense = deck_int(deck, "model", "moe_dense_layers")
    shared = deck_int(deck, "model", "n_shared_expert")
    per = {}
    for l in layers:
        names = list(LLAMA_LAYER)
        if deck_flag(deck, "model", "qkv_bias", False):
            names.append("qkv_b")
        if E > 0 and l >= dense:  # a mixture of experts' block
            names.append("router_w")
            names += [f"expert.{e}/{t}" for e in range(E) for t in ("fc_w", "fcproj_w")]
            if shared > 0:
                names += ["fc_w", "fcproj_w"]
                if deck_flag(deck, "model", "moe_shared_gate", True):
                    names.append("shared_gate_w")
        else:
            names += ["fc_w", "fcproj_w"]
        per[l] = names
    return top, per


def newest_in(run_dir):
    found = []
    for p in glob.glob(os.path.join(run_dir, "ckpt_*.h5")):
        m = re.fullmatch(r"ckpt_(\d+)\.h5", os.path.basename(p))
        if m:
            found.append((int(m.group(1)), p))
    if not found:
        tmp = glob.glob(os.path.join(run_dir, "ckpt_*.h5.tmp"))
        extra = f" (only unfinished {', '.join(map(os.path.basename, tmp))})" if tmp else ""
        raise Bad(f"no ckpt_<step>.h5 in {run_dir}{extra}")
    return max(found)[1]


def as_int(x):
    """An attribute as a Python int, or as it is when it is not a number."""
    try:
        return int(x)
    except (TypeError, ValueError):
        return x


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


FNV1A_INIT = 1469598103934665603


def deck_problem(f):
    """Why the stored deck is not the text its checksum was made of (triad then calls
    the file corrupted and does not restart from it), or None."""
    raw = f.attrs.get("deck")
    if raw is None:
        return None
    if isinstance(raw, np.ndarray):
        raw = b"".join(x if isinstance(x, bytes) else str(x).encode() for x in raw.reshape(-1))
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    raw = bytes(raw).split(b"\0", 1)[0]  # (the C string the attribute holds)
    if "deck_checksum" not in f.attrs:  # (a file from before the checksum)
        return None
    if not raw:
        return "its stored deck is empty"
    h = fnv1a(FNV1A_INIT, raw)
    stored = int(f.attrs["deck_checksum"]) & 0xFFFFFFFFFFFFFFFF
    if h != stored:
        return (f"its stored deck is not the text its checksum was made of (deck_checksum {stored:016x}, "
                f"the deck's {h:016x}): the file is corrupted, and triad does not restart from it")
    return None


def describe(path, args, out):
    if os.path.isdir(path):
        path = newest_in(path)
    if not os.path.exists(path):
        raise Bad(f"{path}: no such file")
    if not os.path.isfile(path):
        raise Bad(f"{path}: not a regular file (a device or a pipe): give a checkpoint, ckpt_<step>.h5")
    if path.endswith(".tmp"):
        print(f"note: {path} is an unfinished write (triad renames ckpt_<step>.h5.tmp when "
              "complete and never restarts from a .tmp)", file=out)
    size = os.path.getsize(path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        what = ("is not an HDF5 file (or its first bytes are corrupted)" if "signature not found" in str(e)
                else "is truncated (an interrupted write or copy) or corrupted")
        raise Bad(f"{path} ({human(size)}) does not open: {e}. It {what}; "
                  "restart = 'auto' skips such files and takes the previous checkpoint")
    with f:
        a = {k: attr_text(v) for k, v in f.attrs.items()}
        missing = [k for k in ("format_version", "step", "tokens") if k not in a]
        if missing or "model" not in f:
            raise Bad(f"{path}: not a triad checkpoint (missing {', '.join(missing + (['/model'] if 'model' not in f else []))})")
        deck = a.get("deck", "")
        damaged = deck_problem(f)
        if args.deck:
            if damaged:
                raise Bad(f"{path}: {damaged}")
            if not deck:
                raise Bad(f"{path} holds no stored deck (a file from before triad kept one)")
            print(deck.rstrip("\n"), file=out)
            return 0

        # the model shape, from the tensors
        layers = sorted(int(m.group(1)) for k in f["model"] for m in [re.fullmatch(r"h\.(\d+)", k)] if m)
        problems = [damaged] if damaged else []
        for k in ("step", "tokens"):
            if not isinstance(as_int(a[k]), int):
                problems.append(f"its {k} attribute is {a[k]!r}, not an integer")
        if "optim" not in f:  # (weights alone, as io.init_from takes them; a restart needs the optimizer's state)
            print("note: no /optim: io.init_from takes these weights, but a restart (io.restart) needs the "
                  "optimizer's state and refuses the file", file=out)
        top, per_layer = expected_tensors(deck, "wpe" in f["model"], layers)
        for t in top:
            if t not in f["model"]:
                problems.append(f"/model/{t} is missing")
        for l in layers:
            for t in per_layer[l]:
                if t not in f["model"][f"h.{l}"]:
                    problems.append(f"/model/h.{l}/{t} is missing")
        if layers != list(range(len(layers))):
            problems.append(f"layer groups are not h.0 .. h.{len(layers) - 1}: {layers}")
        def rows(name):  # (a group where a dataset belongs is named below, not read)
            o = f["model"].get(name)
            if o is not None and not isinstance(o, h5py.Dataset):
                problems.append(f"/model/{name} is a group, not a dataset")
                return None
            return o.shape[0] if o is not None and o.shape else None
        C, V, T = rows("lnf_w"), rows("wte"), rows("wpe")
        if T is None:  # (no position table: the llama family's context is the deck's)
            T = as_int(deck_value(deck, "model", "seq_len"))
        L = len(layers)
        heads = deck_value(deck, "model", "n_head")

        # (a file of an earlier version has no cp: it was written with cp = 1)
        tp, cp, dp, pp = (as_int(a.get(k, 1 if k == "cp" else "?")) for k in ("tp", "cp", "dp", "pp"))
        world = tp * cp * dp * pp if all(isinstance(x, int) for x in (tp, cp, dp, pp)) else "?"
        print(f"file            {path} ({human(size)})", file=out)
        print(f"format_version  {a['format_version']}", file=out)
        print(f"step            {a['step']}", file=out)
        print(f"tokens          {a['tokens']}", file=out)
        grid = f"tp = {tp}, cp = {cp}, dp = {dp}, pp = {pp}" if cp != 1 else f"tp = {tp}, dp = {dp}, pp = {pp}"
        print(f"written with    {grid} ({world} ranks; the tensors are in "
              "logical shapes, not tied to it)", file=out)
        shape = f"L = {L}, C = {C}, V = {V}, T = {T}"
        shape += f", heads = {heads} (from the deck)" if heads else ", heads = ? (no deck attribute)"
        print(f"model           {shape}", file=out)
        for key, have in (("n_layer", L), ("d_model", C), ("vocab_size", V), ("seq_len", T)):
            d = deck_value(deck, "model", key)
            if d is not None and have is not None and str(have) != d:
                problems.append(f"the deck says {key} = {d} but the tensors say {have}")
        nh = as_int(heads)
        if heads and (not isinstance(nh, int) or nh < 1):
            problems.append(f"the deck's n_head = {heads} is not a whole number of heads")
        elif heads and C and C % nh:
            problems.append(f"n_head = {heads} does not divide d_model = {C}")
        extra = {k: v for k, v in a.items() if k not in ("format_version", "step", "tokens", "tp", "cp", "dp", "pp", "deck")}
        for k, v in sorted(extra.items()):
            print(f"{k:<15} {v}", file=out)

        # every dataset
        datasets = []
        f.visititems(lambda n, o: datasets.append(n) if isinstance(o, h5py.Dataset) else None)
        groups = {}  # model, optim/m, optim/v, ... -> number of values
        for n in datasets:
            if f[n].dtype.kind not in "fiu":
                problems.append(f"/{n} holds {f[n].dtype} values, not numbers")
                datasets = [d for d in datasets if f[d].dtype.kind in "fiu"]
                break
        for n in datasets:
            parts = n.split("/")
            g = "/".join(parts[:2]) if parts[0] == "optim" and len(parts) > 2 else parts[0]
            groups[g] = groups.get(g, 0) + int(np.prod(f[n].shape))
        print("contents        " + ", ".join(f"/{g}: {n:,} values" for g, n in groups.items()), file=out)
        # a file that carries deck_checksum was written by a triad that stores a checksum on every
        # dataset; one without them was never sealed (a background write still going, or interrupted)
        if "deck_checksum" in a:
            bare = [n for n in datasets if "checksum" not in f[n].attrs]
            if bare:
                problems.append(f"{len(bare)} of {len(datasets)} datasets carry no checksum (/{bare[0]} first): "
                                "the checkpoint was never sealed (a background write still going or interrupted; "
                                "triad renames only verified files), and its data may be incomplete")
        if "model" in groups:
            for g in groups:
                if g.startswith("optim/") and groups[g] != groups["model"]:
                    problems.append(f"/{g} holds {groups[g]:,} values, /model {groups['model']:,}")

        read_all = args.stats or args.verify
        checked = mismatched = unchecked = 0
        width = max(len(n) for n in datasets) + 1 if datasets else 10
        header = f"{'dataset':<{width}} {'shape':<14} {'dtype':<8}"
        if args.stats:
            header += f" {'min':>12} {'max':>12} {'norm':>12}"
        if read_all:
            header += "  checksum"
        print("", file=out)
        print(header.rstrip(), file=out)
        for n in datasets:
            ds = f[n]
            line = f"/{n:<{width - 1}} {str(list(ds.shape)):<14} {str(ds.dtype):<8}"
            if read_all:
                total, lo, hi, norm, nonfinite = scan(ds, args.stats)
                if args.stats:
                    if np.isfinite(lo):
                        line += f" {lo:12.5g} {hi:12.5g} {norm:12.5g}"
                    else:
                        line += f" {'-':>12} {'-':>12} {'-':>12}"
                    if nonfinite:
                        problems.append(f"/{n} has {nonfinite} NaN/Inf values")
                stored = as_int(attr_text(ds.attrs["checksum"])) if "checksum" in ds.attrs else None
                if stored is not None and not isinstance(stored, int):
                    line += "  (not a number)"
                    problems.append(f"/{n}: its checksum attribute is {stored!r}, not a number")
                    unchecked += 1
                elif stored is None:
                    line += "  (none stored)"
                    unchecked += 1
                elif int(stored) == total:
                    line += "  ok"
                    checked += 1
                else:
                    line += f"  MISMATCH (stored {int(stored):016x}, data {total:016x})"
                    mismatched += 1
                    problems.append(f"/{n}: checksum mismatch: the data is corrupted")
            print(line.rstrip(), file=out)
        print("", file=out)
        if read_all:
            print(f"checksums       {checked} match, {mismatched} differ, {unchecked} datasets carry none", file=out)
    if problems:
        raise Bad(f"{path}: " + "; ".join(problems))
    print("verdict         ok" + ("" if read_all else " (structure; --verify reads the data and checks the checksums)"),
          file=out)
    return 0


class StdoutFailed(Exception):
    """stdout took not all of what was written to it."""


class Stdout:
    """stdout as describe() writes it, line by line as before (a long --stats shows its rows as it
    goes), its write errors told apart from the file's."""

    def write(self, text):
        try:
            return sys.stdout.write(text)
        except OSError as e:
            raise StdoutFailed(e.strerror or str(e))

    def flush(self):
        try:
            sys.stdout.flush()
        except OSError as e:
            raise StdoutFailed(e.strerror or str(e))


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `ckpt_info.py ... | head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="See docs/analysis.md and docs/formats.md.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="CKPT", help="ckpt_<step>.h5, or a run dir (its newest checkpoint)")
    ap.add_argument("--stats", action="store_true", help="min / max / L2 norm per dataset (reads all data; also verifies)")
    ap.add_argument("--verify", action="store_true", help="read all data and compare the stored checksums")
    ap.add_argument("--deck", action="store_true", help="print the deck stored in the checkpoint and nothing else")
    args = ap.parse_args()
    status = 0
    out = Stdout()
    for i, p in enumerate(args.files):
        try:
            if i:
                print("", file=out)
            describe(p, args, out)
            out.flush()
        except StdoutFailed as e:  # (a full stdout is not the file's fault)
            print(f"ckpt_info.py: error: the output could not all be written to stdout: {e.args[0]}", file=sys.stderr)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error at exit)
            return 1
        except Bad as e:
            out.flush()
            print(f"ckpt_info.py: error: {e}", file=sys.stderr)
            status = 1
        except (OSError, KeyError, RuntimeError, ValueError, TypeError, AttributeError) as e:
            out.flush()
            print(f"ckpt_info.py: error: {p}: unreadable: {e} (truncated or corrupted file?)", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
