#!/usr/bin/env bash
# Runs every test of the workspace (installs missing system packages first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
cargo test --workspace --locked --no-fail-fast
