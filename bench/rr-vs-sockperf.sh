#!/usr/bin/env bash
# lockstep probe rr vs sockperf ping-pong: UDP request/response round-trip time on
# loopback, server pinned to one CPU and client to another.
#
#   bench/rr-vs-sockperf.sh [SECONDS]        (default 10 s per run)
#
# For each receive mode it runs A B C A B C (ROUNDS rounds): lockstep with the full
# split (software TX and RX timestamps on both sides), lockstep --no-timestamps (RTT
# only, like sockperf), then sockperf; receive modes:
#   block: lockstep's default blocking recvmsg   vs  sockperf's default (blocking recvfrom)
#   poll:  lockstep --poll (MSG_DONTWAIT loop)    vs  sockperf --nonblocked (spins on recvfrom)
# Both measure the full round trip (sockperf --full-rtt; without it sockperf prints
# RTT/2), with SIZE-byte UDP payloads (default 96: lockstep's smallest request, the
# probe header plus room for the server's hop record; sockperf gets the same size).
# sockperf leaves out its warm-up; lockstep reports every request.
# Prints p50/p99/p99.9 of each run, the average of each tool over its rounds, and the
# ratios lockstep/sockperf (targets: p50 <= 1.1x, p99.9 <= 1.0x).
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), SERVER_CPU (1),
# CLIENT_CPU (0), ROUNDS (2), SIZE (96), MODES ("block poll"), PORT (47200; PORT+1 is
# used too), PRIO (unset: SCHED_OTHER; set e.g. 90 for SCHED_FIFO on both tools, via
# --priority and chrt), KEEP=1 keeps the result files.
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
ROUNDS=${ROUNDS:-2}
SIZE=${SIZE:-96}
MODES=${MODES:-block poll}
PORT=${PORT:-47200}
PRIO=${PRIO:-}

case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if ! command -v sockperf >/dev/null 2>&1; then
    echo "sockperf not found: apt-get install sockperf" >&2
    exit 3
fi
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found (used to read both tools' results)" >&2
    exit 3
fi
if ! sockperf pp --help 2>&1 | grep -q -- --full-rtt; then
    echo "this sockperf has no --full-rtt: it would report RTT/2, not comparable" >&2
    exit 3
fi

OUT=$(mktemp -d /tmp/rr-vs-sockperf.XXXXXX)
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

LS_PRIO=()
CHRT=()
if [ -n "$PRIO" ]; then
    LS_PRIO=(--priority "$PRIO")
    CHRT=(chrt -f "$PRIO")
fi

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

echo "# $(uname -r), $(nproc) CPUs, server CPU $SERVER_CPU, client CPU $CLIENT_CPU, ${SIZE}B, $SECONDS_PER_RUN s per run, $ROUNDS rounds, $(sockperf --version 2>&1 | head -1)"
for mode in $MODES; do
    case "$mode" in
        block) LS_MODE=(); SP_MODE=() ;;
        poll) LS_MODE=(--poll); SP_MODE=(--nonblocked) ;;
        *) echo "unknown mode $mode (block or poll)" >&2; exit 2 ;;
    esac
    for round in $(seq 1 "$ROUNDS"); do
        for variant in split lean; do
            if [ "$variant" = lean ]; then TS=(--no-timestamps); else TS=(); fi
            echo "# $mode round $round: lockstep ($variant)" >&2
            "$LOCKSTEP" probe rr server --bind "127.0.0.1:$PORT" --cpu "$SERVER_CPU" "${LS_PRIO[@]}" \
                "${LS_MODE[@]}" "${TS[@]}" --quiet \
                > /dev/null 2>"$OUT/lockstep-server-$variant-$mode-$round.err" &
            SERVER_PID=$!
            sleep 0.5
            "$LOCKSTEP" probe rr client --to "127.0.0.1:$PORT" --cpu "$CLIENT_CPU" "${LS_PRIO[@]}" \
                "${LS_MODE[@]}" "${TS[@]}" --size "${SIZE}B" --duration "${SECONDS_PER_RUN}s" \
                --json --quiet > "$OUT/lockstep-$variant-$mode-$round.json" \
                2> "$OUT/lockstep-$variant-$mode-$round.err"
            stop_server
        done

        echo "# $mode round $round: sockperf" >&2
        "${CHRT[@]}" taskset -c "$SERVER_CPU" sockperf sr -i 127.0.0.1 -p "$((PORT + 1))" \
            "${SP_MODE[@]}" > "$OUT/sockperf-server-$mode-$round.txt" 2>&1 &
        SERVER_PID=$!
        sleep 0.5
        "${CHRT[@]}" taskset -c "$CLIENT_CPU" sockperf pp -i 127.0.0.1 -p "$((PORT + 1))" \
            -t "$SECONDS_PER_RUN" -m "$SIZE" --full-rtt "${SP_MODE[@]}" \
            > "$OUT/sockperf-$mode-$round.txt" 2>&1
        stop_server
    done
done

python3 - "$OUT" "$ROUNDS" "$MODES" <<'EOF'
import json, re, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
KEYS = ["50", "99", "99.9"]

def lockstep(path):
    r = json.load(open(path))["results"]
    p = r["rtt"]["percentiles_ns"]
    return r["rtt"]["count"], [p[k] / 1000.0 for k in KEYS]

def sockperf(path):
    text = open(path).read()
    count = int(re.search(r"Total (\d+) observations", text).group(1))
    vals = []
    for k in ["50.000", "99.000", "99.900"]:
        m = re.search(r"percentile " + re.escape(k) + r" =\s+([0-9.]+)", text)
        vals.append(float(m.group(1)))
    return count, vals

TOOLS = [("lockstep", "lockstep-split", lockstep, "json"),
         ("lockstep-lean", "lockstep-lean", lockstep, "json"),
         ("sockperf", "sockperf", sockperf, "txt")]
print(f"{'mode':6} {'tool':17} {'run':>4} {'samples':>9} {'p50 us':>9} {'p99 us':>9} {'p99.9 us':>9}")
for mode in modes:
    avg = {}
    for tool, prefix, read, ext in TOOLS:
        rows = []
        for r in range(1, rounds + 1):
            n, v = read(f"{out}/{prefix}-{mode}-{r}.{ext}")
            rows.append(v)
            print(f"{mode:6} {tool:17} {r:>4} {n:>9} " + " ".join(f"{x:9.2f}" for x in v))
        avg[tool] = [sum(col) / len(col) for col in zip(*rows)]
        print(f"{mode:6} {tool:17} {'avg':>4} {'':>9} " + " ".join(f"{x:9.2f}" for x in avg[tool]))
    for tool in ("lockstep", "lockstep-lean"):
        ratio = [a / b if b else float("nan") for a, b in zip(avg[tool], avg["sockperf"])]
        verdict = "ok" if ratio[0] <= 1.1 and ratio[2] <= 1.0 else "missed"
        print(f"{mode:6} {tool + '/sockperf':17} {'':>4} {'':>9} " + " ".join(f"{x:8.2f}x" for x in ratio)
              + f"   (p50 <= 1.1x, p99.9 <= 1.0x: {verdict})")
EOF
