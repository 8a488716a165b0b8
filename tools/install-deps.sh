#!/bin/sh
# install-deps.sh -- the Debian/Ubuntu packages triad needs to build, test and
# run (as root, or through sudo).  Does nothing when all are installed.
# slurm-wlm and munge are for the test of the job scripts on a local cluster;
# help2man makes the man page; PCRE2 and utf8proc are the tokenizer's
# regexes and Unicode normalization; libblis-openmp-dev is the second BLAS that
# bench/gemm_bench compares (the build links OpenBLAS); the aarch64 cross
# compiler and qemu-user run the portable path on another processor
# (regression/aarch64.sh); python3-torch is the reference of the llama
# family's test (regression/llama_pytorch.sh) and the peer of the benchmarks.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools libopenblas-dev libblis-openmp-dev help2man
libpcre2-dev libutf8proc-dev
gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
python3 python3-h5py python3-numpy python3-matplotlib python3-torch
slurm-wlm munge"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing$missing"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
