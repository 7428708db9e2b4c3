#!/usr/bin/env bash
# Renders a lockstep report.html with headless Chromium and saves a PNG screenshot:
# proof that the page opens offline and shows its plots.
#
#   bench/screenshot-report.sh REPORT.html OUT.png
#
# Environment: CHROMIUM (binary, default chromium), WINDOW (width,height in CSS px,
# default 1400,3000; the screenshot is of the window, so make it tall enough for the
# page), TIMEOUT (seconds, default 120).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 REPORT.html OUT.png" >&2
    exit 2
fi
REPORT=$1
OUT=$2
CHROMIUM=${CHROMIUM:-chromium}
WINDOW=${WINDOW:-1400,3000}
TIMEOUT=${TIMEOUT:-120}

if [ ! -f "$REPORT" ]; then
    echo "$REPORT: no such file" >&2
    exit 2
fi
if ! command -v "$CHROMIUM" >/dev/null 2>&1; then
    echo "$CHROMIUM not found: install it with  apt-get install chromium  (Debian) or set CHROMIUM=..." >&2
    exit 3
fi

# Chromium resolves both paths itself: hand it absolute ones.
REPORT_ABS=$(realpath "$REPORT")
OUT_DIR=$(dirname "$OUT")
mkdir -p "$OUT_DIR"
OUT_ABS="$(realpath "$OUT_DIR")/$(basename "$OUT")"
rm -f "$OUT_ABS"

PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"' EXIT

# No network: the page is self-contained, and the flags keep Chromium from calling
# home (background networking, component updates, sync). --no-sandbox because the
# lab runs as root.
timeout "$TIMEOUT" "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --hide-scrollbars --user-data-dir="$PROFILE" \
    --window-size="$WINDOW" --screenshot="$OUT_ABS" "file://$REPORT_ABS" \
    >"$PROFILE/chromium.log" 2>&1 || {
    status=$?
    echo "chromium failed (exit $status):" >&2
    tail -n 20 "$PROFILE/chromium.log" >&2
    exit 1
}
if [ ! -s "$OUT_ABS" ]; then
    echo "chromium wrote no screenshot; its log:" >&2
    tail -n 20 "$PROFILE/chromium.log" >&2
    exit 1
fi
echo "$OUT_ABS"
