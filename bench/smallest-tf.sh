#!/usr/bin/env bash
# Smallest time-frame on `line` (sender → R1 edge → R2 core → receiver) with at most
# 1e-4 frame slips per packet: runs scenarios/line.toml in TDP mode at each TF, from
# the largest down, for FRAMES frames each, and prints per TF the packets sent and
# received, the frame slips counted by the routers, their ratio, and the p99/max
# end-to-end latency. The answer is the smallest TF whose slip ratio is <= 1e-4
# (target: <= 50 us on a non-RT VM; welponer2012 needed Preempt-RT for 100 us,
# baldi2006 used 250 us).
#
#   sudo bench/smallest-tf.sh [TF ...]     (default: 500us 250us 100us 50us 25us)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), FRAMES (1e5 frames
# per TF, i.e. 5 s at 50 us; at least 1e4), MAX_SECONDS (30: a run's cap), KEEP=1.
set -euo pipefail

cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
FRAMES=${FRAMES:-100000}
MAX_SECONDS=${MAX_SECONDS:-30}
if [ $# -gt 0 ]; then TFS=("$@"); else TFS=(500us 250us 100us 50us 25us); fi

if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found (used to read the JSON results)" >&2
    exit 3
fi

OUT=$(mktemp -d /tmp/smallest-tf.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

echo "# $(uname -r), $(nproc) CPUs, scenarios/line.toml in TDP mode, $FRAMES frames per TF"
printf "%-8s %10s %10s %8s %12s %10s %10s  %s\n" TF sent received slips "slips/pkt" p99 max "<= 1e-4"
for tf in "${TFS[@]}"; do
    secs=$(python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)(ns|us|ms|s)', '$tf')
if not m: sys.exit('bad TF: $tf')
scale = {'ns': 1e-9, 'us': 1e-6, 'ms': 1e-3, 's': 1.0}[m.group(2)]
print(f'{min(max(float(m.group(1)) * scale * $FRAMES, 1.0), $MAX_SECONDS):.3f}')")
    if ! "$LOCKSTEP" lab run scenarios/line.toml --modes tdp --tf "$tf" --duration "${secs}s" \
        --output "$OUT/$tf" --json --quiet > "$OUT/$tf.json" 2> "$OUT/$tf.log"; then
        printf "%-8s %s\n" "$tf" "refused or failed: $(grep -v '^lab ' "$OUT/$tf.log" | tail -1)"
        continue
    fi
    python3 - "$OUT/$tf.json" "$tf" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
f = doc["results"]["runs"][0]["flows"][0]
sent, got, slips = f["sent"], f["received"], f["slips"]
ratio = slips / sent if sent else float("nan")
us = lambda v: "-" if v is None else f"{v / 1000:.1f}us"
ok = "yes" if sent and ratio <= 1e-4 and got == sent else "no"
print(f"{sys.argv[2]:<8} {sent:>10} {got:>10} {slips:>8} {ratio:>12.2e} {us(f['p99_ns']):>10} {us(f['max_ns']):>10}  {ok}")
PY
done
