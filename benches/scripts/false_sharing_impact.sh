#!/usr/bin/env bash
# False-sharing impact check: does the audit's estimated cost (events x calibrated tau) match
# the measured runtime difference between a flagged example and its fixed twin?
#
#   bash benches/scripts/false_sharing_impact.sh [ROUNDS] [REPEATS]
#
# Environment: CAL_REPS (repetitions per mode of each calibration, default 5), OMP_PROC_BIND
# (default true, see below).
#
# The false-sharing cost tau measured on a shared VM changes several-fold within seconds, so a
# tau calibrated once does not describe the machine state of native runs made a minute later.
# This script therefore measures in ROUNDS rounds (default 5); each round is
#   1. `cachescope calibrate --false-sharing --repetitions CAL_REPS --json`: tau and clock now;
#   2. for every pair, the flagged and the fixed program natively (-O2, 2 threads), REPEATS
#      times each (default 5), alternating flagged, fixed, flagged, ..., best time of each;
#   3. per pair: measured diff = flagged - fixed, estimated cost = events x this round's tau /
#      threads / this round's clock, error % = (estimate - measured) / measured.
# The events come from one recording per pair, made before the rounds: the flagged program
# recorded (`cachescope record`, build `CC="cachescope cc" make`) with the same arguments and
# audited with `cachescope audit --machine ivybridge-4c --config (thresholds 0) --json -`; the
# events are the sum over its false-sharing findings (with 64-byte lines, as in the
# calibration; the thresholds are 0 so that every object's estimate counts, also one below the
# default thresholds). Pluto's event count does not depend on tau.
# cost_cycles = events x tau is summed over all threads (each thread pays for its own events),
# while the runtime difference is wall time with the threads running in parallel, so the cost
# is divided by the thread count; the calibration defines tau the same way (extra thread time
# per event).
#
# Threads are bound to CPUs (OMP_PROC_BIND=true unless set otherwise) in the native runs and
# the recordings: the calibration pins its two threads to two CPUs, and unbound OpenMP threads
# on a busy VM often share one CPU, where false sharing costs nothing and dynamic schedules
# hand out long runs of rows to one thread.
#
# Output: per-round rows (all of them), then per pair the medians over the rounds and the
# spread (min..max) of the per-round error. The load average is printed before and after.
# prime_sieve is flagged too but has no fixed twin, so it is left out. The arguments make the
# native runs last about 0.05-1 s.
set -euo pipefail
rounds=${1:-5}
reps=${2:-5}
cal_reps=${CAL_REPS:-5}
threads=2
for v in "$rounds" "$reps" "$cal_reps"; do
  if ! [[ "$v" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS>=1] [REPEATS>=1] (CAL_REPS>=1 in the environment); got '$v'" >&2
    exit 2
  fi
done
root=$(cd "$(dirname "$0")/../.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
cs="${CARGO_TARGET_DIR:-$root/target}/release/cachescope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C "$root/examples" O="$work/native" CC=gcc CFLAGS="-O2 -fopenmp" >/dev/null
make -s -C "$root/examples" O="$work/inst" CC="$cs cc" >/dev/null
export OMP_NUM_THREADS=$threads
export OMP_PROC_BIND=${OMP_PROC_BIND:-true}
# No thresholds: every recorded-layout object's estimated cost counts, not only the ones that
# would fail the audit.
printf 'min_events = 0\nmin_time_share = 0.0\nmin_line_fraction = 0.0\n' >"$work/audit.toml"

# flagged program and arguments | fixed program and arguments (same work)
pairs=(
  "false_sharing 200000|false_sharing_padded 200000"
  "accumulators_packed 10000000|accumulators_padded 10000000"
  # chunk 16 also hands out 16x fewer chunks: the difference includes scheduling overhead
  "spmv_dynamic 1|spmv_dynamic 16"
  # same schedule, y padded to one line per row (128 KiB with 2000 rows, stays in L2)
  "spmv_dynamic 1 2000 500|spmv_dynamic_padded 1 2000 500"
  # control, no false sharing on either side: what the padded layout itself costs
  "spmv_dynamic 16 2000 500|spmv_dynamic_padded 16 2000 500"
)

# time_once CMD...: wall time of one run of CMD in seconds (output discarded); fails if CMD does.
time_once() {
  local s e
  s=$(date +%s.%N)
  if ! "$@" >/dev/null 2>&1; then
    echo "error: $* failed" >&2
    return 1
  fi
  e=$(date +%s.%N)
  awk -v s="$s" -v e="$e" 'BEGIN { printf "%.6f\n", e - s }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Events per pair: one recording of the flagged program.
events=()
for p in "${pairs[@]}"; do
  flagged=${p%%|*}
  # shellcheck disable=SC2086
  "$cs" record -o "$work/t.cstrace" -- "$work/inst/"$flagged >/dev/null 2>&1
  rc=0
  "$cs" audit --machine ivybridge-4c --config "$work/audit.toml" --json - "$work/t.cstrace" \
    >"$work/audit.json" || rc=$?
  if [[ $rc -gt 1 ]]; then
    echo "error: audit of $flagged failed (exit $rc)" >&2
    exit 2
  fi
  events+=("$(python3 - "$work/audit.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(sum(x["events"] for x in r["findings"] if x["kind"] == "false_sharing"))
EOF
)")
  rm -f "$work/t.cstrace"
done

# Rounds: calibration, then every pair natively; one line per (round, pair) in rows.tsv.
: >"$work/rows.tsv"
for r in $(seq "$rounds"); do
  "$cs" calibrate --false-sharing --repetitions "$cal_reps" --json "$work/cal.json" >/dev/null
  read -r tau ghz < <(python3 - "$work/cal.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
print(c["tau_cycles"], c["frequency"]["ghz"])
EOF
)
  for i in "${!pairs[@]}"; do
    p=${pairs[$i]}
    flagged=${p%%|*}
    fixed=${p#*|}
    tf=999999
    tx=999999
    for _ in $(seq "$reps"); do
      # shellcheck disable=SC2086
      t=$(time_once "$work/native/"$flagged)
      tf=$(awk -v a="$tf" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
      # shellcheck disable=SC2086
      t=$(time_once "$work/native/"$fixed)
      tx=$(awk -v a="$tx" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$tau" "$ghz" "$i" "$tf" "$tx" "${events[$i]}" \
      >>"$work/rows.tsv"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

printf '%s\n' "${pairs[@]}" >"$work/pairs.txt"
python3 - "$work/rows.tsv" "$work/pairs.txt" "$threads" "$reps" "$cal_reps" "$rounds" \
  "$load_before" "$load_after" "$OMP_PROC_BIND" <<'EOF'
import statistics, sys

rows_file, pairs_file, threads, reps, cal_reps, rounds, load0, load1, bind = sys.argv[1:]
threads = int(threads)
pairs = [l.rstrip("\n").replace("|", " vs ") for l in open(pairs_file) if l.strip()]
rows = []
for line in open(rows_file):
    r, tau, ghz, i, tf, tx, ev = line.split("\t")
    tau, ghz, tf, tx, ev = float(tau), float(ghz), float(tf), float(tx), int(ev)
    diff = (tf - tx) * 1e3
    est = ev * tau / threads / (ghz * 1e9) * 1e3
    # No events: no estimate to check (the control pair).
    err = (est - diff) / diff * 100 if diff != 0 and ev > 0 else float("nan")
    rows.append(dict(round=int(r), tau=tau, ghz=ghz, pair=int(i), tf=tf, tx=tx, ev=ev,
                     diff=diff, est=est, err=err))

taus = sorted({(x["round"], x["tau"]) for x in rows})
tv = [t for _, t in taus]
print(f"{rounds} rounds; each: calibrate --false-sharing (median of {cal_reps} runs per mode), "
      f"then every pair natively, best of {reps} alternating runs each; {threads} threads, "
      f"OMP_PROC_BIND={bind}")
print(f"tau: median {statistics.median(tv):.2f} cycles, {min(tv):.2f}..{max(tv):.2f} "
      f"(per round: {', '.join(f'{t:.2f}' for t in tv)}); clock {rows[0]['ghz']:.3f} GHz")
print(f"load average before: {load0}; after: {load1}")
print()
print("Per pair, medians over the rounds (error spread: min..max of the per-round errors):")
print()
print("| pair | flagged s | fixed s | measured diff ms | events | est. cost ms | error % | error min..max % |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for i, name in enumerate(pairs):
    p = [x for x in rows if x["pair"] == i]
    med = lambda k: statistics.median(x[k] for x in p)
    errs = [x["err"] for x in p if x["err"] == x["err"]]
    spread = (f"{statistics.median(errs):+.0f} | {min(errs):+.0f}..{max(errs):+.0f}" if errs
              else "n/a | n/a")
    print(f"| {name} | {med('tf'):.4f} | {med('tx'):.4f} | {med('diff'):.2f} | {p[0]['ev']} | "
          f"{med('est'):.2f} | {spread} |")
print()
print("Every round:")
print()
print("| round | tau cycles | pair | flagged s | fixed s | measured diff ms | events | est. cost ms | error % |")
print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
for x in rows:
    print(f"| {x['round']} | {x['tau']:.2f} | {pairs[x['pair']]} | {x['tf']:.4f} | {x['tx']:.4f} | "
          f"{x['diff']:.2f} | {x['ev']} | {x['est']:.2f} | "
          f"{'n/a' if x['err'] != x['err'] else format(x['err'], '+.0f')} |")
print()
print(f"measured diff = flagged - fixed wall time; est. cost = events x that round's tau / {threads} "
      "threads / clock; error % = (est - measured) / measured (n/a without events).")
EOF
