#!/bin/sh
# analyze.sh -- clang's static analyzer (clang-tidy's clang-analyzer-*
# checks) over triad's C sources, against the findings reviewed and
# dismissed in tools/analyze_dismissed.txt.  `make analyze` runs it with the
# build's own flags (docs/regression.md).
#
# Usage: tools/analyze.sh [-j N] [FILE.c ...] -- COMPILER FLAGS
#   no files: every src/*/*.c; CLANG_TIDY names the program (default
#   clang-tidy); ANALYZE_DISMISSED another list (regression/analyze.sh).
# Status: 0 every finding listed and every listed one found; 1 a finding
# not listed (NEW: fix it, or review it and list it with the reason) or a
# listed one no longer found (GONE: delete it, so that it cannot hide a
# later one); 2 the analysis itself failed (a file clang-tidy cannot
# process, no clang-tidy, no list).
#
# A finding is keyed by its file, check and message, without its line, so
# that edits elsewhere in a file do not disturb the list; a key found more
# often than it is listed is new.
set -u
here=$(cd "$(dirname "$0")/.." && pwd -P)
jobs=$(nproc 2> /dev/null || echo 1)
if [ "${1:-}" = -j ]; then
    jobs=$2
    shift 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/files"
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    printf '%s\n' "$1" >> "$work/files"
    shift
done
[ "${1:-}" = -- ] && shift
tidy=${CLANG_TIDY:-clang-tidy}
if ! command -v "$tidy" > /dev/null 2>&1; then
    echo "analyze.sh: $tidy not found (Debian: apt-get install clang-tidy)" >&2
    exit 2
fi
dismissed=${ANALYZE_DISMISSED:-$here/tools/analyze_dismissed.txt}
if [ ! -r "$dismissed" ]; then
    echo "analyze.sh: $dismissed: cannot read the list of dismissed findings" >&2
    exit 2
fi
[ -s "$work/files" ] || LC_ALL=C ls "$here"/src/*/*.c > "$work/files"

# One file's analysis: its output, status and name in $WORK/<n>.*
cat > "$work/one.sh" << 'EOF'
src=$1
shift
out="$WORK/$(printf '%s' "$src" | cksum | cut -d' ' -f1)"
printf '%s\n' "$src" > "$out.src"
# (__builtin_cpu_supports: clang 14 refuses GCC's "f16c"; the analysis needs no answer)
"$TIDY" --quiet -checks='-*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.*' "$src" -- "$@" \
    '-D__builtin_cpu_supports(feature)=1' > "$out.out" 2> "$out.err"
echo $? > "$out.rc"
EOF
echo "analyze.sh: $(wc -l < "$work/files") files, $jobs at a time ($("$tidy" --version | sed -n 's/.*version /clang-tidy /p' | head -1))"
tr '\n' '\0' < "$work/files" | WORK=$work TIDY=$tidy xargs -0 -P "$jobs" -I{} sh "$work/one.sh" {} "$@"

status=0
for rc in "$work"/*.rc; do
    [ -f "$rc" ] || break
    o=${rc%.rc}
    if [ "$(cat "$rc")" != 0 ] || grep -q ': error: ' "$o.out"; then
        echo "analyze.sh: clang-tidy cannot process $(cat "$o.src"):" >&2
        grep ': error: ' "$o.out" | head -n 5 >&2
        head -n 3 "$o.err" >&2
        status=2
    fi
done
if [ "$(ls "$work" | grep -c '\.rc$')" -ne "$(wc -l < "$work/files")" ]; then
    echo "analyze.sh: clang-tidy ran on $(ls "$work" | grep -c '\.rc$') of the $(wc -l < "$work/files") files" >&2
    status=2
fi
[ $status -eq 0 ] || exit $status

# the findings, "file<TAB>check<TAB>message<TAB>line" (the file relative to
# the tree; a system header by its name alone, as clang versions place them)
tab=$(printf '\t')
cat "$work"/*.out | sed -n "s/^\(.*\):\([0-9]*\):[0-9]*: warning: \(.*\) \[clang-analyzer-\([^]]*\)\]\$/\1$tab\4$tab\3$tab\2/p" |
    HERE="$here/" awk -F'\t' -v OFS='\t' '{
        if (index($1, ENVIRON["HERE"]) == 1) $1 = substr($1, length(ENVIRON["HERE"]) + 1)
        else if (match($1, /\/include\//)) $1 = substr($1, RSTART + 9)
        gsub(/  +/, " ", $3); sub(/ +$/, "", $3); print }' | LC_ALL=C sort -u > "$work/found"
# the list: "FILE | CHECK | MESSAGE" lines (the first two bars separate)
grep -v '^#' "$dismissed" | grep -v '^[[:space:]]*$' |
    sed "s/ *| */$tab/; s/ *| */$tab/; s/  */ /g; s/ *\$//" > "$work/listed"
awk -F'\t' '
    FILENAME == ARGV[1] { listed[$1 FS $2 FS $3]++; next }
    { k = $1 FS $2 FS $3; found[k]++; line[k] = line[k] " " $4; where[k] = $1; what[k] = $3 " [" $2 "]" }
    END {
        for (k in found) {
            total += found[k]
            if (found[k] > listed[k]) {
                new += found[k] - listed[k]
                printf "NEW  %s: %s (line%s%s%s)\n", where[k], what[k], (found[k] > 1 ? "s" : ""), line[k],
                       listed[k] ? sprintf("; found %d times, listed %d", found[k], listed[k]) : ""
            }
        }
        for (k in listed)
            if (listed[k] > found[k]) {
                gone += listed[k] - found[k]
                split(k, f, FS)
                printf "GONE %s | %s | %s (listed %d times, found %d)\n", f[1], f[2], f[3], listed[k], found[k] + 0
            }
        printf "analyze.sh: %d findings, %d of them listed as dismissed; %d new, %d listed and gone\n",
               total, total - new, new, gone
        if (new + gone > 0) exit 1
    }' "$work/listed" "$work/found"
