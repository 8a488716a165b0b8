#!/usr/bin/python3
"""compare.py RUN_A RUN_B RTOL [QUANTITY ...]

Compare per-step metrics of two triad runs (their metrics.h5) and print the
worst relative deviation per quantity.  RTOL = 0 demands bitwise equality.
Exit status 0 if every quantity agrees within RTOL, 1 otherwise (with a table
of the first differing steps)."""
import sys

import h5py
import numpy as np


def load(run, q):
    with h5py.File(f"{run}/metrics.h5", "r") as f:
        return f["metrics/step"][:], f[f"metrics/{q}"][:]


def main():
    a, b, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    quantities = sys.argv[4:] or ["loss"]
    status = 0
    for q in quantities:
        sa, va = load(a, q)
        sb, vb = load(b, q)
        if len(sa) != len(sb) or not np.array_equal(sa, sb):
            print(f"{q}: the runs cover different steps ({len(sa)} vs {len(sb)} rows)")
            status = 1
            continue
        den = np.maximum(np.abs(vb), 1e-30)
        with np.errstate(invalid="ignore"):  # inf - inf: a skipped step's norm on both sides
            rel = np.abs(va - vb) / den
        worst = float(rel.max()) if len(rel) else 0.0
        bad = rel > rtol if rtol > 0 else va != vb
        print(f"{q}: {len(sa)} steps, worst relative deviation {worst:.3e} (tolerance {rtol:g})")
        if bad.any():
            status = 1
            print(f"  {'step':>6} {'expected':>16} {'got':>16} {'rel err':>10}")
            for i in np.flatnonzero(bad)[:10]:
                print(f"  {sa[i]:6d} {vb[i]:16.9g} {va[i]:16.9g} {rel[i]:10.3e}")
    return status


if __name__ == "__main__":
    sys.exit(main())
