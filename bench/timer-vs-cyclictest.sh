#!/usr/bin/env bash
# lockstep probe timer vs cyclictest: wake-up latency at 100 us, SCHED_FIFO 90, one CPU.
#
#   bench/timer-vs-cyclictest.sh [SECONDS]        (default 10 s per run)
#
# Runs A B A B (lockstep, cyclictest; ROUNDS=2 rounds) with --strategy sleep, then the
# same with --strategy hybrid, and prints p50/p99/p99.9/max of each run, of each tool
# pooled over its rounds, and the ratio lockstep/cyclictest. cyclictest runs with -N so
# its histogram has 1 ns buckets (up to HIST_NS; later wake-ups count as overflows).
# Targets (issue): sleep p50 and p99 within 10 % of cyclictest; hybrid p99 <= 1/3 of
# cyclictest's.
#
# cyclictest holds /dev/cpu_dma_latency at 0 unless given --default-system (it keeps
# idle CPUs polling, which shortens wake-ups a lot); lockstep only does when asked, so
# it runs with --dma-latency-zero here to compare like with like.
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), CPU (default 1),
# ROUNDS (default 2), HIST_NS (default 1000000), KEEP=1 keeps the result files.
# Needs root (SCHED_FIFO, mlockall) and cyclictest (apt-get install rt-tests).
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
CPU=${CPU:-1}
ROUNDS=${ROUNDS:-2}
HIST_NS=${HIST_NS:-1000000}

case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if ! command -v cyclictest >/dev/null 2>&1; then
    echo "cyclictest not found: apt-get install rt-tests" >&2
    exit 3
fi
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found (used to read both tools' JSON)" >&2
    exit 3
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "run as root: both tools need SCHED_FIFO and mlockall" >&2
    exit 3
fi

OUT=$(mktemp -d /tmp/timer-vs-cyclictest.XXXXXX)
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$OUT"' EXIT
fi

echo "# $(uname -r), $(nproc) CPUs, CPU $CPU, $SECONDS_PER_RUN s per run, $ROUNDS rounds, $(cyclictest --help 2>&1 | head -1)"
for strategy in sleep hybrid; do
    for round in $(seq 1 "$ROUNDS"); do
        echo "# round $round: lockstep --strategy $strategy" >&2
        "$LOCKSTEP" probe timer --strategy "$strategy" --interval 100us --priority 90 \
            --cpu "$CPU" --dma-latency-zero --duration "${SECONDS_PER_RUN}s" --json --quiet \
            > "$OUT/lockstep-$strategy-$round.json" 2> "$OUT/lockstep-$strategy-$round.txt"
        echo "# round $round: cyclictest" >&2
        cyclictest -m -p90 -i100 -a"$CPU" -t1 -q -D"$SECONDS_PER_RUN" -N -h"$HIST_NS" \
            --json="$OUT/cyclictest-$strategy-$round.json" > /dev/null
    done
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, math, sys

out, rounds = sys.argv[1], int(sys.argv[2])
KEYS = [("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9), ("max", None)]

def rank(p, n):
    return max(1, math.ceil(p / 100.0 * n - 1e-9))

def pct(pairs, n, p, overflow_floor=None):
    """pairs: sorted (value_ns, count); n: total count including overflows."""
    r = rank(p, n)
    seen = 0
    for v, c in pairs:
        seen += c
        if seen >= r:
            return v
    return overflow_floor  # in the overflow of cyclictest's histogram

def lockstep_run(path):
    d = json.load(open(path))["results"]["latency"]
    h = d["histogram"]
    return {"pairs": list(zip(h["bucket_ns"], h["count"])), "n": d["count"], "max": d["max_ns"],
            "pct": {k: d["percentiles_ns"].get(k[1:]) for k, _ in KEYS if k != "max"}}

def cyclictest_run(path):
    t = json.load(open(path))["thread"]["0"]
    pairs = sorted((int(k), v) for k, v in t["histogram"].items())
    n = t["cycles"]
    maxv = t["max"]
    return {"pairs": pairs, "n": n, "max": maxv,
            "pct": {k: pct(pairs, n, p, None) for k, p in KEYS if p is not None}}

def pooled(runs):
    acc = {}
    for r in runs:
        for v, c in r["pairs"]:
            acc[v] = acc.get(v, 0) + c
    pairs = sorted(acc.items())
    n = sum(r["n"] for r in runs)
    return {"pairs": pairs, "n": n, "max": max(r["max"] for r in runs),
            "pct": {k: pct(pairs, n, p) for k, p in KEYS if p is not None}}

def us(v):
    return "  >hist" if v is None else f"{v / 1000:8.2f}"

def row(name, r):
    cells = [us(r["pct"][k]) for k, p in KEYS if p is not None] + [us(r["max"])]
    return f"{name:<26} {r['n']:>9} " + " ".join(cells)

verdicts = []
for strategy in ["sleep", "hybrid"]:
    ls = [lockstep_run(f"{out}/lockstep-{strategy}-{i}.json") for i in range(1, rounds + 1)]
    ct = [cyclictest_run(f"{out}/cyclictest-{strategy}-{i}.json") for i in range(1, rounds + 1)]
    print()
    print(f"== lockstep --strategy {strategy} vs cyclictest (values in us)")
    print(f"{'run':<26} {'samples':>9} " + " ".join(f"{k:>8}" for k, _ in KEYS))
    for i in range(rounds):
        print(row(f"lockstep {strategy} #{i + 1}", ls[i]))
        print(row(f"cyclictest #{i + 1}", ct[i]))
    L, C = pooled(ls), pooled(ct)
    print(row(f"lockstep {strategy} (all)", L))
    print(row("cyclictest (all)", C))
    ratios = []
    for k, p in KEYS:
        a = L["max"] if p is None else L["pct"][k]
        b = C["max"] if p is None else C["pct"][k]
        ratios.append(None if not a or not b else a / b)
    print(f"{'ratio lockstep/cyclictest':<26} {'':>9} " +
          " ".join("       -" if r is None else f"{r:8.2f}" for r in ratios))
    if strategy == "sleep":
        ok = all(r is not None and abs(r - 1) <= 0.10 for r in ratios[:2])
        verdicts.append(f"sleep: p50 and p99 within 10% of cyclictest: {'PASS' if ok else 'FAIL'}")
    else:
        ok = ratios[1] is not None and ratios[1] <= 1 / 3
        verdicts.append(f"hybrid: p99 <= 1/3 of cyclictest's: {'PASS' if ok else 'FAIL'}")
print()
for v in verdicts:
    print(v)
EOF
if [ "${KEEP:-0}" = 1 ]; then
    echo "# result files kept in $OUT"
fi
