#!/bin/sh
# setup.sh -- install the packages, then configure and build triad in place.
set -eu
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
# With a CUDA toolkit the CUDA backend is compiled and linked too (its tests
# skip on a machine without a GPU).
cuda=""
if [ -x /usr/local/cuda/bin/nvcc ]; then cuda=--with-cuda; fi
[ -f Makefile ] && [ Makefile -nt configure ] || ./configure --quiet $cuda
make -j"$(nproc)"
