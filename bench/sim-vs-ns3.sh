#!/usr/bin/env bash
# lockstep's simulator against ns-3 on the FIFO runs of scenarios/line.toml and
# scenarios/mesh4.toml: the same networks, the same delay accounting, per-flow delay
# and the wall time each simulator takes.
#
# ns-3 side: bench/ns3/fifo-sim.cc, built here against Debian's ns-3 3.37 (installed
# with apt-get when missing). Point-to-point devices with byte-limited drop-tail
# queues, a frame costing its IP packet + 38 bytes on the wire, propagation 0, routers
# that forward on the flow's path (a packet tag: flow, hop) the instant a frame has
# arrived, the same source phases (mesh4's asynchronous senders' slow clocks with the
# simulator's integer arithmetic), delay = arrival of the last bit at the sink minus
# the frame start on the sender's clock. No logging, no pcap, no flow monitor: the
# sinks keep each delay in a vector. The header of fifo-sim.cc says where each choice
# comes from in crates/sim.
#
# lockstep side: `lockstep sim run SCENARIO --modes fifo --duration D --threads 1 --json -q` with
# its defaults (host model ideal, processing 0, propagation 0, framing ethernet). Its
# mean is exact, its p99 comes from a log-bucket histogram (within 1/128); ns-3's p99
# is the exact nearest-rank value.
#
# ns-3 runs in two ways per scenario: as ns-3 orders its events (`--ties=ns3`: the
# timed runs and the comparison), and once with the frames that arrive at one instant
# forwarded in lockstep's event order (`--ties=lockstep`: the "same ties" column),
# which shows how much of a difference is the order of simultaneous arrivals.
#
# Wall time: the event loop only, both sides (lockstep: `performance.runs[].wall_ns`;
# ns-3: Simulator::Run()), each over D seconds of traffic plus 1 s for what is in
# flight, divided by D; with ROUNDS > 1 the runs alternate A B A B and the smallest
# wall time of each counts.
#
#   bench/sim-vs-ns3.sh [LINE_SECONDS [MESH4_SECONDS]]     (default 60 60)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep; target/fast/lockstep,
# from `cargo build --profile fast`, is the simulator's fastest build), ROUNDS (default
# 2), NS3_BUILD (where fifo-sim is built, default target/bench-ns3), KEEP=1 keeps the
# result documents. The last line is
#   lockstep sim is N.Nx faster than ns-3; worst per-flow mean-delay difference X.X%
# (total ns-3 wall time over total lockstep wall time; the largest |mean difference|
# against ns-3's own event order).
set -euo pipefail

LINE_SECONDS=${1:-${LINE_SECONDS:-60}}
MESH4_SECONDS=${2:-${MESH4_SECONDS:-60}}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
ROUNDS=${ROUNDS:-2}
NS3_BUILD=${NS3_BUILD:-target/bench-ns3}

for v in "$LINE_SECONDS" "$MESH4_SECONDS" "$ROUNDS"; do
    case "$v" in
        ''|*[!0-9]*|0) echo "usage: $0 [LINE_SECONDS [MESH4_SECONDS]]  (positive whole numbers; ROUNDS too)" >&2; exit 2 ;;
    esac
done
if [ ! -x "$LOCKSTEP" ]; then
    echo "$LOCKSTEP not found: build it with cargo build --release (or set LOCKSTEP=...)" >&2
    exit 3
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found (used to read the JSON results)" >&2
    exit 3
fi

# Debian's ns-3 3.37: headers in /usr/include/ns3, libraries libns3-<module>.so.
if [ ! -f /usr/include/ns3/point-to-point-module.h ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "ns-3 not installed: run as root (apt-get install -y ns3 libns3-dev) or install it first" >&2
        exit 3
    fi
    echo "# installing ns-3 (apt-get install -y ns3 libns3-dev)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y ns3 libns3-dev >&2
fi
if ! command -v g++ >/dev/null 2>&1; then
    echo "g++ not found (apt-get install g++)" >&2
    exit 3
fi
mkdir -p "$NS3_BUILD"
NS3_SIM=$NS3_BUILD/fifo-sim
if [ ! -x "$NS3_SIM" ] || [ bench/ns3/fifo-sim.cc -nt "$NS3_SIM" ]; then
    echo "# building $NS3_SIM" >&2
    # (pkg-config's ns3-* cflags are broken in the Debian package: "-I/usr\;"; the
    # headers are in the default include path, so only the libraries are named)
    g++ -O2 -std=c++17 bench/ns3/fifo-sim.cc -o "$NS3_SIM" \
        -lns3-point-to-point -lns3-network -lns3-core
fi

OUT=$(mktemp -d /tmp/sim-vs-ns3.XXXXXX)
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$OUT"; else echo "# results kept in $OUT" >&2; fi
}
trap cleanup EXIT

NS3_VERSION=$(dpkg-query -W -f='${Version}' libns3-dev 2>/dev/null || echo unknown)
echo "# $(uname -r), $(nproc) CPUs, ns-3 $NS3_VERSION (Debian), $("$LOCKSTEP" --version), line ${LINE_SECONDS}s, mesh4 ${MESH4_SECONDS}s, $ROUNDS round(s)"

