#!/bin/sh
# run_selftest.sh -- tests of the regression runner itself (regression/run):
# a perturbed reference must fail with the step/expected/got/rel-err table, a
# perturbation inside the tolerance must pass, twins, skips, bad case files,
# failing runs and REGENERATE=1 must be reported as docs/regression.md says.
. "$(dirname "$0")/lib.sh"

RUNNER="$top_srcdir/regression/run"
CASES="$top_srcdir/regression/cases"
REFS="$top_srcdir/regression/references"
mkdir -p "$scratch/cases" "$scratch/refs" "$scratch/empty"
cp "$CASES/serial.nml" "$scratch/cases/"
cp -R "$CASES/data" "$scratch/cases/"

# runner OUTFILE ARGS...: run the runner on the scratch cases; status returned.
runner() {
    out=$1; shift
    "$PYTHON3" "$RUNNER" --triad "$TRIAD" --casedir "$scratch/cases" --workdir "$scratch/work.$out" \
        "$@" > "$scratch/$out" 2>&1
}
# has OUTFILE REGEX: the output has a line matching REGEX (extended).
has() { grep -Eq -- "$2" "$scratch/$1"; }
# perturb FACTOR STEP: the serial reference with loss at STEP multiplied by FACTOR.
perturb() {
    awk -v f="$1" -v s="$2" '$1 == "step" && $2 == s { $3 = sprintf("%.9e", $3 * f) } { print }' \
        "$REFS/serial.ref" > "$scratch/refs/serial.ref"
}

# 1. The stored reference, unchanged: every comparison passes.
cp "$REFS/serial.ref" "$scratch/refs/"
runner ok.out --refdir "$scratch/refs" serial
st=$?
ok $st "the serial case passes against its own stored reference"
[ $st -eq 0 ] || diag < "$scratch/ok.out"
has ok.out '^ok [0-9]+ - serial vs reference: loss +(identical|worst rel err)'
ok $? "TAP line per quantity with the worst deviation"
has ok.out '^1\.\.[0-9]+$'
ok $? "a TAP plan"

# 2. One loss value raised by 1e-3 relative (tolerance 1e-5): a failure with the table.
perturb 1.001 5
runner bad.out --refdir "$scratch/refs" serial
st=$?
[ $st -ne 0 ]
ok $? "a perturbed reference makes the runner exit non-zero"
has bad.out '^not ok [0-9]+ - serial vs reference: loss +worst rel err 9\.99e-04 at step 5'
ok $? "the loss comparison is 'not ok' and names the worst step and its relative error"
has bad.out '^# +step +expected +got +rel err$'
ok $? "a table headed step, expected, got, rel err follows"
expected=$(awk '$1 == "step" && $2 == 5 { print $3 }' "$scratch/refs/serial.ref")
awk -v e="$expected" '$1 == "#" && $2 == "5" && $3 == e && $5 ~ /^9\.99[0-9]e-04$/ { f = 1 } END { exit !f }' "$scratch/bad.out"
ok $? "the table row: step 5, the perturbed expected value ($expected), got, rel err ~1e-3"
[ "$(grep -Ec '^# +[0-9]+ +[0-9]' "$scratch/bad.out")" -eq 1 ]
ok $? "only the perturbed step is in the table"
has bad.out '^ok [0-9]+ - serial vs reference: grad_norm'
ok $? "the other quantities still pass"
diag < "$scratch/bad.out"     # the failure report itself, for the log

# 3. A perturbation inside the tolerance (1e-7 relative against rtol 1e-5) passes.
perturb 1.0000001 5
runner small.out --refdir "$scratch/refs" serial
ok $? "a deviation inside the stated tolerance passes"

# 4. No reference: a failure that says how to make one; REGENERATE=1 makes it.
runner none.out --refdir "$scratch/empty" serial
st=$?
[ $st -ne 0 ] && has none.out '^not ok [0-9]+ - serial vs reference: no file' && has none.out 'REGENERATE=1 regression/run serial'
ok $? "a missing reference is 'not ok' with the REGENERATE command"
REGENERATE=1 runner regen.out --refdir "$scratch/empty" serial
st=$?
[ $st -eq 0 ] && has regen.out '^ok [0-9]+ - serial: reference written'
ok $? "REGENERATE=1 writes the reference"
head -12 "$scratch/empty/serial.ref" | diag
grep -q '^# build: .*commit' "$scratch/empty/serial.ref" && grep -q '^# run 1: ' "$scratch/empty/serial.ref" &&
    grep -q '^columns: loss grad_norm lr$' "$scratch/empty/serial.ref" &&
    [ "$(grep -c '^step ' "$scratch/empty/serial.ref")" -eq 12 ] &&
    grep -q '^param_norm wte [0-9]' "$scratch/empty/serial.ref"
