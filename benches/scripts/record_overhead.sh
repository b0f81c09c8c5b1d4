#!/usr/bin/env bash
# Recording overhead: wall time of `cachescope record` (instrumented build, shim writing the
# trace) vs the native -O2 build, per example, with 1 and 2 threads; plus bytes per access.
#
#   bash benches/scripts/record_overhead.sh [gcc|clang-14] [REPEATS]
#
# Prints a Markdown table and the geometric mean of the slowdowns. Each time is the best of
# REPEATS runs (default 3), which filters out the noise of a shared VM.
set -euo pipefail
cc=${1:-gcc}
reps=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="$root/target/release/cachescope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
wrap="$cs cc --compiler $cc"
make -s -C "$root/examples" O="$work/native" CC="$cc" >/dev/null
make -s -C "$root/examples" O="$work/inst" CC="$wrap" >/dev/null

# name and arguments (the examples' defaults, sized to run ~0.1-1 s natively)
cases=(
  "jacobi_naive"
  "jacobi_blocked"
  "false_sharing"
  "false_sharing_padded"
  "prime_sieve"
  "spmv_dynamic 1"
  "spmv_dynamic 16"
  "accumulators_packed"
  "accumulators_padded"
  "producer_consumer"
  "mutex_counter"
  "latent_false_sharing"
)

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

echo "| example | threads | native s | record s | slowdown | accesses | bytes/access |"
echo "|---|---:|---:|---:|---:|---:|---:|"
logsum=0; n=0
for c in "${cases[@]}"; do
  set -- $c
  name=$1; shift
  for t in 1 2; do
    export OMP_NUM_THREADS=$t
    nat=$(best "$reps" "$work/native/$name" "$@")
    rec=$(best "$reps" "$cs" record -o "$work/t.cstrace" -- "$work/inst/$name" "$@")
    info=$("$cs" trace info --json - "$work/t.cstrace")
    acc=$(echo "$info" | grep -m1 '"accesses"' | tr -dc '0-9')
    bytes=$(echo "$info" | grep -m1 '"file_bytes"' | tr -dc '0-9')
    slow=$(echo "$rec $nat" | awk '{printf "%.2f", $1/$2}')
    bpa=$(echo "$bytes $acc" | awk '{printf "%.3f", ($2>0)?$1/$2:0}')
    printf "| %s %s | %d | %.3f | %.3f | %s | %s | %s |\n" "$name" "$*" "$t" "$nat" "$rec" "$slow" "$acc" "$bpa"
    logsum=$(echo "$logsum $slow" | awk '{print $1+log($2)}')
    n=$((n+1))
  done
done
echo
echo "geometric mean slowdown ($cc, $n runs): $(echo "$logsum $n" | awk '{printf "%.2f", exp($1/$2)}')x"
