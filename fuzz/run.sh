#!/bin/bash
# Runs the fuzz targets one after the other, at low priority, and prints one
# summary line per run (for docs/fuzzing.md).
#   fuzz/run.sh [seconds per target, default 600] [target...]
# Needs cargo-fuzz (`cargo install cargo-fuzz`); on stable Rust it sets
# RUSTC_BOOTSTRAP=1 for the sanitizer flags cargo-fuzz passes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
secs="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(gres_conf fake_gpus stepd_wire gpu_freq hostlist health_log)
export RUSTC_BOOTSTRAP=1
mkdir -p logs
nice -n 19 cargo fuzz build -O >/dev/null 2>&1 || { echo "cargo fuzz build failed" >&2; exit 1; }
for t in "${targets[@]}"; do
    mkdir -p "work/$t"
    log="logs/$t-$(date -u +%Y%m%dT%H%M%SZ).log"
    start=$(date -u +%Y-%m-%dT%H:%MZ)
    t0=$SECONDS
    nice -n 19 cargo fuzz run -O "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    took=$((SECONDS - t0))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
    corp=$(echo "$last" | grep -o 'corp: [0-9]*' | grep -o '[0-9]*')
    if [ $rc -eq 0 ]; then result="no crash, panic, leak or timeout"; else result="FAILED (rc $rc, see $log)"; fi
    echo "| $start | $t | ${took} s | ${execs:-?} | $result | cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} |"
done
