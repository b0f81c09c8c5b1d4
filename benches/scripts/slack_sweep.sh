#!/usr/bin/env bash
# Slack sweep of the parallel engine: for synthetic and recorded example traces, each slack's
# run time and throughput, how many quanta ran in lockstep, and the deviation of every counter
# from the exact engine.
#
#   bash benches/scripts/slack_sweep.sh [REPEATS] [HOST_THREADS] [SLACKS...]
#
# REPEATS (default 3): runs per cell, the best time is kept. HOST_THREADS (default 2): the
# parallel engine's --threads. SLACKS (default 1 100 1000 10000 100000).
# Synthetic traces (`trace gen`, 4 threads, time unit: events): stencil, stream, false-sharing
# and producer-consumer. Recorded traces: every example, 2 OpenMP threads, with the arguments
# of tests/examples_record.rs (time unit: instructions).
# Machine: ivybridge-4c. Output: a Markdown table on stdout.
# Columns: time s (best), M acc/s (simulated accesses / best time), lockstep (quanta run in
# lockstep / all quanta), L1 misses and coherence misses as relative deviation from the exact
# engine, and the number of report counters that differ from the exact engine's.
set -euo pipefail
reps=${1:-3}
host=${2:-2}
shift $(($# < 2 ? $# : 2))
slacks=("$@")
[[ ${#slacks[@]} -gt 0 ]] || slacks=(1 100 1000 10000 100000)
root=$(cd "$(dirname "$0")/../.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="$root/target/release/cachescope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

"$cs" trace gen stencil --threads 4 --size 4M --iterations 2 -o "$work/stencil4.cstrace" >/dev/null
"$cs" trace gen stream --threads 4 --size 4M --iterations 2 -o "$work/stream4.cstrace" >/dev/null
"$cs" trace gen false-sharing --threads 4 --size 64K --iterations 4 -o "$work/fs4.cstrace" >/dev/null
"$cs" trace gen producer-consumer --threads 4 --size 64K --iterations 4 -o "$work/pc4.cstrace" >/dev/null

make -s -C "$root/examples" O="$work/inst" CC="$cs cc" >/dev/null
export OMP_NUM_THREADS=2
while read -r name args; do
  # shellcheck disable=SC2086
  "$cs" record -o "$work/${name}${args// /_}.cstrace" -- "$work/inst/$name" $args >/dev/null 2>&1
done <<'EOF'
jacobi_naive 128 4
jacobi_blocked 128 4
false_sharing 200
false_sharing_padded 200
prime_sieve 200000
spmv_dynamic 1 5000 1
spmv_dynamic 16 5000 1
accumulators_packed 20000
accumulators_padded 20000
producer_consumer 4 1024
mutex_counter 2000 2
latent_false_sharing 200 0
EOF

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); best of $reps; --threads $host; machine ivybridge-4c"
echo
echo "| trace | slack | time s | M acc/s | lockstep | L1 misses Δ% | coherence misses Δ% | counters ≠ |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for t in "$work"/*.cstrace; do
  name=$(basename "$t")
  "$cs" simulate "$t" --machine ivybridge-4c --json "$work/exact.json" >/dev/null
  te=$(best "$reps" "$cs" simulate "$t" --machine ivybridge-4c --json /dev/null)
  python3 - "$name" "$te" "$work/exact.json" <<'PY'
import json, sys
name, t, f = sys.argv[1], float(sys.argv[2]), sys.argv[3]
r = json.load(open(f))
acc = sum(th["accesses"] for th in r["threads"])
print(f"| {name} | exact | {t:.3f} | {acc / t / 1e6:.2f} | | | | |")
PY
  for s in "${slacks[@]}"; do
    "$cs" simulate "$t" --machine ivybridge-4c --engine parallel --slack "$s" --threads "$host" \
      --json "$work/par.json" >/dev/null
    tp=$(best "$reps" "$cs" simulate "$t" --machine ivybridge-4c --engine parallel --slack "$s" \
      --threads "$host" --json /dev/null)
    python3 - "$name" "$s" "$tp" "$work/exact.json" "$work/par.json" <<'PY'
import json, sys
name, slack, t = sys.argv[1], sys.argv[2], float(sys.argv[3])
e, p = (json.load(open(f)) for f in sys.argv[4:6])
q = p.pop("quanta", {"total": 0, "lockstep": 0})
for r in (e, p):
    r.pop("engine", None)
    r.pop("slack", None)
def leaves(x, at=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{at}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{at}[{i}]")
    else:
        yield at, x
le, lp = dict(leaves(e)), dict(leaves(p))
differ = sum(1 for k in le if le[k] != lp.get(k))
def dev(a, b):
    return "-" if a == 0 and b == 0 else f"{abs(a - b) / max(a, 1) * 100:.2f}"
m = lambda r: r["levels"][0]["misses"]
l1 = lambda r: sum(m(r).values())
coh = lambda r: m(r)["coherence_true"] + m(r)["coherence_false"]
acc = sum(th["accesses"] for th in p["threads"])
print(f"| {name} | {slack} | {t:.3f} | {acc / t / 1e6:.2f} | {q['lockstep']}/{q['total']} "
      f"| {dev(l1(e), l1(p))} | {dev(coh(e), coh(p))} | {differ}/{len(le)} |")
PY
  done
done
