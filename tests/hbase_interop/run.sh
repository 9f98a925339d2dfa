#!/usr/bin/env bash
# Interop with the real formats: Hadoop's own readers read the files Kura writes, and HBase's own
# protobuf definitions decode them into the cells a Kura scan returns.
#
#   tests/hbase_interop/run.sh [KURA_BIN]       (default: target/release/kura, else target/debug/kura)
#
# What it does, on a fresh machine with Java 17 and Python 3.11 (network: package registries):
#   1. Fetches, once, into ${XDG_CACHE_HOME:-~/.cache}/kura-interop: the jars of Hadoop 3.5.0's
#      client from PyPI's pyspark source distribution (deps/jars/: hadoop-client-api,
#      hadoop-client-runtime, slf4j-api, commons-lang3, guava, commons-collections4 and what they
#      load), and a venv with PyPI's protobuf and hbase-driver (which ships HBase's Client_pb2 and
#      Cell_pb2, generated from HBase's Client.proto and Cell.proto).
#   2. Compiles tests/hbase_interop/java (kura.interop.HadoopDump) with javac against those jars.
#   3. Sanity check of the checker: Hadoop's readers read HBase's own HashTable output
#      (tests/fixtures/hbase-2x/hashtable) and find its 101 batches.
#   4. Starts a Kura server (own data dir and port), loads a table with binary keys, an empty
#      qualifier, three versions per cell and a 200 KB value (check.py load).
#   5. `kura verify --out` over three regions: Hadoop's SequenceFile.Reader reads `partitions`,
#      MapFile.Reader reads every hashes/part-r-* (and finds every key through the index); every
#      batch equals HashTable's MD5 of a REST scan of the same table, computed in Python; then
#      `kura verify --against` the same files says equal.
#   6. `kura export` (when this kura has it): Hadoop's SequenceFile.Reader reads every part-m-*,
#      with a Result deserializer that reads HBase's length-delimited framing; Client_pb2 decodes
#      every Result; the cells equal a REST scan with every version.
#   7. `kura import` of those parts after Hadoop's own SequenceFile.Writer wrote them again
#      RECORD and BLOCK compressed with DefaultCodec (kura.interop.HadoopRewrite), as HBase's
#      Export does with output compression on: each imported table equals the exported one.
# Exit status: 0 when every check passed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
KURA="${1:-}"
if [[ -z "$KURA" ]]; then
  for k in "$TARGET_DIR/release/kura" "$TARGET_DIR/debug/kura"; do
    if [[ -x "$k" ]]; then KURA="$k"; break; fi
  done
fi
[[ -x "$KURA" ]] || { echo "no kura binary: build one (cargo build --release) or pass its path" >&2; exit 2; }

PYSPARK_VERSION=4.3.0   # its sdist ships deps/jars/hadoop-client-api-3.5.0.jar
HBASE_DRIVER_VERSION=1.1.1
JARS="hadoop-client-api-3.5.0 hadoop-client-runtime-3.5.0 slf4j-api-2 commons-lang3-3 guava-3
      failureaccess-1 commons-collections4-4 commons-io-2"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/kura-interop"
PY="$(command -v python3.11 || command -v python3)"
START=$SECONDS

WORK="$(mktemp -d -t kura-interop.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '==> %s\n' "$*"; }

# 1. Downloads, cached.
mkdir -p "$CACHE/jars"
have_jars() {
  local j
  for j in $JARS; do
    compgen -G "$CACHE/jars/$j*.jar" >/dev/null || return 1
  done
}
if ! have_jars; then
  step "fetching pyspark==$PYSPARK_VERSION's source distribution for Hadoop's jars (once)"
  mkdir -p "$CACHE/dl"
  "$PY" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    "pyspark==$PYSPARK_VERSION" -d "$CACHE/dl"
  patterns=()
  for j in $JARS; do patterns+=("pyspark-$PYSPARK_VERSION/deps/jars/$j*.jar"); done
  tar xzf "$CACHE/dl/pyspark-$PYSPARK_VERSION.tar.gz" -C "$CACHE/jars" --strip-components=3 \
    --wildcards "${patterns[@]}"
  rm -f "$CACHE/dl/pyspark-$PYSPARK_VERSION.tar.gz"   # 450 MB; only the jars are kept
  have_jars || { echo "the sdist lacks some of: $JARS" >&2; exit 1; }
fi
CP="$(printf '%s:' "$CACHE"/jars/*.jar)"

