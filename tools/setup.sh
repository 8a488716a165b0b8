#!/bin/sh
# setup.sh -- install the packages, then configure and build triad in place.
set -eu
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
# With a CUDA toolkit the CUDA backend is compiled and linked too (its tests
# skip on a machine without a GPU): also where the tree was configured
# without it before.
cuda=""
if [ -x /usr/local/cuda/bin/nvcc ]; then cuda=--with-cuda; fi
configured() { [ -f Makefile ] && [ Makefile -nt configure ] &&
    { [ -z "$cuda" ] || grep -q -e '--with-cuda' config.status 2> /dev/null; }; }
configured || ./configure --quiet $cuda
make -j"$(nproc)"
