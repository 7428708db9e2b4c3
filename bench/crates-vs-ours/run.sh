#!/bin/sh
# Two well-kept crates measured against lockstep's own code (see src/main.rs):
#   hdrhistogram vs lockstep_core::stats::Histogram/Summary — time per recorded sample
#     over 10 M seeded latencies, memory held, percentile/max/mean/stddev error against
#     the sorted samples, serialized size, merging two per-CPU histograms;
#   plotters (SVG backend) vs report/svg.rs — the same 3-series latency CCDF: bytes,
#     render time, self-containedness (SVGs written to $OUT for screenshots);
#   and each crate's build cost: crates pulled in and clean release compile time.
# Builds in release, runs the comparison RUNS times (default 3) and prints the tables of
# the first run and the spread of every timing across runs.
#
#   sh bench/crates-vs-ours/run.sh          (RUNS=3 OUT=/tmp/cmp COST=1)
#
# Optional: chromium renders the SVGs to PNG when it is installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-3}
OUT=${OUT:-/tmp/cmp}
COST=${COST:-1}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
cargo build --quiet --release --manifest-path "$here/Cargo.toml"
bin="$CARGO_TARGET_DIR/release/crates-vs-ours"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=1
while [ "$i" -le "$RUNS" ]; do
    "$bin" all --out "$OUT" > "$tmp/run$i.txt"
    if [ "$i" -eq 1 ]; then
        grep -v '^@ ' "$tmp/run1.txt"
    fi
    i=$((i + 1))
done

echo
echo "== timings over $RUNS runs (each a median within its run)"
cat "$tmp"/run*.txt | awk '
    /^@ / { k = $2; if (!(k in n)) order[++m] = k; v[k, ++n[k]] = $3
            if (!(k in lo) || $3 + 0 < lo[k]) lo[k] = $3 + 0
            if (!(k in hi) || $3 + 0 > hi[k]) hi[k] = $3 + 0 }
    END { printf "%-22s", "metric"; for (j = 1; j <= n[order[1]]; j++) printf " %10s", "run " j
          printf " %16s\n", "spread (max/min)"
          for (i = 1; i <= m; i++) { k = order[i]; printf "%-22s", k
              for (j = 1; j <= n[k]; j++) printf " %10s", v[k, j]
              printf " %16.2f\n", (lo[k] > 0 ? hi[k] / lo[k] : 0) } }'

if command -v chromium >/dev/null 2>&1; then
    for f in ours plotters; do
        chromium --headless --no-sandbox --disable-gpu --screenshot="$OUT/$f.png" \
            --window-size=800,500 "file://$OUT/$f.svg" >/dev/null 2>&1 || true
    done
    echo
    echo "screenshots: $OUT/ours.png $OUT/plotters.png"
fi

[ "$COST" = 1 ] || exit 0
# Build cost: each crate alone in a fresh project and target directory, the versions
# of this bench's Cargo.lock, release profile as the workspace's (debug = 1).
echo
echo "== build cost (clean release build, $(nproc) jobs)"
printf '%-44s %8s %10s\n' "dependency" "crates" "seconds"
cost() {
    name=$1
    label=$2
    dep=$3
    d="$tmp/cost-$name"
    mkdir -p "$d/src"
    printf '[package]\nname = "cost-%s"\nversion = "0.1.0"\nedition = "2021"\n[workspace]\n[dependencies]\n%s\n[profile.release]\ndebug = 1\n' "$name" "$dep" > "$d/Cargo.toml"
    echo 'fn main() {}' > "$d/src/main.rs"
    cp "$here/Cargo.lock" "$d/Cargo.lock"
    cargo fetch --quiet --manifest-path "$d/Cargo.toml" >/dev/null 2>&1 || true
    crates=$(cargo tree --quiet --manifest-path "$d/Cargo.toml" -e normal,build --prefix none 2>/dev/null | sed 's/ (\*)//' | sort -u | grep -vc '^cost-' || true)
    start=$(date +%s.%N)
    CARGO_TARGET_DIR="$d/target" cargo build --quiet --release --manifest-path "$d/Cargo.toml"
    end=$(date +%s.%N)
    printf '%-44s %8s %10.1f\n' "$label" "$crates" "$(awk "BEGIN { print $end - $start }")"
}
cost hdr "hdrhistogram 7, default features" 'hdrhistogram = "7.5"'
cost hdr-bare "hdrhistogram 7, no default features" 'hdrhistogram = { version = "7.5", default-features = false }'
cost plotters "plotters 0.3, svg_backend + line_series" 'plotters = { version = "0.3", default-features = false, features = ["svg_backend", "line_series"] }'
# Ours: svg.rs alone through rustc (std only); the histogram is part of lockstep-core.
start=$(date +%s.%N)
rustc --edition 2021 --crate-type lib -C opt-level=3 -g -A dead_code --out-dir "$tmp" \
    "$here/../../crates/lockstep/src/report/svg.rs"
end=$(date +%s.%N)
printf '%-44s %8s %10.1f\n' "report/svg.rs (ours, std only, rustc alone)" 0 "$(awk "BEGIN { print $end - $start }")"
