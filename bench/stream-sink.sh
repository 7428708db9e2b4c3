#!/usr/bin/env bash
# lockstep probe stream -> probe sink on loopback at 100 kpps: receive jitter of a
# busy-polling sink vs a blocking one (toussaint2018's inter-arrival ΔT measure).
#
#   bench/stream-sink.sh [SECONDS]        (default 10 s per run)
#
# Runs the sink in each mode (ROUNDS rounds, alternating poll, block, poll, block) on
# SINK_CPU with the stream on STREAM_CPU (--strategy spin), and prints per run: packets
# received and lost, the rate achieved by the sender, and the std-dev, p99.9 and max of
# the inter-arrival time ΔT, from application receive times and from kernel RX
# timestamps (the difference is what the receiving process adds).
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), RATE (100000pps),
# SIZE (64B), STREAM_CPU (0), SINK_CPU (1), ROUNDS (1), PORT (47300), PRIO (unset;
# e.g. 90 for SCHED_FIFO on both), KEEP=1 keeps the result files.
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
RATE=${RATE:-100000pps}
SIZE=${SIZE:-64B}
STREAM_CPU=${STREAM_CPU:-0}
SINK_CPU=${SINK_CPU:-1}
ROUNDS=${ROUNDS:-1}
PORT=${PORT:-47300}
PRIO=${PRIO:-}

case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found (used to read the JSON results)" >&2
    exit 3
fi

OUT=$(mktemp -d /tmp/stream-sink.XXXXXX)
SINK_PID=
cleanup() {
    if [ -n "$SINK_PID" ]; then kill "$SINK_PID" 2>/dev/null || true; wait "$SINK_PID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

PRIO_ARGS=()
if [ -n "$PRIO" ]; then PRIO_ARGS=(--priority "$PRIO"); fi

echo "# $(uname -r), $(nproc) CPUs, $RATE of $SIZE, stream CPU $STREAM_CPU (spin), sink CPU $SINK_CPU, $SECONDS_PER_RUN s per run, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
    for mode in poll block; do
        echo "# round $round: sink --$mode" >&2
        MODE_ARGS=()
        if [ "$mode" = poll ]; then MODE_ARGS=(--poll); fi
        # The sink stops 1 s after the stream's last packet (idle timeout).
        "$LOCKSTEP" probe sink --bind "127.0.0.1:$PORT" --cpu "$SINK_CPU" "${PRIO_ARGS[@]}" \
            "${MODE_ARGS[@]}" --idle-timeout 1s --json --quiet > "$OUT/sink-$mode-$round.json" &
        SINK_PID=$!
        sleep 0.5
        "$LOCKSTEP" probe stream --to "127.0.0.1:$PORT" --rate "$RATE" --size "$SIZE" \
            --strategy spin --cpu "$STREAM_CPU" "${PRIO_ARGS[@]}" \
            --duration "${SECONDS_PER_RUN}s" --json --quiet > "$OUT/stream-$mode-$round.json"
        wait "$SINK_PID"
        SINK_PID=
    done
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def us(v):
    return "-" if v is None else f"{v / 1000.0:.2f}"

print(f"{'sink':6} {'run':>3} {'received':>9} {'lost':>6} {'sent pps':>9} "
      f"{'dT sd us':>9} {'dT p99.9':>9} {'dT max':>9} {'kdT sd':>9} {'kdT max':>9}")
for r in range(1, rounds + 1):
    for mode in ("poll", "block"):
        s = json.load(open(f"{out}/sink-{mode}-{r}.json"))["results"]
        t = json.load(open(f"{out}/stream-{mode}-{r}.json"))["results"]
        d, k = s["delta_t"], s["kernel_delta_t"]
        pps = t["achieved_pps"] or 0.0
        print(f"{mode:6} {r:>3} {s['totals']['received']:>9} {s['totals']['lost']:>6} {pps:>9.0f} "
              f"{us(d['stddev_ns']):>9} {us(d['percentiles_ns'].get('99.9')):>9} {us(d['max_ns']):>9} "
              f"{us(k['stddev_ns']):>9} {us(k['max_ns']):>9}")
        if not t["sustained"] or t["skipped_slots"]:
            print(f"       note: sender sustained={t['sustained']}, {t['skipped_slots']} slots skipped, {t['late']} late")
EOF
