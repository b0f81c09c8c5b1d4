#!/usr/bin/env bash
# Recording overhead: wall time of `cachescope record` (instrumented build, shim writing the
# trace) vs the native -O2 build, per example, with 1 and 2 threads; plus bytes per access.
#
#   bash benches/scripts/record_overhead.sh [gcc|clang-14] [REPEATS]
#
# Prints a Markdown table and the geometric means. Each time is the best of REPEATS runs
# (default 3), which filters out the noise of a shared VM; the load average is printed before
# and after, since a loaded machine inflates the record times most (the writer thread runs at
# the lowest priority, see docs/tracer.md "Overhead").
#
# Columns: `instrumented s` is the instrumented build run without recording (every access and
# basic block still calls into the shim, which returns at once): the floor of any recording.
# `record CPU s` is the user+system time of the recorded run, all threads including the
# writer. CACHESCOPE_SHIM selects another shim build (a path ending in libcachescope_shim.so,
# e.g. to compare two versions); CARGO_TARGET_DIR is honoured.
set -euo pipefail
cc=${1:-gcc}
reps=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="${CARGO_TARGET_DIR:-$root/target}/release/cachescope"
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

# best REPS CMD...: "WALL CPU", the best wall time and the best user+system time (seconds) of
# REPS runs of CMD (output discarded).
best() {
  local reps=$1
  shift
  local bw=999999 bc=999999 t w u s
  for _ in $(seq "$reps"); do
    t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 ) || {
      rc=$?
      echo "warning: exit status $rc from: $*" >&2
    }
    read -r w u s <<<"$t"
    bw=$(echo "$bw $w" | awk '{print ($2<$1)?$2:$1}')
    bc=$(echo "$bc $u $s" | awk '{c=$2+$3; print (c<$1)?c:$1}')
  done
  echo "$bw $bc"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
echo
echo "| example | threads | native s | instrumented s | record s | record CPU s | slowdown | floor | accesses | bytes/access |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
logsum=0; logfloor=0; n=0
for c in "${cases[@]}"; do
  set -- $c
  name=$1; shift
  for t in 1 2; do
    export OMP_NUM_THREADS=$t
    read -r nat _ <<<"$(best "$reps" "$work/native/$name" "$@")"
    read -r ins _ <<<"$(best "$reps" "$work/inst/$name" "$@")"
    read -r rec cpu <<<"$(best "$reps" "$cs" record -o "$work/t.cstrace" -- "$work/inst/$name" "$@")"
    info=$("$cs" trace info --json - "$work/t.cstrace")
    # Here-strings, not `echo | grep -m1`: grep leaving early would kill echo with SIGPIPE,
    # which `pipefail` turns into the end of the script.
    acc=$(grep -m1 '"accesses"' <<<"$info" | tr -dc '0-9')
    bytes=$(grep -m1 '"file_bytes"' <<<"$info" | tr -dc '0-9')
    slow=$(echo "$rec $nat" | awk '{printf "%.2f", $1/$2}')
    floor=$(echo "$ins $nat" | awk '{printf "%.2f", $1/$2}')
    bpa=$(echo "$bytes $acc" | awk '{printf "%.3f", ($2>0)?$1/$2:0}')
    printf "| %s %s | %d | %.3f | %.3f | %.3f | %.3f | %s | %s | %s | %s |\n" \
      "$name" "$*" "$t" "$nat" "$ins" "$rec" "$cpu" "$slow" "$floor" "$acc" "$bpa"
    logsum=$(echo "$logsum $slow" | awk '{print $1+log($2)}')
    logfloor=$(echo "$logfloor $floor" | awk '{print $1+log($2)}')
    n=$((n+1))
  done
done
echo
echo "geometric mean slowdown ($cc, $n runs): $(echo "$logsum $n" | awk '{printf "%.2f", exp($1/$2)}')x"
echo "geometric mean floor (instrumented, not recording): $(echo "$logfloor $n" | awk '{printf "%.2f", exp($1/$2)}')x"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
