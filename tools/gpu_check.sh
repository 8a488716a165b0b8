#!/bin/sh
# gpu_check.sh -- on a GPU machine: build triad with the CUDA backend (the
# plugin triad-cuda.so), its unit tests and the GEMM benchmark through
# configure and make, and run them; then run the full program on the GPU
# against the CPU (training, and triad sample's text and rates), benchmark
# GPT-2 124M, and run the regression suite's GPU cases (docs/cuda.md, "On a
# GPU machine").
#
#   tools/gpu_check.sh          about 5 minutes expected on an H200 machine
#
# Needs nvcc and the CUDA libraries, gcc, and Open MPI, OpenBLAS, parallel
# HDF5, PCRE2 and utf8proc: from shared/ompi/runtime.tar.xz (made by
# tools/gpu_bundle.sh on a Debian machine) when the machine has none.  The
# build is `./configure --with-cuda && make` in a copy of the tree, with the
# libraries given to configure by hand; configure itself from autoreconf, or
# from the bundle where the machine has no autotools.  The bundle's prebuilt
# triad (and its triad-cuda.so) is the fallback when the build fails.
# Environment:
#   CUDA_ARCH    nvcc -arch value (default native: the GPU present)
#   BUILD        build folder (default /tmp/triad-gpu; the copy of the tree in BUILD/src)
#   JOBS         parallel compiles (default: the number of CPUs)
#   SANITIZE     1 (default) runs the kernels under compute-sanitizer too (last)
#   BUDGET       seconds the whole script may take (default 480); each step's
#                timeout is cut to what is left, steps with no time left fail
#   BENCH_STEPS  steps of each GPT-2 124M benchmark run (default 20)
#   PYTHON3      the regression runner's python, with h5py and numpy (default python3)
# Prints every test's TAP output, PASS/FAIL lines and a summary; exit status
# 0 when all passed.  With $OUT set to a folder, the logs are copied there.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
B=${BUILD:-/tmp/triad-gpu}
ARCH=${CUDA_ARCH:-native}
JOBS=${JOBS:-$(nproc 2> /dev/null || echo 4)}
BUDGET=${BUDGET:-480}
MA=x86_64-linux-gnu
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
passed=0
failed=0

