#!/usr/bin/python3
"""plot_metrics.py -- plot the per-step metrics of triad runs (RUN_DIR/metrics.h5).

  plot_metrics.py run/demo -o loss.png
  plot_metrics.py run/a run/b -o cmp.png --quantities loss,lr,grad_norm,tokens_per_s --logy
  plot_metrics.py run/demo --list              the quantities the file holds

One subplot per quantity (stacked, sharing the step axis), one line per run;
the legend names each run by its directory (or --labels).  A run that
evaluated (train.eval_every) adds its held-out loss (/eval) to the loss
subplot as a second, dashed curve with markers; one that evaluated
multiple-choice tasks (train.mc_eval_every: /eval/<task>) gets a subplot
`accuracy` below the others, each task's acc solid and acc_norm dotted
(ask for it among --quantities to place it).  Any dataset under
/metrics can be plotted: loss lr grad_norm loss_scale tokens_per_s mfu
step_time skipped comm_tp_bytes comm_dp_bytes comm_pp_bytes comm_cp_bytes comm_seconds
(docs/formats.md); moe_tokens, several values a step, is drawn as a thin line
per layer and expert that took tokens.  A run may be given as its directory or as the
metrics.h5 file itself, and may still be running (the file is read without
HDF5's file lock; rows appear as triad flushes them, every io.metrics_flush
steps).  Writes PNG (or PDF/SVG, by the extension) with matplotlib's Agg
backend: no display needed.  Needs h5py, numpy and matplotlib
(/usr/bin/python3 on Debian: python3-h5py python3-numpy python3-matplotlib).
"""

import argparse
import os
import sys
import time

# Read files that a running triad holds open (it does not use SWMR; rows it
# has flushed are readable).  Must be set before HDF5 is loaded.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")

try:
    import h5py
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter
except ImportError as e:  # pragma: no cover
    sys.exit(f"plot_metrics.py: {e}: install python3-h5py python3-numpy python3-matplotlib "
             "(or run /usr/bin/python3)")

DEFAULT = "loss,lr,grad_norm,tokens_per_s"
LABELS = {
    "loss": "loss (nats)",
    "lr": "learning rate",
    "grad_norm": "gradient norm",
    "loss_scale": "loss scale",
    "tokens_per_s": "tokens / s",
    "mfu": "MFU (%)",
    "step_time": "step time (s)",
    "skipped": "skipped",
    "comm_tp_bytes": "tp bytes / step",
    "comm_dp_bytes": "dp bytes / step",
    "comm_pp_bytes": "pp bytes / step",
    "comm_cp_bytes": "cp bytes / step",
    "comm_seconds": "comm seconds / step",
    "moe_tokens": "tokens per expert",
    "accuracy": "task accuracy",
}


def metrics_path(run):
    if os.path.exists(run) and not os.path.isdir(run):
        if not os.path.isfile(run):
            raise SystemExit(f"plot_metrics.py: error: {run} is a device or a pipe: give a triad run_dir or its "
                             "metrics.h5")
        return run  # (a metrics file under another name)
    path = os.path.join(run, "metrics.h5") if os.path.isdir(run) else run
    if not os.path.exists(path):
        hint = "" if os.path.isdir(run) else f" ({run} does not exist)"
        raise SystemExit(f"plot_metrics.py: error: no {path}{hint}: give a triad run_dir or its metrics.h5")
    return path


def values(d, path):
    """Dataset d read whole; a chunk that fails its checksum (triad's series carry HDF5's Fletcher-32) named.

    A running job rewrites the last chunk of each series at every flush: a chunk read while it is written fails
    its checksum too, so such a read is tried again for a few seconds before it is called damaged."""
    for attempt in range(6):
        try:
            return d[:]
        except OSError as e:
            if "checksum" not in str(e):
                raise
            if attempt == 5:
                raise SystemExit(f"plot_metrics.py: error: {path}: {d.name} fails its checksum ({e}), read 6 "
                                 "times over 2.5 s: a byte of the file changed after triad wrote it (the disk, a "
                                 "copy); other quantities may still plot (--quantities), and the run's checkpoints "
                                 "are checked apart")
            time.sleep(0.5)


def column(g, name, path):
    """Dataset name of group g as float64 (a KeyError said as the file's)."""
    if name not in g:
        raise SystemExit(f"plot_metrics.py: error: {path} has {g.name} without {g.name}/{name}: not a whole "
                         "metrics file (damaged, or written by another program)")
    return values(g[name], path).astype(np.float64)


