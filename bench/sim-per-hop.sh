#!/usr/bin/env bash
# What one packet-hop costs the simulator, apart from the machine's load: cachegrind
# counts instructions and simulated cache misses of two runs of different length,
# and the difference divided by the difference in packet-hops leaves out start-up
# (reading, planning, building) and the result document. Deterministic, so two
# builds compare exactly where wall time on a shared machine does not.
#
#   bench/sim-per-hop.sh [LOCKSTEP]     (default target/release/lockstep)
#
# Runs mesh4 FIFO and TDP (2 s and 4 s of traffic) and a generated 961-router grid
# with 1,000 flows (20 and 40 ms), each on one thread (`--threads 1`: parts would add
# the barrier's spinning to the count). Needs valgrind (installed with apt-get as root).
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKSTEP=${1:-target/release/lockstep}
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release" >&2
    exit 3
fi
if ! command -v valgrind >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "valgrind not installed (apt-get install valgrind)" >&2
        exit 3
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y valgrind >&2
fi
OUT=$(mktemp -d /tmp/sim-per-hop.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
"$LOCKSTEP" sim gen --topology grid --routers 961 --flows 1000 --load 0.5 -o "$OUT/grid.toml" >/dev/null

count() { # scenario mode duration -> "instructions D1-misses LL-misses hops"
    local tag="$OUT/run.$RANDOM"
    valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null \
        "$LOCKSTEP" sim run "$1" --modes "$2" --duration "$3" --threads 1 -q -o "$tag.d" --json \
        > "$tag.json" 2> "$tag.err"
    python3 - "$tag" <<'PY'
import json, re, sys
tag = sys.argv[1]
err = open(tag + ".err").read().replace(",", "")
get = lambda name: int(re.search(name + r"\s*(?:refs|misses):\s*(\d+)", err).group(1))
hops = json.load(open(tag + ".json"))["performance"]["runs"][0]["packet_hops"]
print(get(r"I"), get(r"D1"), get(r"LLd"), hops)
PY
}
per_hop() { # label scenario mode short long
    read -r i1 d1 l1 h1 < <(count "$2" "$3" "$4")
    read -r i2 d2 l2 h2 < <(count "$2" "$3" "$5")
    python3 -c "
h = $h2 - $h1
print(f'$1: {($i2 - $i1) / h:.0f} instructions, {($d2 - $d1) / h:.1f} D1 misses, {($l2 - $l1) / h:.2f} last-level misses per packet-hop ({h} hops)')"
}
echo "# $("$LOCKSTEP" --version), $(uname -r), $(valgrind --version)"
per_hop "mesh4 FIFO" scenarios/mesh4.toml fifo 2s 4s
per_hop "mesh4 TDP " scenarios/mesh4.toml tdp 2s 4s
per_hop "grid 961  " "$OUT/grid.toml" tdp 20ms 40ms
