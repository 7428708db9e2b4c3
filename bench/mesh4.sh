#!/usr/bin/env bash
# mesh4 (baldi2006 §IV): four routers in a full mesh of 100 Mb/s links, five CBR flows
# of 1002-byte packets loading the busiest links to 96 %, FIFO then TDP (TF 250 us).
# Prints per flow the end-to-end delay jitter (max − min) in both modes, their ratio,
# loss and slips, and checks the targets: ratio >= 20x (the paper shows about 10x),
# TDP jitter < 2 TF, zero loss.
#
#   sudo bench/mesh4.sh [SECONDS]     (default 10 s per mode)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), KEEP=1 keeps the
# result directory (with report.html).
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}

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

OUT=$(mktemp -d /tmp/mesh4.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT (report.html inside)" >&2; fi
}
trap cleanup EXIT

echo "# $(uname -r), $(nproc) CPUs, scenarios/mesh4.toml, ${SECONDS_PER_RUN}s per mode"
"$LOCKSTEP" lab run scenarios/mesh4.toml --duration "${SECONDS_PER_RUN}s" --output "$OUT/results" \
    --json --quiet > "$OUT/summary.json" 2> "$OUT/log" || {
    echo "lab run failed; its output:" >&2
    cat "$OUT/log" >&2
    exit 1
}
python3 - "$OUT/summary.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = {r["mode"]: r for r in doc["results"]["runs"]}
tf = runs["tdp"]["tf_ns"]
fifo = {f["flow"]: f for f in runs["fifo"]["flows"]}
tdp = {f["flow"]: f for f in runs["tdp"]["flows"]}
ms = lambda v: "-" if v is None else f"{v / 1e6:.3f}"
print(f"{'flow':<7} {'FIFO jitter ms':>14} {'TDP jitter ms':>13} {'ratio':>7} {'FIFO lost':>9} {'TDP lost':>8} {'TDP slips':>9}  {'ratio>=20':>9} {'TDP<2TF':>7}")
for name, f in fifo.items():
    t = tdp.get(name, {})
    fj, tj = f.get("jitter_ns"), t.get("jitter_ns")
    ratio = fj / tj if fj and tj else None
    print(f"{name:<7} {ms(fj):>14} {ms(tj):>13} {('%.1fx' % ratio) if ratio else '-':>7} {f['lost']:>9} {t.get('lost', '-'):>8} {t.get('slips', '-'):>9}  "
          f"{'yes' if ratio and ratio >= 20 else 'no':>9} {'yes' if tj is not None and tj < 2 * tf else 'no':>7}")
PY
