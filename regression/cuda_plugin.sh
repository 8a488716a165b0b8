#!/bin/sh
# The CUDA backend loaded on demand (docs/cuda.md, "Loaded on demand"): in a
# --with-cuda build, triad links no CUDA library and a CPU run loads none
# (the dynamic loader's own record, LD_DEBUG=files, of every rank), while a
# CUDA run loads triad-cuda.so and cuBLAS (the same record, so the check
# can see a load); the plugin needs no MPI and nothing of triad; a plugin
# that is missing, not a shared object, needs a library that is not there,
# or is not triad's, stops every rank with the file, the loader's reason and
# the fixes, status 1, no hang.  SKIPs in a build without CUDA.
. "$(dirname "$0")/lib.sh"

if ! "$TRIAD" --version 2> /dev/null | grep -q '^cuda: .*backend built'; then
    skip "no CUDA backend in this build (./configure --with-cuda)"
    done_testing
fi
plugin="$top_builddir/triad-cuda.so"
deck="$DECKS/tiny.nml"
common="train.steps=2 train.warmup_steps=0 train.peak_gflops=1"
cuda_libs='libcudart|libcublas'

ldd "$TRIAD" > "$scratch/ldd.out" 2>&1
! grep -Eq "$cuda_libs" "$scratch/ldd.out"
ok $? "triad links no CUDA library (ldd)"
ldd "$plugin" > "$scratch/ldd_plugin.out" 2>&1
grep -q libcublas "$scratch/ldd_plugin.out" && grep -q libcudart "$scratch/ldd_plugin.out" &&
    ! grep -Eq 'libmpi|not found' "$scratch/ldd_plugin.out"
ok $? "triad-cuda.so links cuBLAS and the CUDA runtime, and no MPI"

# loads NAME NP [overrides]: a run with the loader's record of each process's
# libraries in $scratch/NAME.ld.<pid>; its status
loads() {
    name=$1 np=$2
    shift 2
    LD_DEBUG=files LD_DEBUG_OUTPUT="$scratch/$name.ld" timeout -k 5 120 $MPIEXEC -n "$np" \
        -x LD_DEBUG -x LD_DEBUG_OUTPUT "$TRIAD" "$deck" $common "$@" io.run_dir="'$scratch/$name'" \
        > "$scratch/$name.out" 2>&1
}

loads cpu 2
st=$?
ok $st "a CPU run on 2 ranks"
n=$(cat "$scratch"/cpu.ld.* 2> /dev/null | grep -c 'file=.*libhdf5')
[ "$n" -ge 2 ]
ok $? "the loader's record shows each rank's libraries (libhdf5 in $n records)"
got=$(cat "$scratch"/cpu.ld.* 2> /dev/null | grep -E "file=[^ ]*($cuda_libs|triad-cuda)")
[ -z "$got" ]
ok $? "a CPU run loads neither triad-cuda.so nor libcudart nor libcublas"
[ -z "$got" ] || echo "$got" | head -3 | diag

loads gpu 2 train.device="'cuda'" train.share_gpus=.true.
st=$?
cat "$scratch"/gpu.ld.* 2> /dev/null | grep -q 'file=[^ ]*triad-cuda.so .*dynamically loaded' &&
    cat "$scratch"/gpu.ld.* 2> /dev/null | grep -q 'file=[^ ]*libcublas'
ok $? "train.device = 'cuda' loads triad-cuda.so, and with it cuBLAS (exit $st: no GPU here is fine)"

# refused NAME FILE PATTERN...: train.device = 'cuda' with TRIAD_CUDA_BACKEND=FILE
# fails within the timeout, status 1, every PATTERN in the error (grep -F)
refused() {
    name=$1 file=$2
    shift 2
    TRIAD_CUDA_BACKEND=$file timeout -k 5 60 $MPIEXEC -n 2 -x TRIAD_CUDA_BACKEND "$TRIAD" "$deck" $common \
        train.device="'cuda'" io.run_dir="'$scratch/$name'" > "$scratch/$name.out" 2>&1
    st=$?
    miss=""
    for p in "$@"; do grep -qF -- "$p" "$scratch/$name.out" || miss="$miss '$p'"; done
    # (not anchored: mpirun writes the two streams through its own buffers,
    # so the error may begin in the middle of a line of the deck's echo)
    [ $st -eq 1 ] && [ -z "$miss" ] && [ "$(grep -c 'error: ' "$scratch/$name.out")" -eq 1 ]
    ok $? "TRIAD_CUDA_BACKEND $name: status 1 (got $st, 124: a hang), one error naming the file and why$miss"
    [ -z "$miss" ] || grep -m3 -E 'error|hint' "$scratch/$name.out" | diag
}
refused "missing" "$scratch/none/triad-cuda.so" "TRIAD_CUDA_BACKEND = $scratch/none/triad-cuda.so: no such file"
head -c 4096 "$top_srcdir/README.md" > "$scratch/text.so" # (longer than an ELF header)
refused "not ELF" "$scratch/text.so" "cannot load the CUDA backend $scratch/text.so on host" \
    "invalid ELF header" "train.device = 'cpu'"
# a backend that needs a library this machine lacks (as libcublas.so.13 on a
# node without CUDA): linked against a stand-in, which is then removed
printf 'int absent_fn(void) { return 1; }\n' > "$scratch/absent.c"
printf 'int absent_fn(void);\nint uses_absent(void) { return absent_fn(); }\n' > "$scratch/needs.c"
mkdir -p "$scratch/lib"
if ${CC:-cc} -shared -fPIC -o "$scratch/lib/libtriad_absent.so.1" -Wl,-soname,libtriad_absent.so.1 "$scratch/absent.c" &&
    ${CC:-cc} -shared -fPIC -o "$scratch/needs.so" "$scratch/needs.c" "$scratch/lib/libtriad_absent.so.1"; then
    rm -f "$scratch/lib/libtriad_absent.so.1"
    refused "needing a missing library" "$scratch/needs.so" "cannot load the CUDA backend $scratch/needs.so on host" \
        "libtriad_absent.so.1: cannot open shared object file" "install the CUDA" "LD_LIBRARY_PATH" \
        "TRIAD_CUDA_BACKEND" "train.device = 'cpu'"
    # a shared object that loads but is not triad's backend
    ${CC:-cc} -shared -fPIC -o "$scratch/other.so" "$scratch/absent.c"
    refused "foreign" "$scratch/other.so" "$scratch/other.so is not a triad CUDA backend" "triad_device_plugin"
    # the entry of a backend built for another version of the interface (it returns no table)
    printf 'const void *triad_device_plugin(const void *host) { (void)host; return 0; }\n' > "$scratch/old.c"
    ${CC:-cc} -shared -fPIC -o "$scratch/old.so" "$scratch/old.c"
    refused "of another triad" "$scratch/old.so" "the CUDA backend $scratch/old.so was built for another triad"
else
    skip "cannot build the stand-in libraries with ${CC:-cc}"
fi
done_testing
