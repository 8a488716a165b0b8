#!/bin/sh
# analyze.sh -- clang's static analyzer (clang-tidy's clang-analyzer-*
# checks) over triad's C sources, against the findings reviewed and
# dismissed in tools/analyze_dismissed.txt.  Exits 1 when a finding is not
# there (a new one: fix it, or review it and add it with the reason), and
# names the dismissed ones no longer found (delete them from the file).
# `make analyze` runs it with the build's own flags (docs/regression.md).
#
# Usage: tools/analyze.sh [-j N] [FILE.c ...] -- COMPILER FLAGS
#   (no files: every src/*/*.c; CLANG_TIDY names the program, default
#   clang-tidy; ANALYZE_DISMISSED another list, for regression/analyze.sh)
#
# A finding is keyed by its file, check and message, without its line, so
# that edits elsewhere in a file do not disturb the list.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2> /dev/null || echo 1)
if [ "${1:-}" = -j ]; then
    jobs=$2
    shift 2
fi
files=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    files="$files $1"
    shift
done
[ "${1:-}" = -- ] && shift
tidy=${CLANG_TIDY:-clang-tidy}
if ! command -v "$tidy" > /dev/null 2>&1; then
    echo "analyze.sh: $tidy not found (Debian: apt-get install clang-tidy)" >&2
    exit 2
fi
[ -n "$files" ] || files=$(LC_ALL=C ls "$here"/src/*/*.c)
dismissed=${ANALYZE_DISMISSED:-$here/tools/analyze_dismissed.txt}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One file's findings, each "file | check | message" (the file relative to
# the tree; a system header by its name alone, as clang versions place them).
cat > "$work/one.sh" << 'EOF'
#!/bin/sh
src=$1
shift
out="$WORK/$(echo "$src" | tr / _)"
# (__builtin_cpu_supports: clang 14 refuses GCC's "f16c"; the analysis needs no answer)
"$TIDY" --quiet -checks='-*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.*' "$src" -- "$@" \
    '-D__builtin_cpu_supports(feature)=1' \
    > "$out.out" 2> "$out.err"
echo $? > "$out.rc"
echo "$src" > "$out.src"
EOF
chmod +x "$work/one.sh"
echo "analyze.sh: $(echo $files | wc -w) files, $jobs at a time ($("$tidy" --version | sed -n 's/.*version /clang-tidy /p' | head -1))"
# shellcheck disable=SC2086
printf '%s\n' $files | TIDY=$tidy WORK=$work xargs -P "$jobs" -I{} "$work/one.sh" {} "$@"

status=0
for rc in "$work"/*.rc; do
    if [ "$(cat "$rc")" != 0 ] && ! grep -q "warning:" "${rc%.rc}.out"; then
        echo "analyze.sh: clang-tidy failed on $(cat "${rc%.rc}.src"):" >&2
        head -n 5 "${rc%.rc}.err" >&2
        status=2
    fi
done
[ $status -eq 0 ] || exit $status

cat "$work"/*.out | sed -n 's/^\([^ :]*\):\([0-9]*\):[0-9]*: warning: \(.*\) \[clang-analyzer-\([^]]*\)\]$/\1|\4|\3|\2/p' |
    sed "s#^$here/##; s#^/[^|]*/include/##; s/  */ /g; s/ |/|/g" | LC_ALL=C sort -u > "$work/found"
# the keys with their counts, found and dismissed
cut -d'|' -f1-3 "$work/found" | LC_ALL=C sort | uniq -c > "$work/found.keys"
grep -v '^#' "$dismissed" | grep -v '^[[:space:]]*$' | sed 's/  */ /g; s/ *| */|/g; s/ *$//' | LC_ALL=C sort | uniq -c \
    > "$work/dismissed.keys"
new=0
while read -r n key; do
    had=$(awk -v k="$key" '{c = $1; $1 = ""; sub(/^ /, ""); if ($0 == k) print c}' "$work/dismissed.keys")
    if [ "${had:-0}" -lt "$n" ]; then
        new=$((new + n - ${had:-0}))
        grep -F "$key|" "$work/found" | while IFS='|' read -r f c m l; do
            echo "NEW  $f:$l: $m [$c]"
        done
    fi
done < "$work/found.keys"
while read -r n key; do
    now=$(awk -v k="$key" '{c = $1; $1 = ""; sub(/^ /, ""); if ($0 == k) print c}' "$work/found.keys")
    [ "${now:-0}" -lt "$n" ] && echo "GONE $key (dismissed $n, found ${now:-0}: delete it from $(basename "$dismissed"))"
done < "$work/dismissed.keys"
total=$(wc -l < "$work/found")
echo "analyze.sh: $total findings, $((total - new)) of them dismissed, $new new"
[ $new -eq 0 ]
