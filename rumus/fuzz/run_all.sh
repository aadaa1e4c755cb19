#!/usr/bin/env bash
# Runs every fuzz target at once, one libFuzzer job each, and writes a one-line summary per
# target (executions, findings, corpus size) to OUT/summary.txt.
#
#   run_all.sh [SECONDS]                    build (cargo +nightly fuzz build -O
#                                           --debug-assertions), then fuzz SECONDS (600) each
#   run_all.sh --bin-dir DIR [--seconds N] [--out DIR] [--forks N] [--targets "a b"]
#              [--strict-alloc]
#                                           fuzz with binaries built earlier: no cargo needed,
#                                           so DIR can be copied to another x86-64 Linux machine
#   run_all.sh --stage DIR                  build, then put the binaries, seeds, dictionaries
#                                           and this script in DIR, ready to copy elsewhere:
#                                           DIR/run_all.sh --bin-dir DIR/bin --seconds 3600
#
# OUT (default fuzz/runs/<date>) gets corpus/<target>/ (the seeds plus what the fuzzer found
# new), artifacts/<target>/ (crash-*, oom-*, timeout-*: inputs to replay, then to save under
# fuzz/regressions/<target>/), logs/<target>.log and summary.txt.
#
# Every job runs in libFuzzer's fork mode (-fork=N, default 1 process per target; more with
# --forks on a machine with cores to spare) and goes on after a finding, so one run can report
# several. Inputs may be up to 8 MiB (-max_len), enough for huge headers and gzip bombs. A
# process using over 4 GiB (-rss_limit_mb) or an input taking over 30 s (-timeout) is a
# finding. rumus reserves memory for sizes read from files fallibly (an Err when refused), so
# by default a refused allocation returns null as it does outside ASan
# (allocator_may_return_null=1) instead of aborting; with --strict-alloc, any single request
# of 4 GiB or more is a finding too (-malloc_limit_mb), fallible or not. Scratch files of the
# drivers go to /dev/shm when it exists; the safetensors and CSV targets get the tokens of
# their formats from dicts/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seconds=600
bin_dir=""
out=""
stage=""
forks=1
targets=""
max_len=$((8 << 20))
rss_limit_mb=4096
timeout_s=30
malloc_limit_mb=$((1 << 20)) # 1 TiB: past what ASan can allocate, so never hit
asan_options=allocator_may_return_null=1

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --bin-dir) bin_dir=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --stage) stage=$2; shift 2 ;;
        --forks) forks=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --strict-alloc) malloc_limit_mb=$rss_limit_mb; asan_options=allocator_may_return_null=0; shift ;;
        -h|--help) usage ;;
        [0-9]*) seconds=$1; shift ;;
        *) echo "run_all.sh: unknown argument $1" >&2; usage 2 ;;
    esac
done

if [[ -z "$bin_dir" ]]; then
    # cargo fuzz runs from the crate that holds fuzz/ (rumus/).
    (cd "$here/.." && cargo +nightly fuzz build -O --debug-assertions)
    bin_dir="$here/target/x86_64-unknown-linux-gnu/release"
fi
if [[ -z "$targets" ]]; then
    if [[ -f "$here/Cargo.toml" ]]; then
        targets=$(sed -n '/^\[\[bin\]\]/,/^name/s/^name = "\(.*\)"/\1/p' "$here/Cargo.toml")
    else
        targets=$(cd "$here/seeds" && for d in */; do echo "${d%/}"; done)
    fi
fi

if [[ -n "$stage" ]]; then
    mkdir -p "$stage/bin"
    for t in $targets; do cp "$bin_dir/$t" "$stage/bin/"; done
    cp -r "$here/seeds" "$here/dicts" "$stage/"
    cp "$0" "$stage/run_all.sh"
    echo "staged $(du -sh "$stage" | cut -f1) in $stage; run there: $stage/run_all.sh --bin-dir $stage/bin --seconds $seconds"
    exit 0
fi

out=${out:-$here/runs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/logs"
scratch_root=/dev/shm
[[ -d $scratch_root && -w $scratch_root ]] || scratch_root=$out
scratch="$scratch_root/rumus-fuzz-scratch-$$"

for t in $targets; do
    [[ -x "$bin_dir/$t" ]] || { echo "run_all.sh: no binary $bin_dir/$t" >&2; exit 1; }
done

# The dictionary of tokens (keys, dtypes, edge-case numbers) a target's format uses.
dict_for() {
    case "$1" in
        checkpoint_loader|checkpoint_structure|weights_loader) echo "$here/dicts/safetensors.dict" ;;
        csv_reader) echo "$here/dicts/csv.dict" ;;
    esac
}

pids=()
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
for t in $targets; do
    mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "$scratch/$t"
    # The first folder receives what the fuzzer finds; the seeds are only read.
    extra=("$out/corpus/$t")
    [[ -d "$here/seeds/$t" ]] && extra+=("$here/seeds/$t")
    dict=$(dict_for "$t")
    [[ -n "$dict" && -f "$dict" ]] && extra+=(-dict="$dict")
    TMPDIR="$scratch/$t" ASAN_OPTIONS="$asan_options${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$bin_dir/$t" \
        -fork="$forks" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
        -max_total_time="$seconds" -max_len="$max_len" \
        -rss_limit_mb="$rss_limit_mb" -malloc_limit_mb="$malloc_limit_mb" -timeout="$timeout_s" \
        -artifact_prefix="$out/artifacts/$t/" \
        "${extra[@]}" > "$out/logs/$t.log" 2>&1 &
    pids+=($!)
done
echo "fuzzing $(echo $targets | wc -w) targets for ${seconds}s each, $forks process(es) each; output in $out"

status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
rm -rf "$scratch"

count() { find "$1" -maxdepth 1 -type f -name "$2" 2>/dev/null | wc -l; }
{
    printf '%-22s %12s %8s %8s %5s %8s %7s\n' target executions exec/s crashes ooms timeouts corpus
    for t in $targets; do
        # Fork mode's last status line: "#N: cov: ... exec/s: R oom/timeout/crash: ...".
        last=$(grep -a '^#[0-9]*: cov:' "$out/logs/$t.log" | tail -1 || true)
        execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<< "$last")
        rate=$(sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p' <<< "$last")
        printf '%-22s %12s %8s %8s %5s %8s %7s\n' "$t" "${execs:-?}" "${rate:-?}" \
            "$(count "$out/artifacts/$t" 'crash-*')" "$(count "$out/artifacts/$t" 'oom-*')" \
            "$(count "$out/artifacts/$t" 'timeout-*')" "$(count "$out/corpus/$t" '*')"
    done
} | tee "$out/summary.txt"
exit $status
