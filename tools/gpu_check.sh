#!/bin/sh
# gpu_check.sh -- on a GPU machine: build the CUDA backend, its unit tests and
# the GEMM benchmark, and run them (docs/cuda.md, "On a GPU machine").
#
#   tools/gpu_check.sh          about 2 minutes expected on an H200 machine
#
# Needs nvcc and the CUDA libraries, gcc, and OpenBLAS and Open MPI: those
# two from shared/ompi/runtime.tar.xz (made by tools/gpu_bundle.sh on a Debian
# machine) when the machine has none.  No autotools: the few files are
# compiled directly.  Environment:
#   CUDA_ARCH  nvcc -arch value (default native: the GPU present)
#   BUILD      build folder (default /tmp/triad-gpu)
#   SANITIZE   1 (default) runs the kernels under compute-sanitizer too
# Prints every test's TAP output and a summary; exit status 0 when all passed.
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-/tmp/triad-gpu}
ARCH=${CUDA_ARCH:-native}
MA=x86_64-linux-gnu
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
CUDA_LIBS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcublasLt -lcublas -lcudart -lstdc++"
passed=0
failed=0

die() { echo "gpu_check: $*" >&2; exit 1; }
ok() { passed=$((passed + 1)); echo "gpu_check: PASS $*"; }
bad() { failed=$((failed + 1)); echo "gpu_check: FAIL $*"; }

[ -x "$NVCC" ] || die "nvcc not found (set NVCC)"
mkdir -p "$B" || die "cannot create $B"
echo "gpu_check: $("$NVCC" --version | tail -1), CUDA in $CUDA_HOME, -arch=$ARCH"
nvidia-smi -L 2>/dev/null || echo "gpu_check: nvidia-smi not available"

# ---------------------------------------------------------------- MPI and BLAS
if [ -f shared/ompi/runtime.tar.xz ]; then
    R=$B/ompi
    if [ ! -d "$R/usr" ]; then
        mkdir -p "$R" && tar -C "$R" -xJf shared/ompi/runtime.tar.xz || die "cannot unpack shared/ompi"
    fi
    # Debian's Open MPI and PMIx moved from / to $R: *_DESTDIR relocates all
    # their install folders (OPAL_PREFIX would miss /etc/openmpi); Debian's
    # pmix-mca-params.conf names the plugin folder absolutely.
    export OPAL_DESTDIR="$R" PMIX_DESTDIR="$R" PATH="$R/usr/bin:$PATH"
    export PMIX_MCA_mca_base_component_path="$R/usr/lib/$MA/pmix2/lib/pmix"
    export LD_LIBRARY_PATH="$R/usr/lib/$MA:$R/usr/lib/$MA/openmpi/lib:$R/usr/lib/$MA/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    MPI_CFLAGS="-I$R/usr/lib/$MA/openmpi/include"
    MPI_LIBS="-L$R/usr/lib/$MA/openmpi/lib -lmpi"
    BLAS_CFLAGS="-I$R/usr/include/$MA/openblas-pthread"
    BLAS_LIBS="-L$R/usr/lib/$MA/openblas-pthread -lopenblas"
    echo "gpu_check: Open MPI and OpenBLAS from shared/ompi ($(tr '\n' ' ' < shared/ompi/PACKAGES | wc -w) packages)"
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
CC="gcc -std=c11 -O2 -march=native -fopenmp -fno-math-errno -D_POSIX_C_SOURCE=200809L
    -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror -Isrc -Icuda -Iregression/unit -I$CUDA_HOME/include"
t0=$(date +%s)
pids=""
for f in context kernels matmul attention crossentropy lowp; do
    "$NVCC" -std=c++17 -O3 -arch="$ARCH" --compiler-options=-Wall,-Wextra,-Wshadow -Werror all-warnings \
        -Icuda -c "cuda/$f.cu" -o "$B/$f.o" &
    pids="$pids $!"
done
for p in $pids; do wait "$p" || die "nvcc failed"; done
$CC -c cuda/check.c -o "$B/check.o" &&
    $CC $MPI_CFLAGS -c cuda/stage.c -o "$B/stage.o" &&
    $CC $BLAS_CFLAGS -c src/kernels_cpu.c -o "$B/kernels_cpu.o" &&
    $CC $BLAS_CFLAGS -c src/gemm.c -o "$B/gemm.o" || die "gcc failed"
CUDA_OBJS="$B/context.o $B/kernels.o $B/matmul.o $B/attention.o $B/crossentropy.o $B/lowp.o $B/check.o"
for t in test_cuda_kernels test_cuda_lowp; do
    $CC "regression/unit/$t.c" $CUDA_OBJS "$B/kernels_cpu.o" "$B/gemm.o" $BLAS_LIBS $CUDA_LIBS -lm \
        -o "$B/$t" || die "cannot build $t"
done
$CC $MPI_CFLAGS cuda/device.c src/log.c regression/unit/test_cuda_device.c "$B/stage.o" $CUDA_OBJS \
    $MPI_LIBS $CUDA_LIBS -lm -o "$B/test_cuda_device" || die "cannot build test_cuda_device"
"$NVCC" -std=c++17 -O3 -arch="$ARCH" -Icuda bench/cuda_gemm_bench.cu "$B/check.o" "$B/context.o" \
    "$B/matmul.o" "$B/lowp.o" -lcublasLt -lcublas -o "$B/cuda_gemm_bench" || die "cannot build the benchmark"
echo "gpu_check: built in $(($(date +%s) - t0)) s"

# ---------------------------------------------------------------- tests
# Passes when it exits 0, ran (no skip plan: this machine has a GPU) and no
# test said "not ok".
run_tap() {
    name=$1
    shift
    echo "== $name"
    timeout 300 "$@" > "$B/$name.log" 2>&1
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
run_tap test_cuda_kernels "$B/test_cuda_kernels"
run_tap test_cuda_lowp "$B/test_cuda_lowp"
run_tap test_cuda_device "$B/test_cuda_device"
run_tap test_cuda_device_2ranks mpirun -np 2 "$B/test_cuda_device"

# compute-sanitizer: out-of-bounds accesses (memcheck) and shared-memory races
# (racecheck) in the kernels.  A tool that cannot run here is reported, not failed.
if [ "${SANITIZE:-1}" = 1 ]; then
    CS=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
    for spec in "memcheck test_cuda_kernels" "memcheck test_cuda_lowp" "racecheck test_cuda_kernels"; do
        set -- $spec
        echo "== compute-sanitizer --tool $1 $2"
        timeout 300 "$CS" --tool "$1" --error-exitcode 9 "$B/$2" > "$B/sanitize-$1-$2.log" 2>&1
        rc=$?
        tail -5 "$B/sanitize-$1-$2.log"
        case $rc in
        0) ok "compute-sanitizer $1 $2" ;;
        9) bad "compute-sanitizer $1 $2 found errors (log: $B/sanitize-$1-$2.log)" ;;
        *) echo "gpu_check: compute-sanitizer $1 could not run here (exit $rc); not counted" ;;
        esac
    done
fi

echo "== cuda_gemm_bench"
if timeout 300 "$B/cuda_gemm_bench"; then ok cuda_gemm_bench; else bad cuda_gemm_bench; fi

echo "gpu_check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
