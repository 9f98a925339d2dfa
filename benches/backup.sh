#!/usr/bin/env bash
# Backup time against data size: `kura backup` of a running server, and a plain `cp -r` of the
# same server's data directory measured in the same run (the baseline), for several sizes.
#
#   benches/backup.sh [ROWS...]      (default: 100000 400000 1600000 rows of 1000-byte values)
#
# For each size: start a server (release build) on a fresh data dir under $WORK (default
# /tmp/kura-backup-bench), load ROWS rows with kura-load (PerformanceEvaluation's TestTable),
# then alternate cp -r and kura backup twice each (the page cache is warm for both), and print
# one markdown table row: the data dir's size (du, apparent bytes, logs' preallocated zeros
# included), the backup's size (its files), the best time of each, the backup's MB/s (of its
# own bytes), and backup time / cp time.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${K:-./target/release/kura}
L=${L:-./target/release/kura-load}
WORK=${WORK:-/tmp/kura-backup-bench}
VALUE=${VALUE:-1000}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 400000 1600000)
[ -x "$K" ] && [ -x "$L" ] || { echo "build first: cargo build --release -p kura -p kura-bench" >&2; exit 2; }

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
best() { if [ "$(echo "$1 < $2" | bc)" = 1 ]; then echo "$1"; else echo "$2"; fi; }

echo "| rows x ${VALUE} B | data dir | backup | cp -r | kura backup | backup MB/s | backup / cp |"
echo "|---|---|---|---|---|---|---|"
for rows in "${SIZES[@]}"; do
    rm -rf "$WORK" && mkdir -p "$WORK"
    port=$((20000 + RANDOM % 20000))
    "$K" --bind "127.0.0.1:$port" --data-dir "$WORK/data" >"$WORK/server.log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    "$L" --target "127.0.0.1:$port" -w random-read --rows "$rows" --value-size "$VALUE" \
        -c 4 -d 1s --no-baseline >"$WORK/load.log" 2>&1
    # Background flushes and compactions settle first (cp -r fails on a file that vanishes).
    bytes=0
    while [ "$(du -sb "$WORK/data" | cut -f1)" != "$bytes" ]; do
        bytes=$(du -sb "$WORK/data" | cut -f1); sleep 3
    done
    cp_best=999999; bk_best=999999
    for round in 1 2; do
        sync
        t0=$(now); cp -r "$WORK/data" "$WORK/cp$round"; sync; t1=$(now)
        cp_best=$(best "$(secs "$t0" "$t1")" "$cp_best")
        rm -rf "$WORK/cp$round"
        sync
        t0=$(now); "$K" backup --url "http://127.0.0.1:$port" --out "$WORK/b$round" >/dev/null; sync; t1=$(now)
        bk_best=$(best "$(secs "$t0" "$t1")" "$bk_best")
        bk_bytes=$(du -sb --exclude=kura-backup.json "$WORK/b$round" | cut -f1)
        rm -rf "$WORK/b$round"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
    trap - EXIT
    printf '| %s | %.1f MB | %.1f MB | %.2f s | %.2f s | %.0f | %.2f |\n' "$rows" \
        "$(echo "$bytes / 1000000" | bc -l)" "$(echo "$bk_bytes / 1000000" | bc -l)" \
        "$cp_best" "$bk_best" \
        "$(echo "$bk_bytes / 1000000 / $bk_best" | bc -l)" "$(echo "$bk_best / $cp_best" | bc -l)"
done
rm -rf "$WORK"
