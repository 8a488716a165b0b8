#!/bin/sh
# map.sh -- docs/design.md's map of the code holds (regression/map_check.py):
# the layer folders and their order, no upward include, no circle among the
# modules, MPI communication only in comm.c and the named control-plane
# files.  TAP.
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/..}"
exec "${PYTHON3:-python3}" "$top_srcdir/regression/map_check.py" "$top_srcdir"
