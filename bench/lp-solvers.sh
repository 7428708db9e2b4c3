#!/usr/bin/env bash
# The LP analysis' two candidate solvers on the same programs: microlp (pure Rust,
# what lockstep uses) and HiGHS (C++, the `highs` crate). Prints per program its
# size, each solver's median time of 5 solves and both optima (they must agree).
#
#   bench/lp-solvers.sh [NETWORK.toml...]   (default: examples/reference/*.toml)
#
# Needs cmake, g++ and libclang-dev for HiGHS (apt-get install cmake libclang-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    files=(examples/reference/*.toml)
fi
for tool in cmake g++; do
    command -v "$tool" >/dev/null || { echo "lp-solvers: $tool is missing (apt-get install cmake g++ libclang-dev)" >&2; exit 3; }
done
cargo build --quiet --release --manifest-path bench/lp-solvers/Cargo.toml
bench/lp-solvers/target/release/lp-solvers "${files[@]}"
