#!/bin/sh
# bad_decks.sh -- every deck in regression/bad/*.nml must make `triad check`
# fail: exit status 1, nothing on stdout, and on stderr every `! expect:`
# substring the deck lists; a deck with `! at: LINE:COL` must also name itself
# and that place ("FILE:LINE:COL: error: ").  Then a bad command-line
# override, and a bad deck on 2 MPI ranks (the error printed once).
. "$(dirname "$0")/lib.sh"
triad=$TRIAD
tmp=$scratch
if [ ! -x "$triad" ]; then
    echo "Bail out! $triad is not built (run make first)"
    exit 1
fi

problems=""

# report DESCRIPTION: ok if no problem was noted since the last report (the
# problems and the run's stderr as diagnostics otherwise).
report() {
    [ -z "$problems" ]
    ok $? "$1"
    if [ -n "$problems" ]; then
        printf '%s\n' "$problems" | diag
        echo "stderr was:" | diag
        diag < "$tmp/err"
    fi
    problems=""
}

problem() {
    problems="${problems:+$problems
}$1"
}

# expect_failure: the last run ($rc, $tmp/out, $tmp/err) failed cleanly.
expect_failure() {
    [ "$rc" -eq 1 ] || problem "exit status $rc, expected 1"
    [ -s "$tmp/out" ] && problem "wrote to stdout: $(head -c 200 "$tmp/out")"
    grep -q 'error: ' "$tmp/err" || problem "no 'error: ' on stderr"
}

# fails COMMAND...: run it (stdout and stderr into $tmp/out, $tmp/err); it
# must fail cleanly.
fails() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    expect_failure
}

expect_in_stderr() {
    grep -qF -e "$1" "$tmp/err" || problem "stderr lacks: $1"
}

