#!/bin/sh
# gpu_bundle.sh -- gather Debian's Open MPI runtime, headers and OpenBLAS, and
# the full triad program built here with the CUDA backend and the libraries
# it loads (parallel HDF5 and its dependencies), into shared/ompi (or DIR)
# for tools/gpu_check.sh, on a Debian machine that has them installed
# (tools/install-deps.sh), the CUDA toolkit and a package registry.
#
#   tools/gpu_bundle.sh [DIR]
#
# The GPU machine has nvcc and the CUDA libraries but no MPI, no BLAS, no
# HDF5 and no registry.  The CUDA unit tests need OpenBLAS (the CPU reference
# kernels) and the device-selection test needs MPI, so this downloads
# (apt-get download, no install) the packages with those files, plus every
# library they load that is not part of a base system (found with ldd,
# mapped to packages with dpkg -S), unpacks them with dpkg-deb -x and packs
# the result into DIR/runtime.tar.xz (~11 MB of it; unpacked ~65 MB, too much
# for the working tree that travels to the GPU machine).  gpu_check.sh unpacks
# it and points PATH, LD_LIBRARY_PATH and Open MPI's relocation variables
# there.
#
# The same archive holds, under triad/:
#   bin/triad, bin/triad-cuda.so  the program and its CUDA backend, built
#                in a copy of this working tree with ./configure --with-cuda
#                --disable-native (portable host code; the GEMM picks AVX-512
#                at run time) and CUDA_GENCODE (default sm_90 machine code +
#                compute_90 PTX).  The plugin loads the CUDA libraries of the
#                GPU machine (libcudart/libcublas of the same major version,
#                CUDA 13 here), never bundled; gpu_check.sh runs this triad
#                only when its own build there fails.
#   usr/, lib/   the libraries triad loads beyond the part above (HDF5 with
#                its dependencies: curl, TLS, Kerberos, ...) and the headers
#                of parallel HDF5, PCRE2 and utf8proc, for gpu_check.sh's
#                build there.  Kept apart: only triad runs put them on the path.
#   autotools/   configure, Makefile.in and the rest autoreconf made, with
#                HASH (of configure.ac and Makefile.am): the GPU machine may
#                have no autotools.
#   BUILD, PACKAGES  how it was built, and the packages under triad/usr.
# Environment: CUDA_HOME (default /usr/local/cuda), CUDA_GENCODE, JOBS (make
# -j, default the number of CPUs), TRIAD=0 to leave the program out.
set -eu
cd "$(dirname "$0")/.."
DEST=${1:-shared/ompi}
MULTIARCH=x86_64-linux-gnu
# What the tests use directly.
WANT="libopenmpi3 openmpi-bin openmpi-common libopenmpi-dev libopenblas0-pthread libopenblas-pthread-dev"
# What building triad there needs beyond that (the libraries come from ldd).
TRIAD_WANT="libhdf5-openmpi-dev libpcre2-dev libutf8proc-dev"
# Present on any system that runs nvcc and gcc -fopenmp; bundling them could
# shadow newer ones.
BASE="libc6 libgcc-s1 libstdc++6 zlib1g libudev1 libuuid1 libgomp1"
TRIAD=${TRIAD:-1}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GENCODE=${CUDA_GENCODE:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90}
JOBS=${JOBS:-$(nproc)}

need=$WANT
[ "$TRIAD" = 1 ] && need="$need $TRIAD_WANT"
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        { echo "gpu_bundle: $p is not installed here (run tools/install-deps.sh)" >&2; exit 1; }
done
if [ "$TRIAD" = 1 ] && [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "gpu_bundle: no $CUDA_HOME/bin/nvcc to build triad with the CUDA backend" \
        "(set CUDA_HOME, or TRIAD=0 for the MPI/BLAS part only)" >&2
    exit 1
fi

# The package owning a file (dpkg knows /lib/... and /usr/lib/... apart).
owner() {
    dpkg -S "$1" 2>/dev/null || dpkg -S "$(readlink -f "$1")" 2>/dev/null ||
        dpkg -S "$(echo "$1" | sed 's|^/usr/lib/|/lib/|')" 2>/dev/null || true
}
# The packages of the libraries listed on stdin, less BASE and the CUDA
# toolkit's own (the GPU machine brings those).
packages_of() {
    grep -v -e "^$CUDA_HOME/" -e '/cuda[^/]*/' | while read -r lib; do owner "$lib"; done |
        cut -d: -f1 | sort -u | grep -vxF "$(echo "$BASE" | tr ' ' '\n')" || true
}
# A hash of the sources triad is built from (for BUILD).
sources_hash() {
    find src cuda -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) |
        LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1
}

