#!/usr/bin/env bash
# Kura against the HTTP stack's ceiling, side by side (benches/README.md, "The figures").
#
#   benches/ceiling.sh [--runs N] [--secs S] [-c N] [--out DIR] [--no-build]
#
# Runs kura-load's `health`, `random-read` and `random-write` workloads (`sync` durability, 64
# connections, S = 6 seconds a phase) against a fresh server each, in turn, N = 2 times. Each
# kura-load run measures the trivial actix-web server (`kura-ceiling`: one handler answering
# 13 bytes) beside Kura, and after its long phases the three again in rounds of one-second
# slices in turn (`--rounds`, README "What one run does", step 5), whose ratios the machine's
# drift does not bend. Prints a markdown table: per figure each run's median of its rounds,
# the median over the runs, the long phases' ratio of each run, and the target:
#
# - `/healthz` / the trivial server      >= 0.9
# - 1-cell GET / the trivial server      >= 0.8
# - 1-cell PUT (sync) / the trivial server >= 0.5
#
# then the server's CPU per operation against the trivial server's in the long phases. Exit 2
# when a run could not be made, 1 when a median missed its target.
set -euo pipefail

runs=2
secs=6
conns=64
out=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift ;;
    --secs) secs="$2"; shift ;;
    -c) conns="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "ceiling.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

. "$(dirname "$0")/common.sh"
release_binaries ceiling.sh "$build"
[ -x "$target/release/kura-ceiling" ] || {
    echo "ceiling.sh: $target/release/kura-ceiling missing (run without --no-build)" >&2
    exit 2
}
out=${out:-$root/benches/out/ceiling}
rm -rf "$out"
mkdir -p "$out"

workloads=(health random-read random-write)
for i in $(seq 1 "$runs"); do
    for w in "${workloads[@]}"; do
        echo "== run $i: $w" >&2
        if ! "$load" --spawn-server "$kura" --durability sync -w "$w" -c "$conns" -d "${secs}s" \
            --quiet --out "$out/$w-$i" >"$out/$w-$i.txt" 2>&1; then
            echo "ceiling.sh: the $w run failed (see $out/$w-$i.txt)" >&2
            exit 2
        fi
    done
done

python3 - "$out" "$runs" <<'EOF'
import json, statistics, sys

out, runs = sys.argv[1], int(sys.argv[2])
rows = [
    ("`/healthz` / the trivial server", "health", 0.9),
    ("1-cell GET / the trivial server", "random-read", 0.8),
    ("1-cell PUT (`sync`) / the trivial server", "random-write", 0.5),
]

def result(w, i):
    return json.load(open(f"{out}/{w}-{i}/result.json"))

def rounds_median(r):
    rounds = (r.get("rounds") or {}).get("rounds") or []
    ratios = [x["run"] / x["ceiling"] for x in rounds if x["ceiling"] > 0]
    return statistics.median(ratios) if ratios else None

def long_ratio(r):
    return next((x.get("ceiling") for x in r["ratios"] if x["phase"] == "run"), None)

def cpu(r, name):
    phase = r.get(name) if name != "run" else next(p for p in r["phases"] if p["name"] == "run")
    c = (phase or {}).get("cpu") or {}
    return c.get("server_us")

def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"

missed = False
print("| figure | rounds' median, each run | median | long phases, each run | target | met |")
print("|---|---|---|---|---|---|")
for label, w, target in rows:
    rs = [result(w, i) for i in range(1, runs + 1)]
    meds = [rounds_median(r) for r in rs]
    known = [m for m in meds if m is not None]
    overall = statistics.median(known) if known else None
    met = overall is not None and overall >= target
    missed |= not met
    print(f"| {label} | {', '.join(fmt(m) for m in meds)} | **{fmt(overall)}** | "
          f"{', '.join(fmt(long_ratio(r)) for r in rs)} | >= {target} | {'yes' if met else '**no**'} |")
print()
for label, w, _ in rows:
    rs = [result(w, i) for i in range(1, runs + 1)]
    pairs = [f"{fmt(cpu(r, 'run'), 1)} / {fmt(cpu(r, 'ceiling'), 1)}" for r in rs]
    print(f"- {label}: server CPU per operation, Kura / the trivial server, µs: {'; '.join(pairs)}")
sys.exit(1 if missed else 0)
EOF
