#!/usr/bin/env python3
"""Drive a running Kura server with the real starbase 0.3.3 client.

Usage:  starbase_compat.py [BASE_URL]      (default: $KURA_URL, else http://127.0.0.1:8080)

Every step asserts the data the server returned; the script exits 1 on the first failure, printing
the step, what was expected and what came back. Its tables are suffixed with the process id and
dropped at the end.

starbase's habits the server must survive (read from its 0.3.3 sources, see HBASE_REST.md §8):
  * every request carries `Content-type: application/json; charset=UTF-8`, and every GET a body `{}`;
  * before most table operations it lists tables with `GET /` (Accept: application/json);
  * puts go to `PUT|POST /{t}/{base64(row)}` with the base64 unescaped in the path (it may hold `/`
    and `+`): the body's row key must win;
  * gets are `GET /{t}/{row}/[cols][/ts,ts+1/][?v=N]` (so `/{t}/{row}//ts,ts+1/` without columns);
  * schema: create = PUT (201), add_columns = POST (200), drop_columns = PUT of the remaining families;
  * a scanner is `PUT /{t}/scanner` with body `""` (default), `{}` or `{"filter": "<json string>"}`,
    then exactly ONE `GET` of the scanner (it relies on the unlimited default batch), then DELETE;
  * every string in a response except `timestamp` is base64-decoded as UTF-8.
"""

import base64
import json
import os
import sys
import time
import traceback
from urllib.parse import urlparse

from starbase import Connection
from starbase.client.transport import HttpRequest
from starbase.client.transport.methods import PUT


class CompatFailure(Exception):
    pass


STEP = ["(start)"]


def step(name):
    STEP[0] = name
    print(f"[starbase] {name}", flush=True)


def check(cond, what, got=None):
    if not cond:
        raise CompatFailure(f"{what}; got: {got!r}")


def b64(s):
    return base64.b64encode(s.encode("utf8")).decode("ascii")


def cells(raw_row):
    """(column, timestamp, value) of a raw (json_decoded) starbase row."""
    return [(c["column"], int(c["timestamp"]), c["$"]) for c in raw_row["Cell"]]


