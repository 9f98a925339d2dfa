#!/usr/bin/env python3
"""The Python half of tests/hbase_interop/run.sh: loads a table into a Kura server over its
HBase REST API, and checks what Hadoop's own readers (kura.interop.HadoopDump, Java) printed
from Kura's files against what Kura holds.

    check.py load URL TABLE
    check.py fixture DUMP                      HBase's own HashTable output (sanity of the check)
    check.py hashdir DUMP HASHDIR URL TABLE [REGION_START...]
                                               `kura verify --out` files vs a REST scan
    check.py export DUMP URL TABLE VERSIONS    `kura export` files vs a REST scan, every Result
                                               decoded with HBase's Client.proto (Client_pb2)
    check.py same URL TABLE COPY VERSIONS      two tables hold the same cells (`kura import` of
                                               files Hadoop's writer compressed)

Each check prints one line saying what it compared and exits non-zero on the first mismatch.
"""

import base64
import hashlib
import json
import os
import sys
import urllib.error
import urllib.request


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


# --- Kura's REST API -----------------------------------------------------------------------

def request(method, url, body=None, content_type="application/json"):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", content_type)
    token = os.environ.get("KURA_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def b64(b):
    return base64.b64encode(b).decode()


def unb64(s):
    return base64.b64decode(s)


def put_rows(url, table, rows):
    """rows: [(key, [(family, qualifier, ts, value)])]"""
    body = {"Row": [{"key": b64(k), "Cell": [{"column": b64(f + b":" + q), "timestamp": ts, "$": b64(v)}
                                              for (f, q, ts, v) in cells]} for (k, cells) in rows]}
    status, _, text = request("PUT", f"{url}/{table}/fakerow", body)
    if status not in (200, 201):
        fail(f"writing rows: HTTP {status} {text[:200]!r}")


def scan(url, table, max_versions):
    """Every row of the table, in order: [(key, [(family, qualifier, ts, value)])], cells in
    HBase order as the server returns them."""
    status, headers, text = request("PUT", f"{url}/{table}/scanner",
                                    {"batch": 5000, "maxVersions": max_versions})
    if status != 201:
        fail(f"opening a scanner: HTTP {status} {text[:200]!r}")
    location = headers.get("Location") or headers.get("location")
    rows = []
    while True:
        status, _, text = request("GET", location)
        if status == 204:
            break
        if status != 200:
            fail(f"reading the scanner: HTTP {status}")
        for r in json.loads(text)["Row"]:
            key = unb64(r["key"])
            cells = []
            for c in r["Cell"]:
                f, _, q = unb64(c["column"]).partition(b":")
                cells.append((f, q, int(c["timestamp"]), unb64(c.get("$", ""))))
            if rows and rows[-1][0] == key:
                rows[-1][1].extend(cells)  # a row split across two answers
            else:
                rows.append((key, cells))
    request("DELETE", location)
    return rows


def load(url, table):
    """A table with binary keys (\\x00, \\xff), an empty qualifier, three versions at explicit
    timestamps, a second family, and one 200 KB value."""
    schema = {"name": table, "ColumnSchema": [{"name": "cf", "VERSIONS": "3"}, {"name": "g"}]}
    status, _, text = request("PUT", f"{url}/{table}/schema", schema)
    if status not in (200, 201):
        fail(f"creating {table}: HTTP {status} {text[:200]!r}")
    rows = []
    for i in range(1500):
        key = bytes([0x00, 0xff]) + i.to_bytes(4, "big") if i % 3 == 0 else f"row{i:05}".encode()
        cells = [(b"cf", b"", ts, f"v{i}@{ts}".encode()) for ts in (1000 + i, 2000 + i, 3000 + i)]
        if i % 2 == 0:
            cells.append((b"g", b"q\x00\xff", 77, bytes([i % 256]) * (i % 40)))
        rows.append((key, cells))
    rows.append((b"\xff\xff", [(b"cf", b"big", 5, os.urandom(200 * 1024))]))
    for start in range(0, len(rows), 300):
        put_rows(url, table, rows[start:start + 300])
    print(f"ok   loaded {len(rows)} rows into {table}")


# --- HadoopDump output -----------------------------------------------------------------------

def parse_dump(path):
    files = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "file":
                fields = dict(p.split("=", 1) for p in parts[2:])
                files.append({"path": parts[1], **fields, "recs": [], "index_get": None})
            elif parts[0] == "rec":
                k = b"" if parts[1] == "-" else bytes.fromhex(parts[1])
                v = parts[2]
                files[-1]["recs"].append((k, v))
            elif parts[0] == "index-get":
                files[-1]["index_get"] = int(parts[1])
    return files


IBW = "org.apache.hadoop.hbase.io.ImmutableBytesWritable"
NULL = "org.apache.hadoop.io.NullWritable"
RESULT = "org.apache.hadoop.hbase.client.Result"
DEFAULT_CODEC = "org.apache.hadoop.io.compress.DefaultCodec"


def hashdir_batches(files):
    """(partition keys, [(key, md5 hex)] over every MapFile in order)."""
    parts = [f for f in files if f["path"].endswith("partitions")]
    if len(parts) != 1:
        fail("the dump has no partitions file")
    p = parts[0]
    if (p["key"], p["value"], p["compression"], p["codec"]) != (IBW, NULL, "RECORD", DEFAULT_CODEC):
        fail(f"partitions header: {p}")
    maps = sorted((f for f in files if f["compression"] == "MAPFILE"), key=lambda f: f["path"])
    batches = []
    for m in maps:
        if (m["key"], m["value"]) != (IBW, IBW):
            fail(f"{m['path']}: classes {m['key']} / {m['value']}")
        if m["index_get"] != len(m["recs"]):
            fail(f"{m['path']}: MapFile.get found {m['index_get']} of {len(m['recs'])} keys")
        for k, v in m["recs"]:
            if len(v) != 32:
                fail(f"{m['path']}: a hash of {len(v) // 2} bytes")
            batches.append((k, v))
    keys = [k for k, _ in batches]
    if keys != sorted(keys) or len(maps) != len(p["recs"]) + 1:
        fail("batches out of order, or hash files and partitions disagree")
    return [k for k, _ in p["recs"]], batches


def hashtable(rows, target, start=b""):
    """HBase HashTable's batches over one region, written out independently of Kura."""
    out, key, md5, size, n = [], start, hashlib.md5(), 0, 0
    for row, cells in rows:
        if n and size >= target:
            out.append((key, md5.hexdigest()))
            key, md5, size, n = row, hashlib.md5(), 0, 0
        for f, q, ts, v in cells:
            md5.update(row + f + q + ts.to_bytes(8, "little", signed=True) + v)
            size += len(row) + len(f) + len(q) + 8 + len(v)
        n += 1
    out.append((key, md5.hexdigest()))
    return out


def check_fixture(dump):
    partitions, batches = hashdir_batches(parse_dump(dump))
    if partitions != [str(i).encode() for i in range(1, 10)]:
        fail(f"fixture partitions {partitions}")
    if len(batches) != 101 or batches[0] != (b"", "d41d8cd98f00b204e9800998ecf8427e"):
        fail(f"fixture batches: {len(batches)}, first {batches[:1]}")
    if dict(batches)[b"1"] != "89f1afb9350445279bee733c46cbd446":
        fail("fixture batch 1")
    print(f"ok   Hadoop read HBase's own HashTable fixture: 9 partitions, {len(batches)} batches")


def read_manifest(path):
    props = {}
    with open(os.path.join(path, "manifest"), encoding="latin-1") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                k, _, v = line.partition("=")
                props[k] = v
    return props


def check_hashdir(dump, hashdir, url, table, region_starts):
    m = read_manifest(hashdir)
    partitions, batches = hashdir_batches(parse_dump(dump))
    if int(m["numHashFiles"]) != len(partitions) + 1 or m["table"] != table:
        fail(f"manifest {m} vs {len(partitions)} partitions")
    rows = scan(url, table, int(m.get("versions", "1")))
    starts = [b""] + sorted(region_starts)
    expected = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else None
        region = [r for r in rows if r[0] >= start and (end is None or r[0] < end)]
        expected += hashtable(region, int(m["targetBatchSize"]), start)
    if batches != expected:
        for i, (a, b) in enumerate(zip(batches, expected)):
            if a != b:
                fail(f"batch {i}: Kura's file has {a}, the REST scan hashes to {b}")
        fail(f"{len(batches)} batches in the files, {len(expected)} from the REST scan")
    print(f"ok   Hadoop's MapFile.Reader read {len(batches)} batches of {len(rows)} rows in "
          f"{len(partitions) + 1} hash files over {len(starts)} regions "
          f"(MapFile.get found every key through the index); each equals HashTable's MD5 of a "
          f"REST scan (versions={m.get('versions', '1')}, targetBatchSize={m['targetBatchSize']})")


def check_export(dump, url, table, versions):
    pb_dir = os.environ.get("HBASE_PB_DIR")
    if pb_dir:
        sys.path.insert(0, pb_dir)
    import Client_pb2  # HBase's Client.proto, as PyPI's hbase-driver ships it
    from google.protobuf.internal.decoder import _DecodeVarint32

    files = [f for f in parse_dump(dump) if os.path.basename(f["path"]).startswith("part-m-")]
    if not files:
        fail("the export has no part-m-* file")
    cells, rows, results = [], [], 0
    for f in files:
        if (f["key"], f["value"], f["compression"]) != (IBW, RESULT, "NONE"):
            fail(f"{f['path']}: header {f}")
        for key, value in f["recs"]:
            raw = bytes.fromhex(value)
            n, pos = _DecodeVarint32(raw, 0)
            if pos + n != len(raw):
                fail(f"{f['path']}: row {key!r}: a {n}-byte Result in a {len(raw) - pos}-byte value")
            r = Client_pb2.Result()
            r.ParseFromString(raw[pos:])
            results += 1
            if r.stale or r.partial or not r.cell:
                fail(f"{f['path']}: row {key!r}: stale={r.stale} partial={r.partial} cells={len(r.cell)}")
            if not rows or rows[-1] != key:
                rows.append(key)
            for c in r.cell:
                if c.row != key:
                    fail(f"{f['path']}: a cell of row {c.row!r} under key {key!r}")
                if c.cell_type != 4:  # PUT
                    fail(f"{f['path']}: row {key!r}: cell type {c.cell_type}")
                cells.append((c.row, c.family, c.qualifier, c.timestamp, c.value))
    expected = [(k, fam, q, ts, v) for (k, cs) in scan(url, table, versions) for (fam, q, ts, v) in cs]
    if cells != expected:
        for i, (a, b) in enumerate(zip(cells, expected)):
            if a != b:
                fail(f"cell {i}: export has {a[:4]}, the REST scan {b[:4]}")
        fail(f"{len(cells)} cells exported, {len(expected)} scanned")
    print(f"ok   Hadoop's SequenceFile.Reader read {len(files)} part files, {results} Results; "
          f"Client_pb2 decoded {len(cells)} cells of {len(rows)} rows, equal to a REST scan "
          f"with maxVersions={versions}")


def check_same(url, table, copy, versions):
    a, b = scan(url, table, versions), scan(url, copy, versions)
    if a != b:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                fail(f"row {i}: {table} has {x[0]!r} with {len(x[1])} cells, {copy} {y[0]!r} "
                     f"with {len(y[1])}")
        fail(f"{table} has {len(a)} rows, {copy} {len(b)}")
    print(f"ok   {copy} equals {table}: {len(a)} rows, {sum(len(c) for _, c in a)} cells "
          f"(maxVersions={versions})")


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "load" and len(argv) == 4:
        load(argv[2], argv[3])
    elif cmd == "fixture" and len(argv) == 3:
        check_fixture(argv[2])
    elif cmd == "hashdir" and len(argv) >= 6:
        check_hashdir(argv[2], argv[3], argv[4], argv[5], [a.encode() for a in argv[6:]])
    elif cmd == "export" and len(argv) == 6:
        check_export(argv[2], argv[3], argv[4], int(argv[5]))
    elif cmd == "same" and len(argv) == 6:
        check_same(argv[2], argv[3], argv[4], int(argv[5]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
