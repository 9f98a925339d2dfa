#!/usr/bin/env bash
# Counters against Redis, side by side (benches/README.md, "The figures").
#
#   benches/redis_counter.sh [--secs N] [--rounds R] [-c N] [--counters N] [--out DIR] [--no-build]
#
# Kura's `PUT /TestTable/{key}?check=increment` with `sync` durability over HTTP (kura-load's
# `increment` workload) against Redis `INCR` with `appendonly yes` and `appendfsync always`
# (redis-benchmark), both at the same connections (64) on the same number of hot counters
# (1,000, picked uniformly), in alternating rounds on this machine, each server started fresh
# with its data in a temporary directory. Both acknowledge an increment only once it is in a
# file the OS has been asked to fsync: Redis fsyncs its append-only file before it answers,
# Kura fsyncs its log (group commit) before it answers.
#
# Redis comes from Debian's `redis-server` package (it brings `redis-benchmark`): the script
# installs it with apt-get when it is missing and it runs as root, else says what to install.
# Prints a markdown table: per round Redis ops/s, Kura ops/s and their ratio, Kura's ratio to
# the HTTP stack's ceiling (kura-load's `x ceiling`: a trivial actix-web server answering 13
# bytes, measured in the same run), and that ceiling's rate against Redis, the bound of Kura's
# ratio over HTTP on this machine; and what one operation cost each server in CPU (user +
# system, every thread, from /proc/PID/stat): Redis per INCR, Kura per increment, the trivial
# server per answer. Exit 2 when a run could not be made.
set -euo pipefail

secs=10
rounds=3
conns=64
counters=1000
out=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --secs) secs="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    -c) conns="$2"; shift ;;
    --counters) counters="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "redis_counter.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

. "$(dirname "$0")/common.sh"
release_binaries redis_counter.sh "$build"
out=${out:-$root/benches/out/redis-counter}
mkdir -p "$out"

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
    else
        echo "redis_counter.sh: needs redis-server and redis-benchmark (Debian: apt-get install redis-server)" >&2
        exit 2
    fi
fi


redis_pid=""
redis_dir=""
cleanup() {
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    [ -n "$redis_dir" ] && rm -rf "$redis_dir"
    return 0
}
trap cleanup EXIT

# CPU time (user + system, every thread) of process $1 in clock ticks (proc(5) fields 14, 15).
hz=$(getconf CLK_TCK)
cpu_ticks() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

# One Redis round: INCR on $counters keys from $conns connections for about $secs seconds.
redis_round() {
    local port
    port=$(free_port)
    redis_dir=$(mktemp -d -t kura-redis.XXXXXX)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$redis_dir" --save "" \
        --appendonly yes --appendfsync always --daemonize no --loglevel warning \
        >"$out/redis-$1.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 1 50); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    # A short probe sizes the request count to the time bound (redis-benchmark counts requests).
    local probe n rps
    probe=$(redis-benchmark -p "$port" -c "$conns" -n 20000 -r "$counters" -t incr --csv -q | awk -F'"' '/INCR/ {print $4}')
    n=$(python3 -c "print(max(20000, int(float('${probe:-0}') * $secs)))")
    local cpu0 cpu1
    cpu0=$(cpu_ticks "$redis_pid")
    rps=$(redis-benchmark -p "$port" -c "$conns" -n "$n" -r "$counters" -t incr --csv -q | awk -F'"' '/INCR/ {print $4}')
    cpu1=$(cpu_ticks "$redis_pid")
    # Every increment was applied: the counters sum to the requests sent.
    local total
    total=$(redis-cli -p "$port" --scan --pattern 'counter:*' | xargs -r redis-cli -p "$port" mget | awk '{s+=$1} END {print s+0}')
    kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
    rm -rf "$redis_dir"; redis_dir=""
    if [ -z "$rps" ] || [ "$total" != $((20000 + n)) ]; then
        echo "redis_counter.sh: the Redis round failed (ops/s '${rps}', counters sum $total of $((20000 + n)))" >&2
        exit 2
    fi
    # Redis's CPU per INCR of the measured run, microseconds.
    echo "$rps $(python3 -c "print(f'{($cpu1 - $cpu0) / $hz * 1e6 / $n:.1f}')")"
}

# One Kura round: kura-load's increment workload on $counters rows, sync durability.
kura_round() {
    local dir="$out/kura-$1"
    rm -rf "$dir"
    # No rounds: the comparison is with Redis, in this script's own alternating rounds.
    if ! "$load" --spawn-server "$kura" --durability sync -w increment --rows "$counters" \
        -c "$conns" -d "${secs}s" --rounds 0 --quiet --out "$dir" >"$out/kura-$1.txt" 2>&1; then
        echo "redis_counter.sh: the Kura round failed (see $out/kura-$1.txt)" >&2
        exit 2
    fi
    python3 - "$dir/result.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
run = next(p for p in r["phases"] if p["name"] == "run")
ratio = next((x for x in r["ratios"] if x["phase"] == "run"), {})
c = ratio.get("ceiling")
# Server CPU per answer (kura-load reads it from /proc for the servers it started).
us = lambda p: f'{p["cpu"]["server_us"]:.1f}' if p and (p.get("cpu") or {}).get("server_us") is not None else "-"
print(f'{run["summary"]["ok_throughput"]:.0f}', f'{c:.2f}' if c else "-", us(run), us(r.get("ceiling")))
EOF
}

rows=()
for i in $(seq 1 "$rounds"); do
    read -r r r_us < <(redis_round "$i")
    read -r k c k_us c_us < <(kura_round "$i")
    ratio=$(python3 -c "print(f'{$k / $r:.2f}')")
    # The trivial actix-web server's rate in the same run (kura-load's ceiling), against Redis:
    # what any HTTP answer costs here, the bound of Kura / Redis.
    bound=$(python3 -c "c = '$c'; print('-' if c == '-' else f'{$k / float(c) / $r:.2f}')")
    rows+=("| $i | $(printf '%.0f' "$r") | $k | **$ratio** | $c | $bound | $r_us | $k_us | $c_us |")
done

echo
echo "Counters: $conns connections, $counters counters, ${secs} s per run, rounds alternating Redis then Kura"
echo
echo "| round | Redis INCR, appendfsync always, ops/s | Kura check=increment, sync, ops/s | Kura / Redis | Kura x ceiling | ceiling / Redis | Redis CPU µs / INCR | Kura CPU µs / increment | ceiling CPU µs / answer |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
