# Shared helpers of the measurement scripts in benches/scripts/ (sourced, not run).

# best REPS CMD...: the best wall time in seconds of REPS runs of CMD (output discarded);
# the best of several runs filters out the noise of a shared VM.
best() {
  local reps=$1
  shift
  local b=999999
  for _ in $(seq "$reps"); do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    e=$(date +%s.%N)
    b=$(echo "$b $s $e" | awk '{t=$3-$2; print (t<$1)?t:$1}')
  done
  echo "$b"
}