ok $? "the written reference has the build, the command, 12 step rows and the final norms"
runner again.out --refdir "$scratch/empty" serial
ok $? "and the same build passes against it"

# 5. Twins, skips, a bad case file and a failing run, in one invocation.
{ printf '! wrong_twin -- lr 6e-3 against a twin with lr 5e-3.\n! twin: serial\n'
  printf '! twin_compare: loss rtol=1e-5; param_norm rtol=1e-5\n! twin_memory: activations < 0.5; gradients <= 1\n'
  grep -v '^!' "$CASES/serial.nml" | sed 's/ lr = [0-9.d+-]*,/ lr = 6.0d-3,/'; } > "$scratch/cases/wrong_twin.nml"
printf '! big -- more ranks than allowed.\n! ranks: 64\n! compare: loss rtol=1e-5\n&train steps = 1 /\n' > "$scratch/cases/big.nml"
printf '! marked -- not yet.\n! skip: feature X is refused by this build\n&train steps = 1 /\n' > "$scratch/cases/marked.nml"
printf '! gpu -- a device case.\n! needs: gpu\n! compare: loss rtol=1e-5\n&train steps = 1 /\n' > "$scratch/cases/gpu.nml"
printf '! typo -- a misspelt key.\n! twn: serial\n&train steps = 1 /\n' > "$scratch/cases/typo.nml"
printf '! badmem -- an unknown memory column.\n! twin: serial\n! twin_compare: loss exact\n! twin_memory: weights < 1\n&train steps = 1 /\n' > "$scratch/cases/badmem.nml"
{ printf '! crash -- heads do not divide d_model.\n'
  grep -v '^!' "$CASES/serial.nml" | sed 's/n_head = 4/n_head = 5/'; } > "$scratch/cases/crash.nml"
cp "$REFS/serial.ref" "$scratch/refs/"
REGRESSION_GPU=0 runner mixed.out --refdir "$scratch/refs" --max-ranks 4
st=$?
[ $st -ne 0 ]
ok $? "an invocation with failing cases exits non-zero"
has mixed.out '^ok [0-9]+ - big # SKIP needs 64 ranks, at most 4 allowed'
ok $? "a case needing more ranks than --max-ranks is skipped with the reason"
has mixed.out '^ok [0-9]+ - marked # SKIP feature X is refused by this build'
ok $? "a case marked 'skip:' is skipped with its reason"
has mixed.out '^ok [0-9]+ - gpu # SKIP needs a GPU'
ok $? "a case needing a GPU is skipped when there is none"
has mixed.out "^not ok [0-9]+ - typo: bad case file: .*unknown metadata key 'twn:'"
ok $? "a misspelt metadata key is an error, not silently ignored"
has mixed.out "^not ok [0-9]+ - badmem: bad case file: .*twin_memory: unknown column 'weights'"
ok $? "an unknown twin_memory column is an error naming it"
has mixed.out '^not ok [0-9]+ - wrong_twin vs twin serial: memory activations: [0-9]+ bytes on rank 0 < 0.5 x [0-9]+$' &&
    has mixed.out '^ok [0-9]+ - wrong_twin vs twin serial: memory gradients: [0-9]+ bytes on rank 0 <= 1 x [0-9]+$'
ok $? "twin_memory compares rank 0's allocated bytes with the twin's: a bound it misses fails, one it meets passes"
has mixed.out '^not ok [0-9]+ - crash: run 1 of 1 exited with status 1' && has mixed.out '^#   .*n_head'
ok $? "a failing run is 'not ok' with the tail of its output"
has mixed.out '^not ok [0-9]+ - wrong_twin vs twin serial: same problem, the decks differ in train.lr' &&
    has mixed.out 'train.lr differs and is not a layout key'
ok $? "a twin whose deck differs beyond the layout is reported"
has mixed.out '^not ok [0-9]+ - wrong_twin vs twin serial: loss +worst rel err' && has mixed.out '^# +step +expected +got +rel err$'
ok $? "a twin comparison failure has the table too"
has mixed.out '^not ok [0-9]+ - wrong_twin vs twin serial: param_norm .* at tensor ' && has mixed.out '^# +tensor +expected +got +rel err$'
ok $? "final quantities are compared per tensor, with a table"
has mixed.out '^ok [0-9]+ - serial vs reference: loss'
ok $? "the passing case still passes next to the failing ones"
diag < "$scratch/mixed.out"

# 6. --list and a pattern that matches nothing.
runner list.out --list
[ $? -eq 0 ] && has list.out '^serial +1 +- +one rank' && has list.out '^big +64 ' && has list.out 'skip: feature X'
ok $? "--list shows the cases with ranks, twins and skips"
runner nomatch.out --refdir "$scratch/refs" no_such_case
[ $? -ne 0 ] && has nomatch.out '^Bail out! no case matches no_such_case'
ok $? "a pattern that matches no case bails out"
done_testing
