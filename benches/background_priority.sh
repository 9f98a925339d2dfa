#!/usr/bin/env bash
# What a CPU-hungry background thread takes from GETs at each priority a background job of
# Kura could run at (benches/README.md, "The figures"; `actors/src/background.rs`).
#
#   benches/background_priority.sh [--rounds N] [--secs S] [--out DIR] [--no-build]
#
# Starts `kura`, loads 10,000 rows of 1,000 bytes, writes a 1 GiB file of random bytes under
# DIR and reads it once (into the page cache). Then, N = 3 times, reads the rows with one-cell
# GETs from 64 connections for S = 10 seconds in four phases in turn: alone; beside a process
# streaming the file from the page cache (`cat` in a loop: memory traffic and CPU, as a
# compaction's) at nice 10 (Kura's flushes and merges), at nice 19, and under Linux's
# SCHED_IDLE policy (`chrt --idle 0`, Kura's reference rewrites). Prints per phase the GETs/s
# of each round as a ratio to the round's phase alone, their median, and the CPU per GET that
# the rest of the machine (the streaming process) took. Exit 2 when a run could not be made.
set -euo pipefail

rounds=3
secs=10
out=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift ;;
    --secs) secs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "background_priority.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

. "$(dirname "$0")/common.sh"
release_binaries background_priority.sh "$build"
command -v chrt >/dev/null || { echo "background_priority.sh: chrt (util-linux) missing" >&2; exit 2; }
out=${out:-$root/benches/out/background-priority}
rm -rf "$out"
mkdir -p "$out"

addr="127.0.0.1:$(free_port)"
"$kura" --data-dir "$out/data" --bind "$addr" >"$out/server.log" 2>&1 &
server_pid=$!
streamer=""
# stop_streamer: stops the streaming loop and the `cat` it is running (frozen first, so that
# it cannot start another in between).
stop_streamer() {
    kill -STOP "$streamer" 2>/dev/null || true
    pkill -P "$streamer" 2>/dev/null || true
    kill -KILL "$streamer" 2>/dev/null || true
    wait "$streamer" 2>/dev/null || true
    streamer=""
}
cleanup() {
    if [ -n "$streamer" ]; then stop_streamer; fi
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null || true
    rm -rf "$out/data" "$out/stream.bin"
}
trap cleanup EXIT
for _ in $(seq 100); do
    curl -sf "http://$addr/healthz" >/dev/null && break
    sleep 0.1
done
if ! "$load" --target "$addr" --no-baseline -w random-read --rows 10000 --value-size 1000 -d 1s \
    --quiet --out "$out/prepare" >"$out/prepare.txt" 2>&1; then
    echo "background_priority.sh: loading the rows failed (see $out/prepare.txt)" >&2
    exit 2
fi
head -c 1G /dev/urandom >"$out/stream.bin"
cat "$out/stream.bin" >/dev/null

# phase NAME [COMMAND PREFIX...]: GETs for $secs seconds, beside the streaming process run
# under the prefix (none: alone).
phase() {
    local name=$1
    shift
    if [ $# -gt 0 ]; then
        # In this script's session, as Kura's background threads share their server's: with
        # the kernel's autogroups, a session of its own would be weighed as a peer of the
        # server's whatever its priority.
        (while :; do "$@" cat "$out/stream.bin" >/dev/null; done) &
        streamer=$!
    fi
    local ok=0
    "$load" --target "$addr" --server-pid "$server_pid" --no-baseline --no-load -w random-read \
        --rows 10000 --value-size 1000 -c 64 -d "${secs}s" --quiet --out "$out/$name" \
        >"$out/$name.txt" 2>&1 || ok=$?
    if [ -n "$streamer" ]; then
        stop_streamer
    fi
    [ "$ok" = 0 ] || { echo "background_priority.sh: the $name phase failed (see $out/$name.txt)" >&2; exit 2; }
}

for i in $(seq 1 "$rounds"); do
    echo "== round $i" >&2
    phase "alone-$i"
    phase "nice10-$i" nice -n 10
    phase "nice19-$i" nice -n 19
    phase "idle-$i" chrt --idle 0
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys

out, rounds = sys.argv[1], int(sys.argv[2])

def phase(name):
    p = json.load(open(f"{out}/{name}/result.json"))["phases"][0]
    return p["summary"]["ok_throughput"], p["cpu"]["machine"]["others_us"]

print("| the streaming process | GETs/s x alone, per round | median | rest of the machine, µs per GET |")
print("|---|---|---|---|")
for label, key in [("none", "alone"), ("nice 10", "nice10"), ("nice 19", "nice19"), ("SCHED_IDLE", "idle")]:
    ratios, rest = [], []
    for i in range(1, rounds + 1):
        alone, _ = phase(f"alone-{i}")
        rate, others = phase(f"{key}-{i}")
        ratios.append(rate / alone)
        rest.append(others)
    print(f"| {label} | {', '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} "
          f"| {', '.join(f'{r:.1f}' for r in rest)} |")
EOF
