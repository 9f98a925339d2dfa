#!/usr/bin/env python3
"""Drive a running Kura server with the real hbase-rest-py 1.0.0 client (import name `hbase`).

Usage:  hbase_rest_py_compat.py [BASE_URL]      (default: $KURA_URL, else http://127.0.0.1:8080)

With KURA_COMPAT_BACKEND=bigtable (a server on `--backend bigtable`) the one documented difference
of that backend is expected instead of HBase's rule: a put with an older timestamp after a delete
is visible, because Bigtable keeps no delete markers (README, "Where the backends differ").

Every step asserts the data the server returned; the script exits 1 on the first failure, printing
the step, what was expected and what came back. It creates its own tables (suffixed with the process
id) and drops them at the end, so it can run against a server that holds other data.

What hbase-rest-py sends (read from its 1.0.0 sources, see HBASE_REST.md §8):
  admin   GET /status/cluster, /version/cluster, /namespaces[/ns][/tables], /{t}/regions,
          GET|PUT|DELETE /{t}/schema (PUT = create or *replace*)
  put     PUT /{t}/fakerow  JSON CellSet (the body's row key wins), ints/floats as 8-byte BE
  get     GET /{t}/{row}[/{col}[/{ts}]] or /{t}/{row}/{col}/?v=N  (a path ts means [0, ts))
  delete  DELETE /{t}/{row}[/{col}]
  scan    PUT /{t}/scanner (text/xml) -> GET <absolute Location> until 204 -> DELETE
"""

import json
import os
import struct
import sys
import time
import traceback

from hbase.admin import HBaseAdmin
from hbase.delete import Delete
from hbase.get import Get
from hbase.put import Put
from hbase.rest_client import HBaseRESTClient
from hbase.scan import Scan
from hbase.scan_filter_helper import (
    build_base_scanner,
    build_column_prefix_filter,
    build_prefix_filter,
    build_row_filter,
    build_single_column_value_filter,
    build_value_filter,
)
from hbase.utils import Bytes, result_parser


class CompatFailure(Exception):
    pass


STEP = ["(start)"]


def step(name):
    STEP[0] = name
    print(f"[hbase-rest-py] {name}", flush=True)


def check(cond, what, got=None):
    if not cond:
        raise CompatFailure(f"{what}; got: {got!r}")


def ok_result(res, what):
    """hbase-rest-py returns the body (str) on 200/201 and a dict with status_code otherwise."""
    check(not isinstance(res, dict) or "status_code" not in res, f"{what}: expected 200/201", res)
    return res


def err_status(res):
    return res.get("status_code") if isinstance(res, dict) else None


def cells_of(row):
    return [(c["column"].decode(), c["timestamp"], c["$"]) for c in row["cell"]]


def scan_all(client, table, payload):
    """Open a scanner, read every batch until 204, merge rows split across batches."""
    scan = Scan(client=client)
    first = scan.scan(table, scanner_payload=payload)
    check(isinstance(first, tuple), "scanner create: expected 201 with a Location", first)
    check(
        isinstance(scan.scanner, str) and scan.scanner.startswith("http"),
        "scanner Location must be an absolute URL",
        scan.scanner,
    )
    more, data = first
    pages = 0
    merged = []
    while more:
        pages += 1
        check(pages < 10000, "scanner never reported 204 (exhausted)")
        for row in data["row"]:
            if merged and merged[-1]["key"] == row["key"]:
                merged[-1]["cell"].extend(row["cell"])
            else:
                merged.append({"key": row["key"], "cell": list(row["cell"])})
        more, data = scan.scan_next()
    check(scan.scanner is None, "scanner should be deleted after 204")
    return merged, pages


