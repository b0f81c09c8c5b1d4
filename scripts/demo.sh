#!/usr/bin/env bash
# The main job end to end: `cachescope demo`, reports in ./demo-out (installs missing system
# packages first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
# The default members include the recording shim, which `demo` links into the example programs.
cargo build --release --locked
./target/release/cachescope demo --out demo-out "$@"
