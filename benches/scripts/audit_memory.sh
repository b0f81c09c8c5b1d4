#!/usr/bin/env bash
# Peak memory and wall time of `cachescope audit` (default eleven layouts) and, for scale,
# `cachescope simulate`, on generated traces that touch more and more data.
#
#   bash benches/scripts/audit_memory.sh [SIZES...]      (default: 16M 64M 256M 1G)
#
# Per size: a 2-thread stream over SIZE in one barrier segment (every line used by one
# thread), a 4-thread pointer chase over SIZE/4 (lines touched in scattered order), and a
# 2-thread array of SIZE/64 that both threads update at random places (every line shared and
# written: counted in detail in every layout, and a finding on every line). Prints
# a Markdown table; memory is the maximum resident set size from GNU time. The 1G stream has
# 402 M events and takes minutes. CARGO_TARGET_DIR is honoured; CACHESCOPE overrides the
# binary (to compare two builds).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${CACHESCOPE:-}" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
fi
cs=${CACHESCOPE:-${CARGO_TARGET_DIR:-$root/target}/release/cachescope}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16M 64M 256M 1G)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure CMD...: "seconds MB" of one run (exit 1 of audit, findings, is not a failure).
measure() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || [ $? -eq 1 ] || {
    cat "$work/err" >&2
    return 1
  }
  # (GNU time writes "Command exited with non-zero status 1" first when the audit finds some.)
  tail -n 1 "$work/time" | awk '{printf "%s %.0f", $1, $2 / 1024}'
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $($cs --version)"
echo
echo "| trace | events | audit s | audit MB | simulate s | simulate MB |"
echo "|---|---:|---:|---:|---:|---:|"
for size in "${sizes[@]}"; do
  bytes=$(numfmt --from=iec "$size")
  for spec in "stream 2 $bytes" "pointer-chase 4 $((bytes / 4))" "random 2 $((bytes / 64))"; do
    read -r workload threads wsize <<<"$spec"
    t="$work/t.cstrace"
    events=$("$cs" trace gen "$workload" --threads "$threads" --size "$wsize" --iterations 1 -o "$t" |
      sed -E 's/.*thread\(s\), ([0-9,]+) events.*/\1/')
    read -r as am <<<"$(measure "$cs" audit "$t")"
    read -r ss sm <<<"$(measure "$cs" simulate "$t" --machine ivybridge-4c)"
    echo "| $workload $(numfmt --to=iec "$wsize"), $threads threads | $events | $as | $am | $ss | $sm |"
    rm -f "$t"
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
