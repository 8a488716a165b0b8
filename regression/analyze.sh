#!/bin/sh
# tools/analyze.sh (make analyze) on small files of its own: a new finding
# fails with its file and line, a reviewed one listed in the dismissed file
# passes, a key found more often than listed fails, a listed one no longer
# found fails and is named, a file that does not compile or a missing list
# is an error (not a clean pass), and the error helpers' models in log.h
# are seen (no false null dereference after `return errorf(...)` or after
# die_all_if).  The analysis of src/ itself is `make analyze`, too long for
# make check.
. "$(dirname "$0")/lib.sh"

if ! command -v "${CLANG_TIDY:-clang-tidy}" > /dev/null 2>&1; then
    skip "clang-tidy is not installed (tools/install-deps.sh installs it)"
    done_testing
fi
an="$top_srcdir/tools/analyze.sh"
flags="-std=c11 -D_POSIX_C_SOURCE=200809L -I$top_srcdir/src/base"
# analyze [LIST] FILE: tools/analyze.sh on one file against LIST (default: none listed); status in $st
: > "$scratch/none.txt"
analyze() {
    list="$scratch/none.txt"
    [ $# -eq 2 ] && list=$1 && shift
    ANALYZE_DISMISSED="$list" sh "$an" -j 1 "$1" -- $flags > "$scratch/out" 2>&1
    st=$?
}

cat > "$scratch/deref.c" << 'EOF'
int first(const int *p)
{
    if (p) return 0;
    return *p; /* p is NULL here */
}
EOF
analyze "$scratch/deref.c"
diag < "$scratch/out"
[ $st -eq 1 ] && grep -q "^NEW  $scratch/deref.c: Dereference of null pointer .*\[core.NullDereference\] (line 4)$" \
    "$scratch/out"
ok $? "a new finding: status 1 (got $st), its file, line and check named"

printf '# reviewed: the test'"'"'s own\n%s | core.NullDereference | %s\n' "$scratch/deref.c" \
    "Dereference of null pointer (loaded from variable 'p')" > "$scratch/listed.txt"
analyze "$scratch/listed.txt" "$scratch/deref.c"
[ $st -eq 0 ] && grep -q "^analyze.sh: 1 findings, 1 of them listed as dismissed; 0 new, 0 listed and gone$" "$scratch/out"
ok $? "the same finding listed as dismissed: passes (status $st)"

cat >> "$scratch/deref.c" << 'EOF'
int second(const int *p)
{
    if (p) return 1;
    return *p;
}
EOF
analyze "$scratch/listed.txt" "$scratch/deref.c"
[ $st -eq 1 ] && grep -q "^NEW  .*(lines 4 9; found 2 times, listed 1)$" "$scratch/out"
ok $? "the same key twice, listed once: status 1 (got $st), both lines named"

printf 'int twice(int x) { return 2 * x; }\n' > "$scratch/clean.c"
analyze "$scratch/listed.txt" "$scratch/clean.c"
[ $st -eq 1 ] && grep -q "^GONE $scratch/deref.c | core.NullDereference | Dereference of null pointer" "$scratch/out"
ok $? "a listed finding no longer found: status 1 (got $st), named to be deleted"

analyze "$scratch/nosuch.txt" "$scratch/clean.c"
[ $st -eq 2 ] && grep -q "nosuch.txt: cannot read the list of dismissed findings" "$scratch/out"
ok $? "no list of dismissed findings: status 2 (got $st), not every finding new"

printf 'int broken(void) { return undeclared; }\n' > "$scratch/broken.c"
analyze "$scratch/broken.c"
[ $st -eq 2 ] && grep -q "clang-tidy cannot process $scratch/broken.c" "$scratch/out" &&
    grep -q "broken.c:1:.*error: use of undeclared identifier 'undeclared'" "$scratch/out"
ok $? "a file that does not compile: status 2 (got $st), the compiler's error shown"

# The helpers' callers: after `if (get(&p, ...)) return` and after
# die_all_if(..., !q, ...) the pointers are set, which the analyzer sees
# only through log.h's models (errorf is -1; a failed rank does not return).
mpi=$(${CC:-mpicc} --showme:compile 2> /dev/null)
if [ -z "$mpi" ]; then
    skip "no Open MPI compiler wrapper (\$CC --showme:compile) for log.h's mpi.h"
    done_testing
fi
flags="$flags $mpi"
cat > "$scratch/errpath.c" << 'EOF'
#include "log.h"
#include <stdlib.h>
static int get(int **out, char *err, size_t len, int n)
{
    *out = NULL;
    if (n < 0) return errorf(err, len, "n is %d", n);
    *out = malloc(sizeof **out);
    if (!*out) return errorf(err, len, "out of memory");
    **out = n;
    return 0;
}
int use(int n)
{
    char err[64];
    int *p;
    if (get(&p, err, sizeof err, n)) return -1;
    int v = *p;
    free(p);
    return v;
}
int use_all(MPI_Comm comm, int n)
{
    int *q = n > 0 ? malloc(sizeof *q) : NULL;
    die_all_if(comm, !q, "out of memory", "");
    *q = n;
    int v = *q;
    free(q);
    return v;
}
EOF
analyze "$scratch/errpath.c"
diag < "$scratch/out"
[ $st -eq 0 ] && grep -q "^analyze.sh: 0 findings" "$scratch/out"
ok $? "return errorf(...) and die_all_if are failures to the analyzer: no null dereference after them (status $st)"
done_testing
