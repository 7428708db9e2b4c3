#!/usr/bin/env bash
# Incremental admission benchmark: admit 10,000 shaped flows over 1,000 FIFO
# rate-latency servers (random feed-forward paths of 2-6 hops, seeded), printing the
# time per admission (p50/p99/max; wall clock, and the thread's CPU time, which leaves
# out the time other processes on this shared machine hold the core) and the time of a
# full re-analysis. Targets: <= 1 ms per admission, < 10 s for the full re-analysis.
#
#   bench/admission.sh [--topology pods|flat] [--flows N] [--servers N] [--seed S] [--grid-ps N]
#
# Without arguments it runs the default network with exact arithmetic and with the
# delays propagated downstream rounded up to 1 ps (Admission::set_propagation_grid:
# every bound stays a valid, slightly larger, upper bound), alternating A B A B to
# show the run-to-run spread.
#
# The default topology groups the servers in cells of 10 (paths stay in a cell);
# --topology flat spreads paths over one order of all servers, where everything
# downstream of a path is a large part of the network.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p lockstep-netcalc --example admission_bench
bin="${CARGO_TARGET_DIR:-target}/release/examples/admission_bench"
if [ $# -eq 0 ]; then
    for _ in 1 2; do
        "$bin"
        "$bin" --grid-ps 1
    done
else
    "$bin" "$@"
fi
