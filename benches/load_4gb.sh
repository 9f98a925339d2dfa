#!/usr/bin/env bash
# The 4 GB load and the reads right after it, beside reads of 10,000 rows in the same set-up
# (benches/README.md, "The figures": the load's stalls, tail and memory; reads as data grows).
#
#   benches/load_4gb.sh [--rows N] [--value-size B] [--read-secs S] [--out DIR] [--no-build]
#                       [--kura BIN] [--also W,W..]
#
# (`--kura` measures another build of the server, for A/B runs; kura-load is this tree's. A
# wrapper script given there should `exec` the server, whose CPU the reads count.)
#
# 1. Starts `kura` on a fresh data directory under DIR (64 MB memtables, the default) and
#    samples its RssAnon (`/proc/PID/status`: anonymous memory, not the mapped segments) every
#    second.
# 2. Loads N rows (4,000,000) of B bytes (1,000) with kura-load's load phase (16 connections,
#    batches of 100 rows), then at once reads them for S seconds (30) with one-cell GETs from
#    64 connections; then, once no region compacts or holds a split's shared files any more
#    (`/admin/tables/TestTable/regions`), reads them the same way again.
# 3. Before step 1 and again after step 2, starts a fresh server, loads 10,000 rows of B bytes
#    and reads them the same way: the baseline is the mean of the two, so that the machine's
#    drift over the run (its rates moved by up to 30% within minutes on a shared VM) weighs
#    on both sides of the ratios alike.
#
# Prints a markdown table of the figures beside their targets: seconds of the load with no
# completed write, the load's p99.9, the largest RssAnon against twice the memtable budget per
# region of the loaded table plus 256 MB, and GETs/s right after the load and once its
# compactions are done against GETs/s on 10,000 rows (the mean of the reads before and after,
# both printed), and the segments per region as the read right after the load ended; then the
# CPU each read's GETs cost the server, kura-load and the rest of the machine (kura-load's
# `cpu` figures: kernel threads and other tenants show in the rest).
# --also W,W..: other kura-load workloads (`multi-get`, `scan10`, ...) read the same way once
# settled and on 10,000 rows before and after; a second table gives their ratios (no target).
# Per-second charts: DIR/load/chart.svg, DIR/read/chart.svg and DIR/settled/chart.svg. Needs
# about twice N x B of free disk under DIR while it runs (the data directory is removed at the
# end). Exit 2 when a run could not be made, 1 when a target was missed.
set -euo pipefail

rows=4000000
value=1000
read_secs=30
out=""
build=1
other_kura=""
also=""
while [ $# -gt 0 ]; do
    case "$1" in
    --rows) rows="$2"; shift ;;
    --value-size) value="$2"; shift ;;
    --read-secs) read_secs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    --kura) other_kura="$2"; shift ;;
    --also)
        also="${2//,/ }"
        case " $also " in *" random-read "*) echo "load_4gb.sh: --also: random-read is always read" >&2; exit 2 ;; esac
        shift ;;
    -h | --help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "load_4gb.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

. "$(dirname "$0")/common.sh"
release_binaries load_4gb.sh "$build"
if [ -n "$other_kura" ]; then
    kura=$(cd "$(dirname "$other_kura")" && pwd)/$(basename "$other_kura")
    [ -x "$kura" ] || { echo "load_4gb.sh: $other_kura is not an executable" >&2; exit 2; }
fi
out=${out:-$root/benches/out/load-4gb}
rm -rf "$out"
mkdir -p "$out"
memtable_mb=64

addr="127.0.0.1:$(free_port)"
server_pid=""
sampler_pid=""
# 10,000 rows of $value bytes on a server of their own, read as the loaded rows are; reported
# in $out/$1 (and each --also workload's in $out/$1-W).
read_small() {
    local w name
    for w in random-read $also; do
        name=$1
        [ "$w" = random-read ] || name="$1-$w"
        if ! "$load" --spawn-server "$kura" --no-baseline -w "$w" --rows 10000 --value-size "$value" \
            -d "${read_secs}s" --quiet --out "$out/$name" >"$out/$name.txt" 2>&1; then
            echo "load_4gb.sh: the $w read of 10,000 rows failed (see $out/$name.txt)" >&2
            exit 2
        fi
    done
}
cleanup() {
    if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null || true; fi
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$out/data"
    return 0
}
trap cleanup EXIT

