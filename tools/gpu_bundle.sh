#!/bin/sh
# gpu_bundle.sh -- gather Debian's Open MPI runtime, headers and OpenBLAS into
# shared/ompi (or DIR) for tools/gpu_check.sh, on a Debian machine that has
# them installed (tools/install-deps.sh) and a package registry.
#
#   tools/gpu_bundle.sh [DIR]
#
# The GPU machine has nvcc and the CUDA libraries but no MPI, no BLAS and no
# registry.  The CUDA unit tests need OpenBLAS (the CPU reference kernels) and
# the device-selection test needs MPI, so this downloads (apt-get download, no
# install) the packages with those files, plus every library they load that
# is not part of a base system (found with ldd, mapped to packages with
# dpkg -S), unpacks them with dpkg-deb -x and packs the result into
# DIR/runtime.tar.xz (~11 MB; unpacked it would be ~65 MB, too much for the
# working tree that travels to the GPU machine).  gpu_check.sh unpacks it
# and points PATH, LD_LIBRARY_PATH and Open MPI's relocation variables there.
set -eu
cd "$(dirname "$0")/.."
DEST=${1:-shared/ompi}
MULTIARCH=x86_64-linux-gnu
# What the tests use directly.
WANT="libopenmpi3 openmpi-bin openmpi-common libopenmpi-dev libopenblas0-pthread libopenblas-pthread-dev"
# Present on any system that runs nvcc; bundling them could shadow newer ones.
BASE="libc6 libgcc-s1 libstdc++6 zlib1g libudev1 libuuid1"

for p in $WANT; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        { echo "gpu_bundle: $p is not installed here (run tools/install-deps.sh)" >&2; exit 1; }
done

# The package owning a file (dpkg knows /lib/... and /usr/lib/... apart).
owner() {
    dpkg -S "$1" 2>/dev/null || dpkg -S "$(readlink -f "$1")" 2>/dev/null ||
        dpkg -S "$(echo "$1" | sed 's|^/usr/lib/|/lib/|')" 2>/dev/null || true
}

# Shared libraries loaded by the binaries and plugins of the wanted packages.
deps=$(for p in libopenmpi3 openmpi-bin libopenblas0-pthread; do dpkg -L "$p"; done |
    while read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        case "$f" in *.so|*.so.*|/usr/bin/*) ldd "$f" 2>/dev/null | awk '/=> \// {print $3}' ;; esac
    done | sort -u |
    while read -r lib; do owner "$lib"; done | cut -d: -f1 | sort -u)
pkgs=$(for p in $WANT $deps; do echo "$p"; done | sort -u | grep -vxF "$(echo "$BASE" | tr ' ' '\n')")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
echo "gpu_bundle: downloading" $pkgs
(cd "$tmp" && apt-get download -q $pkgs)
root=$tmp/root
mkdir -p "$root"
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$root"; done
# Only what the tests load travels: no docs, static archives, LAPACK or
# Fortran modules (the working tree sent to the GPU machine is limited).
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" \
    "$root/usr/lib/$MULTIARCH/fortran" "$root/usr/lib/$MULTIARCH/openblas-pthread/liblapack"*
find "$root" -name '*.a' -delete
# The plain names that Debian's alternatives would provide.
ln -sf orterun "$root/usr/bin/mpirun"
ln -sf opal_wrapper "$root/usr/bin/mpicc"
rm -rf "$DEST"
mkdir -p "$DEST"
tar -C "$root" -cJf "$DEST/runtime.tar.xz" usr etc
echo "$pkgs" > "$DEST/PACKAGES"
echo "gpu_bundle: $DEST/runtime.tar.xz: $(echo $pkgs | wc -w) packages," \
    "$(du -sh "$root" | cut -f1) unpacked, $(du -sh "$DEST/runtime.tar.xz" | cut -f1) compressed"