VENV="$CACHE/venv"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import google.protobuf" 2>/dev/null \
   || [[ ! -f "$VENV/.hbase-driver-$HBASE_DRIVER_VERSION" ]]; then
  step "creating $VENV with protobuf and hbase-driver==$HBASE_DRIVER_VERSION (once)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check protobuf
  # Only its generated protobuf modules are used: its client's own dependencies are not needed.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "hbase-driver==$HBASE_DRIVER_VERSION"
  touch "$VENV/.hbase-driver-$HBASE_DRIVER_VERSION"
fi
HBASE_PB_DIR="$("$VENV/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("hbasedriver"); print(os.path.join(os.path.dirname(s.origin), "protobuf_py"))')"
export HBASE_PB_DIR
[[ -f "$HBASE_PB_DIR/Client_pb2.py" ]] || { echo "hbase-driver has no Client_pb2.py in $HBASE_PB_DIR" >&2; exit 1; }

# 2. The Java reader.
step "compiling kura.interop.HadoopDump against Hadoop $(basename "$CACHE"/jars/hadoop-client-api-*.jar .jar | sed 's/hadoop-client-api-//')"
mapfile -t SOURCES < <(find "$HERE/java" -name '*.java')
javac -nowarn -d "$WORK/classes" -cp "$CP" "${SOURCES[@]}"
dump() { java -Dslf4j.internal.verbosity=ERROR -cp "$WORK/classes:$CP" kura.interop.HadoopDump "$@"; }
CHECK=("$VENV/bin/python" "$HERE/check.py")

# 3. The checker on HBase's own files.
step "Hadoop's readers on HBase's own HashTable output (sanity of this check)"
FIX="$ROOT/tests/fixtures/hbase-2x/hashtable"
dump seq "$FIX/partitions" >"$WORK/fixture.dump"
dump mapfile "$FIX"/hashes/part-r-* >>"$WORK/fixture.dump"
"${CHECK[@]}" fixture "$WORK/fixture.dump"

# 4. A server and a table.
PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
URL="http://127.0.0.1:$PORT"
step "starting $KURA on $URL"
"$KURA" --bind "127.0.0.1:$PORT" --data-dir "$WORK/data" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
  curl -fsS -o /dev/null --max-time 1 "$URL/healthz" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done
TABLE=interop
"${CHECK[@]}" load "$URL" "$TABLE"

# 5. kura verify --out.
step "kura verify --out, read back with Hadoop's SequenceFile.Reader and MapFile.Reader"
# Three regions (as a source split at row00500 and row01000 would have) into three hash files;
# batches of ~300 bytes give the first file more than 128 records: several index entries.
"$KURA" verify --url "$URL" --table "$TABLE" --out "$WORK/hashes" --versions 3 --batch-bytes 300 \
  --region-start row00500 --region-start row01000 --num-hash-files 3
dump seq "$WORK/hashes/partitions" >"$WORK/hashes.dump"
dump mapfile "$WORK"/hashes/hashes/part-r-* >>"$WORK/hashes.dump"
"${CHECK[@]}" hashdir "$WORK/hashes.dump" "$WORK/hashes" "$URL" "$TABLE" row00500 row01000
"$KURA" verify --url "$URL" --table "$TABLE" --against "$WORK/hashes"

# 6. kura export.
if "$KURA" export --help >/dev/null 2>&1; then
  step "kura export, read back with Hadoop's SequenceFile.Reader and HBase's Client_pb2"
  "$KURA" export --url "$URL" --table "$TABLE" --out "$WORK/export" --versions 3 --rows-per-part 400
  mapfile -t PARTS < <(find "$WORK/export" -name 'part-m-*' | sort)
  dump seq "${PARTS[@]}" >"$WORK/export.dump"
  "${CHECK[@]}" export "$WORK/export.dump" "$URL" "$TABLE" 3

  # 7. kura import of the same parts, compressed by Hadoop's own writer.
  rewrite() { java -Dslf4j.internal.verbosity=ERROR -cp "$WORK/classes:$CP" kura.interop.HadoopRewrite "$@"; }
  for kind in RECORD BLOCK; do
    step "kura import of the parts Hadoop's SequenceFile.Writer wrote $kind compressed"
    mkdir -p "$WORK/$kind"
    rewrite "$kind" "$WORK/$kind" "${PARTS[@]}"
    "$KURA" import --url "$URL" --table "${TABLE}_$kind" --from "$WORK/$kind" \
      --create-families cf,g --create-versions 3 --checkpoint "$WORK/$kind.checkpoint"
    "${CHECK[@]}" same "$URL" "$TABLE" "${TABLE}_$kind" 3
  done
else
  echo "skip kura export: this kura binary has no export subcommand"
fi

echo "hbase interop: all checks passed in $((SECONDS - START)) s"