read_small small-before
"$kura" --data-dir "$out/data" --bind "$addr" --memtable-mb "$memtable_mb" >"$out/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://$addr/healthz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { echo "load_4gb.sh: kura did not start (see $out/server.log)" >&2; exit 2; }
    sleep 0.1
done
(
    while kill -0 "$server_pid" 2>/dev/null; do
        awk '/^RssAnon/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true
        sleep 1
    done
) >"$out/rss_kb.txt" &
sampler_pid=$!

if ! "$load" --target "$addr" --server-pid "$server_pid" --no-baseline -w random-read --rows "$rows" --value-size "$value" \
    -d 1s --quiet --out "$out/load" >"$out/load.txt" 2>&1; then
    echo "load_4gb.sh: the load failed (see $out/load.txt)" >&2
    exit 2
fi
# Reads of the loaded rows for $read_secs seconds (one-cell GETs, or workload $3), reported in
# $out/$1; $2 names the read in an error.
read_loaded() {
    if ! "$load" --target "$addr" --server-pid "$server_pid" --no-baseline --no-load -w "${3:-random-read}" --rows "$rows" \
        --value-size "$value" -d "${read_secs}s" --quiet --out "$out/$1" >"$out/$1.txt" 2>&1; then
        echo "load_4gb.sh: the read $2 failed (see $out/$1.txt)" >&2
        exit 2
    fi
}
read_loaded read "after the load"
curl -sf "http://$addr/admin/tables/TestTable/regions" >"$out/regions.json"
# The load leaves compactions behind it (the splits' shared files, the flushed tiers): once
# every region has caught up, the same reads again. The first read pays for the backlog as
# well as for the data's size; this one for the size alone.
settled=""
for _ in $(seq 1 300); do
    if curl -sf "http://$addr/admin/tables/TestTable/regions" | python3 -c '
import json, sys
r = json.load(sys.stdin)["regions"]
sys.exit(0 if all(not x["compacting"] and x["reference_segments"] == 0 for x in r) else 1)'; then
        settled=1
        break
    fi
    sleep 2
done
if [ -z "$settled" ]; then
    echo "load_4gb.sh: the load's compactions did not finish within 10 minutes" >&2
    exit 2
fi
read_loaded settled "once the compactions were done"
for w in $also; do
    read_loaded "settled-$w" "$w once the compactions were done" "$w"
done
cleanup
server_pid=""
sampler_pid=""

read_small small-after

python3 - "$out" "$memtable_mb" "$rows" "$value" $also <<'EOF'
import json, sys
out, memtable_mb, rows, value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
also = sys.argv[5:]
def phase_of(name, which):
    r = json.load(open(f"{out}/{name}/result.json"))
    return next(p for p in r["phases"] if p["name"] == which)
def phase(name, which):
    return phase_of(name, which)["summary"]
