#!/bin/sh
# tools/analyze.sh (make analyze) on small files of its own: a new finding
# fails with its file and line, a reviewed one listed in the dismissed file
# passes, a listed one no longer found is named, a file that does not
# compile is an error (not a clean pass), and errorf's -1 is seen through
# log.h's macro (no false null dereference after `return errorf(...)`).
# The analysis of src/ itself is `make analyze`, too long for make check.
. "$(dirname "$0")/lib.sh"

if ! command -v "${CLANG_TIDY:-clang-tidy}" > /dev/null 2>&1; then
    skip "clang-tidy is not installed (tools/install-deps.sh installs it)"
    done_testing
fi
an="$top_srcdir/tools/analyze.sh"
flags="-std=c11 -D_POSIX_C_SOURCE=200809L -I$top_srcdir/src/base $(${CC:-mpicc} --showme:compile 2> /dev/null)"

cat > "$scratch/deref.c" << 'EOF'
int first(const int *p)
{
    if (p) return 0;
    return *p; /* p is NULL here */
}
EOF
: > "$scratch/none.txt"
ANALYZE_DISMISSED="$scratch/none.txt" sh "$an" -j 1 "$scratch/deref.c" -- $flags > "$scratch/out" 2>&1
st=$?
diag < "$scratch/out"
[ $st -eq 1 ] && grep -q "^NEW  $scratch/deref.c:4: Dereference of null pointer .*\[core.NullDereference\]" "$scratch/out"
ok $? "a new finding: status 1 (got $st), its file, line and check named"

printf '# reviewed: the test'"'"'s own\n%s | core.NullDereference | %s\n' "$scratch/deref.c" \
    "Dereference of null pointer (loaded from variable 'p')" > "$scratch/dismissed.txt"
ANALYZE_DISMISSED="$scratch/dismissed.txt" sh "$an" -j 1 "$scratch/deref.c" -- $flags > "$scratch/out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "1 findings, 1 of them dismissed, 0 new" "$scratch/out"
ok $? "the same finding listed as dismissed: passes (status $st)"

cat > "$scratch/clean.c" << 'EOF'
int twice(int x) { return 2 * x; }
EOF
ANALYZE_DISMISSED="$scratch/dismissed.txt" sh "$an" -j 1 "$scratch/clean.c" -- $flags > "$scratch/out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "^GONE $scratch/deref.c|core.NullDereference|" "$scratch/out"
ok $? "a dismissed finding no longer found: named to be deleted (status $st)"

printf 'int broken(void) { return undeclared; }\n' > "$scratch/broken.c"
ANALYZE_DISMISSED="$scratch/none.txt" sh "$an" -j 1 "$scratch/broken.c" -- $flags > "$scratch/out" 2>&1
st=$?
[ $st -eq 2 ] && grep -q "clang-tidy failed on $scratch/broken.c" "$scratch/out"
ok $? "a file that does not compile: status 2 (got $st), not a clean pass"

# errorf's callers: after `if (get(&p, ...)) return` p is set, which the
# analyzer sees only through log.h's macro (errorf is -1)
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
EOF
ANALYZE_DISMISSED="$scratch/none.txt" sh "$an" -j 1 "$scratch/errpath.c" -- $flags > "$scratch/out" 2>&1
st=$?
diag < "$scratch/out"
[ $st -eq 0 ] && grep -q "0 findings" "$scratch/out"
ok $? "return errorf(...) is a failure to the analyzer: no null dereference after it (status $st)"
done_testing