def load(run, quantities):
    """{quantity: (steps, values)} for one run; missing quantities are left out."""
    path = metrics_path(run)
    try:
        with h5py.File(path, "r") as f:
            if "metrics" not in f or "step" not in f["metrics"]:
                raise SystemExit(f"plot_metrics.py: error: {path} has no /metrics/step: not a triad metrics file")
            g = f["metrics"]
            steps = values(g["step"], path)
            out = {}
            for q in quantities:
                if q in g:
                    v = values(g[q], path).astype(np.float64)
                    n = min(len(steps), len(v))  # a live file may be mid-flush
                    if v.ndim > 1:  # several values a step (moe_tokens: [steps, L, E]): a column each
                        v = v.reshape(v.shape[0], int(np.prod(v.shape[1:])))  # (not -1: a live file may have 0 rows)
                        used = np.any(v != 0, axis=0)  # (a dense layer's experts took nothing)
                        v = v[:, used] if used.any() else v[:, :1]  # (all zero: one line of zeros, not none)
                    out[q] = (steps[:n], v[:n])
            available = sorted(g.keys())
            # (a live file may be mid-flush: each series cut to the rows all its columns have)
            if "eval" in f and "loss" in quantities and "loss" in f["eval"]:
                es, el = column(f["eval"], "step", path), column(f["eval"], "loss", path)
                n = min(len(es), len(el))
                out["eval_loss"] = (es[:n], el[:n])
            tasks = {}
            for name, t in (f["eval"].items() if "eval" in f else ()):
                if isinstance(t, h5py.Group):
                    cols = [column(t, k, path) for k in ("step", "acc", "acc_norm")]
                    n = min(len(c) for c in cols)
                    tasks[name] = tuple(c[:n] for c in cols)
            if tasks:
                out["accuracy"] = tasks
                available.append("accuracy")
    except OSError as e:
        raise SystemExit(f"plot_metrics.py: error: cannot read {path}: {e} (a file that a run is writing at this "
                         "moment reads again a moment later; else it is truncated or damaged)")
    if len(steps) > 1 and np.any(np.diff(steps) <= 0):
        print(f"plot_metrics.py: warning: {path}: steps are not increasing", file=sys.stderr)
    if len(steps) == 0 and quantities:
        print(f"plot_metrics.py: warning: {path} has no rows yet (a run before its first flush)", file=sys.stderr)
    for q, series in out.items():
        if q in ("accuracy", "eval_loss"):  # (a dict of tasks; the held-out loss, whose NaN is the loss's)
            continue
        v = series[1]
        if len(v) and not np.isfinite(v).any():
            print(f"plot_metrics.py: warning: {path}: every {q} is NaN or Inf", file=sys.stderr)
    return out, available


