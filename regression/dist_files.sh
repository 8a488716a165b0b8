#!/bin/sh
# dist_files.sh -- the release tarball's file list (make distdir): every file
# the repository tracks is in it (a header left out of Makefile.am once made
# the tarball unbuildable), and no build product an in-tree build leaves in
# the distributed folders (objects, dependency files, programs).  Skipped
# outside a git checkout (a tarball's own build).
. "$(dirname "$0")/lib.sh"
if ! git -C "$top_srcdir" rev-parse --is-inside-work-tree > /dev/null 2>&1 || [ ! -e "$top_srcdir/.git" ]; then
    skip "not a git checkout: nothing to compare the tarball's list with"
    done_testing
fi
d="$scratch/dist"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s -C "$top_builddir" distdir distdir="$d" > "$scratch/make.out" 2>&1
st=$?
ok $st "make distdir"
[ $st -eq 0 ] || { tail -5 "$scratch/make.out" | diag; done_testing; exit; }
git -C "$top_srcdir" ls-files | grep -v -e '^\.ci/' -e '^\.gitignore$' > "$scratch/tracked"
missing=$(while read -r f; do [ -e "$d/$f" ] || echo "$f"; done < "$scratch/tracked")
[ -z "$missing" ]
ok $? "every tracked file but .ci/ and .gitignore is in the tarball ($(wc -l < "$scratch/tracked") files)"
[ -z "$missing" ] || echo "$missing" | head -20 | diag
junk=$(find "$d" \( -name '*.o' -o -name '.deps' -o -name '.dirstamp' -o -name '*.trs' \) -print | head -20)
elf=$(find "$d" -type f -size +1k -exec sh -c 'head -c 4 "$1" | grep -q "ELF" && echo "$1"' _ {} \; | head -20)
[ -z "$junk$elf" ]
ok $? "no build product in the tarball (objects, dependency files, programs)"
[ -z "$junk$elf" ] || printf '%s\n%s\n' "$junk" "$elf" | diag
done_testing
