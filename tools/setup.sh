#!/bin/sh
# setup.sh -- install the packages, then configure and build triad in place.
set -eu
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
[ -f Makefile ] && [ Makefile -nt configure ] || ./configure --quiet
make -j"$(nproc)"
