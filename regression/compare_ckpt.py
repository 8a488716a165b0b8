#!/usr/bin/python3
"""compare_ckpt.py A.h5 B.h5 TOL [KBIAS_ABS]

Compare every /model tensor of two checkpoints (written by any
decomposition: they are stored in their logical shapes).  The deviation of
a tensor is max|a-b| / max|b| (its largest element sets the scale).  Prints
the worst tensors; exit status 0 if every tensor is within TOL.

The key third of qkv_b is special: softmax is invariant to it, so its exact
gradient is zero and what it receives is rounding noise, which AdamW turns
into steps of up to lr each.  Runs that sum in a different order (other
decompositions) therefore move it differently.  With KBIAS_ABS given it is
compared separately, by max|a-b| <= KBIAS_ABS (use lr * steps)."""
import sys

import h5py
import numpy as np


def tensors(f):
    out = {}
    f["model"].visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def split_kbias(t):
    """Move the key third of every qkv_b into a tensor of its own."""
    for name in [n for n in t if n.endswith("qkv_b")]:
        C = t[name].shape[0] // 3
        t[name + "[k]"] = t[name][C:2 * C]
        t[name] = np.concatenate([t[name][:C], t[name][2 * C:]])


def main():
    a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    kbias_abs = float(sys.argv[4]) if len(sys.argv) > 4 else None
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        ta, tb = tensors(fa), tensors(fb)
    status = 0
    if kbias_abs is not None:
        split_kbias(ta)
        split_kbias(tb)
        worst = max(float(np.abs(ta[n] - tb[n]).max()) for n in ta if n.endswith("[k]"))
        print(f"key biases: max |a-b| = {worst:.3e} (bound {kbias_abs:g})")
        status = int(worst > kbias_abs)
        for n in [n for n in ta if n.endswith("[k]")]:
            del ta[n], tb[n]
    if ta.keys() != tb.keys():
        print(f"different tensors: {sorted(set(ta) ^ set(tb))}")
        return 1
    devs = []
    for name in ta:
        if ta[name].shape != tb[name].shape:
            print(f"{name}: shapes {ta[name].shape} and {tb[name].shape} differ")
            return 1
        scale = max(float(np.abs(tb[name]).max()), 1e-30)
        devs.append((float(np.abs(ta[name] - tb[name]).max()) / scale, name))
    devs.sort(reverse=True)
    print(f"{len(devs)} tensors; worst deviation {devs[0][0]:.3e} in {devs[0][1]} (tolerance {tol:g})")
    for d, name in devs[:3]:
        print(f"  {name:24s} {d:.3e}")
    return status or int(devs[0][0] > tol)


if __name__ == "__main__":
    sys.exit(main())
