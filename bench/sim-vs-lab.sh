#!/usr/bin/env bash
# The simulator against the lab, same scenario, same host, same run of this script:
#   1. measure this host's wake-up latency (lockstep probe timer at the scenario's
#      frame length and the nodes' real-time priority),
#   2. run the scenario in network namespaces (lockstep lab run),
#   3. simulate it with that measured host model and the lab's links (lockstep sim
#      run --host timer.json --links veth --packets: veths behind tc tbf, as the
#      lab builds them),
#   4. simulate it once more with each node's own wake-ups as the lab measured them
#      (--node-hosts: what the model gives when the host is known exactly),
#   5. print each simulation beside the lab (lockstep sim compare): per flow p50, p99, p99.9,
#      jitter (max − min), loss, slips and the Kolmogorov–Smirnov distance between
#      the two latency samples; for time-driven runs, how many on-time packets left
#      some router in another frame in one world than in the other (should be 0).
#
#   sudo bench/sim-vs-lab.sh SCENARIO.toml [SECONDS]   (default 10 s per mode)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), TIMER_SECONDS
# (default 10), PRIORITY (default 50, the scenarios' node priority), PROCESSING (what
# each packet a simulated node receives, and each it sends, costs it; default 3us:
# the lab's FIFO router residence of about 12 us here is a wake-up of about 6 us
# plus a receive and a send), CPUS (when set, the simulated nodes share that many
# CPUs as the lab's nodes share this host's; default: a CPU each — sharing one CPU
# fits line.toml here but makes mesh4's fourteen nodes far later than the lab's),
# KEEP=1 keeps the result directories.
set -euo pipefail

SCENARIO=${1:-}
SECONDS_PER_RUN=${2:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
TIMER_SECONDS=${TIMER_SECONDS:-10}
PRIORITY=${PRIORITY:-50}
PROCESSING=${PROCESSING:-3us}
CPUS_ARG=()
[ -n "${CPUS:-}" ] && CPUS_ARG=(--cpus "$CPUS")

if [ -z "$SCENARIO" ] || [ ! -f "$SCENARIO" ]; then
    echo "usage: $0 SCENARIO.toml [SECONDS]  (e.g. scenarios/line.toml)" >&2; exit 2
fi
case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 SCENARIO.toml [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if [ "$(id -u)" != 0 ]; then
    echo "the lab needs root (network namespaces): run with sudo" >&2; exit 3
fi

OUT=$(mktemp -d /tmp/sim-vs-lab.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

TF=$(sed -n 's/^tf *= *"\([^"]*\)".*/\1/p' "$SCENARIO" | head -1)
TF=${TF:-250us}
echo "# $(date -u +%F), $(uname -r), $(nproc) CPUs, $SCENARIO, ${SECONDS_PER_RUN}s per mode"
echo "# 1. this host's wake-ups: probe timer -i $TF -p $PRIORITY for ${TIMER_SECONDS}s"
"$LOCKSTEP" probe timer -i "$TF" -p "$PRIORITY" -D "${TIMER_SECONDS}s" --json --quiet \
    > "$OUT/timer.json" 2> "$OUT/timer.log" || { cat "$OUT/timer.log" >&2; exit 1; }
echo "# 2. the lab (namespaces, real time)"
"$LOCKSTEP" lab run "$SCENARIO" --duration "${SECONDS_PER_RUN}s" --output "$OUT/lab" \
    --quiet > "$OUT/lab.txt" 2> "$OUT/lab.log" || { cat "$OUT/lab.log" >&2; exit 1; }
echo "# 3. the simulator with this host's measured wake-ups and the lab's links"
"$LOCKSTEP" sim run "$SCENARIO" --duration "${SECONDS_PER_RUN}s" --host "$OUT/timer.json" --links veth \
    --processing "$PROCESSING" "${CPUS_ARG[@]}" \
    --packets --output "$OUT/sim" --quiet > "$OUT/sim.txt" 2> "$OUT/sim.log" \
    || { cat "$OUT/sim.log" >&2; exit 1; }
echo "# 4. the simulator with each node's wake-ups as the lab measured them"
"$LOCKSTEP" sim run "$SCENARIO" --duration "${SECONDS_PER_RUN}s" --host "$OUT/timer.json" --links veth \
    --node-hosts "$OUT/lab" --processing "$PROCESSING" "${CPUS_ARG[@]}" \
    --packets --output "$OUT/sim-nodes" --quiet > "$OUT/sim-nodes.txt" 2> "$OUT/sim-nodes.log" \
    || { cat "$OUT/sim-nodes.log" >&2; exit 1; }
echo
echo "## predicted: the simulator with the timer probe's wake-ups (step 3)"
"$LOCKSTEP" sim compare "$OUT/lab" "$OUT/sim"
echo "## given the nodes' own wake-ups (step 4)"
"$LOCKSTEP" sim compare "$OUT/lab" "$OUT/sim-nodes"