def main(base):
    u = urlparse(base)
    conn = Connection(host=u.hostname, port=u.port or 80)
    suffix = f"{os.getpid()}_{int(time.time()) % 100000}"
    t_name = f"compat_sb_{suffix}"
    v_name = f"compat_sb_v_{suffix}"
    s_name = f"compat_sb_scan_{suffix}"

    step("version, cluster version, cluster status")
    ver = conn.version
    check(isinstance(ver, dict) and "REST" in ver, "GET /version (JSON) has REST", ver)
    check(conn.cluster_version is not None, "GET /version/cluster answers JSON")
    check(isinstance(conn.cluster_status, dict), "GET /status/cluster answers a JSON object")

    step("create a table with two families (PUT schema -> 201)")
    for name in (t_name, v_name, s_name):
        conn.drop_table(name)  # leftovers of an earlier run
    table = conn.table(t_name)
    check(not table.exists(), "fresh table does not exist yet")
    st = table.create("cf1", "cf2")
    check(st == 201, "create returns 201", st)
    check(table.exists(), "table exists after create (found in GET /)", conn.tables())
    check(sorted(table.columns()) == ["cf1", "cf2"], "families", table.columns())
    check(t_name in conn.tables(), "GET / lists the table", conn.tables())
    check(table.create("cf1") is False, "creating it again is refused by starbase's exists check")
    regions = table.regions()
    check(isinstance(regions, dict) and len(regions.get("Region", [])) >= 1, "regions", regions)

    step("alter: add_columns (POST schema -> 200), drop_columns (PUT remaining -> 201)")
    st = table.add_columns("cf3")
    check(st == 200, "add_columns returns 200", st)
    check(sorted(table.columns()) == ["cf1", "cf2", "cf3"], "cf3 added", table.columns())
    st = table.drop_columns("cf3")
    check(st == 201, "drop_columns (PUT replace) returns 201", st)
    check(sorted(table.columns()) == ["cf1", "cf2"], "cf3 dropped", table.columns())

    step("insert (PUT /t/<b64 row>) and fetch a row")
    data = {"cf1": {"id": "1", "name": "Some name"}, "cf2": {"id": "2", "age": "32"}}
    check(table.insert("row1", data) == 200, "insert returns 200")
    got = table.fetch("row1")
    check(got == data, "fetch returns what was inserted", got)
    got = table.fetch("row1", ["cf1"])
    check(got == {"cf1": data["cf1"]}, "fetch one family", got)
    got = table.fetch("row1", {"cf2": ["age"], "cf1": ["name"]})
    check(got == {"cf1": {"name": "Some name"}, "cf2": {"age": "32"}}, "fetch two columns", got)
    check(table.fetch("no-such-row") is None, "fetch of a missing row is None (404)")

    step("update (POST /t/<b64 row>) merges into the row")
    check(table.update("row1", {"cf2": {"gender": "male"}}) == 200, "update returns 200")
    got = table.fetch("row1")
    check(got == {"cf1": data["cf1"], "cf2": dict(data["cf2"], gender="male")}, "merged", got)

    step("row keys whose base64 holds '/' and '+' (unescaped in the PUT path), and UTF-8 keys")
    for key in ("\u00ff\u00fe", "k\u20acy", "\u043a\u043b\u044e\u0447"):
        check(table.insert(key, {"cf1": {"k": key}}) == 200, f"insert {key!r} (b64 {b64(key)})")
        got = table.fetch(key)
        check(got == {"cf1": {"k": key}}, f"fetch {key!r}", got)

    step("insert into a missing family fails (404)")
    st = table.insert("row2", {"nofam": {"a": "b"}})
    check(st == 404, "insert into an unknown family is 404", st)

    # Table.fetch() ignores raw=True (it hard-codes raw=False and squashes versions into one dict),
    # so several versions are read through Table._get(raw=True), the call fetch() wraps.
    step("versions and timestamps (family with VERSIONS=5)")
    req = HttpRequest(
        connection=conn,
        url=f"{v_name}/schema",
        data={"name": v_name, "ColumnSchema": [{"name": "v", "VERSIONS": "5"}]},
        method=PUT,
    )
    check(req.get_response().status_code == 201, "create versioned table")
    vt = conn.table(v_name)
    for ts, val in ((1000, "a"), (2000, "b"), (3000, "c")):
        check(vt.insert("vrow", {"v": {"q": val}}, timestamp=ts) == 200, f"insert ts={ts}")
    raw = vt._get("vrow", ["v:q"], number_of_versions=3, raw=True)
    check(raw is not None and len(raw["Row"]) == 1, "one row back", raw)
    got = [(c, ts, val) for c, ts, val in cells(raw["Row"][0])]
    check(got == [("v:q", 3000, "c"), ("v:q", 2000, "b"), ("v:q", 1000, "a")], "3 versions", got)
    raw = vt._get("vrow", ["v:q"], raw=True)
    check(cells(raw["Row"][0]) == [("v:q", 3000, "c")], "no v= -> newest only", raw)
    got = vt.fetch("vrow", ["v:q"], timestamp=2000)
    check(got == {"v": {"q": "b"}}, "GET /t/r/v:q/2000,2001/ -> the ts 2000 version", got)
    got = vt.fetch("vrow", timestamp=1000)
    check(got == {"v": {"q": "a"}}, "GET /t/r//1000,1001/ (empty column segment)", got)
    check(vt.fetch("vrow", ["v:q"], timestamp=1500) is None, "no version in [1500, 1501) -> None")
    raw = vt._get("vrow", ["v"], number_of_versions=2, raw=True)
    check([ts for _, ts, _ in cells(raw["Row"][0])] == [3000, 2000], "family, v=2", raw)

    step("scan table: batch insert of 20 rows (multi-row body)")
    st_table = conn.table(s_name)
    st = st_table.create("d")
    check(st == 201, "create scan table", st)
    b = st_table.batch()
    for i in range(20):
        b.insert(f"srow{i:02d}", {"d": {"n": str(i), "tag": "even" if i % 2 == 0 else "odd"}})
    res = b.commit(finalize=True)
    check(res["response"] == [200], "one batch PUT answered 200", res)
    keys = [f"srow{i:02d}" for i in range(20)]

    def scan(filter_string=None, scanner_config=None):
        kw = {"with_row_id": True, "filter_string": filter_string}
        if scanner_config is not None:
            kw["scanner_config"] = scanner_config
        out = st_table.fetch_all_rows(**kw)
        check(out is not None, "scanner created (201 + Location)", out)
        return [(k, v) for row in out for k, v in row.items()]

    step("scan: fetch_all_rows(scanner_config={}) returns every row in order, one GET")
    rows = scan(scanner_config={})
    check([k for k, _ in rows] == keys, "20 rows in key order", [k for k, _ in rows])
    check(rows[3][1] == {"d": {"n": "3", "tag": "odd"}}, "row content", rows[3])

    step("scan: fetch_all_rows() default body \"\" (JSON empty string) = empty scanner")
    rows = scan()
    check([k for k, _ in rows] == keys, "20 rows", [k for k, _ in rows])

    step("scan: PrefixFilter")
    f = json.dumps({"type": "PrefixFilter", "value": b64("srow1")})
    rows = scan(f)
    check([k for k, _ in rows] == keys[10:], "srow10..srow19", [k for k, _ in rows])

    step("scan: RowFilter with RegexStringComparator")
    f = json.dumps(
        {"type": "RowFilter", "op": "EQUAL",
         "comparator": {"type": "RegexStringComparator", "value": "^srow0[0-4]$"}}
    )
    rows = scan(f)
    check([k for k, _ in rows] == keys[:5], "srow00..srow04", [k for k, _ in rows])

    step("scan: RowFilter with BinaryComparator GREATER_OR_EQUAL")
    f = json.dumps(
        {"type": "RowFilter", "op": "GREATER_OR_EQUAL",
         "comparator": {"type": "BinaryComparator", "value": b64("srow17")}}
    )
    rows = scan(f)
    check([k for k, _ in rows] == keys[17:], "srow17..srow19", [k for k, _ in rows])

    step("scan: ValueFilter keeps only matching cells")
    f = json.dumps(
        {"type": "ValueFilter", "op": "EQUAL",
         "comparator": {"type": "BinaryComparator", "value": b64("odd")}}
    )
    rows = scan(f)
    check([k for k, _ in rows] == keys[1::2], "odd rows", [k for k, _ in rows])
    check(all(v == {"d": {"tag": "odd"}} for _, v in rows), "only the d:tag cell", rows[:2])

    step("scan: SingleColumnValueFilter returns whole rows")
    f = json.dumps(
        {"type": "SingleColumnValueFilter", "op": "EQUAL", "family": b64("d"),
         "qualifier": b64("tag"), "latestVersion": True, "ifMissing": False,
         "comparator": {"type": "BinaryComparator", "value": b64("even")}}
    )
    rows = scan(f)
    check([k for k, _ in rows] == keys[0::2], "even rows", [k for k, _ in rows])
    check(rows[1][1] == {"d": {"n": "2", "tag": "even"}}, "whole row", rows[1])

    step("scan: ColumnPrefixFilter")
    f = json.dumps({"type": "ColumnPrefixFilter", "value": b64("ta")})
    rows = scan(f)
    check(len(rows) == 20 and all(list(v["d"]) == ["tag"] for _, v in rows), "only d:tag", rows[:2])

    step("scan: FilterList MUST_PASS_ALL (PrefixFilter + SingleColumnValueFilter)")
    f = json.dumps(
        {"type": "FilterList", "op": "MUST_PASS_ALL", "filters": [
            {"type": "PrefixFilter", "value": b64("srow1")},
            {"type": "SingleColumnValueFilter", "op": "EQUAL", "family": b64("d"),
             "qualifier": b64("tag"),
             "comparator": {"type": "BinaryComparator", "value": b64("even")}},
        ]}
    )
    rows = scan(f)
    check([k for k, _ in rows] == keys[10::2], "srow10,12,..,18", [k for k, _ in rows])

    step("remove: a column, a family, a row")
    check(table.remove("row1", "cf2", "age") == 200, "DELETE /t/row1/cf2:age")
    got = table.fetch("row1")
    check(got == {"cf1": data["cf1"], "cf2": {"id": "2", "gender": "male"}}, "age gone", got)
    check(table.remove("row1", "cf1") == 200, "DELETE /t/row1/cf1")
    got = table.fetch("row1")
    check(got == {"cf2": {"id": "2", "gender": "male"}}, "cf1 gone", got)
    check(table.remove("row1") == 200, "DELETE /t/row1")
    check(table.fetch("row1") is None, "row gone")
    check(table.remove("row1") == 200, "deleting a missing row is 200")

    step("drop tables")
    for name in (t_name, v_name, s_name):
        st = conn.drop_table(name)
        check(st == 200, f"drop {name} returns 200", st)
        check(not conn.table_exists(name), f"{name} no longer listed", conn.tables())
    st = conn.drop_table(t_name)
    check(st == 404, "dropping a missing table is 404", st)
    print("[starbase] all steps passed", flush=True)


if __name__ == "__main__":
    base_url = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KURA_URL", "http://127.0.0.1:8080"))
    try:
        main(base_url.rstrip("/"))
    except CompatFailure as e:
        print(f"[starbase] FAILED at step '{STEP[0]}': {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception:
        print(f"[starbase] FAILED at step '{STEP[0]}' with an exception:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