die() { echo "gpu_check: $*" >&2; exit 1; }
ok() { passed=$((passed + 1)); echo "gpu_check: PASS $*"; }
bad() { failed=$((failed + 1)); echo "gpu_check: FAIL $*"; }
# tl WANT: WANT seconds, or what is left of BUDGET if that is less (at
# least 1: `timeout 0` would mean no limit)
tl() {
    left=$((BUDGET - ($(date +%s) - T0)))
    [ "$left" -lt 1 ] && left=1
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

[ -x "$NVCC" ] || die "nvcc not found (set NVCC)"
mkdir -p "$B/run" || die "cannot create $B"
rm -f "$B"/*.log "$B"/run/*.log # this run's logs only
echo "gpu_check: $("$NVCC" --version | tail -1), CUDA in $CUDA_HOME, -arch=$ARCH"
nvidia-smi -L 2>/dev/null || echo "gpu_check: nvidia-smi not available"

# ---------------------------------------------------------------- MPI and BLAS
R=""
if [ -f shared/ompi/runtime.tar.xz ]; then
    R=$B/ompi
    if [ ! -d "$R/usr" ] || [ shared/ompi/runtime.tar.xz -nt "$R/.unpacked" ]; then
        rm -rf "$R"
        mkdir -p "$R" && tar -C "$R" -xJf shared/ompi/runtime.tar.xz && touch "$R/.unpacked" ||
            die "cannot unpack shared/ompi"
    fi
    # Debian's Open MPI and PMIx moved from / to $R: *_DESTDIR relocates all
    # their install folders (OPAL_PREFIX would miss /etc/openmpi); Debian's
    # pmix-mca-params.conf names the plugin folder absolutely.
    export OPAL_DESTDIR="$R" PMIX_DESTDIR="$R" PATH="$R/usr/bin:$PATH"
    export PMIX_MCA_mca_base_component_path="$R/usr/lib/$MA/pmix2/lib/pmix"
    export LD_LIBRARY_PATH="$R/usr/lib/$MA:$R/lib/$MA:$R/usr/lib/$MA/openmpi/lib:$R/usr/lib/$MA/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    MPI_CFLAGS="-I$R/usr/lib/$MA/openmpi/include"
    MPI_LIBS="-L$R/usr/lib/$MA/openmpi/lib -lmpi"
    BLAS_CFLAGS="-I$R/usr/include/$MA/openblas-pthread"
    BLAS_LIBS="-L$R/usr/lib/$MA/openblas-pthread -lopenblas"
    echo "gpu_check: Open MPI and OpenBLAS from shared/ompi ($(tr '\n' ' ' < shared/ompi/PACKAGES | wc -w) packages)"
    # Debian 12's libevent (under Open MPI) calls arc4random: glibc 2.36
    glibc=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
    if [ -n "$glibc" ] && [ "$(printf '%s\n' 2.36 "$glibc" | sort -V | head -1)" != 2.36 ]; then
        echo "gpu_check: warning: glibc $glibc here; the bundle's Open MPI needs 2.36 (libevent):" \
            "MPI programs (test_cuda_device, triad) will not load"
    fi
else
    command -v mpicc >/dev/null || die "no MPI here and no shared/ompi: run tools/gpu_bundle.sh on a Debian machine first"
    MPI_CFLAGS=$(mpicc -showme:compile)
    MPI_LIBS=$(mpicc -showme:link)
    BLAS_CFLAGS=$(pkg-config --cflags openblas) && BLAS_LIBS=$(pkg-config --libs openblas) ||
        die "no OpenBLAS here and no shared/ompi"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

# ---------------------------------------------------------------- build
# Through configure and make, as anywhere else (docs/cuda.md): in a copy of
# the tree ($S: the files that travel, no build outputs), the program and the
# plugin triad-cuda.so beside it, the CUDA unit tests and the GEMM
# benchmark, nvcc for -arch=$ARCH.  configure comes from autoreconf where the
# autotools are installed, else from the bundle (tools/gpu_bundle.sh packs
# the generated files) when it was made from the same configure.ac and
# Makefile.am.  The libraries are given to configure by hand (*_CFLAGS,
# *_LIBS: no pkg-config needed), from the bundle or from this machine.
S=$B/src
autotools_hash() { cat "$1/configure.ac" "$1/Makefile.am" | sha256sum | cut -d' ' -f1; }
copy_tree() {
    mkdir -p "$S" || return 1
    if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] && echo "$f"; done |
            tar -T - -cf - | tar -C "$S" -xf -
    else
        tar --exclude=./shared --exclude=./.git -cf - . | tar -C "$S" -xf -
    fi
}
make_configure() {
    AT=${TD:+$TD/autotools}
    if command -v autoreconf > /dev/null 2>&1; then
        (cd "$S" && autoreconf -fi) > "$B/autoreconf.log" 2>&1 || { tail -5 "$B/autoreconf.log"; return 1; }
    elif [ -n "$AT" ] && [ -f "$AT/configure" ] && [ "$(cat "$AT/HASH" 2> /dev/null)" = "$(autotools_hash "$S")" ]; then
        echo "gpu_check: no autotools here: configure and Makefile.in from the bundle"
        tar -C "$AT" --exclude=./HASH -cf - . | tar -C "$S" -xf -
    else
        echo "gpu_check: no autotools here, and the bundle's configure is missing or made from another" \
            "configure.ac/Makefile.am: run tools/gpu_bundle.sh again, or install autoconf and automake"
        return 1
    fi
}
# Triad's own libraries (HDF5, PCRE2, utf8proc and their dependencies) from
# the bundle's triad/ folder, or this machine's through pkg-config.
TD=""
[ -n "$R" ] && [ -d "$R/triad" ] && TD=$R/triad
lib_flags() {
    if [ -n "$TD" ] && [ -f "$TD/usr/include/hdf5/openmpi/hdf5.h" ]; then
        HDF5_CFLAGS="-I$TD/usr/include/hdf5/openmpi"
        HDF5_LIBS="-L$TD/usr/lib/$MA/hdf5/openmpi -lhdf5 -Wl,-rpath-link,$TD/usr/lib/$MA:$TD/lib/$MA"
        TEXT_CFLAGS="-I$TD/usr/include"
        TEXT_LIBS="-L$TD/usr/lib/$MA -lpcre2-8 -lutf8proc"
    else
        HDF5_CFLAGS=$(pkg-config --cflags hdf5-openmpi 2> /dev/null) &&
            HDF5_LIBS=$(pkg-config --libs hdf5-openmpi 2> /dev/null) &&
            TEXT_CFLAGS=$(pkg-config --cflags libpcre2-8 libutf8proc 2> /dev/null) &&
            TEXT_LIBS=$(pkg-config --libs libpcre2-8 libutf8proc 2> /dev/null) ||
            { echo "gpu_check: no parallel HDF5, PCRE2 or utf8proc (bundle or pkg-config)"; return 1; }
    fi
}
UNITS="regression/unit/test_cuda_kernels regression/unit/test_cuda_lowp regression/unit/test_cuda_device"
BUILT=0
t0=$(date +%s)
if copy_tree && make_configure && lib_flags; then
    echo "gpu_check: ./configure --with-cuda=$CUDA_HOME; make -j$JOBS triad triad-cuda.so, the CUDA tests, the benchmark"
    if (cd "$S" && CC=gcc MPICC=gcc CPPFLAGS="$MPI_CFLAGS" LIBS="$MPI_LIBS" BLAS_CFLAGS="$BLAS_CFLAGS" \
            BLAS_LIBS="$BLAS_LIBS" HDF5_CFLAGS="$HDF5_CFLAGS" HDF5_LIBS="$HDF5_LIBS" TEXT_CFLAGS="$TEXT_CFLAGS" \
            TEXT_LIBS="$TEXT_LIBS" NVCC="$NVCC" ./configure -q --with-cuda="$CUDA_HOME" &&
            LD_LIBRARY_PATH="${TD:+$TD/usr/lib/$MA:$TD/lib/$MA:}${LD_LIBRARY_PATH:-}" make -j"$JOBS" \
                CUDA_GENCODE="-arch=$ARCH" triad triad-cuda.so $UNITS bench/cuda_gemm_bench) \
            > "$B/build.log" 2>&1; then
        BUILT=1
        echo "gpu_check: built in $(($(date +%s) - t0)) s (log: $B/build.log)"
    else
        tail -20 "$B/build.log"
        echo "gpu_check: the build failed (log: $B/build.log)"
    fi
fi
[ $BUILT = 1 ] && ok "build: configure --with-cuda && make" || bad "build: configure --with-cuda && make"

# ---------------------------------------------------------------- tests
# Passes when it exits 0, ran (no skip plan: this machine has a GPU) and no
# test said "not ok".
run_tap() {
    name=$1
    shift
    echo "== $name"
    timeout -k 10 "$(tl 300)" "$@" > "$B/$name.log" 2>&1
    rc=$?
    cat "$B/$name.log"
    if grep -q '^1\.\.0 # SKIP' "$B/$name.log"; then
        bad "$name (skipped: no GPU visible)"
    elif [ $rc -ne 0 ] || grep -q '^not ok' "$B/$name.log" || ! grep -q '^1\.\.[1-9]' "$B/$name.log"; then
        bad "$name (exit $rc)"
    else
        ok "$name"
    fi
}
U=$S/regression/unit
run_tap test_cuda_kernels "$U/test_cuda_kernels"
run_tap test_cuda_lowp "$U/test_cuda_lowp"
run_tap test_cuda_device "$U/test_cuda_device"
run_tap test_cuda_device_2ranks mpirun -np 2 "$U/test_cuda_device"

echo "== cuda_gemm_bench"
GPU_OK=0
if timeout -k 10 "$(tl 300)" "$S/bench/cuda_gemm_bench" > "$B/cuda_gemm_bench.log" 2>&1; then
    GPU_OK=1
    cat "$B/cuda_gemm_bench.log"
    ok cuda_gemm_bench
else
    cat "$B/cuda_gemm_bench.log"
    bad cuda_gemm_bench
fi
# GFLOP/s of the 8192^3 products (empty when the benchmark failed)
rate() { awk -v m="$1" '$1 == m && $3 == "TFLOP/s" {printf "%.0f", $2 * 1000}' "$B/cuda_gemm_bench.log"; }
PEAK_BF16=$(rate bf16)
PEAK_FP32=$(rate fp32)

# ---------------------------------------------------------------- the full program
echo "== triad: the full program on the GPU"
# Triad's own libraries (HDF5 and its dependencies) only on triad's path.
TLD="${TD:+$TD/usr/lib/$MA:$TD/lib/$MA:}$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# why LOG: the line of LOG that says why a run failed
why() {
    grep -m1 -E '^error|error:|rror while loading|not found|out of time|CUDA error|Killed' "$1" ||
        tail -1 "$1"
}
# trun NAME NP SECONDS DECK [key=value ...]: a triad run; its output in $B/run/NAME.log
trun() {
    tn=$1 tnp=$2 tt=$(tl "$3")
    shift 3
    rm -rf "$B/run/$tn"
    if [ "$tt" -le 5 ]; then
        echo "gpu_check: out of time (BUDGET=$BUDGET s)" > "$B/run/$tn.log"
        return 124
    fi
    # (triad eval writes no run directory, and refuses the io keys it does not read)
    [ "$1" = eval ] || set -- "$@" io.run_dir="'$B/run/$tn'" io.overwrite=.true.
    LD_LIBRARY_PATH=$TLD OMPI_MCA_hwloc_base_binding_policy=none timeout -k 10 "$tt" \
        mpirun -n "$tnp" "$TR" "$@" > "$B/run/$tn.log" 2>&1
    trc=$?
    [ $trc -eq 124 ] && echo "gpu_check: timed out after $tt s" >> "$B/run/$tn.log"
    return $trc
}
TINY="regression/decks/tiny.nml model.n_layer=4 train.steps=20 io.log_every=1 train.memory_gb=8"

# Which triad: the one built here (its triad-cuda.so beside it), else the
# bundle's prebuilt one (triad/bin/triad and triad-cuda.so) if it loads; the
# first that runs 2 steps on the GPU, else the first for the CPU runs.
TR=""
TRL=""
ANY=""
ANYL=""
ANYWHY=""
try() { # try LABEL BINARY
    TR=$2
    trun probe 1 90 $TINY train.steps=2 train.warmup_steps=0 train.device="'cuda'" && { TRL=$1; return 0; }
    w=$(why "$B/run/probe.log")
    echo "gpu_check: $1 triad: 2 steps on the GPU failed: $w"
    [ -n "$ANY" ] || { ANY=$2; ANYL=$1; ANYWHY=$w; }
    TR=""
    return 1
}
pre=""
if [ -n "$TD" ] && [ -x "$TD/bin/triad" ]; then
    pre=$TD/bin/triad
    head -1 "$TD/BUILD" 2> /dev/null | sed 's/^/gpu_check: prebuilt: /'
    miss=$(LD_LIBRARY_PATH=$TLD ldd "$pre" "$TD/bin/triad-cuda.so" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
    if [ -n "$miss" ]; then
        echo "gpu_check: the prebuilt triad does not load here: ${miss}not found"
        pre=""
    fi
fi
if [ $BUILT = 1 ] && try "built here" "$S/triad"; then
    :
elif [ -n "$pre" ] && try "prebuilt" "$pre"; then
    :
fi
NOGPU=""
if [ -n "$TR" ]; then
    ok "triad ($TRL: $TR) runs 2 steps on the GPU"
elif [ -n "$ANY" ]; then
    TR=$ANY
    TRL=$ANYL
    NOGPU=$ANYWHY
    bad "triad ($TRL: $TR) does not run on the GPU: $NOGPU"
else
    bad "triad: no program to run (none built here, no prebuilt triad in shared/ompi that loads here)"
fi

# cmp_runs GPU_LOG CPU_LOG STEPS RTOL_LOSS RTOL_GNORM: the per-step losses
# (printed with 6 decimals) and grad norms (4 decimals; RTOL 0: not compared)
# of the progress lines, relative to the CPU's, with the printing's rounding
# as an absolute floor; the same steps skipped.  Prints the worst deviations.
cmp_runs() {
    awk -v n="$3" -v rl="$4" -v rg="$5" '
        function abs(x) { return x < 0 ? -x : x }
        function dev(a, b, fl) { return a == b ? 0 : (a ~ /[a-z]/ || b ~ /[a-z]/) ? 1e30 : abs(a - b) / (abs(b) + fl) }
        /^step +[0-9]+\/[0-9]+ \| loss / {
            file = FILENAME == ARGV[1] ? 1 : 2; split($2, s, "/"); k = s[1] + 0
            L[file, k] = $5; S[file, k] = ($NF == "skipped"); c[file]++
            for (i = 6; i < NF; i++) if ($i == "norm") G[file, k] = $(i + 1) # (a mixture adds aux, dropped before)
        }
        END {
            if (c[1] != n || c[2] != n) { printf "progress lines: %d (GPU) and %d (CPU), expected %d\n", c[1], c[2], n; exit 1 }
            wl = wg = 0; kl = kg = 1; bad = 0
            for (k = 1; k <= n; k++) {
                if (S[1, k] != S[2, k]) { printf "step %d skipped on one side only\n", k; bad = 1 }
                d = dev(L[1, k], L[2, k], 1e-6 / rl); if (d > wl) { wl = d; kl = k }
                if (rg > 0 && !S[2, k]) { d = dev(G[1, k], G[2, k], 1e-4 / rg); if (d > wg) { wg = d; kg = k } }
            }
            printf "loss: worst %.2g at step %d (GPU %s, CPU %s; tolerance %g)", wl, kl, L[1, kl], L[2, kl], rl
            if (rg > 0) printf "; grad norm: worst %.2g at step %d (tolerance %g)", wg, kg, rg
            printf "\n"
            exit (bad || wl > rl || (rg > 0 && wg > rg))
        }' "$1" "$2"
}
# pair NAME NP RTOL_LOSS RTOL_GNORM [key=value ...]: the tiny deck on the CPU
# and on the GPU, the same overrides; sets PAIR to the comparison or the failure
PAIR=""
pair() {
    pn=$1 pnp=$2 prl=$3 prg=$4
    shift 4
    gx="train.device='cuda'"
    [ "$pnp" -gt 1 ] && gx="$gx train.share_gpus=.true."
    if [ -z "$TR" ]; then PAIR="no triad"; return 1; fi
    if ! trun "$pn-cpu" "$pnp" 120 $TINY "$@"; then
        PAIR="the CPU run failed: $(why "$B/run/$pn-cpu.log")"
        return 1
    fi
    echo "gpu_check: $pn on the CPU: $(grep -c '^step .*| loss' "$B/run/$pn-cpu.log") steps, last:" \
        "$(grep '^step .*| loss' "$B/run/$pn-cpu.log" | tail -1 | cut -d'|' -f1-2)"
    if [ -n "$NOGPU" ]; then PAIR="not run: $NOGPU"; return 1; fi
    if ! trun "$pn-gpu" "$pnp" 120 $TINY $gx "$@"; then
        PAIR="the GPU run failed: $(why "$B/run/$pn-gpu.log")"
        return 1
    fi
    PAIR=$(cmp_runs "$B/run/$pn-gpu.log" "$B/run/$pn-cpu.log" 20 "$prl" "$prg")
}

# (i) fp32: the GPU's per-step losses within 1e-4 (grad norms 1e-3) of the CPU's
for np in 1 2; do
    if pair "fp32-np$np" "$np" 1e-4 1e-3; then
        ok "train fp32, $np rank(s), 20 steps: CUDA matches the CPU: $PAIR"
    else
        bad "train fp32, $np rank(s), 20 steps: $PAIR"
    fi
done
# (i') a mixture of experts (docs/moe.md: llama, 4 experts, top 2, a gated
# shared expert) on 1 rank, and with expert parallelism ep 2 on 2 ranks
# (the all-to-alls through MPI) with a leading dense block, against the CPU
# within 1e-4
MOE="model.arch='llama' model.n_kv_head=2 model.n_expert=4 model.n_expert_active=2 model.moe_ffn_hidden=24"
MOE="$MOE model.n_shared_expert=1 train.moe_aux_loss=0.02 train.moe_z_loss=1e-3"
for np in 1 2; do
    ep=""; [ "$np" -gt 1 ] && ep="parallel.ep=2 model.moe_dense_layers=1 model.ffn_hidden=40"
    if pair "moe-np$np" "$np" 1e-4 1e-3 $MOE $ep; then
        ok "train a mixture of experts, $np rank(s)${ep:+ ($ep)}, 20 steps: CUDA matches the CPU: $PAIR"
    else
        bad "train a mixture of experts, $np rank(s)${ep:+ ($ep)}: $PAIR"
    fi
done
# (i'') triad eval: a checkpoint's held-out loss (a token shard) and the scores of
# a multiple-choice task (an llm.c eval file by regression/mc_torch.py's
# writer) on the GPU, within 1e-5 of the CPU's, the same acc and acc_norm
EV=$B/run/ev-files
mkdir -p "$EV"
"${PYTHON3:=python3}" - "$EV" << 'EOD'
import json, random, struct, sys
r = random.Random(3)
ids = [r.randrange(64) for _ in range(4000)]
open(sys.argv[1] + "/val.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)) +
                                           struct.pack("<%dH" % len(ids), *ids))
ex = [{"ctx": [r.randrange(64) for _ in range(r.randint(1, 8))], "label": r.randrange(4)} for _ in range(40)]
for e in ex:
    e["endings"] = [[r.randrange(64) for _ in range(r.randint(1, 17 - len(e["ctx"])))] for _ in range(4)]
json.dump(ex, open(sys.argv[1] + "/mc.json", "w"))
EOD
"$PYTHON3" regression/mc_torch.py write "$EV/mc.json" "$EV/mc.bin"
EVAL="data.kind='tokens' data.val_path='$EV/val.bin' eval.tasks='$EV/mc.bin'"
# (the scores' task name: mc; the held-out line: loss X | perplexity ...)
if [ -z "$TR" ]; then
    bad "triad eval on the GPU: no triad"
elif ! trun ev-ckpt 1 60 $TINY train.steps=4 io.save_final=.true. ||
    ! trun ev-cpu 1 60 eval "$B/run/ev-ckpt/ckpt_4.h5" $EVAL eval.scores="'$EV/cpu.tsv'"; then
    bad "triad eval on the CPU (the reference) failed: $(why "$B/run/ev-cpu.log")"
elif [ -n "$NOGPU" ]; then
    bad "triad eval on the GPU: not run: $NOGPU"
elif ! trun ev-gpu 1 60 eval "$B/run/ev-ckpt/ckpt_4.h5" $EVAL eval.scores="'$EV/gpu.tsv'" train.device="'cuda'"; then
    bad "triad eval on the GPU failed: $(why "$B/run/ev-gpu.log")"
elif EVCMP=$("$PYTHON3" - "$B/run/ev-gpu.log" "$B/run/ev-cpu.log" "$EV/gpu.tsv" "$EV/cpu.tsv" << 'EOD'
import re, sys
def held(log):
    return [float(m.group(1)) for m in re.finditer(r"^held-out .*: loss ([0-9.]+) ", open(log).read(), re.M)]
def task(log):
    return re.findall(r"^task mc: acc ([0-9.]+) \| acc_norm ([0-9.]+) ", open(log).read(), re.M)
rows = lambda f: [l.split("\t") for l in open(f) if not l.startswith("#")]
(g,), (c,) = held(sys.argv[1]), held(sys.argv[2])
a, b = rows(sys.argv[3]), rows(sys.argv[4])
worst = max(abs(float(x[5]) - float(y[5])) / abs(float(y[5])) for x, y in zip(a, b))
good = abs(g - c) <= 1e-5 * c and len(a) == len(b) == 160 and worst <= 1e-5 and task(sys.argv[1]) == task(sys.argv[2])
print("held-out loss %.9f (CPU %.9f), 160 choices' log-probabilities within %.2g, acc and acc_norm %s" %
      (g, c, worst, task(sys.argv[1])))
sys.exit(not good)
EOD
); then
    ok "triad eval on the GPU: $EVCMP"
else
    bad "triad eval on the GPU: $EVCMP"
fi
# (ii) bf16 and fp16 on 2 ranks, an overflow injected on rank 1 at step 5:
# skipped on every rank; fp16 backs its loss scale off (hysteresis 1).  The
# GPU's losses against the CPU's with the same settings, within the
# precisions' tolerances against fp32 (regression/precision.sh).
INJ="diag.inject_overflow_step=5 diag.inject_rank=1"
for spec in "bf16 1e-2" "fp16 2.5e-3 train.loss_scale_hysteresis=1"; do
    set -- $spec
    p=$1
    # (the hysteresis is fp16's alone: a deck that sets it for bf16 is refused)
    if pair "$p-np2" 2 "$2" 0 train.precision="'$p'" $INJ ${3:-}; then
        g=$B/run/$p-np2-gpu.log
        miss=""
        grep -q "step 5: gradients not finite (first on world rank 1)" "$g" || miss="$miss 'step 5: gradients not finite'"
        grep -q '^step  *5/20 .*| skipped$' "$g" || miss="$miss 'step 5 ... | skipped'"
        [ "$p" = fp16 ] && ! grep -q "step 5: loss scale 65536 -> 32768" "$g" && miss="$miss 'step 5: loss scale 65536 -> 32768'"
        if [ -z "$miss" ]; then
            ok "train $p, 2 ranks, overflow at step 5: skipped on both ranks$([ "$p" = fp16 ] && echo ", scale 65536 -> 32768"); $PAIR"
        else
            bad "train $p, 2 ranks, overflow at step 5: the GPU log lacks$miss"
        fi
    else
        bad "train $p, 2 ranks, overflow at step 5: $PAIR"
    fi
done

# (iii) triad sample (docs/sample.md) on the GPU: a byte-level llama trained
# 30 steps on the CPU; a prompt file's greedy text on the GPU, on 1 rank and
# on pp 2, equal to the CPU's; then the rates of 64 prompts of 96-127 bytes,
# 128 new tokens each, on the llama small config (one step trained), in one
# batch and one at a time, beside the CPU's (one rank).  Whether the GPU's
# text at temperature 0.9 is the same batched as one at a time is printed,
# not counted (cuBLAS may sum a product's rows differently for another row
# count; the CPU's GEMM never does).
echo "== triad sample on the GPU"
SD=$B/run/sample
# sample_run NAME NP ARGS...: its text in $SD/NAME.txt, its stderr in $SD/NAME.err
sample_run() {
    sn=$1 snp=$2
    shift 2
    LD_LIBRARY_PATH=$TLD OMPI_MCA_hwloc_base_binding_policy=none timeout -k 10 "$(tl 120)" \
        mpirun -n "$snp" "$TR" sample "$@" > "$SD/$sn.txt" 2> "$SD/$sn.err"
}
rates() { sed -n 's/.*prefill \([0-9]*\) tokens in .* (\([0-9.]*\) tokens\/s), decode \([0-9]*\) tokens in .* (\([0-9.]*\) tokens\/s)/prefill \2 tokens\/s, decode \4 tokens\/s/p' "$SD/$1.err"; }
if [ -z "$TR" ] || [ -n "$NOGPU" ]; then
    bad "triad sample on the GPU: not run: ${NOGPU:-no triad}"
else
    rm -rf "$SD" && mkdir -p "$SD"
    printf 'The\nAnd so it was\nx\nIt was the best\nThe\nof\n' > "$SD/prompts.txt"
    SCK=$B/run/sample-train/ckpt_30.h5
    trun sample-train 1 60 regression/decks/tiny.nml model.arch="'llama'" model.n_kv_head=2 model.vocab_size=256 \
        model.seq_len=32 data.kind="'text'" data.path="'$PWD/regression/cases/data/corpus.txt'" train.steps=30 \
        train.batch_size=8 train.lr=1d-2 io.save_final=.true.
    g="sample.prompt_file=$SD/prompts.txt sample.max_new_tokens=12"
    sample_run cpu 1 "$SCK" $g sample.temperature=0
    sample_run gpu 1 "$SCK" $g sample.temperature=0 train.device=cuda
    grc=$?
    sample_run gpu_pp2 2 "$SCK" $g sample.temperature=0 train.device=cuda train.share_gpus=.true. parallel.pp=2
    prc=$?
    if [ $grc -eq 0 ] && [ $prc -eq 0 ] && [ -s "$SD/cpu.txt" ] && cmp -s "$SD/gpu.txt" "$SD/cpu.txt" &&
        cmp -s "$SD/gpu_pp2.txt" "$SD/cpu.txt"; then
        ok "triad sample, 6 prompts, greedy: the GPU's text (1 rank and pp 2) = the CPU's"
    else
        bad "triad sample, greedy, GPU (exit $grc, pp 2 exit $prc) against the CPU: $(head -c 300 "$SD/gpu.err")"
    fi
    sample_run t1 1 "$SCK" $g sample.temperature=0.9 train.device=cuda
    sample_run t1b 1 "$SCK" $g sample.temperature=0.9 train.device=cuda sample.batch_size=1
    echo "gpu_check: temperature 0.9 on the GPU, batched = one at a time: $(cmp -s "$SD/t1.txt" "$SD/t1b.txt" &&
        echo yes || echo no) (not counted)"
    awk 'BEGIN { for (i = 0; i < 64; i++) { n = 96 + (i * 13) % 32; s = "";
                 for (j = 0; j < n; j++) s = s sprintf("%c", 97 + (i * 7 + j * 3) % 26); print s } }' > "$SD/p64.txt"
    if trun sample-small 1 120 bench/llama_small.nml model.vocab_size=256 train.steps=1 io.save_final=.true.; then
        r="$B/run/sample-small/ckpt_1.h5 sample.prompt_file=$SD/p64.txt sample.max_new_tokens=128 sample.temperature=0.8"
        sample_run small_gpu 1 $r train.device=cuda
        sample_run small_gpu_b1 1 $r train.device=cuda sample.batch_size=1
        sample_run small_cpu 1 $r
        if [ -s "$SD/small_gpu.txt" ] && [ -n "$(rates small_gpu)" ]; then
            ok "triad sample, llama small, 64 prompts x 128 new tokens: GPU batch 64: $(rates small_gpu); GPU one at a time: $(rates small_gpu_b1); CPU (1 rank, $OMP_NUM_THREADS threads) batch 64: $(rates small_cpu)"
        else
            bad "triad sample, llama small on the GPU: $(head -c 300 "$SD/small_gpu.err")"
        fi
    else
        bad "triad sample: training the llama small config failed: $(why "$B/run/sample-small.log")"
    fi
fi

# (iv) GPT-2 124M on one GPU, batch 8 x 1024 tokens: tokens/s and MFU
# against the GEMM benchmark's rates measured above.
BB=8
BT=1024
BSTEPS=${BENCH_STEPS:-20}
MEM_GB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2> /dev/null |
    awk 'NR == 1 && $1 + 0 > 0 {printf "%d", $1 / 1024}')
[ -n "$MEM_GB" ] || MEM_GB=80
BENCH="bench/gpt2_124m.nml model.seq_len=$BT train.batch_size=$BB train.steps=$BSTEPS train.memory_gb=$MEM_GB"
# bench_report LOG PEAK_GFLOPS [PEAK2_GFLOPS LABEL2]: mean over the steps after
# the 5th (cuBLAS heuristics and allocations settle first)
bench_report() {
    awk -v tok="$((BB * BT))" -v peak="$2" -v peak2="${3:-}" -v l2="${4:-}" '
        /^model: .* FLOP\/token/ { for (i = 1; i < NF; i++) if ($(i + 1) == "FLOP/token") ftok = $i * 1e6 }
        /^peak \(rank 0\): / { for (i = 3; i <= NF; i++) if ($i == "GFLOP/s") { tpeak = $(i - 1); break } }
        /^step +[0-9]+\/[0-9]+ \| loss / {
            split($2, s, "/"); split($0, f, "|"); n++
            if (s[1] + 0 <= 5) next
            ms = f[7]; sub(/ms/, "", ms); mfu = f[6]; sub(/MFU/, "", mfu); sub(/%/, "", mfu)
            m++; t += ms / 1000; own += mfu
        }
        END {
            if (m == 0 || t <= 0) { print "no timed steps"; exit 1 }
            tps = tok * m / t
            printf "%.0f tokens/s (steps 6-%d, mean %.1f ms per step of %d tokens)", tps, n, 1000 * t / m, tok
            if (ftok > 0 && peak > 1) printf ", MFU %.1f%% of %.0f GFLOP/s", 100 * tps * ftok / (peak * 1e9), peak
            if (ftok > 0 && peak2 > 1) printf " (%.1f%% of the %s rate, %.0f GFLOP/s)", 100 * tps * ftok / (peak2 * 1e9), l2, peak2
            printf "; triad'"'"'s own MFU column: %.1f%% (of the rate it names on its peak line, %.0f GFLOP/s)", own / m, tpeak
            printf "; %.1f MFLOP/token\n", ftok / 1e6
        }' "$1"
}
bench() { # bench PRECISION PEAK_GFLOPS [PEAK2 LABEL2]
    bp=$1 bpk=${2:-}
    shift 2
    name="bench gpt2_124m $bp (B=$BB, T=$BT, $BSTEPS steps, 1 GPU)"
    [ "$bp" = fp32 ] && name="$name, TF32 off"
    if [ -z "$TR" ] || [ -n "$NOGPU" ]; then bad "$name: not run: ${NOGPU:-no triad}"; return; fi
    LD_LIBRARY_PATH=$TLD timeout -k 5 60 mpirun -n 1 "$TR" plan $BENCH train.device="'cuda'" \
        train.precision="'$bp'" > "$B/run/plan-$bp.log" 2>&1
    if ! grep -q '^FITS' "$B/run/plan-$bp.log"; then
        bad "$name: triad plan: $(grep -m1 -E '^(DOES NOT FIT|error)' "$B/run/plan-$bp.log" || tail -1 "$B/run/plan-$bp.log")"
        return
    fi
    echo "gpu_check: triad plan ($bp): $(grep '^FITS' "$B/run/plan-$bp.log")"
    # (triad times its own 4096^3 product in this precision for its MFU column)
    if ! trun "bench-$bp" 1 180 $BENCH train.device="'cuda'" train.precision="'$bp'"; then
        bad "$name: the run failed: $(why "$B/run/bench-$bp.log")"
        return
    fi
    grep '^step ' "$B/run/bench-$bp.log" | tail -3
    if out=$(bench_report "$B/run/bench-$bp.log" "${bpk:-0}" "$@"); then
        ok "$name: $out"
    else
        bad "$name: $out"
    fi
}
[ -n "$PEAK_BF16" ] || echo "gpu_check: no bf16 rate from cuda_gemm_bench: MFU not computed"
bench bf16 "$PEAK_BF16"
bench fp32 "$PEAK_FP32" "$PEAK_BF16" bf16

# (v) the regression suite's GPU cases (regression/cases/gpu_*) against
# their references and CPU twins, where this python has h5py and numpy
echo "== regression/run 'gpu_*'"
if [ -z "$TR" ] || [ -n "$NOGPU" ]; then
    bad "regression cases gpu_*: not run: ${NOGPU:-no triad}"
elif ! "${PYTHON3:=python3}" -c 'import h5py, numpy' 2> /dev/null; then
    echo "gpu_check: regression cases gpu_*: not run, $PYTHON3 lacks h5py or numpy (PYTHON3 names another); not counted"
else
    rm -rf "$B/regression"
    LD_LIBRARY_PATH=$TLD REGRESSION_GPU=1 OMPI_MCA_hwloc_base_binding_policy=none top_srcdir=$PWD \
        top_builddir=$PWD timeout -k 10 "$(tl 180)" "$PYTHON3" regression/run --triad "$TR" \
        --workdir "$B/regression" 'gpu_*' > "$B/regression_gpu.log" 2>&1
    rrc=$?
    grep -E '^(not ok|# )' "$B/regression_gpu.log" | tail -8
    if [ $rrc -eq 0 ] && ! grep -q '^not ok' "$B/regression_gpu.log"; then
        ok "regression cases gpu_*: $(grep -c '^ok' "$B/regression_gpu.log") checks against references and CPU twins"
    else
        bad "regression cases gpu_* (exit $rrc): $(grep -m1 '^not ok' "$B/regression_gpu.log" || tail -1 "$B/regression_gpu.log")"
    fi
fi

# ---------------------------------------------------------------- sanitizer
# compute-sanitizer: out-of-bounds accesses (memcheck) and shared-memory races
# (racecheck) in the kernels.  A tool that cannot run here (or for which no
# time is left) is reported, not failed.  Last, as the slowest part.
if [ "${SANITIZE:-1}" = 1 ]; then
    CS=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
    for spec in "memcheck test_cuda_kernels" "memcheck test_cuda_lowp" "racecheck test_cuda_kernels"; do
        set -- $spec
        echo "== compute-sanitizer --tool $1 $2"
        st=$(tl 300)
        if [ "$st" -le 10 ]; then
            echo "gpu_check: compute-sanitizer $1 $2: no time left (BUDGET=$BUDGET s); not counted"
            continue
        fi
        timeout -k 10 "$st" "$CS" --tool "$1" --error-exitcode 9 "$U/$2" > "$B/sanitize-$1-$2.log" 2>&1
        rc=$?
        tail -5 "$B/sanitize-$1-$2.log"
        case $rc in
        0) ok "compute-sanitizer $1 $2" ;;
        9) bad "compute-sanitizer $1 $2 found errors (log: $B/sanitize-$1-$2.log)" ;;
        *) echo "gpu_check: compute-sanitizer $1 could not run here (exit $rc); not counted" ;;
        esac
    done
fi

if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ -w "$OUT" ]; then
    mkdir -p "$OUT/gpu_check_logs" && cp "$B"/*.log "$B"/run/*.log "$OUT/gpu_check_logs/" 2> /dev/null
fi
echo "gpu_check: $passed passed, $failed failed, in $(($(date +%s) - T0)) s"
[ "$failed" -eq 0 ]
