#!/usr/bin/env bash
# A sender on the kernel's UDP stack against the frame ports (needs root): one sender
# (`lockstep node --io MODE`) sends one flow of 64-byte probes, N packets in every
# 1 ms frame, for DUR over one veth between two namespaces to a receiver on the UDP
# stack; per mode and N it prints the achieved rate, the frames skipped and the
# sender's CPU (user + system, bash `times`) per packet sent.
#
#   bench/sender-io.sh [DUR] [N ...]        (default: 5s, N = 100 400 1000)
#
# Namespaces lsb-hio-s and lsb-hio-d, removed at the end (also on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-5s}
shift || true
counts=("${@:-100 400 1000}")
cargo build --quiet --release -p lockstep
bin="$PWD/${CARGO_TARGET_DIR:-target}/release/lockstep"
work=$(mktemp -d /tmp/sender-io.XXXXXX)
s=lsb-hio-s
d=lsb-hio-d
cleanup() { ip netns del $s 2>/dev/null || true; ip netns del $d 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add $s
ip netns add $d
ip link add hios netns $s type veth peer name hiod netns $d
ip -n $s addr add 10.9.1.1/24 dev hios
ip -n $d addr add 10.9.1.2/24 dev hiod
for n in $s $d; do ip -n $n link set lo up; done
ip -n $s link set hios up
ip -n $d link set hiod up
mac() { ip -n "$1" -j link show "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])'; }
ip -n $s neigh replace 10.9.1.2 lladdr "$(mac $d hiod)" dev hios nud permanent
ip -n $d neigh replace 10.9.1.1 lladdr "$(mac $s hios)" dev hiod nud permanent

node() { # name role ifname addr
    printf '[node]\nname = "%s"\nid = %s\nrole = "%s"\nmode = "fifo"\n\n[node.frame]\ntf = "1ms"\nk = 1\n\n' "$1" "$2" "$3"
    printf '[[node.ports]]\nid = 1\nifname = "%s"\nmac = "02:00:00:00:00:01"\naddr = "%s"\nprefix_len = 24\nrate_bps = 10000000000\n\n' "$4" "$5"
}
{ node rcv 20 receiver hiod 10.9.1.2; printf '[live]\nbind = "10.9.1.2:7000"\n'; } > "$work/rcv.toml"

echo "date: $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r)"
for n in ${counts[*]}; do
    {
        node snd 10 sender hios 10.9.1.1
        printf '[[node.flows]]\nid = 1\nout_port = 1\nrows = [{ slot = 0, packets = %s, size = 100 }]\n\n' "$n"
        printf '[live]\nstrategy = "sleep"\ntx_timestamps = false\n[[live.flows]]\nflow = 1\ndst = "10.9.1.2:7000"\nsrc_port = 6001\nsize = 64\n'
    } > "$work/snd.toml"
    for io in udp packet xdp; do
        out="$work/$io-$n"
        mkdir -p "$out"
        ip netns exec $d "$bin" node -q --config "$work/rcv.toml" --output "$out" --ready-file "$out/ready" >/dev/null 2>"$out/rcv.log" &
        rpid=$!
        for _ in $(seq 200); do [ -e "$out/ready" ] && break; sleep 0.05; done
        ip netns exec $s bash -c "'$bin' node -q --config '$work/snd.toml' --io $io --duration $dur --output '$out' >/dev/null 2>'$out/snd.log'; times" > "$out/times"
        sleep 0.5
        kill -TERM $rpid
        wait $rpid || true
        python3 - "$out" "$io" "$n" <<'PY'
import json, re, sys
out, io, n = sys.argv[1:4]
snd = json.load(open(f"{out}/snd.json"))
rcv = json.load(open(f"{out}/rcv.json"))
def sec(t):
    m = re.match(r"(\d+)m([\d.]+)s", t)
    return int(m[1]) * 60 + float(m[2])
user, system = (sec(t) for t in open(f"{out}/times").read().split("\n")[1].split())
c = snd["counters"]
secs = (snd["stop_ns"] - snd["start_ns"]) / 1e9
sent = max(c["sent"], 1)
print(f"{io:6} N {n:>5}: {c['sent'] / secs / 1e3:7.1f} kpps (asked {int(n)}), skipped {c['skipped_frames']} of {c['frames'] + c['skipped_frames']} frames, "
      f"CPU {(user + system) / sent * 1e9:5.0f} ns/packet, received {rcv['counters']['probes']} of {c['sent']} (io {snd.get('io')})")
PY
    done
done
