#!/bin/sh
# Fills fuzz/corpus/<target>/ with seeds from the project's own files: the
# scenarios, the network files of examples/, the node files the planner makes of
# the small scenarios (`lockstep lab plan --output`), and a few export plans,
# request bodies and unit strings. Comments and descriptions are left out of the
# TOML seeds: a shorter input is a faster one, and the fuzzer mutates what is left.
# The corpus is not committed (.gitignore); run this from anywhere, once, before
# fuzzing:   sh fuzz/seed.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
c=$root/fuzz/corpus
mkdir -p "$c/scenario_toml" "$c/nodefile_toml" "$c/netcalc_toml" "$c/export_toml" \
    "$c/units_text" "$c/ctl_request_json"

# TOML without comment lines, blank lines, descriptions or trailing comments
compact() {
    sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' -e '/^description[[:space:]]*=/d' \
        -e 's/[[:space:]][[:space:]]*#[^"]*$//' "$1" > "$2"
}

for f in "$root"/scenarios/*.toml; do
    compact "$f" "$c/scenario_toml/$(basename "$f")"
done
for f in "$root"/examples/*.toml "$root"/examples/reference/*.toml; do
    compact "$f" "$c/netcalc_toml/$(basename "$f")"
done

plans=$(mktemp -d)
[ -x "$root/target/debug/lockstep" ] || (cd "$root" && cargo build -q -p lockstep)
for s in line gateway forwarding; do
    "$root/target/debug/lockstep" lab plan "$root/scenarios/$s.toml" --output "$plans/$s" > /dev/null
done
for f in "$plans"/*/*/config/*.toml; do
    run=$(echo "$f" | sed "s|$plans/||; s|/config/|_|; s|/|_|g")
    compact "$f" "$c/nodefile_toml/$run"
done
cp "$c/nodefile_toml/line_tdp_r1.toml" "$c/export_toml/node.toml"
rm -r "$plans"

cat > "$c/export_toml/flows.toml" <<'EOF'
[[flow]]
name = "c"
dev = "eth0"
rate = "40Mbit/s"
burst = "51514B"
max_packet = "1514B"
peak = "100Mbit/s"
latency = "50ms"
match = { src = "10.0.0.3", dst = "10.0.0.0/24", proto = "udp", dport = 9000, sport = 7 }
[[flow]]
name = "d"
dev = "eth0"
rate = "1Mbit/s"
burst = "2kB"
ceil = "2Mbit/s"
limit = "100kB"
EOF
cat > "$c/export_toml/port.toml" <<'EOF'
[[port]]
dev = "eth1"
tf = "250us"
k = 4
rows = [2, { slot = 0, packets = 3, size = 1000 }, { slot = 3, packets = 0 }]
reserved_prio = 6
epoch_ns = -5
etf = true
etf_delta = "200us"
offload = false
txtime_assist = true
EOF

printf '%s\n' '{"name":"f1","path":["s0","s1"],"rate":"10Mbit/s","burst":"3028B","peak":"100Mbit/s","max_packet":"1514B","deadline":"1ms"}' > "$c/ctl_request_json/flow.json"
printf '%s' '{"path":["s0"],"rate":"1Mbit/s","duration":"10s"}' > "$c/ctl_request_json/oneshot.json"
printf '%s' '{"path":["s1","s2"]}' > "$c/ctl_request_json/standing.json"
printf '%s' '{"name":"t1","path":["s0/1","r1/2"],"packets":3,"size":1002,"d":[0,1]}' > "$c/ctl_request_json/tdp.json"
printf '%s' '{"name":"t2","id":7,"path":["s0/1","r1/2","r2/1"],"packets":1,"size":1002,"d":[0,1,2]}' > "$c/ctl_request_json/tdp3.json"

i=0
for u in 100us -1.5ms 7.41us 2min 1514B 1.5KiB 2MB 100000pps 2.5pps 135kpps 40Mbit/s \
    20B/us 12.5MB/s 100Mbps 302800/3069Mbit/s 0.000001bit/ns 2MiB 12000bit 3ps; do
    printf '%s' "$u" > "$c/units_text/u$i"
    i=$((i + 1))
done
printf '%s' '45 µs' > "$c/units_text/u$i"
printf '%s' '1_000 kbps' > "$c/units_text/u$((i + 1))"
echo "seeds in $c"
