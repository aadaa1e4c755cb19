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

if [[ "${1:-}" == "--each" ]]; then
    binary=${2:?"--each needs a test binary"}
    seconds=${3:-60}
    failed=0
    log=$(mktemp)
    while read -r test; do
        status=0
        timeout -k 5 "$seconds" "$binary" --exact "$test" --test-threads=1 >"$log" 2>&1 || status=$?
        if [[ $status -eq 0 ]]; then
            echo "ok      $test"
        else
            failed=$((failed + 1))
            echo "FAILED  $test (exit $status$([[ $status -eq 124 ]] && echo ", after $seconds s"))"
            grep -A1 'panicked at' "$log" | head -4 | sed 's/^/        /' || true
        fi
    done < <("$binary" --list 2>/dev/null | sed -n 's/: test$//p')
    rm -f "$log"
    echo "$failed tests failed"
    [[ $failed -eq 0 ]]
    exit
fi

dir=${1:?"usage: tests/gpu_suite.sh --stage DIR | DIR [SECONDS] | --each BINARY [SECONDS]"}
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
