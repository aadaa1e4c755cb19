#!/usr/bin/env bash
# Runs the GPU tests on a machine with a real GPU, from binaries built elsewhere (no cargo
# needed there), each binary in its own process and time limit, every GPU test required to
# find a GPU (RUMUS_REQUIRE_GPU) with timestamp queries (RUMUS_REQUIRE_GPU_TIMING) and
# cooperative matrices (RUMUS_REQUIRE_COOPMAT, unless RUMUS_GPU_NO_COOP turns them off), and
# every wait for the GPU limited (RUMUS_GPU_WAIT_TIMEOUT): a kernel that hangs fails its
# binary with an error naming the wait instead of stopping the run.
#
#   tests/gpu_suite.sh --stage DIR     build the test files that use a GPU (release) and
#                                      examples/bench_gpu, and copy their binaries to DIR
#   tests/gpu_suite.sh DIR [SECONDS]   run every test binary in DIR, each for at most
#                                      SECONDS (default 300), from the repository root (a
#                                      test reads a fixture file under it); one line per
#                                      binary, and the failures' output under DIR/logs
#   tests/gpu_suite.sh --cuda DIR [SECONDS]
#                                      run every staged test against the CUDA backend
#                                      (RUMUS_TEST_DEVICE=cuda), each test in a process of its
#                                      own (a CUDA fault is sticky: it would fail every later
#                                      test of the process), for at most SECONDS (default 90)
#                                      each; the CUDA libraries come from the loader's path,
#                                      with a PyTorch install's nvidia/cu13/lib put first when
#                                      `python3` has one; one line per binary, then failures
#   tests/gpu_suite.sh --each BINARY [SECONDS]
#                                      run each test of one staged binary in a process of
#                                      its own, for at most SECONDS (default 60) each: a
#                                      kernel that hangs the GPU fails its own test only
#                                      (e.g. DIR/gpu_products, one test per product kernel
#                                      variant); one line per test
#
# The environment passes through: RUMUS_GPU_NO_COOPMAT2=1 runs the suite with the products off
# VK_NV_cooperative_matrix2 (their default where offered), RUMUS_GPU_TRACE=1 names each kernel
# as it runs. The wait limit is RUMUS_GPU_WAIT_TIMEOUT if set, else 60 seconds.
set -euo pipefail