# ---------------------------------------------------------------- the corpus
for f in "$top_srcdir"/regression/bad/*.nml; do
    name=$(basename "$f")
    fails "$triad" check "$f"
    sed -n 's/^! expect: //p' "$f" >"$tmp/expect"
    [ -s "$tmp/expect" ] || problem "$name has no '! expect:' line"
    while IFS= read -r want; do
        expect_in_stderr "$want"
    done <"$tmp/expect"
    at=$(sed -n 's/^! at: //p' "$f")
    [ -n "$at" ] && expect_in_stderr "$f:$at: error: "
    report "$name${at:+ ($at)}: $(head -n 1 "$tmp/expect")"
done

# ---------------------------------------------------------------- a good deck, echoed
cat >"$tmp/good.nml" <<'EOF'
! a valid deck
&model n_layer = 2, n_head = 2, d_model = 32, seq_len = 16, vocab_size = 256 /
&train steps = 3, batch_size = 4 /
EOF
"$triad" check "$tmp/good.nml" >"$tmp/echo.nml" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || problem "exit status $rc, expected 0"
[ -s "$tmp/err" ] && problem "wrote to stderr"
grep -q '^  n_layer *= 2$' "$tmp/echo.nml" || problem "the echo lacks n_layer = 2"
report "a good deck passes and is echoed"

"$triad" check "$tmp/echo.nml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || problem "exit status $rc, expected 0"
cmp -s "$tmp/out" "$tmp/echo.nml" || problem "echo of the echo differs: $(diff "$tmp/echo.nml" "$tmp/out" | head -n 5)"
report "the echo is a deck that echoes to itself"

# ---------------------------------------------------------------- line ends, sizes, bytes
# A CR LF deck reads as the LF one.  A CR-only deck (old Mac editors) is
# refused: Fortran reads no line end at a lone CR, so the '!' comment on the
# first line would hide the whole deck from a Fortran program.
sed 's/$/\r/' "$tmp/good.nml" >"$tmp/crlf.nml"
"$triad" check "$tmp/crlf.nml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || problem "exit status $rc, expected 0"
cmp -s "$tmp/out" "$tmp/echo.nml" || problem "the effective deck differs: $(diff "$tmp/echo.nml" "$tmp/out" | head -n 4)"
report "a deck with crlf line ends reads as the LF one"
tr '\n' '\r' <"$tmp/good.nml" >"$tmp/cr.nml"
fails "$triad" check "$tmp/cr.nml"
expect_in_stderr "$tmp/cr.nml:1:15: error: a carriage return without a line feed"
expect_in_stderr "hint: save the deck with LF (Unix) or CR LF (Windows) line ends"
report "a deck with lone CR line ends is refused at its first CR"
printf '&model n_layer = 2 /\r\n&train steps = 3 ! three\r  batch_size = 4 /\r\n' >"$tmp/mixed.nml"
fails "$triad" check "$tmp/mixed.nml"
expect_in_stderr "$tmp/mixed.nml:2:25: error: a carriage return without a line feed"
report "a lone CR after CR LF lines is refused at its line and column"
printf '%s' "$(sed 's/$/\r/' "$tmp/good.nml")" >"$tmp/lastcr.nml" # CR LF lines, the last LF cut off
"$triad" check "$tmp/lastcr.nml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || problem "exit status $rc, expected 0"
cmp -s "$tmp/out" "$tmp/echo.nml" || problem "the effective deck differs: $(diff "$tmp/echo.nml" "$tmp/out" | head -n 4)"
report "a CR that ends the deck (its LF cut off) hides nothing and reads"
printf '&model\n  n_layer = 2\n  n_h\000ead = 4 /\n' >"$tmp/nul.nml"
fails "$triad" check "$tmp/nul.nml"
expect_in_stderr "$tmp/nul.nml:3:6: error: the deck contains a NUL byte"
report "a NUL byte is reported with its line and column"
fails timeout 20 "$triad" check /dev/zero
expect_in_stderr "/dev/zero: error: more than 1 MiB; triad reads a deck up to 1 MiB"
report "check /dev/zero stops at its bound (no unbounded read)"
{ echo '&model n_layer = 2 /'; yes '! a comment that pads the deck past its bound' | head -n 40000; } >"$tmp/big.nml"
fails "$triad" check "$tmp/big.nml"
expect_in_stderr "$tmp/big.nml: error: 1840021 bytes; triad reads a deck up to 1 MiB"
report "a deck over 1 MiB is refused with its size, before reading it"
yes '! a comment that pads the deck past its bound' | head -n 40000 | "$triad" check /dev/stdin >"$tmp/out" 2>"$tmp/err"
rc=$?
expect_failure
expect_in_stderr "/dev/stdin: error: more than 1 MiB; triad reads a deck up to 1 MiB"
report "a stream over 1 MiB is refused at its bound"
fails "$triad" check "$tmp"
expect_in_stderr "$tmp: error: a directory, not a file"
report "a directory named as the deck is said to be one"

# ---------------------------------------------------------------- a bad override
fails "$triad" check "$tmp/good.nml" model.n_layers=3
expect_in_stderr "command line:1:7: error: unknown key 'n_layers' in &model"
expect_in_stderr "hint: did you mean 'n_layer'?"
report "override model.n_layers=3 fails with the nearest name"

# ---------------------------------------------------------------- on 2 ranks
bad="$top_srcdir/regression/bad/unknown_key_typo.nml"
fails $MPIEXEC -n 2 --oversubscribe "$triad" check "$bad"
count=$(grep -c "error: unknown key 'n_layers'" "$tmp/err")
[ "$count" -eq 1 ] || problem "the error is printed $count times, expected once"
report "a bad deck on 2 ranks: exit 1, the error printed once"

fails $MPIEXEC -n 2 --oversubscribe "$triad" check "$tmp/good.nml" parallel.dp=4
expect_in_stderr "tp * dp * pp = 1 * 4 * 1 = 4, but 2 ranks were launched"
expect_in_stderr "hint: set dp = 2"
count=$(grep -c "error: tp \* dp \* pp" "$tmp/err")
[ "$count" -eq 1 ] || problem "the error is printed $count times, expected once"
report "dp = 4 on 2 ranks: the world size is checked, the error printed once"

fails "$triad" check "$tmp/good.nml" train.steps=99999999999999999999
expect_in_stderr "does not fit in 64 bits"
report "an integer override that does not fit is an error"

# A key nothing reads (regression/bad/unread_*.nml) in a deck that resumes a run (io.restart = 'auto' with a
# checkpoint in io.run_dir): a warning, not an error (a campaign's requeued job goes on)
mkdir -p "$tmp/campaign" && : > "$tmp/campaign/ckpt_100.h5"
"$triad" check "$tmp/good.nml" io.restart="'auto'" io.run_dir="'$tmp/campaign'" train.loss_scale=5 >"$tmp/out" 2>"$tmp/err" ||
    problem "exit status $? resuming"
grep -q "^warning: .*train.loss_scale = 5 with precision = 'fp32' (the loss scale is fp16's alone), so nothing reads it" "$tmp/err" &&
    grep -q "(a run that resumes from a checkpoint goes on)" "$tmp/err" || problem "no warning"
fails "$triad" check "$tmp/good.nml" io.restart="'auto'" io.run_dir="'$tmp/nothing_yet'" train.loss_scale=5
expect_in_stderr "train.loss_scale = 5 with precision = 'fp32'"
report "a key nothing reads: a warning where the deck resumes a run, an error where it starts one"

# A deck in a named pipe: read once its writer comes (1 s late here); without one, refused after 10 s (it
# waited in open() for ever); a pipe as data.path is refused at once (the data is mapped)
mkfifo "$tmp/fifo.nml"
(sleep 1; cat "$tmp/good.nml" > "$tmp/fifo.nml") &
"$triad" check "$tmp/fifo.nml" >"$tmp/out" 2>"$tmp/err" || problem "exit status $? with a writer"
wait
grep -q "^&model" "$tmp/out" || problem "no effective deck on stdout"
report "a deck in a named pipe whose writer comes a second late is read"
t0=$(date +%s)
fails timeout 60 "$triad" check "$tmp/fifo.nml"
expect_in_stderr "fifo.nml: error: a pipe through which nothing came in 10 s (its writer not started, or slow to begin)"
expect_in_stderr "hint: start the pipe's writer before triad, or write the deck to a file first"
report "a deck in a named pipe without a writer: refused after 10 s ($(( $(date +%s) - t0 )) s; 124 is a hang)"
timeout 60 $MPIEXEC -n 1 "$triad" "$tmp/good.nml" data.kind="'text'" data.path="'$tmp/fifo.nml'" \
    model.vocab_size=256 io.run_dir="'$tmp/fiforun'" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || problem "exit status $rc, expected 1 (124: a hang)"
expect_in_stderr "data file '$tmp/fifo.nml' is not a regular file"
expect_in_stderr "hint: the data is read at any offset, as a mapping: name a regular file"
report "data.path naming a named pipe: refused at once, not waited on"

# The commands one process answers start no MPI without a launcher (main.c, one_process_command): an MPI
# that cannot start (a pml that does not exist) stops a training run, not them (the launchers' variables
# unset: the suite may itself run under one, in a batch job)
# (main.c's launcher_vars, read from the source)
vars=$(sed -n '/launcher_vars\[\] = {/,/};/p' "$top_srcdir/src/driver/main.c" | grep -o '"[A-Z0-9_]*"' | tr -d '"')
nolauncher="env"
for v in $vars; do nolauncher="$nolauncher -u $v"; done
nolauncher="$nolauncher OMPI_MCA_pml=none_such"
for cmd in "check $tmp/good.nml" "plan $tmp/good.nml" "schedule $tmp/good.nml parallel.pp=2" --version --doc; do
    $nolauncher "$triad" $cmd >"$tmp/out" 2>"$tmp/err" || problem "triad $cmd: exit status $? without MPI"
    [ -s "$tmp/out" ] || problem "triad $cmd: nothing on stdout"
done
$nolauncher "$triad" "$tmp/good.nml" io.run_dir="'$tmp/nompi'" >"$tmp/out" 2>"$tmp/err" &&
    problem "training ran with an MPI that cannot start: the checks above prove nothing"
[ "$(echo $vars | wc -w)" -ge 11 ] || problem "launcher_vars not read from main.c: '$vars'"
report "check, plan, schedule, --version, --doc without a launcher: no MPI started (training needs it)"
# ... and each launcher's variable starts it (so the MPI that cannot start stops triad check)
for v in $vars; do
    $nolauncher $v=0 "$triad" check "$tmp/good.nml" >"$tmp/out" 2>"$tmp/err" && problem "$v set: triad check did not start MPI"
done
report "check under a launcher (each of the $(echo $vars | wc -w) variables main.c knows them by): MPI started"

done_testing