def main(base):
    client = HBaseRESTClient(hosts_list=[base])
    admin = HBaseAdmin(client)
    put = Put(client=client)
    get = Get(client=client)
    delete = Delete(client=client)
    suffix = f"{os.getpid()}_{int(time.time()) % 100000}"
    t = f"compat_hrp_{suffix}"
    ts_table = f"compat_hrp_scan_{suffix}"

    step("cluster version, status, namespaces")
    ver = ok_result(admin.cluster_version(), "GET /version/cluster")
    check("Version" in json.loads(ver), "/version/cluster JSON has a Version field", ver)
    ok_result(admin.cluster_status(), "GET /status/cluster")
    ns = json.loads(ok_result(admin.namespaces(), "GET /namespaces"))
    check("default" in ns.get("Namespace", []), "/namespaces lists default", ns)
    ok_result(admin.namespace("default"), "GET /namespaces/default")

    step("create table with a 3-version family (VERSIONS sent as a JSON number)")
    for name in (t, ts_table):
        admin.table_delete(name)  # leftovers of an earlier run; 404 is fine
    ok_result(admin.table_create_or_update(t, [{"name": "cf", "VERSIONS": 3}]), "PUT schema")
    tables = json.loads(ok_result(admin.tables("default"), "GET /namespaces/default/tables"))
    names = [x["name"] for x in tables.get("table", [])]
    check(t in names, f"table list contains {t}", tables)
    schema = json.loads(ok_result(admin.table_schema(t), "GET schema"))
    check(schema.get("name") == t, "schema name", schema)
    fams = {c["name"]: c for c in schema.get("ColumnSchema", [])}
    check(set(fams) == {"cf"}, "schema families == {cf}", schema)
    check(str(fams["cf"].get("VERSIONS")) == "3", "cf VERSIONS == 3", fams["cf"])
    regions = json.loads(ok_result(admin.table_regions(t), "GET regions"))
    check(len(regions.get("Region", [])) >= 1, "at least one region", regions)

    step("put one row with int, float and string cells; get it back")
    ok_result(put.put(t, "row-1", {"cf:age": 1, "cf:amount": 34.56, "cf:name": "John"}), "put")
    res = get.get(t, "row-1")
    check(isinstance(res, dict) and "row" in res, "get row-1", res)
    check(len(res["row"]) == 1 and res["row"][0]["key"] == b"row-1", "one row, key row-1", res)
    cols = [c[0] for c in cells_of(res["row"][0])]
    check(cols == ["cf:age", "cf:amount", "cf:name"], "cells sorted by qualifier", cols)
    c = res["row"][0]["cell"]
    check(Bytes.to_int(c[0]["$"]) == 1, "cf:age == 1 (8-byte BE long)", c[0])
    check(Bytes.to_float(c[1]["$"]) == 34.56, "cf:amount == 34.56 (8-byte BE double)", c[1])
    check(Bytes.to_string(c[2]["$"]) == "John", "cf:name == John", c[2])
    now_ms = int(time.time() * 1000)
    check(abs(c[0]["timestamp"] - now_ms) < 600_000, "server-assigned ts is ~now (ms)", c[0])

    step("get a single column; get a missing row and a missing column (404)")
    res = get.get(t, "row-1", "cf:name")
    check([x[0] for x in cells_of(res["row"][0])] == ["cf:name"], "only cf:name", res)
    check(err_status(get.get(t, "no-such-row")) == 404, "missing row is 404")
    check(err_status(get.get(t, "row-1", "cf:nosuch")) == 404, "missing column is 404")

    step("bulk put (several rows in one body to /t/fakerow)")
    rows = [(f"b-{i}", {"cf:n": i, "cf:s": f"s{i}"}) for i in range(10)]
    ok_result(put.bulk(t, rows), "bulk put")
    for i in (0, 5, 9):
        res = get.get(t, f"b-{i}")
        check(not err_status(res), f"get b-{i}", res)
        c = res["row"][0]["cell"]
        check(Bytes.to_int(c[0]["$"]) == i and c[1]["$"] == f"s{i}".encode(), f"b-{i} values", c)

    step("versions and explicit timestamps")
    for ts, v in ((1000, "v1"), (2000, "v2"), (3000, "v3"), (4000, "v4")):
        ok_result(put.put(t, "vrow", {"cf:q": v}, timestamp=ts), f"put ts={ts}")
    # out of order: an older timestamp arriving last must not win
    ok_result(put.put(t, "vrow", {"cf:q": "v0"}, timestamp=500), "put ts=500")
    res = get.get(t, "vrow", "cf:q", number_of_versions=3)
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(got == [(4000, b"v4"), (3000, b"v3"), (2000, b"v2")], "3 newest versions, ts desc", got)
    res = get.get(t, "vrow", "cf:q", number_of_versions=10)
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(len(got) == 3, "v=10 capped by family VERSIONS=3", got)
    res = get.get(t, "vrow", "cf:q")
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(got == [(4000, b"v4")], "default read = newest version", got)
    res = get.get(t, "vrow", "cf:q", timestamp=3000)
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(got == [(2000, b"v2")], "GET .../3000 is the newest version in [0, 3000)", got)
    res = get.get(t, "vrow", "cf:q", timestamp=4001)
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(got == [(4000, b"v4")], "GET .../4001 returns ts 4000", got)
    ok_result(put.put(t, "vrow", {"cf:q": "v3b"}, timestamp=3000), "overwrite ts=3000")
    res = get.get(t, "vrow", "cf:q", timestamp=3001)
    got = [(x[1], x[2]) for x in cells_of(res["row"][0])]
    check(got == [(3000, b"v3b")], "same (row, column, ts) re-put: last write wins", got)

    step("alter: add a family (PUT schema with both), data of cf kept")
    ok_result(
        admin.table_create_or_update(t, [{"name": "cf", "VERSIONS": 3}, {"name": "cf2"}]),
        "PUT schema with cf + cf2",
    )
    schema = json.loads(ok_result(admin.table_schema(t), "GET schema"))
    fams = {c["name"]: c for c in schema.get("ColumnSchema", [])}
    check(set(fams) == {"cf", "cf2"}, "families == {cf, cf2}", schema)
    check(str(fams["cf"].get("VERSIONS")) == "3", "cf still VERSIONS 3", fams["cf"])
    res = get.get(t, "row-1", "cf:name")
    check(not err_status(res) and res["row"][0]["cell"][0]["$"] == b"John", "cf data kept", res)
    ok_result(put.put(t, "row-1", {"cf2:x": "in-cf2"}), "put into the new family")
    res = get.get(t, "row-1", "cf2:x")
    check(not err_status(res) and res["row"][0]["cell"][0]["$"] == b"in-cf2", "cf2 read", res)

    step("alter: replace schema without cf2 drops it (put to cf2 -> 404)")
    ok_result(admin.table_create_or_update(t, [{"name": "cf", "VERSIONS": 3}]), "PUT schema cf")
    schema = json.loads(ok_result(admin.table_schema(t), "GET schema"))
    fams = [c["name"] for c in schema.get("ColumnSchema", [])]
    check(fams == ["cf"], "families == [cf]", schema)
    check(err_status(put.put(t, "row-1", {"cf2:x": "y"})) == 404, "put to a dropped family: 404")
    check(err_status(put.put(t, "row-1", {"nofam:x": "y"})) == 404, "put to unknown family: 404")

    step("deletes: column, row, missing row; a delete masks older puts")
    ok_result(delete.delete(t, "row-1", "cf:age"), "DELETE /t/row-1/cf:age")
    res = get.get(t, "row-1")
    cols = [x[0] for x in cells_of(res["row"][0])]
    check(cols == ["cf:amount", "cf:name"], "cf:age gone, the rest kept", cols)
    ok_result(delete.delete(t, "row-1"), "DELETE /t/row-1")
    check(err_status(get.get(t, "row-1")) == 404, "deleted row is 404")
    ok_result(delete.delete(t, "never-existed"), "DELETE of a missing row is 200")
    ok_result(delete.delete(t, "vrow", "cf:q"), "DELETE /t/vrow/cf:q")
    check(err_status(get.get(t, "vrow", "cf:q", number_of_versions=3)) == 404, "all versions gone")
    ok_result(put.put(t, "vrow", {"cf:q": "late-old"}, timestamp=3500), "put older ts after delete")
    if os.environ.get("KURA_COMPAT_BACKEND") == "bigtable":
        res = get.get(t, "vrow", "cf:q")
        check(not err_status(res) and res["row"][0]["cell"][0]["$"] == b"late-old",
              "Bigtable: no delete marker, the older put is visible", res)
    else:
        check(err_status(get.get(t, "vrow", "cf:q")) == 404, "older put stays masked by the delete")
    ok_result(put.put(t, "vrow", {"cf:q": "fresh"}), "put with server ts after delete")
    res = get.get(t, "vrow", "cf:q")
    check(not err_status(res) and res["row"][0]["cell"][0]["$"] == b"fresh", "fresh put seen", res)
    ok_result(delete.delete(t, "b-3", "cf"), "DELETE a whole family of a row")
    check(err_status(get.get(t, "b-3")) == 404, "row with its only family deleted is 404")

    step("scan table: 100 rows x 3 cells")
    ok_result(admin.table_create_or_update(ts_table, [{"name": "cf"}]), "create scan table")
    batch = [
        (f"row-{i}", {"cf:age": i, "cf:email": f"ex{i}@grr.la", "cf:text": "this is just text"})
        for i in range(1, 101)
    ]
    ok_result(put.bulk(ts_table, batch[:50]), "bulk put 1..50")
    ok_result(put.bulk(ts_table, batch[50:]), "bulk put 51..100")
    all_keys = sorted(f"row-{i}".encode() for i in range(1, 101))

    step("scan: default scanner (batch 1000) returns every row in key order")
    merged, _ = scan_all(client, ts_table, build_base_scanner())
    check([r["key"] for r in merged] == all_keys, "100 rows in byte order", len(merged))
    check(all(len(r["cell"]) == 3 for r in merged), "3 cells per row")
    r50 = next(r for r in merged if r["key"] == b"row-50")
    check(Bytes.to_int(r50["cell"][0]["$"]) == 50, "row-50 cf:age == 50", r50)

    step("scan: batch=7 splits rows across GETs (batch counts cells)")
    merged, pages = scan_all(client, ts_table, build_base_scanner(batch=7))
    check(pages >= 300 // 7, "at least 43 batches of <= 7 cells", pages)
    check([r["key"] for r in merged] == all_keys, "rows in order after merging", len(merged))
    check(sum(len(r["cell"]) for r in merged) == 300, "300 cells in total")

    step("scan: startRow/endRow (exclusive) + column")
    merged, _ = scan_all(
        client, ts_table, build_base_scanner(startRow="row-9", endRow="row-99", column=["cf:email"])
    )
    want = [b"row-9"] + [f"row-9{i}".encode() for i in range(9)]
    check([r["key"] for r in merged] == want, "rows [row-9, row-99)", [r["key"] for r in merged])
    check(all(cells_of(r)[0][0] == "cf:email" and len(r["cell"]) == 1 for r in merged), "email")

    step("scan: PrefixFilter")
    merged, _ = scan_all(client, ts_table, build_prefix_filter("row-8", column=["cf:email"]))
    want = [b"row-8"] + [f"row-8{i}".encode() for i in range(10)]
    check([r["key"] for r in merged] == want, "prefix row-8 -> 11 rows", [r["key"] for r in merged])

    step("scan: RowFilter with BinaryComparator EQUAL")
    merged, _ = scan_all(client, ts_table, build_row_filter("row-1", "EQUAL"))
    check([r["key"] for r in merged] == [b"row-1"], "only row-1", [r["key"] for r in merged])
    check(len(merged[0]["cell"]) == 3, "row-1 has its 3 cells", merged[0])

    step("scan: RowFilter with BinaryComparator LESS")
    merged, _ = scan_all(client, ts_table, build_row_filter("row-11", "LESS"))
    check([r["key"] for r in merged] == [b"row-1", b"row-10", b"row-100"], "rows < row-11",
          [r["key"] for r in merged])

    step("scan: RowFilter with RegexStringComparator (anchored, and unanchored = find)")
    merged, _ = scan_all(client, ts_table, build_row_filter("^row-9[0-9]$", "EQUAL", "regex"))
    want = [f"row-9{i}".encode() for i in range(10)]
    check([r["key"] for r in merged] == want, "regex ^row-9[0-9]$", [r["key"] for r in merged])
    merged, _ = scan_all(client, ts_table, build_row_filter("-10", "EQUAL", "regex"))
    check([r["key"] for r in merged] == [b"row-10", b"row-100"], "regex '-10' matches anywhere",
          [r["key"] for r in merged])

    step("scan: ValueFilter LESS (binary) keeps only the matching cells")
    merged, _ = scan_all(client, ts_table, build_value_filter(10, "LESS"))
    want = sorted(f"row-{i}".encode() for i in range(1, 10))
    check([r["key"] for r in merged] == want, "rows with a cell < 8-byte 10", [r["key"] for r in merged])
    for r in merged:
        check(len(r["cell"]) == 1 and cells_of(r)[0][0] == "cf:age", "only cf:age cell", r)
        check(struct.unpack(">q", r["cell"][0]["$"])[0] < 10, "value < 10", r)

    step("scan: ValueFilter with SubstringComparator")
    merged, _ = scan_all(client, ts_table, build_value_filter("this", "EQUAL", "substring"))
    check(len(merged) == 100, "every row has the text cell", len(merged))
    check(all(len(r["cell"]) == 1 and cells_of(r)[0][0] == "cf:text" for r in merged), "text only")

    step("scan: SingleColumnValueFilter (binary LESS) returns whole rows")
    merged, _ = scan_all(
        client, ts_table, build_single_column_value_filter("cf", "age", 10, "LESS")
    )
    check([r["key"] for r in merged] == want, "9 rows with age < 10", [r["key"] for r in merged])
    check(all(len(r["cell"]) == 3 for r in merged), "whole rows (3 cells)")

    step("scan: SingleColumnValueFilter (substring)")
    merged, _ = scan_all(
        client,
        ts_table,
        build_single_column_value_filter("cf", "email", "ex5", "EQUAL", comparator="substring"),
    )
    want5 = sorted([b"row-5"] + [f"row-5{i}".encode() for i in range(10)])
    check([r["key"] for r in merged] == want5, "emails containing ex5", [r["key"] for r in merged])

    step("scan: ColumnPrefixFilter")
    merged, _ = scan_all(client, ts_table, build_column_prefix_filter("em"))
    check(len(merged) == 100, "100 rows", len(merged))
    check(all(len(r["cell"]) == 1 and cells_of(r)[0][0] == "cf:email" for r in merged), "email")

    step("scan: maxVersions and time range on the versioned table")
    for ts, v in ((1000, "a"), (2000, "b"), (3000, "c")):
        ok_result(put.put(t, "scanv", {"cf:q": v}, timestamp=ts), "put scanv")
    merged, _ = scan_all(
        client, t, build_base_scanner(startRow="scanv", endRow="scanw", maxVersions=3)
    )
    got = [(x[1], x[2]) for x in cells_of(merged[0])] if merged else []
    check(got == [(3000, b"c"), (2000, b"b"), (1000, b"a")], "3 versions from the scanner", got)
    merged, _ = scan_all(
        client,
        t,
        build_base_scanner(
            startRow="scanv", endRow="scanw", maxVersions=3, startTime=2000, endTime=3000
        ),
    )
    got = [(x[1], x[2]) for x in cells_of(merged[0])] if merged else []
    check(got == [(2000, b"b")], "time range [2000, 3000)", got)

    step("scanner: delete mid-way, then its URL is 404")
    scan = Scan(client=client)
    more, data = scan.scan(ts_table, scanner_payload=build_base_scanner(batch=3))
    check(more and len(data["row"]) >= 1, "first batch", data)
    loc = scan.scanner
    check(scan.delete_scanner() == 200, "DELETE scanner is 200")
    r = client.session.get(loc, headers=client.headers)
    check(r.status_code == 404, "GET a deleted scanner is 404", r.status_code)

    step("stateless scan: reversed with startrow/endrow and column (as test_scan.py does)")
    data = client.send_request(
        method="GET",
        url_suffix=f"/{ts_table}/*?column=cf:email&startrow=row-99&endrow=row-9&reversed=true",
    )
    check(isinstance(data, str), "stateless scan 200", data)
    result = result_parser(json.loads(data))
    keys = [r["key"] for r in result["row"]]
    want = [f"row-9{i}".encode() for i in range(9, -1, -1)]
    check(keys == want, "reversed rows row-99 .. row-90", keys)

    step("drop tables")
    for name in (t, ts_table):
        ok_result(admin.table_delete(name), f"DELETE /{name}/schema")
        check(err_status(admin.table_schema(name)) == 404, "dropped table schema is 404")
    tables = json.loads(ok_result(admin.tables("default"), "table list"))
    names = [x["name"] for x in tables.get("table", [])]
    check(t not in names and ts_table not in names, "dropped tables not listed", names)
    check(err_status(admin.table_delete(t)) == 404, "dropping a missing table is 404")
    check(err_status(put.put(t, "r", {"cf:a": "x"})) == 404, "put into a dropped table is 404")

    client.session.close()
    print("[hbase-rest-py] all steps passed", flush=True)


if __name__ == "__main__":
    base_url = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KURA_URL", "http://127.0.0.1:8080"))
    try:
        main(base_url.rstrip("/"))
    except CompatFailure as e:
        print(f"[hbase-rest-py] FAILED at step '{STEP[0]}': {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception:  # a client exception (bad JSON, connection refused, ...) is a failure too
        print(f"[hbase-rest-py] FAILED at step '{STEP[0]}' with an exception:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
