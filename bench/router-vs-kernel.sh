#!/usr/bin/env bash
# Router forwarding rate: lockstep's user-space router (FIFO and TDP modes) vs the
# Linux kernel forwarding in the same namespace topology (tx → r1 → rx, unshaped
# veths), loaded by iperf3 with UDP datagrams as fast as it can send (-u -b 0), at
# two sizes: 64-byte datagrams and 1472-byte ones (1500-byte IP packets, full
# frames). The router runs once per I/O mode of its ports (--io: packet = recvmmsg/
# sendmmsg, ring = TPACKET_V3 receive ring, ring-v2 = TPACKET_V2 receive ring, xdp =
# AF_XDP socket fed by an XDP program; a row whose router fell back from xdp to packet
# is marked "(fell back)"), all against the kernel of the same round: per round and size one `lockstep lab run` of
# scenarios/forwarding.toml with kernel, FIFO and TDP (--io packet), then FIFO and
# TDP again for every other mode.
#
# Per run: the delivered packet rate, its ratio to the kernel's, and the CPU time the
# whole machine was busy per delivered packet (/proc/stat over the load's window,
# every CPU and process: on a shared machine other jobs count too). Every round is
# printed, then the median round of each row. Targets: at 64 B FIFO >= 1.0x and
# TDP >= 0.9x; at 1500 B both >= 1.0x.
#
#   sudo bench/router-vs-kernel.sh [SECONDS]     (default 5 s per mode)
#
# Environment: LOCKSTEP (binary, default target/release/lockstep), ROUNDS (3),
# IO_MODES ("packet ring ring-v2 xdp"), SIZES ("64 1472"), STRATEGY (the router's wait
# strategy instead of the scenario's sleep: spin, hybrid), COALESCE (the router's
# coalescing time instead of the scenario's 20us; 0us: off), ROUTER_CPU (pin the
# router's thread to this CPU), KEEP=1 keeps the results.
set -euo pipefail

SECONDS_PER_RUN=${1:-5}
cd "$(dirname "$0")/.."
LOCKSTEP=${LOCKSTEP:-target/release/lockstep}
ROUNDS=${ROUNDS:-3}
IO_MODES=${IO_MODES:-packet ring ring-v2 xdp}
SIZES=${SIZES:-64 1472}

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

echo "# $(uname -r), $(nproc) CPUs, iperf3 $(iperf3 --version | head -1 | awk '{print $2}'), ${SECONDS_PER_RUN}s per mode, $ROUNDS round(s), I/O modes: $IO_MODES, router strategy: ${STRATEGY:-as in the scenario}, coalescing: ${COALESCE:-as in the scenario}, router CPU: ${ROUTER_CPU:-any}, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
first_io=${IO_MODES%% *}
for round in $(seq 1 "$ROUNDS"); do
    for size in $SIZES; do
        scen="$OUT/forwarding-$size.toml"
        sed -e "s/^size = \"64B\"/size = \"${size}B\"/" \
            ${STRATEGY:+-e "s/^strategy = \"[a-z]*\"/strategy = \"$STRATEGY\"/"} \
            ${COALESCE:+-e "s/^coalesce = \"[0-9a-z]*\"/coalesce = \"$COALESCE\"/"} \
            ${ROUTER_CPU:+-e "s/^role = \"core\"/role = \"core\"\ncpu = $ROUTER_CPU/"} \
            scenarios/forwarding.toml > "$scen"
        for io in $IO_MODES; do
            modes=fifo,tdp
            [ "$io" = "$first_io" ] && modes=kernel,fifo,tdp
            name="r$round-$size-$io"
            "$LOCKSTEP" lab run "$scen" --duration "${SECONDS_PER_RUN}s" --modes "$modes" --io "$io" \
                --output "$OUT/$name" --json --quiet > "$OUT/$name.json" 2> "$OUT/$name.log" || {
                echo "lab run $name failed; its output:" >&2
                cat "$OUT/$name.log" >&2
                exit 1
            }
        done
    done
done

python3 - "$OUT" "$ROUNDS" "$IO_MODES" "$SIZES" <<'PY'
import json, os, statistics, sys
out, rounds, ios, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
rows = {}   # (size, label) -> [(round, pps, ratio, cpu_ns)]
fell_back = set()   # (run name, mode) whose router used packet instead of xdp
def load(name):
    doc = json.load(open(os.path.join(out, name + ".json")))
    res = {}
    for run in doc["results"]["runs"]:
        l = run["loads"][0]
        got = l.get("received_packets")
        busy = l.get("machine_busy_ns")
        res[run["mode"]] = (l.get("received_pps"), l.get("sent_packets"), got,
                            busy / got if busy and got else None)
        if "the xdp mode is not available here" in json.dumps(run):
            fell_back.add((name, run["mode"]))
    return res
targets = {("64", "fifo"): 1.0, ("64", "tdp"): 0.9, ("1472", "fifo"): 1.0, ("1472", "tdp"): 1.0}
for r in range(1, rounds + 1):
    for size in sizes:
        kernel = None
        print(f"round {r}, {size}-byte datagrams:")
        print(f"  {'mode':<14} {'delivered pps':>14} {'sent':>10} {'delivered':>10} {'vs kernel':>10} {'CPU ns/pkt':>11}")
        for io in ios:
            res = load(f"r{r}-{size}-{io}")
            if "kernel" in res:
                kernel = res["kernel"][0]
                order = [("kernel", "kernel")]
            else:
                order = []
            order += [(m, f"{m} {io}") for m in ("fifo", "tdp")]
            for mode, label in order:
                pps, sent, got, cpu = res.get(mode, (None, None, None, None))
                ratio = pps / kernel if pps and kernel else None
                rows.setdefault((size, label), []).append((r, pps, ratio, cpu))
                note = " (fell back)" if (f"r{r}-{size}-{io}", mode) in fell_back else ""
                print(f"  {label:<14} {pps and f'{pps:,.0f}' or '-':>14} {sent or '-':>10} {got or '-':>10} "
                      f"{ratio and f'{ratio:.2f}x' or '-':>10} {cpu and f'{cpu:,.0f}' or '-':>11}{note}")
print()
print(f"median round of {rounds} (by ratio to the same round's kernel):")
for size in sizes:
    print(f"  {size}-byte datagrams:")
    print(f"  {'mode':<14} {'delivered pps':>14} {'vs kernel':>10} {'CPU ns/pkt':>11}  target")
    for (sz, label), runs in rows.items():
        if sz != size:
            continue
        ok = [x for x in runs if x[1]]
        if not ok:
            print(f"  {label:<14} {'-':>14}")
            continue
        key = (lambda x: x[2] or 0) if label != "kernel" else (lambda x: x[1])
        med = sorted(ok, key=key)[(len(ok) - 1) // 2]
        _, pps, ratio, cpu = med
        t = targets.get((size, label.split()[0]))
        tgt = f">= {t:.1f}x {'met' if ratio and ratio >= t else 'missed'}" if t else ""
        print(f"  {label:<14} {pps:>14,.0f} {ratio and f'{ratio:.2f}x' or '-':>10} {cpu and f'{cpu:,.0f}' or '-':>11}  {tgt}")
PY
