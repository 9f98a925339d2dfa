#!/usr/bin/env bash
# Short fuzzing runs of every cargo-fuzz target (fuzz/README.md).
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS (default 60) each
#   scripts/fuzz.sh TARGET [SECS]   one target
# Exits non-zero if any target finds a crash; the input is kept in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v cargo-fuzz >/dev/null || { echo "install cargo-fuzz first: cargo install cargo-fuzz" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1
secs="${2:-${FUZZ_SECONDS:-60}}"
targets=("$@")
if [[ $# -eq 0 ]]; then
  targets=(log_reader segment_reader manifest_reader rowspec cellset_body scanner_body filter_parsers)
else
  targets=("$1")
fi
if [[ ! -e fuzz/corpus/log_reader/valid-0 ]]; then
  cargo run --quiet --manifest-path fuzz/Cargo.toml --bin seed_corpus
fi
failed=()
for t in "${targets[@]}"; do
  echo "==> $t for ${secs}s"
  mkdir -p "fuzz/corpus/$t"
  # Fuzz into a scratch copy of the corpus so the committed seeds stay small.
  work="$(mktemp -d)"
  cp -r "fuzz/corpus/$t/." "$work/"
  if ! (cd fuzz && cargo fuzz run -s none "$t" "$work" -- -max_total_time="$secs" -rss_limit_mb=2048); then
    failed+=("$t")
  fi
  rm -rf "$work"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "crashes found in: ${failed[*]}" >&2
  exit 1
fi
echo "no crashes"
