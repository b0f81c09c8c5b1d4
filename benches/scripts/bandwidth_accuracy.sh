#!/usr/bin/env bash
# Runtime-estimate accuracy of `cachescope bandwidth` (issue #6, thesis Table 4.4): the Jacobi
# examples, naive and temporally blocked, with 1 and 2 threads, estimated with a calibrated
# model of this machine vs. the measured wall time of their uninstrumented -O2 builds.
#
#   bash benches/scripts/bandwidth_accuracy.sh [HOST.toml] [REPEATS] [N] [ITERS]
#
# HOST.toml: a model written by `cachescope calibrate --bandwidth -o HOST.toml` (calibrated here
# first when not given). N (default 2048: two 32 MiB grids, twice this VM's 32 MiB L3) and
# ITERS (default 12; the blocked version does all of them in one pass, TB = ITERS, B = 16).
# Per run: wall time of the native build, best of REPEATS (default 5) with OMP_NUM_THREADS set
# and threads bound to cores; the instrumented build recorded once; `cachescope bandwidth
# --machine HOST.toml --json`. error % = (estimate - measured) / measured. Memory bytes are the
# summed demand of the `*-mem` paths (read + write).
set -euo pipefail
model=${1:-}
reps=${2:-5}
n=${3:-2048}
iters=${4:-12}
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
source "$root/benches/scripts/lib.sh"
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="$root/target/release/cachescope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z "$model" ]]; then
  model="$work/host.toml"
  "$cs" calibrate --bandwidth -o "$model" >&2
fi
for p in jacobi_naive jacobi_blocked; do
  gcc -O2 -g -fopenmp -o "$work/$p-native" "$root/examples/$p.c"
  "$cs" cc -O2 -g -fopenmp -o "$work/$p" "$root/examples/$p.c"
done
export OMP_PROC_BIND=true
printf '%-15s %7s %10s %10s %8s %14s  %s\n' program threads measured estimated error mem-bytes "adds most time / dominant data path"
for threads in 1 2; do
  for p in jacobi_naive jacobi_blocked; do
    args=("$n" "$iters")
    [[ $p == jacobi_blocked ]] && args+=(16 "$iters")
    measured=$(OMP_NUM_THREADS=$threads best "$reps" "$work/$p-native" "${args[@]}")
    OMP_NUM_THREADS=$threads "$cs" record -o "$work/$p-$threads.trace" -- "$work/$p" "${args[@]}" >/dev/null 2>&1
    "$cs" bandwidth "$work/$p-$threads.trace" --machine "$model" --json "$work/$p-$threads.json" >/dev/null
    python3 - "$work/$p-$threads.json" "$p" "$threads" "$measured" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
est = a["program"]["estimated_seconds"]
measured = float(sys.argv[4])
mem = sum(s["demand"]["volume"] for s in a["series"]
          if s["path"].endswith("-mem") and s["direction"] in ("read", "write"))
err = (est - measured) / measured * 100
p = a["program"]
print(f'{sys.argv[2]:<15} {sys.argv[3]:>7} {measured:>9.3f}s {est:>9.3f}s {err:>+7.1f}% {mem:>14,}  '
      f'{p["dominant"] or "nothing"} / {p["dominant_path"] or "none"}')
EOF
  done
done
