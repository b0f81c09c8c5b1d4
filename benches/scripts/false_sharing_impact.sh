#!/usr/bin/env bash
# False-sharing impact check: does the audit's estimated cost (events x calibrated tau) match
# the measured runtime difference between a flagged example and its fixed twin?
#
#   bash benches/scripts/false_sharing_impact.sh [CAL.toml] [REPEATS]
#
# CAL.toml: a model written by `cachescope calibrate --false-sharing -o CAL.toml` (calibrated
# here first when not given). For each pair, with 2 threads (OMP_NUM_THREADS=2):
#   * native -O2 wall time of the flagged and the fixed program, best of REPEATS (default 5);
#   * the flagged program recorded (`cachescope record`, build `CC="cachescope cc" make`) with
#     the same arguments, audited with `cachescope audit --machine CAL.toml --config (thresholds 0) --json -`;
#   * estimated cost = sum of the false-sharing findings' cost_cycles / threads / GHz (seconds),
#     with the audit's thresholds set to 0 so that every object's estimate counts.
# cost_cycles is summed over all threads (each thread pays for its own events), while the
# runtime difference is wall time with the threads running in parallel, so the cost is divided
# by the thread count; the calibration defines tau the same way (extra thread time per event).
# error % = (estimate - measured) / measured.
# prime_sieve is flagged too but has no fixed twin, so it is left out. The arguments make the
# native runs last about 0.1-1 s, long enough to measure the difference above the noise.
set -euo pipefail
cal=${1:-}
reps=${2:-5}
threads=2
root=$(cd "$(dirname "$0")/../.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="$root/target/release/cachescope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z "$cal" ]]; then
  cal="$work/cal.toml"
  "$cs" calibrate --false-sharing -o "$cal" >&2
fi
ghz=$(awk -F'= *' '/^\[bandwidth\]/{b=1; next} /^\[/{b=0} b && $1 ~ /^ghz/{print $2; exit}' "$cal")
tau=$(awk -F'= *' '/^\[bandwidth\]/{b=1; next} /^\[/{b=0} b && $1 ~ /^false_sharing_penalty_cycles/{print $2; exit}' "$cal")
if [[ -z "$ghz" || -z "$tau" ]]; then
  echo "error: $cal has no bandwidth.ghz or bandwidth.false_sharing_penalty_cycles" >&2
  exit 2
fi
make -s -C "$root/examples" O="$work/native" CC=gcc CFLAGS="-O2 -fopenmp" >/dev/null
make -s -C "$root/examples" O="$work/inst" CC="$cs cc" >/dev/null
export OMP_NUM_THREADS=$threads
# No thresholds: every recorded-layout object's estimated cost counts, not only the ones that
# would fail the audit (spmv_dynamic's is below the default time-share threshold).
printf 'min_events = 0\nmin_time_share = 0.0\nmin_line_fraction = 0.0\n' >"$work/audit.toml"

# flagged program and arguments | fixed program and arguments (same work)
pairs=(
  "false_sharing 200000|false_sharing_padded 200000"
  "accumulators_packed 10000000|accumulators_padded 10000000"
  "spmv_dynamic 1|spmv_dynamic 16"
)

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

echo "tau = $tau cycles at $ghz GHz ($cal); $threads threads; best of $reps native runs"
echo
echo "| pair | flagged s | fixed s | measured diff ms | events | est. cost ms | error % |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for p in "${pairs[@]}"; do
  flagged=${p%%|*}
  fixed=${p#*|}
  # shellcheck disable=SC2086
  tf=$(best "$reps" "$work/native/"$flagged)
  # shellcheck disable=SC2086
  tx=$(best "$reps" "$work/native/"$fixed)
  # shellcheck disable=SC2086
  "$cs" record -o "$work/t.cstrace" -- "$work/inst/"$flagged >/dev/null 2>&1
  rc=0
  "$cs" audit --machine "$cal" --config "$work/audit.toml" --json - "$work/t.cstrace" >"$work/audit.json" || rc=$?
  if [[ $rc -gt 1 ]]; then
    echo "error: audit of $flagged failed (exit $rc)" >&2
    exit 2
  fi
  read -r events cycles < <(python3 - "$work/audit.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
f = [x for x in r["findings"] if x["kind"] == "false_sharing"]
print(sum(x["events"] for x in f), sum(x["cost_cycles"] for x in f))
EOF
)
  echo "$tf $tx $events $cycles" | awk -v a="$flagged" -v b="$fixed" -v ghz="$ghz" -v n="$threads" '{
    diff = ($1 - $2) * 1e3
    est = $4 / n / (ghz * 1e9) * 1e3
    err = (diff != 0) ? (est - diff) / diff * 100 : 0
    printf "| %s vs %s | %.4f | %.4f | %.2f | %d | %.2f | %+.0f |\n", a, b, $1, $2, diff, $3, est, err
  }'
done
echo
echo "measured diff = flagged - fixed wall time; est. cost = sum of cost_cycles of the recorded-layout"
echo "findings / $threads threads / clock; error % = (est - measured) / measured."
