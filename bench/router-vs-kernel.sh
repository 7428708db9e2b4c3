#!/usr/bin/env bash
# Router forwarding rate: lockstep's user-space router (FIFO and TDP modes) vs the
# Linux kernel forwarding in the same namespace topology (tx → r1 → rx, unshaped
# veths), loaded by iperf3 with 64-byte UDP datagrams as fast as it can send
# (-u -l 64 -b 0). All three runs in one `lockstep lab run` of
# scenarios/forwarding.toml; prints the delivered packet rate of each and its ratio
# to the kernel's (targets: FIFO >= 1.0x, TDP >= 0.8x).
#
#   sudo bench/router-vs-kernel.sh [SECONDS]     (default 5 s per mode)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), ROUNDS (1; the
# modes are run ROUNDS times and every round is printed), KEEP=1 keeps the results.
set -euo pipefail

SECONDS_PER_RUN=${1:-5}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
ROUNDS=${ROUNDS:-1}

case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
for tool in python3 iperf3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$tool not found (apt-get install $tool)" >&2
        exit 3
    fi
done

OUT=$(mktemp -d /tmp/router-vs-kernel.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

echo "# $(uname -r), $(nproc) CPUs, iperf3 $(iperf3 --version | head -1 | awk '{print $2}'), 64-byte UDP, ${SECONDS_PER_RUN}s per mode, $ROUNDS round(s)"
for round in $(seq 1 "$ROUNDS"); do
    "$LOCKSTEP" lab run scenarios/forwarding.toml --duration "${SECONDS_PER_RUN}s" \
        --output "$OUT/round$round" --json --quiet > "$OUT/round$round.json" 2> "$OUT/round$round.log" || {
        echo "lab run failed; its output:" >&2
        cat "$OUT/round$round.log" >&2
        exit 1
    }
    python3 - "$OUT/round$round.json" "$round" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
rnd = sys.argv[2]
rates = {}
for run in doc["results"]["runs"]:
    load = run["loads"][0]
    rates[run["mode"]] = (load.get("received_pps"), load.get("sent_packets"), load.get("received_packets"))
kernel = rates.get("kernel", (None,))[0]
print(f"round {rnd}:")
print(f"  {'mode':<8} {'delivered pps':>14} {'sent':>10} {'delivered':>10} {'vs kernel':>10}  target")
for mode, target in [("kernel", ""), ("fifo", ">= 1.0x"), ("tdp", ">= 0.8x")]:
    pps, sent, got = rates.get(mode, (None, None, None))
    ratio = f"{pps / kernel:.2f}x" if pps and kernel else "-"
    pps_s = f"{pps:,.0f}" if pps else "-"
    print(f"  {mode:<8} {pps_s:>14} {sent or '-':>10} {got or '-':>10} {ratio:>10}  {target}")
PY
done
