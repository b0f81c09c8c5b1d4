#!/usr/bin/env bash
# The main job end to end: `cachescope demo`, reports in ./demo-out (installs missing system
# packages first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
cargo run --release --locked --bin cachescope -- demo --out demo-out "$@"
