#!/bin/sh
# namelist_gfortran.sh -- triad's namelist reader against a Fortran
# compiler's (docs/input.md, "Syntax").  regression/namelist/reader.f90,
# compiled here with gfortran, reads each deck of regression/namelist/ the way
# a Fortran code does and prints every value exactly (reals as IEEE bits).
# A deck marked `! expect: same` must read to the same values in triad: the
# reader reads triad's effective deck (`triad check`, the keys it knows) and
# must print what it printed for the deck itself.  A deck marked
# `! expect: refused: MESSAGE` is one gfortran reads but triad refuses on
# purpose: the reader must read it, triad must fail with MESSAGE at
# `! at: LINE:COL`.  Skips where gfortran is not installed
# (tools/install-deps.sh installs it).
. "$(dirname "$0")/lib.sh"
triad=$TRIAD
tmp=$scratch
dir="$top_srcdir/regression/namelist"
FC=${FC:-gfortran}
if ! command -v "$FC" >/dev/null 2>&1; then
    skip "$FC is not installed (tools/install-deps.sh installs gfortran)"
    done_testing
fi
if [ ! -x "$triad" ]; then
    echo "Bail out! $triad is not built (run make first)"
    exit 1
fi
if ! "$FC" -o "$tmp/reader" "$dir/reader.f90" >"$tmp/fc.log" 2>&1; then
    echo "Bail out! $FC cannot compile $dir/reader.f90: $(head -c 300 "$tmp/fc.log")"
    exit 1
fi

# only the reader's keys of an effective deck (gfortran refuses a key its
# namelist lacks)
reader_keys() {
    awk '/^&/ { g = substr($1, 2); print; next }
         /^\// { print; next }
         index(" train.seed train.steps train.peak_gflops train.memory_gb train.loss_scale train.pack_activations train.precision io.trace io.overwrite io.save_final io.allow_nonfinite_weights io.run_dir io.max_seconds sample.prompt sample.tokenizer eval.max_examples eval.scores ", " " g "." $1 " ") { print }' "$1"
}

# triad's defaults, as the reader's starting values
: >"$tmp/empty.nml"
"$triad" check "$tmp/empty.nml" >"$tmp/out" 2>"$tmp/err" || {
    echo "Bail out! triad check of an empty deck failed: $(head -c 300 "$tmp/err")"
    exit 1
}
reader_keys "$tmp/out" >"$tmp/defaults.nml"

# check NAME DECK [SOURCE]: one deck, as the '! expect:' and '! at:' lines of
# SOURCE (default: the deck) say.
check() {
    name=$1 deck=$2 source=${3:-$2}
    problems=""
    expect=$(sed -n 's/^! expect: //p' "$source" | head -n 1)
    "$tmp/reader" "$tmp/defaults.nml" "$deck" >"$tmp/fortran" 2>&1 || problems="gfortran does not read it: $(head -c 300 "$tmp/fortran")"
    "$triad" check "$deck" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case $expect in
    same)
        if [ "$rc" -ne 0 ]; then
            problems="${problems:+$problems; }triad refuses it: $(head -c 300 "$tmp/err")"
        else
            reader_keys "$tmp/out" >"$tmp/effective.nml"
            "$tmp/reader" "$tmp/defaults.nml" "$tmp/effective.nml" >"$tmp/triad" 2>&1 ||
                problems="${problems:+$problems; }gfortran does not read triad's effective deck: $(head -c 300 "$tmp/triad")"
            cmp -s "$tmp/fortran" "$tmp/triad" ||
                problems="${problems:+$problems; }values differ (< gfortran, > triad): $(diff "$tmp/fortran" "$tmp/triad" | grep '^[<>]' | head -n 6)"
        fi
        ;;
    refused:*)
        want=${expect#refused: }
        at=$(sed -n 's/^! at: //p' "$source")
        [ "$rc" -eq 1 ] || problems="${problems:+$problems; }triad exit status $rc, expected 1"
        grep -qF -e "$deck:$at: error: $want" "$tmp/err" ||
            problems="${problems:+$problems; }stderr lacks '$deck:$at: error: $want': $(head -c 300 "$tmp/err")"
        ;;
    *) problems="no '! expect: same' or '! expect: refused: MESSAGE' line" ;;
    esac
    [ -z "$problems" ]
    ok $? "$name: ${expect%%:*}"
    [ -z "$problems" ] || printf '%s\n' "$problems" | diag
}

for f in "$dir"/*.nml; do
    check "$(basename "$f")" "$f"
done

# Line ends and a byte order mark, which a file in git does not keep reliably.
sed 's/$/\r/' "$dir/separators.nml" >"$tmp/crlf.nml"
check "separators.nml with CR LF line ends" "$tmp/crlf.nml" "$dir/separators.nml"
printf '\357\273\277' | cat - "$dir/names.nml" >"$tmp/bom.nml"
check "names.nml after a UTF-8 byte order mark" "$tmp/bom.nml" "$dir/names.nml"
# gfortran reads trace = .false. here: the comment runs on past the CR.
printf '&train seed = 5 / ! a comment\r&io trace = t /\n' >"$tmp/cr.nml"
printf '! expect: refused: a carriage return without a line feed\n! at: 1:30\n' >"$tmp/cr.expect"
check "a lone CR, which ends no comment in Fortran" "$tmp/cr.nml" "$tmp/cr.expect"

done_testing
