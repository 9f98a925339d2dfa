#!/usr/bin/env bash
# Kura's soak run: the long form of the reliability proofs (RELIABILITY.md, "How to prove it").
# CI (.ci/run -> cargo test) runs the short form of the same tests; this script runs them at the
# soak sizes. It takes hours; run it before a release or after touching the log, recovery, flush,
# compaction or split code.
#
# Usage:
#   scripts/soak.sh                 everything below, every durability mode
#   SOAK_MODES="sync" scripts/soak.sh          only some durability modes
#   SOAK_TRIALS=20 SOAK_MAX_ACKS=2000 ...      smaller, for a quick check of the script itself
#   SOAK_SKIP_HOSTILE=1 SOAK_SKIP_PROPTEST=1   skip sections
#
# What it runs (all in release mode, against the real `kura` binary where a server is involved):
#   1. tests/crash_kill9.rs, once per durability mode (sync, interval, none):
#        - kill -9 during concurrent acknowledged writes: SOAK_TRIALS (default 100) trials, each
#          killed after a random number of acknowledged writes in [SOAK_MIN_ACKS, SOAK_MAX_ACKS]
#          (default 5,000..10,000), all on one data directory so every earlier trial is re-checked
#          after every restart;
#        - the same with flush, minor/major compaction and splits running through /admin/;
#        - concurrent increments killed at random: counter >= acknowledged, <= acknowledged + in
#          flight, never backwards.
#      kill -9 keeps the OS page cache, so every mode must lose nothing acknowledged here (power
#      loss is what separates the modes; the storage's simulated power-cut tests cover that).
#      The seed of each run is printed; KURA_SOAK_SEED=<seed> replays the same kill points.
#   2. tests/hostile_http.rs once (it is exhaustive already; slowloris takes ~30 s).
#   3. The storage and actors test suites (where the proptests live) with PROPTEST_CASES=${SOAK_PROPTEST_CASES:-100000}
#      (engine vs. in-memory model, ...).
# Each section prints its duration; the script stops at the first failure (set -e) and the
# failing test prints the exact request and answer.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MODES="${SOAK_MODES:-sync interval none}"
TRIALS="${SOAK_TRIALS:-100}"
MIN_ACKS="${SOAK_MIN_ACKS:-5000}"
MAX_ACKS="${SOAK_MAX_ACKS:-10000}"
WRITERS="${SOAK_WRITERS:-16}"
START=$SECONDS

section() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
took() { printf '    done in %ds\n' "$(($SECONDS - $1))"; }

section "building the server and the tests (release)"
t=$SECONDS
cargo build --release
cargo test --release --no-run --test crash_kill9 --test hostile_http
took $t

for mode in $MODES; do
  section "kill -9 soak, durability=$mode: $TRIALS trials x $MIN_ACKS..$MAX_ACKS acknowledged writes, $WRITERS writers"
  t=$SECONDS
  KURA_SOAK_DURABILITY="$mode" KURA_SOAK_TRIALS="$TRIALS" KURA_SOAK_MIN_ACKS="$MIN_ACKS" \
    KURA_SOAK_MAX_ACKS="$MAX_ACKS" KURA_SOAK_WRITERS="$WRITERS" \
    cargo test --release --test crash_kill9 -- --nocapture --test-threads=1
  took $t
done

if [[ "${SOAK_SKIP_HOSTILE:-0}" != "1" ]]; then
  section "hostile HTTP"
  t=$SECONDS
  cargo test --release --test hostile_http -- --nocapture
  took $t
fi

if [[ "${SOAK_SKIP_PROPTEST:-0}" != "1" ]]; then
  section "proptests with PROPTEST_CASES=${SOAK_PROPTEST_CASES:-100000}"
  t=$SECONDS
  PROPTEST_CASES="${SOAK_PROPTEST_CASES:-100000}" cargo test --release -p kura-storage -p kura-actors
  took $t
fi

section "soak finished in $((SECONDS - START))s"