run_lockstep() { # scenario seconds round
    "$LOCKSTEP" sim run "scenarios/$1.toml" --modes fifo --duration "${2}s" --threads 1 --json -q \
        --output "$OUT/$1-lockstep-$3" > "$OUT/$1-lockstep-$3.json" 2> "$OUT/$1-lockstep-$3.log" || {
        echo "lockstep sim run scenarios/$1.toml failed:" >&2
        cat "$OUT/$1-lockstep-$3.log" >&2
        exit 1
    }
}
run_ns3() { # scenario seconds ties tag
    "$NS3_SIM" --scenario="$1" --duration="$2" --ties="$3" > "$OUT/$1-ns3-$4.json" 2> "$OUT/$1-ns3-$4.log" || {
        echo "ns-3 fifo-sim --scenario=$1 failed:" >&2
        cat "$OUT/$1-ns3-$4.log" >&2
        exit 1
    }
}

for sc in line mesh4; do
    secs=$LINE_SECONDS
    [ "$sc" = mesh4 ] && secs=$MESH4_SECONDS
    for r in $(seq 1 "$ROUNDS"); do
        run_lockstep "$sc" "$secs" "$r"
        run_ns3 "$sc" "$secs" ns3 "$r"
    done
    run_ns3 "$sc" "$secs" lockstep ties
done

python3 - "$OUT" "$ROUNDS" "$LINE_SECONDS" "$MESH4_SECONDS" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
secs = {"line": int(sys.argv[3]), "mesh4": int(sys.argv[4])}
load = lambda p: json.load(open(f"{out}/{p}.json"))
us = lambda ns: f"{ns / 1e3:.2f}"
def pct(a, b):
    v = 100.0 * (a - b) / b
    return 0.0 if abs(v) < 0.005 else v  # no "-0.00%"
total = {"ns3": 0.0, "lockstep": 0.0}
worst = 0.0
hdr = (f"{'flow':<7}{'count':>7} | {'ns-3 mean':>10}{'p99':>9}{'max':>9} | "
       f"{'lockstep mean':>13}{'p99':>9}{'max':>9} | {'Δmean':>7}{'Δmean same ties':>16}")
for sc in ("line", "mesh4"):
    d = secs[sc]
    ls = [load(f"{sc}-lockstep-{r}") for r in range(1, rounds + 1)]
    ns = [load(f"{sc}-ns3-{r}") for r in range(1, rounds + 1)]
    tie = load(f"{sc}-ns3-ties")
    # the delays are the same every round (both are deterministic); wall: the smallest
    l0, n0 = ls[0], ns[0]
    lwall = min(x["performance"]["runs"][0]["wall_ns"] for x in ls) / 1e9
    nwall = min(x["wall_ns"] for x in ns) / 1e9
    total["ns3"] += nwall
    total["lockstep"] += lwall
    run = l0["results"]["runs"][0]
    lflows = {f["name"]: f["latency"] for f in l0["results"]["report"]["runs"][0]["flows"]}
    nflows = {f["flow"]: f for f in n0["flows"]}
    tflows = {f["flow"]: f for f in tie["flows"]}
    print(f"\n{sc} (FIFO, {d} s of traffic): delays in µs")
    print(hdr)
    same = 0
    for name, lf in lflows.items():
        nf, tf = nflows[name], tflows[name]
        dm = pct(lf["mean_ns"], nf["mean_ns"])
        dt = pct(lf["mean_ns"], tf["mean_ns"])
        worst = max(worst, abs(dm))
        if (abs(lf["mean_ns"] - tf["mean_ns"]) < 0.01 and lf["max_ns"] == tf["max_ns"]
                and lf["min_ns"] == tf["min_ns"] and lf["count"] == tf["count"]):
            same += 1
        cnt = str(lf["count"]) if lf["count"] == nf["count"] else f"{lf['count']}/{nf['count']}"
        print(f"{name:<7}{cnt:>7} | {us(nf['mean_ns']):>10}{us(nf['p99_ns']):>9}{us(nf['max_ns']):>9} | "
              f"{us(lf['mean_ns']):>13}{us(lf['percentiles_ns']['99']):>9}{us(lf['max_ns']):>9} | "
              f"{dm:>+6.2f}%{dt:>+15.2f}%".replace("+0.00%", " 0.00%"))
    print(f"ns-3 with lockstep's order of simultaneous arrivals: count, mean, min and max "
          f"identical to lockstep's for {same} of {len(lflows)} flows")
    for ld in run.get("loads", []):
        nl = [f for f in n0["flows"] if not f["reserved"]]
        nrecv = nl[0]["count"] if nl else "-"
        nsent = nl[0]["sent"] if nl else "-"
        print(f"load {ld['load']}: lockstep sent {ld['sent']}, delivered {ld['received']}; "
              f"ns-3 sent {nsent}, delivered {nrecv}")
    print(f"queue drops: lockstep {run['link_drops']}, ns-3 {n0['queue_drops']}; "
          f"node-instants with 2+ frames arriving at once (ns-3 order): {n0['tied_instants']}")
    print(f"events: lockstep {run['events']}, ns-3 {n0['events']}; "
          f"wall per simulated second: ns-3 {1e3 * nwall / d:.1f} ms, lockstep {1e3 * lwall / d:.1f} ms "
          f"→ lockstep {nwall / lwall:.1f}x faster")
ratio = total["ns3"] / total["lockstep"]
print(f"\nlockstep sim is {ratio:.1f}x faster than ns-3; worst per-flow mean-delay difference {worst:.1f}%")
PY
