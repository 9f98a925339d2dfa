#!/usr/bin/env bash
# Browser end-to-end test of the web console.
#
# Builds the release binary (unless KURA_BIN names one), starts it on a free loopback port over a
# temporary data directory, installs playwright-core from package-lock.json (npm ci) if needed,
# runs console.e2e.js in headless Chromium, and stops the server whatever happens.
#
# Needs: node >= 20 with npm, and Chromium at /usr/bin/chromium (Debian: apt-get install chromium;
# override with CHROMIUM_PATH). See README.md beside this file.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -z "${KURA_BIN:-}" ]]; then
  (cd "$repo" && cargo build --release --bin kura)
  KURA_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/kura"
fi
[[ -x "$KURA_BIN" ]] || { echo "no kura binary at $KURA_BIN" >&2; exit 1; }

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
[[ -x "$chromium" ]] || { echo "Chromium not found at $chromium (apt-get install chromium)" >&2; exit 1; }

if [[ ! -d "$here/node_modules/playwright-core" ]]; then
  (cd "$here" && npm ci --no-audit --no-fund)
fi

port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
data="$(mktemp -d "${TMPDIR:-/tmp}/kura-e2e-data.XXXXXX")"
log="$data.log"
server_pid=""

cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$data" "$log"
}
trap cleanup EXIT

# One region per table by default, so "split a region and see two" is literal.
RUST_LOG="${RUST_LOG:-warn}" "$KURA_BIN" --bind "127.0.0.1:$port" --data-dir "$data" \
  --default-regions 1 >"$log" 2>&1 &
server_pid=$!

url="http://127.0.0.1:$port"
ready=""
for _ in $(seq 1 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "kura exited during start-up:" >&2; cat "$log" >&2; exit 1
  fi
  if node -e "fetch('$url/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"; then
    ready=1; break
  fi
  sleep 0.1
done
[[ -n "$ready" ]] || { echo "kura did not answer /healthz within 30 s" >&2; cat "$log" >&2; exit 1; }

status=0
KURA_URL="$url" CHROMIUM_PATH="$chromium" node "$here/console.e2e.js" || status=$?
if [[ $status -ne 0 ]]; then
  echo "--- server log ---" >&2
  tail -n 50 "$log" >&2 || true
fi
exit $status
