#!/usr/bin/env bash
# Kura over the Bigtable emulator, measured in ratios (benches/README.md, "Bigtable backend").
#
#   benches/bigtable.sh [--quick] [--secs N] [-c N] [--out DIR] [--no-build]
#
# 1. Builds `kura`, `kura-load` and the `bigtable_read` bench (release).
# 2. For each application workload (blog, actions, counter, graph): kura-load against one
#    Kura server, then against two servers on the same emulator, requests spread over both
#    (each request of a connection to the next server), correctness checks read from every
#    server. Each kura-load run starts its own emulator and its servers on it, so the one- and
#    two-server runs start from the same empty instance.
# 3. `bigtable_read`: the same row read by bare gRPC ReadRows and by Kura's GET.
# 4. Prints one markdown table of ratios.
#
# --quick: a few seconds per run, for CI. Exit status: 0 when every correctness check passed
# and every run could be made, 1 when a check failed, 2 when a run could not be made.
set -euo pipefail

secs=10
read_secs=5
rounds=3
conns=16
out=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) secs=3; read_secs=2; rounds=1 ;;
    --secs) secs="$2"; read_secs="$2"; shift ;;
    -c) conns="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bigtable.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

. "$(dirname "$0")/common.sh"
release_binaries bigtable.sh "$build"
if [ "$build" = 1 ]; then
    cargo bench -q -p kura-bench --bench bigtable_read --no-run
fi
out=${out:-$root/benches/out/bigtable}
mkdir -p "$out"

status=0
worse() { [ "$1" -gt "$status" ] && status=$1; return 0; }
rows=()
fails=()

# field FILE JQ: a figure of a result.json (empty when the run left none).
field() { [ -f "$1" ] && jq -r "$2 // empty" "$1" 2>/dev/null || true; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
fmt() { awk -v a="$1" 'BEGIN { if (a == "") print "n/a"; else printf "%.2f", a }'; }

for w in blog actions counter graph; do
    for n in 1 2; do
        dir="$out/$w-$n"
        rm -rf "$dir"
        echo "== $w, $n server(s), ${secs}s, $conns connections" >&2
        rc=0
        # No rounds: against the emulator the ratios to the trivial server mean nothing.
        "$load" --spawn-server "$kura" --spawn-backend bigtable --servers "$n" --rounds 0 \
            -w "$w" -c "$conns" -d "${secs}s" -q --out "$dir" > "$dir.md" 2> "$dir.err" || rc=$?
        case $rc in
        0) ;;
        1) worse 1
           fails+=("$w on $n server(s): correctness check FAILED")
           while IFS= read -r f; do fails+=("    $f"); done \
               < <(field "$dir/result.json" '.verification.failures[]') ;;
        *) worse 2
           fails+=("$w on $n server(s): the run could not be made (exit $rc): $(tail -n 3 "$dir.err" | tr '\n' ' ')") ;;
        esac
    done
    one="$out/$w-1/result.json"
    two="$out/$w-2/result.json"
    run='.phases[] | select(.name == "run") | .summary'
    check() {
        local p
        p=$(field "$1" '.passed | tostring')
        case "$p" in true) echo pass ;; false) echo FAIL ;; *) echo "not run" ;; esac
    }
    rows+=("| $w | 2 servers / 1 server \
| $(ratio "$(field "$two" "$run | .ok_throughput")" "$(field "$one" "$run | .ok_throughput")") \
| $(ratio "$(field "$two" "$run | .latency.p50_us")" "$(field "$one" "$run | .latency.p50_us")") \
| $(ratio "$(field "$two" "$run | .latency.p99_us")" "$(field "$one" "$run | .latency.p99_us")") \
| $(fmt "$(field "$one" '.ratios[] | select(.phase == "run") | .throughput')") / \
$(fmt "$(field "$two" '.ratios[] | select(.phase == "run") | .throughput')") \
| $(check "$one") / $(check "$two") |")
done

echo "== gRPC read vs Kura GET, ${read_secs}s x $rounds rounds, $conns readers" >&2
rc=0
cargo bench -q -p kura-bench --bench bigtable_read -- --kura "$kura" --secs "$read_secs" \
    --rounds "$rounds" -c "$conns" --json "$out/read.json" > "$out/read.md" 2> "$out/read.err" || rc=$?
if [ $rc -ne 0 ]; then
    worse $(( rc == 1 ? 1 : 2 ))
    fails+=("bigtable_read (exit $rc): $(tail -n 3 "$out/read.err" | tr '\n' ' ')")
fi
read_json="$out/read.json"

reads() {
    local w e
    w=$(field "$read_json" '(.grpc.wrong + .kura.wrong) | tostring')
    e=$(field "$read_json" '(.grpc.errors + .kura.errors) | tostring')
    [ -n "$w" ] && echo "$w wrong, $e failed reads" || echo "not run"
}
echo
echo "$conns connections; application runs ${secs}s each, reads ${read_secs}s x $rounds rounds:"
echo
echo "| workload | compared | throughput | p50 latency | p99 latency | x healthz, 1 / 2 servers | checks, 1 / 2 servers |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "| read one row | Kura GET / bare gRPC ReadRows \
| $(fmt "$(field "$read_json" '.ratio.throughput')") | $(fmt "$(field "$read_json" '.ratio.p50')") \
| $(fmt "$(field "$read_json" '.ratio.p99')") | - | $(reads) |"
echo
echo "(x healthz: the run's throughput over the same run's GET /healthz baseline, same servers and"
echo "connections. Results in $out.)"
if [ ${#fails[@]} -gt 0 ]; then
    echo
    echo "FAILED:"
    printf '%s\n' "${fails[@]}"
fi
exit $status