def smooth(v, n):
    if n <= 1 or len(v) < n:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    head = c[1:n] / np.arange(1, n)           # growing window at the start
    return np.concatenate([head, (c[n:] - c[:-n]) / n])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="See docs/analysis.md.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="triad run directories (or metrics.h5 files)")
    ap.add_argument("-o", "--output", help="image file to write (.png, .pdf, .svg)")
    ap.add_argument("--quantities", default=DEFAULT,
                    help=f"comma-separated /metrics datasets, one subplot each (default {DEFAULT})")
    ap.add_argument("--logy", action="store_true", help="logarithmic y axis for the loss")
    ap.add_argument("--smooth", type=int, default=1, metavar="N",
                    help="running mean over N steps (the raw curve stays, faint)")
    ap.add_argument("--labels", help="comma-separated legend labels, one per run (default: the run dirs)")
    ap.add_argument("--title", help="figure title")
    ap.add_argument("--size", default="7x6.5", help="figure size in inches, WxH (default 7x6.5)")
    ap.add_argument("--dpi", type=int, default=90, help="resolution of raster output (default 90)")
    ap.add_argument("--list", action="store_true", help="list the quantities of each run and exit")
    args = ap.parse_args()

    quantities = [q.strip() for q in args.quantities.split(",") if q.strip()]
    if not quantities:
        ap.error(f"--quantities '{args.quantities}' names none")
    if args.dpi < 1:
        ap.error(f"--dpi {args.dpi}: the resolution must be at least 1")
    if args.list:
        for run in args.runs:
            _, available = load(run, [])
            print(f"{run}: {' '.join(q for q in available if q != 'step')}")
        return 0
    if not args.output:
        ap.error("-o/--output is required (or --list)")
    labels = args.labels.split(",") if args.labels else [r.rstrip("/") for r in args.runs]
    if len(labels) != len(args.runs):
        ap.error(f"--labels has {len(labels)} names for {len(args.runs)} runs")
    try:
        w, h = (float(x) for x in args.size.lower().split("x"))
    except ValueError:
        ap.error(f"--size {args.size}: expected WxH in inches, e.g. 7x6.5")
    if not (0 < w < 1000 and 0 < h < 1000):
        ap.error(f"--size {args.size}: the width and height must be positive inches, e.g. 7x6.5")
    ext = os.path.splitext(args.output)[1].lower().lstrip(".")
    if ext and ext not in plt.gcf().canvas.get_supported_filetypes():
        ap.error(f"-o {args.output}: '{ext}' is not a format matplotlib writes; end the name in .png, .pdf or .svg")
    fmt = ext or "png"  # (a name without an extension: PNG, under that name)
    plt.close("all")

    data, union = [], set()
    for run in args.runs:
        d, available = load(run, quantities)
        data.append(d)
        union.update(available)
    if "accuracy" in union and "accuracy" not in quantities:
        quantities.append("accuracy")
    unknown = [q for q in quantities if q not in union]
    if unknown:
        raise SystemExit(f"plot_metrics.py: error: no run has {', '.join(unknown)}; "
                         f"available: {' '.join(sorted(union - {'step'}))}")

    fig, axes = plt.subplots(len(quantities), 1, figsize=(w, h), sharex=True, squeeze=False)
    axes = axes[:, 0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, q in zip(axes, quantities):
        for i, (d, label) in enumerate(zip(data, labels)):
            if q not in d:
                print(f"plot_metrics.py: warning: {args.runs[i]} has no {q}", file=sys.stderr)
                continue
            c = colors[i % len(colors)]
            if q == "accuracy":
                for k, (name, (ts, acc, norm)) in enumerate(sorted(d[q].items())):
                    m = "osv^<>"[k % 6]
                    ax.plot(ts, acc, color=c, marker=m, markersize=3, linewidth=1.2, label=f"{label} {name} acc")
                    ax.plot(ts, norm, color=c, marker=m, markersize=3, linewidth=1.0, linestyle=":",
                            label=f"{label} {name} acc_norm")
                continue
            steps, v = d[q]
            if q == "mfu":
                v = 100.0 * v
            if v.ndim > 1:  # one thin line per column (a layer's expert), the run's colour
                for k in range(v.shape[1]):
                    col = smooth(v[:, k], args.smooth) if args.smooth > 1 else v[:, k]
                    ax.plot(steps, col, color=c, linewidth=0.8, alpha=0.6, label=None if k else label)
            elif args.smooth > 1:
                ax.plot(steps, v, color=c, alpha=0.25, linewidth=0.8)
                ax.plot(steps, smooth(v, args.smooth), color=c, linewidth=1.4, label=label)
            else:
                ax.plot(steps, v, color=c, linewidth=1.2, label=label)
            if q == "loss" and "eval_loss" in d:
                es, ev = d["eval_loss"]
                ax.plot(es, ev, color=c, linestyle="--", marker="o", markersize=3, linewidth=1.0,
                        label=f"{label} (held-out)")
        ax.set_ylabel(LABELS.get(q, q))
        if q == "loss" and args.logy:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))  # 2, 3, 4 rather than 2x10^0
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("step")
    axes[0].legend(loc="best", fontsize="small", frameon=False)
    if quantities[-1] == "accuracy" and len(quantities) > 1:
        axes[-1].legend(loc="best", fontsize="x-small", frameon=False)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    tmp = args.output + ".tmp"  # (an earlier image is replaced whole or kept)
    try:
        fig.savefig(tmp, dpi=args.dpi, format=fmt)
        os.replace(tmp, args.output)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise SystemExit(f"plot_metrics.py: error: cannot write {args.output}: {e.strerror or e}")
    print(f"wrote {args.output}: {', '.join(quantities)} for {len(args.runs)} run(s)")
    return 0


def run():
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # (| head: the reader went away)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        if e.filename is None:  # (stdout's: the files' errors are said where they are read or written)
            sys.stderr.write(f"plot_metrics.py: error: the output could not all be written to stdout: {e.strerror}\n")
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        raise
    return status


if __name__ == "__main__":
    sys.exit(run())
