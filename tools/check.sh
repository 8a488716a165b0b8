#!/bin/sh
# check.sh -- run the whole test suite (make check) and print one summary line.
cd "$(dirname "$0")/.."
make -j"$(nproc)" check
status=$?
log=test-suite.log
if [ -f "$log" ]; then
    pass=$(sed -n 's/^# PASS: *//p' "$log"); fail=$(sed -n 's/^# FAIL: *//p' "$log")
    skip=$(sed -n 's/^# SKIP: *//p' "$log"); err=$(sed -n 's/^# ERROR: *//p' "$log")
    xpass=$(sed -n 's/^# XPASS: *//p' "$log")
    [ "$status" -eq 0 ] || cat "$log"
    echo "tests: ${pass:-0} passed, $(( ${fail:-0} + ${err:-0} + ${xpass:-0} )) failed, ${skip:-0} skipped"
fi
exit $status
