#!/usr/bin/env bash
# lockstep probe noise vs oslat: gaps between back-to-back clock reads on one CPU.
#
#   bench/noise-vs-oslat.sh [SECONDS]        (default 10 s per run)
#
# Runs A B A B (lockstep, oslat; ROUNDS=2 rounds) on CPU $CPU, without a real-time
# policy (oslat's default), and compares the maximum gap, the loop count and the shape
# of the gap histogram: counts per power-of-two range of microseconds, the resolution
# oslat has (its buckets are 1 us wide and round up: bucket k holds gaps in
# ((k-1) us, k us]; gaps of 1024 us and more are its overflow bucket). lockstep's
# buckets are finer and are folded into the same ranges.
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), CPU (default 1),
# ROUNDS (default 2), KEEP=1 keeps the result files.
# Needs oslat (apt-get install rt-tests); root is recommended (both lock memory).
set -euo pipefail

SECONDS_PER_RUN=${1:-10}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
CPU=${CPU:-1}
ROUNDS=${ROUNDS:-2}
BUCKETS=1024

case "$SECONDS_PER_RUN" in
    ''|*[!0-9]*|0) echo "usage: $0 [SECONDS]  (a positive whole number of seconds)" >&2; exit 2 ;;
esac
if ! command -v oslat >/dev/null 2>&1; then
    echo "oslat not found: apt-get install rt-tests" >&2
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

OUT=$(mktemp -d /tmp/noise-vs-oslat.XXXXXX)
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$OUT"' EXIT
fi

echo "# $(uname -r), $(nproc) CPUs, CPU $CPU, $SECONDS_PER_RUN s per run, $ROUNDS rounds, $(oslat --help 2>&1 | head -1)"
for round in $(seq 1 "$ROUNDS"); do
    echo "# round $round: lockstep probe noise" >&2
    "$LOCKSTEP" probe noise --cpu "$CPU" --duration "${SECONDS_PER_RUN}s" --json --quiet \
        > "$OUT/lockstep-$round.json" 2> "$OUT/lockstep-$round.txt"
    echo "# round $round: oslat" >&2
    oslat --cpu-list "$CPU" -D "$SECONDS_PER_RUN" -b "$BUCKETS" -q --json="$OUT/oslat-$round.json" > /dev/null
done

python3 - "$OUT" "$ROUNDS" "$BUCKETS" <<'EOF'
import json, sys

out, rounds, nbuckets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

# Ranges of gaps in microseconds: (0,1], (1,2], (2,4], ..., (512,1024), >= 1024 (overflow).
EDGES = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
LABELS = [f"({EDGES[i]},{EDGES[i + 1]}]us" for i in range(len(EDGES) - 1)] + [f">{EDGES[-1]}us"]

def range_of_us(k):
    """Index in LABELS of a gap of k us (rounded up, as oslat does; k >= 1)."""
    for i in range(1, len(EDGES)):
        if k <= EDGES[i]:
            return i - 1
    return len(EDGES) - 1

def lockstep_run(path):
    r = json.load(open(path))["results"]
    g = r["gaps"]
    shape = [0] * len(LABELS)
    for v, c in zip(g["histogram"]["bucket_ns"], g["histogram"]["count"]):
        if v < 0:
            continue
        k = max(1, -(-v // 1000))  # round up to whole us like oslat
        if k >= nbuckets:
            shape[-1] += c
        else:
            shape[range_of_us(k)] += c
    return {"loops": r["reads"], "max_us": g["max_ns"] / 1000, "min_us": g["min_ns"] / 1000,
            "mean_us": g["mean_ns"] / 1000, "shape": shape,
            "stolen": f"{100 * r['stolen_fraction']:.4f}%"}

def oslat_run(path):
    t = json.load(open(path))["thread"]["0"]
    shape = [0] * len(LABELS)
    for key, c in t["histogram"].items():
        k = int(key)
        if k >= nbuckets:  # the last bucket includes the overflows
            shape[-1] += c
        else:
            shape[range_of_us(k)] += c
    # Stolen time as lockstep counts it (gaps above 1 us), from the rounded-up buckets:
    # an upper estimate (each gap may be up to 1 us shorter; overflows count as their bucket).
    stolen_us = sum(int(k) * c for k, c in t["histogram"].items() if int(k) > 1)
    return {"loops": sum(t["histogram"].values()), "max_us": float(t["max"]), "min_us": float(t["min"]),
            "mean_us": float(t["avg"]), "shape": shape,
            "stolen": f"~{100 * stolen_us / (t['duration'] * 1e6):.4f}%"}

runs = []
for i in range(1, rounds + 1):
    runs.append((f"lockstep #{i}", lockstep_run(f"{out}/lockstep-{i}.json")))
    runs.append((f"oslat #{i}", oslat_run(f"{out}/oslat-{i}.json")))

print()
print("(oslat rounds every gap up to whole microseconds, so its min and mean read about 1 us)")
print(f"{'run':<12} {'loops':>12} {'min_us':>8} {'mean_us':>8} {'max_us':>10} {'stolen':>10}")
for name, r in runs:
    print(f"{name:<12} {r['loops']:>12} {r['min_us']:>8.3f} {r['mean_us']:>8.3f} {r['max_us']:>10.1f} {r['stolen']:>10}")

print()
print("gap histogram shape (counts per range; oslat rounds gaps up to whole us)")
print(f"{'range':<16}" + "".join(f"{name:>14}" for name, _ in runs))
for i, label in enumerate(LABELS):
    if all(r["shape"][i] == 0 for _, r in runs):
        continue
    print(f"{label:<16}" + "".join(f"{r['shape'][i]:>14}" for _, r in runs))

ls_max = max(r["max_us"] for n, r in runs if n.startswith("lockstep"))
os_max = max(r["max_us"] for n, r in runs if n.startswith("oslat"))
print()
print(f"max gap: lockstep {ls_max:.1f} us, oslat {os_max:.1f} us, ratio {ls_max / os_max:.2f}")
EOF
if [ "${KEEP:-0}" = 1 ]; then
    echo "# result files kept in $OUT"
fi