# Shared libraries loaded by the binaries and plugins of the wanted packages.
deps=$(for p in libopenmpi3 openmpi-bin libopenblas0-pthread; do dpkg -L "$p"; done |
    while read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        case "$f" in *.so|*.so.*|/usr/bin/*) ldd "$f" 2>/dev/null | awk '/=> \// {print $3}' ;; esac
    done | sort -u | packages_of)
pkgs=$(for p in $WANT $deps; do echo "$p"; done | sort -u | grep -vxF "$(echo "$BASE" | tr ' ' '\n')")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
root=$tmp/root
mkdir -p "$root" "$tmp/debs" "$tmp/tdebs"
chmod 755 "$tmp/debs" "$tmp/tdebs" # apt-get download runs as _apt

# ---------------------------------------------------------------- triad
tpkgs=""
if [ "$TRIAD" = 1 ]; then
    src=$tmp/src
    mkdir -p "$src"
    # The files that travel to the GPU machine: tracked and untracked, not ignored.
    if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] && echo "$f"; done |
            tar -T - -cf - | tar -C "$src" -xf -
    else
        tar --exclude=./shared --exclude=./.git -cf - . | tar -C "$src" -xf -
    fi
    hash=$(cd "$src" && sources_hash)
    echo "gpu_bundle: building triad --with-cuda in $src (make -j$JOBS, $GENCODE)"
    t0=$(date +%s)
    if ! (cd "$src" && autoreconf -fi && ./configure --with-cuda="$CUDA_HOME" --disable-native &&
          make clean && make -j"$JOBS" triad triad-cuda.so CUDA_GENCODE="$GENCODE") > "$tmp/build.log" 2>&1; then
        tail -30 "$tmp/build.log" >&2
        echo "gpu_bundle: building triad failed" >&2
        exit 1
    fi
    echo "gpu_bundle: triad built in $(($(date +%s) - t0)) s"
    if ldd "$src/triad" "$src/triad-cuda.so" | grep -q "not found"; then
        ldd "$src/triad" "$src/triad-cuda.so" | grep "not found" >&2
        echo "gpu_bundle: triad does not load here" >&2
        exit 1
    fi
    tdeps=$(ldd "$src/triad" | awk '/=> \// {print $3}' | sort -u | packages_of)
    tpkgs=$(for p in $TRIAD_WANT $tdeps; do echo "$p"; done | sort -u |
        grep -vxF "$(echo "$BASE $pkgs" | tr ' ' '\n')" || true)
    mkdir -p "$root/triad/bin"
    cp "$src/triad" "$src/triad-cuda.so" "$root/triad/bin/"
    mkdir -p "$root/triad/autotools"
    (cd "$src" && tar -cf - configure Makefile.in aclocal.m4 build_config.h.in build-aux) |
        tar -C "$root/triad/autotools" -xf -
    cat "$src/configure.ac" "$src/Makefile.am" | sha256sum | cut -d' ' -f1 > "$root/triad/autotools/HASH"
    echo "$tpkgs" > "$root/triad/PACKAGES"
    {
        echo "triad $(sed -n 's/^AC_INIT(\[triad\], \[\([^]]*\)\].*/\1/p' "$src/configure.ac")," \
            "from the working tree at git $(git rev-parse --short HEAD 2> /dev/null || echo "(none)")," \
            "built $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
        echo "./configure --with-cuda=$CUDA_HOME --disable-native; make triad triad-cuda.so CUDA_GENCODE='$GENCODE'"
        "$CUDA_HOME/bin/nvcc" --version | tail -1
        gcc --version | head -1
        echo "sources (src/, cuda/) sha256: $hash"
    } > "$root/triad/BUILD"
fi

echo "gpu_bundle: downloading" $pkgs $tpkgs
(cd "$tmp/debs" && apt-get download -q $pkgs)
[ -z "$tpkgs" ] || (cd "$tmp/tdebs" && apt-get download -q $tpkgs)
for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
[ -z "$tpkgs" ] || for deb in "$tmp"/tdebs/*.deb; do dpkg-deb -x "$deb" "$root/triad"; done
# Only what the tests load travels: no docs, static archives, LAPACK or
# Fortran modules (the working tree sent to the GPU machine is limited).
for r in "$root" "$root/triad"; do
    rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/lintian" "$r/usr/share/locale" \
        "$r/usr/lib/$MULTIARCH/fortran" "$r/usr/lib/$MULTIARCH/openblas-pthread/liblapack"*
done
find "$root" \( -name '*.a' -o -name '*.mod' \) -delete
# The plain names that Debian's alternatives would provide.
ln -sf orterun "$root/usr/bin/mpirun"
ln -sf opal_wrapper "$root/usr/bin/mpicc"
for f in "$root"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
    if [ -e "$f" ]; then ln -sf "../libpsm1/${f##*/}" "$root/usr/lib/$MULTIARCH/libpsm_infinipath.so.1"; fi
done
rm -rf "$DEST"
mkdir -p "$DEST"
# (lib/: Debian 12 still ships some libraries, e.g. libnl-3, in /lib)
tar -C "$root" -cJf "$DEST/runtime.tar.xz" $(cd "$root" && ls -d usr lib etc triad 2> /dev/null)
echo "$pkgs" > "$DEST/PACKAGES"
[ "$TRIAD" = 1 ] && cp "$root/triad/BUILD" "$DEST/TRIAD"
echo "gpu_bundle: $DEST/runtime.tar.xz: $(echo $pkgs $tpkgs | wc -w) packages," \
    "$(du -sh "$root" | cut -f1) unpacked, $(du -sh "$DEST/runtime.tar.xz" | cut -f1) compressed" \
    "($(du -b "$DEST/runtime.tar.xz" | cut -f1) bytes)"
[ "$TRIAD" = 1 ] && echo "gpu_bundle: triad/bin/triad ($(du -sh "$root/triad/bin/triad" | cut -f1)), and" \
    "$(echo $tpkgs | wc -w) packages for it alone:" $tpkgs
exit 0