load, read, settled = phase("load", "load"), phase("read", "run"), phase("settled", "run")
before, after = (phase(n, "run")["ok_throughput"] for n in ("small-before", "small-after"))
small = (before + after) / 2
timeline = load["timeline"]
# The last second is partial: the load ends within it.
zero = sum(1 for t in timeline[:-1] if t["ops"] == 0)
p999 = load["latency"]["p999_us"] / 1000
rss = max((int(l) for l in open(f"{out}/rss_kb.txt") if l.strip()), default=0) / 1024
region_stats = json.load(open(f"{out}/regions.json"))["regions"]
regions = len(region_stats)
bound = 2 * memtable_mb * regions + 256
ratio = read["ok_throughput"] / small
ratio_settled = settled["ok_throughput"] / small
checks = [
    ("seconds of the load with no completed write", f"{zero} of {len(timeline)}", "0", zero == 0),
    ("the load's p99.9", f"{p999:.0f} ms", "< 200 ms", p999 < 200),
    ("largest RssAnon", f"{rss:.0f} MB", f"< {bound} MB (2 x {memtable_mb} MB x {regions} regions + 256)", rss < bound),
    ("GET right after the load / GET on 10,000 rows",
     f"{ratio:.2f} ({read['ok_throughput'] / 1000:.1f}k / {small / 1000:.1f}k GET/s)", ">= 0.8", ratio >= 0.8),
    ("GET once the load's compactions are done / GET on 10,000 rows",
     f"{ratio_settled:.2f} ({settled['ok_throughput'] / 1000:.1f}k / {small / 1000:.1f}k GET/s)", ">= 0.8", ratio_settled >= 0.8),
]
print()
print(f"{rows:,} rows of {value:,} bytes loaded in {load['elapsed_s']:.0f} s ({load['rows_per_s'] / 1000:.1f}k rows/s)")
print(f"GETs on 10,000 rows: {before / 1000:.1f}k before the load, {after / 1000:.1f}k after it (their mean is the baseline)")
def span(xs):
    return f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"
segs = span([r["segments"] for r in region_stats])
shared = span([r["reference_segments"] for r in region_stats])
print(f"segments per region as the read right after the load ended: {segs} ({shared} of them a split's shared files)")
# What each GET cost, and what else ran: a read that slowed while the rest of the machine
# (kernel threads, the writeback of the compactions' files, other tenants) took more CPU per
# GET was slowed by the machine as much as by the data.
for name, title in (("small-before", "10,000 rows, before"), ("read", "right after the load"),
                    ("settled", "once settled"), ("small-after", "10,000 rows, after")):
    c = phase_of(name, "run").get("cpu") or {}
    m = c.get("machine") or {}
    req = f" (request threads {c['request_threads_us']:.1f})" if c.get("request_threads_us") is not None else ""
    server = f"server {c['server_us']:.1f} µs{req}, " if c.get("server_us") is not None else ""
    rest = f", the rest {m['others_us']:.1f} µs" if m.get("others_us") is not None else ""
    busy = f" ({m['busy_cores']:.2f} of {m['cores']} cores busy{rest})" if m else ""
    if c:
        print(f"CPU per GET, {title}: {server}kura-load {c['client_us']:.1f} µs{busy}")
print()
print("| figure | value | target | met |")
print("|---|---|---|---|")
for name, got, want, ok in checks:
    print(f"| {name} | {got} | {want} | {'yes' if ok else '**no**'} |")
if also:
    print()
    print("| other reads once settled (no target) | ops/s | on 10,000 rows (before, after) | ratio | server CPU per op, settled / 10,000 rows |")
    print("|---|---|---|---|---|")
    for w in also:
        got = phase(f"settled-{w}", "run")
        b, a = (phase(f"{n}-{w}", "run")["ok_throughput"] for n in ("small-before", "small-after"))
        cpu = [(phase_of(n, "run").get("cpu") or {}).get("server_us") for n in (f"settled-{w}", f"small-before-{w}", f"small-after-{w}")]
        cpu_text = " / ".join("-" if c is None else f"{c:.1f} µs" for c in (cpu[0], None if None in cpu[1:] else (cpu[1] + cpu[2]) / 2))
        print(f"| {w} | {got['ok_throughput'] / 1000:.1f}k | {b / 1000:.1f}k, {a / 1000:.1f}k | {got['ok_throughput'] / ((a + b) / 2):.2f} | {cpu_text} |")
print()
print(f"charts: {out}/load/chart.svg, {out}/read/chart.svg, {out}/settled/chart.svg")
sys.exit(0 if all(ok for *_, ok in checks) else 1)
EOF
