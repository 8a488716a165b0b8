#!/bin/sh
# ckpt_bench.sh -- checkpoint write and read bandwidth for GPT-2 124M (model
# and AdamW state: 3 x 124M floats, 1.4 GiB) through parallel HDF5, against a
# plain sequential write (dd, fsync) and read of the same number of bytes on
# the same file system.  NP ranks (default 2) as tp x dp = NP x 1.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
NP=${NP:-2}
dir=run/bench_ckpt
rm -rf "$dir"
deck="bench/gpt2_124m.nml train.steps=0 parallel.tp=$NP io.save_final=.true. io.run_dir='$dir'"
w=$(mpirun -n "$NP" --oversubscribe ./triad $deck 2>&1 | sed -n 's/.*written and verified: \([0-9.]*\) MiB in \([0-9.]*\) s.*/\1 \2/p')
set -- $w
mib=$1 wsec=$2
r=$(mpirun -n "$NP" --oversubscribe ./triad $deck io.restart="'$dir/ckpt_0.h5'" io.save_final=.false. 2>&1 |
    sed -n 's/.*read in \([0-9.]*\) s.*/\1/p')
bytes=$(stat -c %s "$dir/ckpt_0.h5")
count=$((bytes / 1048576))
t0=$(date +%s.%N)
dd if=/dev/zero of="$dir/plain.bin" bs=1M count=$count conv=fsync status=none
t1=$(date +%s.%N)
dd if="$dir/plain.bin" of=/dev/null bs=1M status=none
t2=$(date +%s.%N)
awk -v mib="$mib" -v w="$wsec" -v r="$r" -v n="$count" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v np="$NP" 'BEGIN {
    dw = t1 - t0; dr = t2 - t1
    printf "%-28s %10s %10s %10s\n", "", "MiB", "seconds", "MiB/s"
    printf "%-28s %10.0f %10.2f %10.0f\n", "triad write (" np " ranks)", mib, w, mib / w
    printf "%-28s %10.0f %10.2f %10.0f\n", "dd write + fsync", n, dw, n / dw
    printf "%-28s %10.0f %10.2f %10.0f\n", "triad read + verify", mib, r, mib / r
    printf "%-28s %10.0f %10.2f %10.0f\n", "dd read (page cache)", n, dr, n / dr
    printf "write: %.0f%% of dd; read: %.0f%% of dd\n", 100 * (mib / w) / (n / dw), 100 * (mib / r) / (n / dr)
}'
rm -f "$dir/plain.bin"
