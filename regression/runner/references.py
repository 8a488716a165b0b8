"""The stored references, regression/references/NAME.ref (docs/regression.md,
"The reference file"): reading one, and writing one from this build's run
with a header that says which build, compiler, host and commands made it."""

import datetime
import os
import platform
import re
import shlex
import shutil
import subprocess

import numpy as np

from .quantities import FINAL_QUANTITIES, STEP_QUANTITIES, CaseError


def read_reference(path):
    """{'steps': array, q: array for per-step columns, 'final': {q: {name: value}}}"""
    ref = {"final": {}}
    cols = None
    steps, rows = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            try:
                if w[0] == "columns:":
                    cols = w[1:]
                elif w[0] == "step":
                    if cols is None:
                        raise ValueError("a step line before the 'columns:' line")
                    if len(w) != 2 + len(cols):
                        raise ValueError("%d values, %d columns" % (len(w) - 2, len(cols)))
                    steps.append(int(w[1]))
                    rows.append([float(x) for x in w[2:]])
                elif w[0] in FINAL_QUANTITIES and len(w) == 3:
                    ref["final"].setdefault(w[0], {})[w[1]] = float(w[2])
                else:
                    raise ValueError("unrecognised line")
            except ValueError as e:
                raise CaseError("%s:%d: %s" % (path, n, e)) from None
    ref["steps"] = np.array(steps, dtype=np.int64)
    data = np.array(rows, dtype=np.float64).reshape(len(rows), len(cols or []))
    for i, q in enumerate(cols or []):
        ref[q] = data[:, i]
    return ref


def write_reference(path, case, out, header):
    """The case's compared quantities of out, under header [(key, value)], into path."""
    step_q = [q for q in STEP_QUANTITIES if q in case.compare]
    final_q = [q for q in FINAL_QUANTITIES if q in case.compare]
    lines = ["# triad regression reference for case '%s' (regression/cases/%s.nml)" % (case.name, case.name)]
    lines += ["# %-9s %s" % (k + ":", v) for k, v in header]
    lines.append("# Quantities and tolerances are set in the case; regenerate with the command above.")
    lines.append("columns: " + " ".join(step_q))
    for i, s in enumerate(out["steps"]):
        lines.append("step %4d " % s + " ".join("%.9e" % out[q][i] for q in step_q))
    for q in final_q:
        for key, v in sorted(out["final"][q].items()):
            lines.append("%s %s %.9e" % (q, key, v))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def build_info(args, launcher, res):
    """The reference's header for the run res: [(key, value)]."""
    info = []
    cmd = "REGENERATE=1 regression/run %s" % res["case"].name
    default = os.path.abspath(os.path.join(args.top_builddir, "triad"))
    if args.triad != default:  # another build of the program (regression/cuda_emu)
        cmd += " --triad %s" % os.path.relpath(args.triad, args.top_builddir)
    info.append(("made by", cmd))
    try:
        v = subprocess.run([args.triad, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30).stdout.decode().strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        v = "triad (version unknown)"
    # the commit of the sources the program was built from (configure's srcdir)
    built_from = makefile_vars(args.top_builddir, "abs_top_srcdir") or args.top_srcdir
    info.append(("build", "%s, commit %s" % (v, git_commit(built_from))))
    cc = compiler_info(args.top_builddir)
    if cc:
        info.append(("compiler", cc))
    compute = re.search(r"^compute: (.*)$", res.get("last_log", ""), re.M)
    if compute:
        info.append(("compute", compute.group(1)))
    info.append(("host", "%s, %s %s" % (cpu_model(), platform.system(), platform.machine())))
    info.append(("launcher", launcher.version or launcher.prog))
    info.append(("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")))
    for i, c in enumerate(res["commands"], 1):
        info.append(("run %d" % i, c))
    return info


def git_commit(srcdir):
    if not shutil.which("git") or not os.path.exists(os.path.join(srcdir, ".git")):
        return "unknown (%s is not a git checkout)" % srcdir
    try:
        p = subprocess.run(["git", "-C", srcdir, "describe", "--always", "--dirty", "--abbrev=12"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
        return p.stdout.decode().strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def makefile_vars(builddir, name):
    """The value of `name = ...` in the build's Makefile, or ''."""
    try:
        with open(os.path.join(builddir, "Makefile"), encoding="utf-8", errors="replace") as f:
            m = re.search(r"^%s = (.*)$" % re.escape(name), f.read(), re.M)
    except OSError:
        return ""
    return m.group(1).strip() if m else ""


def compiler_info(builddir):
    cc, cflags = makefile_vars(builddir, "CC"), makefile_vars(builddir, "CFLAGS")
    if not cc:
        return ""
    ver = ""
    try:
        p = subprocess.run(shlex.split(cc) + ["--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        ver = p.stdout.decode(errors="replace").splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError, ValueError):
        pass
    return "CC=%s (%s), CFLAGS=%s" % (cc, ver or "version unknown", cflags)


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
