#!/bin/sh
# docs_current.sh -- docs/input.md must be what `triad --doc` prints today
# (it is generated from src/config/params.def).  TAP.
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/..}"
: "${top_builddir:=$here/..}"
triad="$top_builddir/triad"
doc="$top_srcdir/docs/input.md"

if [ ! -x "$triad" ]; then
    echo "Bail out! $triad is not built (run make first)"
    exit 1
fi
tmp=$(mktemp "${TMPDIR:-/tmp}/docs_current.XXXXXX") || exit 1
trap 'rm -f "$tmp" "$tmp.diff"' EXIT

if ! "$triad" --doc >"$tmp"; then
    echo "not ok 1 - triad --doc runs"
    echo "1..1"
    exit 1
fi
if diff -u "$doc" "$tmp" >"$tmp.diff" 2>&1; then
    echo "ok 1 - docs/input.md matches triad --doc"
    rm -f "$tmp.diff"
    echo "1..1"
    exit 0
fi
echo "not ok 1 - docs/input.md is out of date with src/config/params.def: run \`make input-docs\`"
sed 's/^/# /' "$tmp.diff"
rm -f "$tmp.diff"
echo "1..1"
exit 1
