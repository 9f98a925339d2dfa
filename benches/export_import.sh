#!/usr/bin/env bash
# `kura export`, `kura import` and `kura copy` speed as a ratio to a plain full scan of the same
# table, all four measured in the same run against the same server.
#
#   benches/export_import.sh [ROWS]      (default: 200000 rows of 1000-byte values)
#
# Starts a server (release build) on a fresh data dir under $WORK (default
# /tmp/kura-export-bench), loads ROWS rows with kura-load (PerformanceEvaluation's TestTable, one
# cell per row), then twice each, alternating: the plain scan (a REST scanner read to its end
# with curl, the same 5000 cells per answer as export reads, the answers thrown away), `kura
# export` of the table, `kura import` of that export into a new table (dropped afterwards), and
# `kura copy` of the table from the server into an embedded data directory (removed afterwards).
# Prints one markdown table row with the best time of each, rows/s and MB/s (MB = the export's
# part files), and each rate as a ratio to the scan's.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${K:-./target/release/kura}
L=${L:-./target/release/kura-load}
WORK=${WORK:-/tmp/kura-export-bench}
ROWS=${1:-200000}
VALUE=${VALUE:-1000}
[ -x "$K" ] && [ -x "$L" ] || { echo "build first: cargo build --release -p kura -p kura-bench" >&2; exit 2; }

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
best() { if [ "$(echo "$1 < $2" | bc)" = 1 ]; then echo "$1"; else echo "$2"; fi; }

rm -rf "$WORK" && mkdir -p "$WORK"
port=$((20000 + RANDOM % 20000))
URL="http://127.0.0.1:$port"
"$K" --bind "127.0.0.1:$port" --data-dir "$WORK/data" >"$WORK/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
"$L" --target "127.0.0.1:$port" -w random-read --rows "$ROWS" --value-size "$VALUE" \
    -c 4 -d 1s --no-baseline >"$WORK/load.log" 2>&1

# The whole table through one REST scanner; prints the bytes of JSON read.
scan() {
    local loc code bytes=0
    loc=$(curl -si -X PUT -H 'Content-Type: application/json' -d '{"batch":5000,"maxVersions":1}' \
        "$URL/TestTable/scanner" | tr -d '\r' | awk 'tolower($1) == "location:" { print $2 }')
    [ -n "$loc" ] || { echo "no scanner" >&2; exit 1; }
    while :; do
        code=$(curl -s -o "$WORK/page" -w '%{http_code}' -H 'Accept: application/json' "$loc")
        [ "$code" = 204 ] && break
        [ "$code" = 200 ] || { echo "scanner answered $code" >&2; exit 1; }
        bytes=$((bytes + $(stat -c %s "$WORK/page")))
    done
    curl -s -X DELETE "$loc" >/dev/null
    echo "$bytes"
}

scan_best=999999; ex_best=999999; im_best=999999; cp_best=999999
for round in 1 2; do
    sync
    t0=$(now); scan >/dev/null; t1=$(now)
    scan_best=$(best "$(secs "$t0" "$t1")" "$scan_best")
    rm -rf "$WORK/export"
    t0=$(now); "$K" export --url "$URL" --table TestTable --out "$WORK/export" >/dev/null; sync; t1=$(now)
    ex_best=$(best "$(secs "$t0" "$t1")" "$ex_best")
    t0=$(now)
    "$K" import --url "$URL" --table "Imported$round" --from "$WORK/export" \
        --checkpoint "$WORK/import.cp" >/dev/null 2>&1
    t1=$(now)
    im_best=$(best "$(secs "$t0" "$t1")" "$im_best")
    curl -sf -X DELETE "$URL/Imported$round/schema" >/dev/null
    t0=$(now)
    "$K" copy --from "$URL" --to "embedded:$WORK/copy" --table TestTable \
        --checkpoint "$WORK/copy.cp" >/dev/null 2>&1
    sync; t1=$(now)
    cp_best=$(best "$(secs "$t0" "$t1")" "$cp_best")
    rm -rf "$WORK/copy"
done
bytes=$(cat "$WORK"/export/part-m-* | wc -c)
mb=$(echo "scale=1; $bytes / 1000000" | bc)
rate() { echo "$ROWS / $1" | bc -l; }
echo "| rows x ${VALUE} B | export MB | scan | export | import | copy | export / scan | import / scan | copy / scan |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '| %s | %s MB | %.2f s (%.0f rows/s, %.0f MB/s) | %.2f s (%.0f rows/s, %.0f MB/s) | %.2f s (%.0f rows/s, %.0f MB/s) | %.2f s (%.0f rows/s) | %.2f | %.2f | %.2f |\n' \
    "$ROWS" "$mb" \
    "$scan_best" "$(rate "$scan_best")" "$(echo "$mb / $scan_best" | bc -l)" \
    "$ex_best" "$(rate "$ex_best")" "$(echo "$mb / $ex_best" | bc -l)" \
    "$im_best" "$(rate "$im_best")" "$(echo "$mb / $im_best" | bc -l)" \
    "$cp_best" "$(rate "$cp_best")" \
    "$(echo "$scan_best / $ex_best" | bc -l)" "$(echo "$scan_best / $im_best" | bc -l)" \
    "$(echo "$scan_best / $cp_best" | bc -l)"
