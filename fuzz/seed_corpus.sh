#!/usr/bin/env bash
# Writes a seed corpus for the trace_reader fuzz target: small generated traces of every
# workload, and bare chunk payloads cut out of them.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=fuzz/corpus/trace_reader
mkdir -p "$corpus"
cargo build -q --release --bin cachescope
for w in stream strided random pointer-chase false-sharing producer-consumer stencil; do
  ./target/release/cachescope trace gen "$w" -o "$corpus/$w.cstrace" --threads 2 --size 2K --iterations 1 >/dev/null
  # The first chunk frame's payload (after the 16-byte file header and the header frame).
  python3 - "$corpus/$w.cstrace" "$corpus/$w.chunk" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
off = 16
hlen = struct.unpack_from('<I', data, off)[0]
off += 8 + hlen
clen = struct.unpack_from('<I', data, off)[0]
open(sys.argv[2], 'wb').write(data[off + 8: off + 8 + clen])
PY
done
