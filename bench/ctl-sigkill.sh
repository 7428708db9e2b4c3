#!/usr/bin/env bash
# The admission controller killed with SIGKILL under 20 concurrent clients, through the
# real client (`lockstep ctl add`, one process per request): each client admits shaped
# flows in a loop (a malformed one every 5th request, answered 400); once ACK
# admissions have been acknowledged the server gets `kill -9`, the clients stop at
# their first "cannot reach" (exit 3), the server is started again on the same
# database, and `lockstep ctl list --json` must hold every acknowledged flow and no
# rejected one. The restart itself re-admits the stored set (it refuses to start when
# a stored reservation no longer fits). Prints the figures; exit 1 when a check fails.
#
#   bench/ctl-sigkill.sh [ACK]      (default 100, below the ~199 flows the network holds;
#                                    LOCKSTEP=path/to/lockstep to choose the binary)
#
# tests/ctl_sigkill.rs does the same in the test suite with HTTP clients in threads,
# TDP flows too.
set -euo pipefail
cd "$(dirname "$0")/.."
ack_target=${1:-100}
bin=${LOCKSTEP:-}
if [ -z "$bin" ]; then
    cargo build --quiet --release -p lockstep
    bin="${CARGO_TARGET_DIR:-target}/release/lockstep"
fi
dir=$(mktemp -d /tmp/ctl-sigkill.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
cat > "$dir/net.toml" <<'EOF'
[[server]]
name = "s0"
rate = "1Gbit/s"
latency = "10us"
buffer = "300kB"

[[server]]
name = "s1"
rate = "1Gbit/s"
latency = "10us"
EOF

# Starts the server on port 0; sets $pid and $url (bounded wait for its address).
start() {
    "$bin" ctl serve --db "$dir/ctl.db" --network "$dir/net.toml" --listen 127.0.0.1:0 \
        2> "$dir/serve-$1.log" &
    pid=$!
    url=
    for _ in $(seq 600); do
        url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$dir/serve-$1.log")
        [ -n "$url" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "the server did not start:" >&2
    cat "$dir/serve-$1.log" >&2
    exit 1
}

start 1
for t in $(seq 0 19); do
    (
        for i in $(seq 0 199); do
            name="c$t-$i"
            burst=1500B
            [ $((i % 5)) -eq 4 ] && burst=100B   # below --max-packet: 400
            set +e
            "$bin" ctl add --server "$url" --name "$name" --path s0,s1 --rate 1Mbit/s \
                --burst "$burst" --max-packet 1500B --deadline 50ms > /dev/null 2>&1
            rc=$?
            set -e
            echo "$name $rc" >> "$dir/answers-$t"
            [ "$rc" -eq 3 ] && exit 0   # the server is gone
        done
    ) &
done
acked() { cat "$dir"/answers-* 2>/dev/null | awk '$2 == 0' | wc -l; }
for _ in $(seq 1200); do
    [ "$(acked)" -ge "$ack_target" ] && break
    sleep 0.1
done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
wait   # the clients: each stops at its first exit 3, or after 200 requests
cat "$dir"/answers-* > "$dir/answers"
awk '$2 == 0 {print $1}' "$dir/answers" | sort > "$dir/acked"
awk '$2 == 1 || $2 == 2 {print $1}' "$dir/answers" | sort > "$dir/rejected"
awk '$2 == 3 {print $1}' "$dir/answers" | sort > "$dir/cut"

start 2
"$bin" ctl list --server "$url" --json | jq -r '.flows[].name' | sort > "$dir/present"
fail=0
missing=$(comm -23 "$dir/acked" "$dir/present" | wc -l)
back=$(comm -12 "$dir/rejected" "$dir/present" | wc -l)
extra=$(comm -13 "$dir/acked" "$dir/present" | comm -23 - "$dir/cut" | wc -l)
echo "acknowledged before the kill: $(wc -l < "$dir/acked"), rejected: $(wc -l < "$dir/rejected"), cut off: $(wc -l < "$dir/cut")"
echo "present after the restart: $(wc -l < "$dir/present") (acknowledged missing: $missing, rejected present: $back, present but never acknowledged nor cut off: $extra)"
[ "$missing" -eq 0 ] && [ "$back" -eq 0 ] && [ "$extra" -eq 0 ] || fail=1
exit $fail