if [[ "${1:-}" == "--stage" ]]; then
    dir=${2:?"--stage needs a folder"}
    mkdir -p "$dir"
    # The test files that open a GPU.
    mapfile -t files < <(grep -l 'gpu()\|gpu_and_handle()\|Device::cuda()' tests/*.rs | xargs -n1 basename | sed 's/\.rs$//')
    args=()
    for file in "${files[@]}"; do
        args+=(--test "$file")
    done
    log="$dir/build.log"
    if ! cargo test --release --no-run --color never "${args[@]}" >"$log" 2>&1; then
        tail -30 "$log"
        echo "the build failed (all of it in $log)"
        exit 1
    fi
    staged=0
    while read -r name path; do
        cp "$path" "$dir/$name"
        staged=$((staged + 1))
    done < <(sed -n 's/^ *Executable tests\/\([a-z0-9_]*\)\.rs (\(.*\))$/\1 \2/p' "$log")
    if [[ $staged -ne ${#files[@]} ]]; then
        echo "staged $staged test binaries of ${#files[@]} (cargo's output: $log)"
        exit 1
    fi
    cargo build --release --color never --example bench_gpu
    cp "${CARGO_TARGET_DIR:-target}/release/examples/bench_gpu" "$dir/"
    echo "staged $staged test binaries and bench_gpu in $dir"
    exit 0
fi

export RUMUS_REQUIRE_GPU=1
# A real GPU times kernels and, unless turned off, multiplies on cooperative matrices: the
# checks of which kernels ran, and of the matrix-unit kernels, fail here instead of skipping.
export RUMUS_REQUIRE_GPU_TIMING=1
if [[ -z "${RUMUS_GPU_NO_COOP:-}" ]]; then
    export RUMUS_REQUIRE_COOPMAT=1
fi
export RUMUS_GPU_WAIT_TIMEOUT=${RUMUS_GPU_WAIT_TIMEOUT:-60}
# Where the tests find their fixture files: this checkout, not the one they were built in.
export CARGO_MANIFEST_DIR=$PWD

# Runs each test of one binary in a process of its own, for at most $2 seconds; prints the
# failures (every test with $3 set) and sets `failed` to their count.
each_test() {
    local binary=$1 seconds=$2 verbose=${3:-}
    local log status
    failed=0
    log=$(mktemp)
    while read -r test; do
        status=0
        timeout -k 5 "$seconds" "$binary" --exact "$test" --test-threads=1 >"$log" 2>&1 || status=$?
        if [[ $status -eq 0 ]]; then
            if [[ -n "$verbose" ]]; then
                echo "ok      $test"
            fi
        else
            failed=$((failed + 1))
            echo "FAILED  $test (exit $status$([[ $status -eq 124 ]] && echo ", after $seconds s"))"
            grep -A1 'panicked at' "$log" | head -4 | sed 's/^/        /' || true
        fi
    done < <("$binary" --list 2>/dev/null | sed -n 's/: test$//p')
    rm -f "$log"
}

if [[ "${1:-}" == "--each" ]]; then
    each_test "${2:?"--each needs a test binary"}" "${3:-60}" verbose
    echo "$failed tests failed"
    [[ $failed -eq 0 ]]
    exit
fi

if [[ "${1:-}" == "--cuda" ]]; then
    dir=${2:?"--cuda needs the folder of staged binaries"}
    seconds=${3:-90}
    export RUMUS_TEST_DEVICE=cuda RUMUS_REQUIRE_CUDA=1
    unset RUMUS_REQUIRE_GPU_TIMING RUMUS_REQUIRE_COOPMAT
    wheels=$(python3 -c "import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))" 2>/dev/null || true)
    if [[ -n "$wheels" && -d "$wheels/nvidia/cu13/lib" ]]; then
        export LD_LIBRARY_PATH="$wheels/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    total=0
    for binary in "$dir"/*; do
        name=$(basename "$binary")
        if [[ ! -f "$binary" || ! -x "$binary" || "$name" == bench_gpu ]]; then
            continue
        fi
        each_test "$binary" "$seconds"
        echo "$([[ $failed -eq 0 ]] && echo ok || echo FAILED)      $name: $failed failed"
        total=$((total + failed))
    done
    echo "$total tests failed against CUDA"
    [[ $total -eq 0 ]]
    exit
fi

dir=${1:?"usage: tests/gpu_suite.sh --stage DIR | DIR [SECONDS] | --cuda DIR [SECONDS] | --each BINARY [SECONDS]"}
seconds=${2:-300}
mkdir -p "$dir/logs"
failed=0
for binary in "$dir"/*; do
    name=$(basename "$binary")
    if [[ ! -f "$binary" || ! -x "$binary" || "$name" == bench_gpu ]]; then
        continue
    fi
    log="$dir/logs/$name.log"
    start=$(date +%s)
    status=0
    timeout -k 10 "$seconds" "$binary" --test-threads=1 >"$log" 2>&1 || status=$?
    took=$(($(date +%s) - start))
    summary=$(grep -E '^test result' "$log" | tail -1 || true)
    if [[ $status -eq 0 ]]; then
        echo "ok      $name (${took} s) $summary"
        rm "$log"
    else
        failed=$((failed + 1))
        if [[ $status -eq 124 ]]; then
            echo "TIMEOUT $name after ${seconds} s: $log"
        else
            echo "FAILED  $name (${took} s, exit $status): $log"
        fi
        grep -E '^test .* FAILED$|panicked at' "$log" | head -5 | sed 's/^/        /' || true
    fi
done
echo "$failed binaries failed"
[[ $failed -eq 0 ]]
