#!/bin/sh
# make install into a scratch DESTDIR: the program in bin, the decks, job
# scripts and tools in share/triad, the docs in share/doc/triad, the man
# page; the installed program runs and checks an installed deck.
. "$(dirname "$0")/lib.sh"
dest="$scratch/inst"
${MAKE:-make} -C "$top_builddir" install DESTDIR="$dest" > "$scratch/install.out" 2>&1
st=$?
ok $st "make install DESTDIR=... succeeds"
[ $st -eq 0 ] || tail -20 "$scratch/install.out" | diag
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
root="$dest$prefix"
for f in bin/triad share/triad/input/demo.nml share/triad/input/gpt2_124m.nml share/triad/jobscripts/cpu.sbatch \
         share/triad/jobscripts/regression.sbatch share/triad/tools/plot_metrics.py share/triad/tools/ckpt_info.py \
         share/doc/triad/README.md share/doc/triad/LICENSE share/doc/triad/input.md share/doc/triad/formats.md \
         share/doc/triad/performance.md share/doc/triad/regression.md; do
    [ -f "$root/$f" ]
    ok $? "installed: $f"
done
if [ -f "$top_builddir/triad-cuda.so" ]; then
    # (MAKEFLAGS unset: under make check it carries -w, whose lines would mix in)
    pkglib=$(printf 'triad-print-pkglibdir:\n\t@echo $(pkglibdir)\n' | env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        ${MAKE:-make} -s --no-print-directory -C "$top_builddir" -f Makefile -f - triad-print-pkglibdir)
    [ -n "$pkglib" ] && [ -x "$dest$pkglib/triad-cuda.so" ]
    ok $? "installed: the CUDA backend, $pkglib/triad-cuda.so (where the program looks for it)"
fi
[ -x "$root/share/triad/tools/plot_metrics.py" ]
ok $? "the installed tools are executable"
if grep -q '^man_MANS = triad.1' "$top_builddir/Makefile"; then
    [ -s "$root/share/man/man1/triad.1" ] && grep -q 'validate the deck' "$root/share/man/man1/triad.1"
    ok $? "installed: share/man/man1/triad.1, made from --help"
else
    skip "no man page: configure found no help2man (apt-get install help2man)"
fi
$MPIEXEC -n 1 "$root/bin/triad" --version > "$scratch/v.out" 2>&1 && grep -q '^simd: ' "$scratch/v.out"
ok $? "the installed triad --version names its build"
$MPIEXEC -n 1 "$root/bin/triad" check "$root/share/triad/input/demo.nml" world=8 > "$scratch/c.out" 2>&1 &&
    grep -q 'deck valid for 8 rank(s): tp 2 x dp 2 x pp 2' "$scratch/c.out"
ok $? "the installed triad checks the installed demo deck for 8 ranks"
done_testing
