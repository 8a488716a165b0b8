#!/usr/bin/env python3
"""map_check.py -- docs/design.md's map of the code, checked against the code.

Prints TAP.  The claims checked:
  1. src/'s folders are the layers, in the order of Makefile.am's
     TRIAD_INCLUDES (bottom up), and docs/design.md's layer table names the
     same folders in the same order; every source file sits in one of them.
  2. Each file includes only headers of its own layer or of layers below
     (no upward arrow); cuda/ sits with the kernels (it may include base/
     and kernels/ only).
  3. The modules' include graph has no circle (a module: a .c and its .h;
     a private header X_internal.h belongs to module X).
  4. MPI calls that communicate are in comm.c (model data, counted) and in
     the control-plane files design.md names, and nowhere else; queries
     (rank, size, clock, version) may be made anywhere but in cuda/, the
     CUDA plugin, which calls no MPI at all.

Usage: map_check.py TOP_SRCDIR
"""
import os
import re
import sys

top = sys.argv[1]
src = os.path.join(top, "src")
results = []


def ok(good, what, detail=()):
    results.append((good, what, list(detail)))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# 1. the layers
am = read(os.path.join(top, "Makefile.am"))
m = re.search(r"^TRIAD_INCLUDES\s*=((?:.*\\\n)*.*)$", am, re.M)
layers = re.findall(r"-I\$\(top_srcdir\)/src/([a-z_]+)", m.group(1)) if m else []
rank = {name: i for i, name in enumerate(layers)}
folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)) and not d.startswith("."))
ok(layers and sorted(layers) == folders, "Makefile.am's TRIAD_INCLUDES names every folder of src/, once",
   ["layers: %s" % " ".join(layers), "folders: %s" % " ".join(folders)])
design = read(os.path.join(top, "docs", "design.md"))
sec = design.split("## 1. Layers", 1)[-1].split("\n## ", 1)[0]
named = [f for f in re.findall(r"^\|\s*`src/([a-z_]+)/`", sec, re.M)]
ok(named == layers[::-1], "docs/design.md's layer table lists the folders top down, as Makefile.am does bottom up",
   ["design.md: %s" % " ".join(named), "Makefile.am reversed: %s" % " ".join(layers[::-1])])
generated = {"build_config.h", "version_git.h"}
loose = [f for f in os.listdir(src) if os.path.isfile(os.path.join(src, f)) and f not in generated and not f.startswith(".")
         and not f.endswith((".o", ".a"))]
ok(not loose, "every source file sits in a layer folder", loose)

# the files and where each header lives
where = {}
files = []
for d in folders:
    for f in sorted(os.listdir(os.path.join(src, d))):
        if f.endswith((".c", ".h", ".def")):
            where.setdefault(f, []).append(d)
            files.append((d, f))
dups = ["%s in %s" % (f, ", ".join(ds)) for f, ds in where.items() if len(ds) > 1]
ok(not dups, "every file name is unique across the layers (the include paths are flat)", dups)

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    return INC.findall(read(path))


# 2. no upward arrow
up = []
for d, f in files:
    for h in includes(os.path.join(src, d, f)):
        if h in where and rank[where[h][0]] > rank[d]:
            up.append("src/%s/%s includes %s of src/%s/, a layer above" % (d, f, h, where[h][0]))
ok(not up, "no upward arrow: each file of src/ includes only its own layer's headers or lower ones", up)
cuda = os.path.join(top, "cuda")
allowed = {"base", "kernels"}
bad = []
for f in sorted(os.listdir(cuda)):
    if f.endswith((".c", ".h", ".cu", ".cuh")):
        for h in includes(os.path.join(cuda, f)):
            if h in where and where[h][0] not in allowed:
                bad.append("cuda/%s includes %s of src/%s/" % (f, h, where[h][0]))
ok(not bad, "cuda/, a device backend, includes only src/base/ and src/kernels/", bad)


# 3. no circle among the modules
def module(f):
    stem = os.path.splitext(f)[0]
    return stem[: -len("_internal")] if stem.endswith("_internal") else stem


graph = {}
for d, f in files:
    a = module(f)
    for h in includes(os.path.join(src, d, f)):
        if h in where and module(h) != a:
            graph.setdefault(a, set()).add(module(h))
circles, state = [], {}


def visit(n, path):
    state[n] = 1
    for k in sorted(graph.get(n, ())):
        if state.get(k) == 1:
            circles.append(" -> ".join(path[path.index(k):] + [k]))
        elif k not in state:
            visit(k, path + [k])
    state[n] = 2


for n in sorted(graph):
    if n not in state:
        visit(n, [n])
ok(not circles, "the modules' include graph has no circle", circles)

# 4. MPI
QUERY = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Wtime", "MPI_Initialized", "MPI_Finalized", "MPI_Error_string",
         "MPI_Get_version", "MPI_Get_library_version", "MPI_Query_thread"}
CALL = re.compile(r"\b(MPI_[A-Z][a-z_]+)\s*\(")
cp = design.split("### MPI:", 1)[-1].split("\n#", 1)[0]
control = set(re.findall(r"^\|\s*`(src/[a-z_]+/[a-z_0-9]+\.c)`", cp, re.M))
calling = set()
for d, f in files:
    if f.endswith(".c"):
        text = re.sub(r"/\*.*?\*/", "", read(os.path.join(src, d, f)), flags=re.S)
        if any(c not in QUERY for c in CALL.findall(text)):
            calling.add("src/%s/%s" % (d, f))
model_data = "src/grid/comm.c"
ok(model_data in calling, "comm.c makes the MPI calls on model data")
stray = sorted(calling - control - {model_data})
ok(not stray, "MPI communication outside comm.c only in the control-plane files docs/design.md names",
   ["%s calls MPI but is not in design.md's control-plane table" % f for f in stray])
stale = sorted(control - calling)
ok(not stale, "every control-plane file design.md names does call MPI", stale)
# the CUDA backend is a plugin that links no MPI (src/kernels/device_load.h):
# not even a query
MPI_ANY = re.compile(r"\b(MPIX?_[A-Z][a-z_]+)\s*\(")
in_cuda = []
for f in sorted(os.listdir(cuda)):
    if f.endswith((".c", ".h", ".cu", ".cuh")):
        text = re.sub(r"/\*.*?\*/", "", read(os.path.join(cuda, f)), flags=re.S)
        in_cuda += ["cuda/%s calls %s" % (f, c) for c in sorted(set(MPI_ANY.findall(text)))]
ok(not in_cuda, "cuda/, the plugin triad-cuda.so, calls no MPI", in_cuda)

for i, (good, what, detail) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if good else "not ok", i, what))
    if not good:
        for line in detail:
            print("# " + line)
print("1..%d" % len(results))
sys.exit(0 if all(r[0] for r in results) else 1)
