//! HBase's own REST filter test (`TestScannersWithFilters`) replayed over HTTP on a real store:
//! the same table, puts and deletes, the same filters sent as the scanner's FilterModel JSON
//! (what the Java client sends) and as the filter language of stateless scans, and the same
//! expected rows and cells.

mod support;

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use support::*;

const T: &str = "TestScannersWithFilters";
const FAM: [&str; 2] = ["testFamilyOne", "testFamilyTwo"];
const VAL: [&str; 2] = ["testValueOne", "testValueTwo"];
const NUM_ROWS: usize = 6;
const COLS_PER_ROW: usize = 6;

/// The Java test's set-up: two groups of four rows, each group with its own qualifiers and value
/// in both families; then qualifier `-1` and row `-1` of each group deleted.
async fn table() -> Client {
    let c = client().await;
    c.create_table(T, &FAM, 1).await;
    for (group, value) in [("One", VAL[0]), ("Two", VAL[1])] {
        for r in 0..4 {
            let row = format!("testRow{group}-{r}");
            for fam in FAM {
                for q in 0..4 {
                    let col = format!("{fam}:testQualifier{group}-{q}");
                    c.put_cell(T, &row, &col, None, value).await;
                }
            }
        }
    }
    for group in ["One", "Two"] {
        for r in 0..4 {
            for fam in FAM {
                let uri = format!("/{T}/testRow{group}-{r}/{fam}:testQualifier{group}-1");
                assert_eq!(c.delete(&uri).await.status, 200, "{uri}");
            }
        }
        let uri = format!("/{T}/testRow{group}-1");
        assert_eq!(c.delete(&uri).await.status, 200, "{uri}");
    }
    c
}

/// A FilterModel JSON through a stateful scanner (batch unlimited, one GET).
async fn scan_model(c: &Client, filter: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut body = serde_json::json!({ "filter": filter });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let r = c.put_json(&format!("/{T}/scanner"), &body).await;
    assert_eq!(r.status, 201, "{filter}: {}", r.text());
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path in Location"));
    let r = c.get_json(&path).await;
    let v = match r.status {
        200 => r.json(),
        204 => serde_json::json!({"Row": []}),
        s => panic!("{filter}: status {s}: {}", r.text()),
    };
    assert_eq!(c.delete(&path).await.status, 200);
    v
}

/// A filter-language string through a stateless scan; `params` are extra query parameters.
async fn scan_lang(c: &Client, filter: &str, params: &str) -> serde_json::Value {
    let enc = utf8_percent_encode(filter, NON_ALPHANUMERIC);
    let r = c.get_json(&format!("/{T}/*?filter={enc}{params}")).await;
    assert_eq!(r.status, 200, "{filter}: {}", r.text());
    r.json()
}

fn b64s(s: &str) -> String {
    b64(s)
}

fn compare(ty: &str, op: &str, cmp: &str, value: &str) -> String {
    let v = match cmp {
        "BinaryComparator" => b64s(value),
        _ => value.to_string(),
    };
    format!(r#"{{"type":"{ty}","op":"{op}","comparator":{{"type":"{cmp}","value":"{v}"}}}}"#)
}

/// Asserts `rows` rows of `per_row` cells each.
fn shape(v: &serde_json::Value, rows: usize, per_row: usize, what: &str) {
    let keys = row_keys(v);
    assert_eq!(keys.len(), rows, "{what}: rows {keys:?}");
    for row in v["Row"].as_array().expect("Row") {
        let n = row["Cell"].as_array().map_or(0, Vec::len);
        assert_eq!(n, per_row, "{what}: cells per row in {v}");
    }
}

/// `row/family:qualifier=value` for every cell.
fn flat(v: &serde_json::Value) -> Vec<String> {
    cells_of(v)
        .into_iter()
        .map(|(r, col, _, val)| format!("{r}/{col}={val}"))
        .collect()
}

#[actix_web::test]
async fn no_filter_and_prefix_filter() {
    let c = table().await;
    shape(
        &scan_lang(&c, "PageFilter(100)", "").await,
        NUM_ROWS,
        COLS_PER_ROW,
        "all",
    );
    let f = format!(
        r#"{{"type":"PrefixFilter","value":"{}"}}"#,
        b64s("testRowOne")
    );
    shape(
        &scan_model(&c, &f, serde_json::json!({})).await,
        NUM_ROWS / 2,
        COLS_PER_ROW,
        &f,
    );
    let v = scan_lang(&c, "PrefixFilter('testRowOne')", "").await;
    shape(&v, NUM_ROWS / 2, COLS_PER_ROW, "PrefixFilter");
}

#[actix_web::test]
async fn page_filter_limits_rows_over_all_regions() {
    let c = table().await;
    let all = row_keys(&scan_lang(&c, "FirstKeyOnlyFilter()", "").await);
    for n in [6usize, 4, 2, 1] {
        let v = scan_model(
            &c,
            &format!(r#"{{"type":"PageFilter","value":"{n}"}}"#),
            serde_json::json!({}),
        )
        .await;
        shape(&v, n, COLS_PER_ROW, "PageFilter json");
        assert_eq!(row_keys(&v), all[..n].to_vec());
        let v = scan_lang(&c, &format!("PageFilter({n})"), "").await;
        shape(&v, n, COLS_PER_ROW, "PageFilter lang");
    }
}

#[actix_web::test]
async fn inclusive_stop_filter_includes_its_row() {
    let c = table().await;
    for group in ["One", "Two"] {
        let (start, stop) = (format!("testRow{group}-0"), format!("testRow{group}-3"));
        let range = serde_json::json!({"startRow": b64s(&start), "endRow": b64s(&stop)});
        let v = scan_model(
            &c,
            r#"{"type":"FilterList","op":"MUST_PASS_ALL","filters":[]}"#,
            range,
        )
        .await;
        shape(&v, NUM_ROWS / 2 - 1, COLS_PER_ROW, "start/stop");
        let f = format!(
            r#"{{"type":"InclusiveStopFilter","value":"{}"}}"#,
            b64s(&stop)
        );
        let v = scan_model(&c, &f, serde_json::json!({"startRow": b64s(&start)})).await;
        shape(&v, NUM_ROWS / 2, COLS_PER_ROW, &f);
        let v = scan_lang(
            &c,
            &format!("InclusiveStopFilter('{stop}')"),
            &format!("&startrow={start}"),
        )
        .await;
        shape(&v, NUM_ROWS / 2, COLS_PER_ROW, "InclusiveStopFilter lang");
    }
}

#[actix_web::test]
async fn qualifier_filter_with_every_operator() {
    let c = table().await;
    let q = "testQualifierOne-2";
    let group_one = serde_json::json!({"endRow": b64s("testRowTwo")});
    let cases = [
        ("EQUAL", "=", false, 2),
        ("LESS", "<", false, 2),
        ("LESS_OR_EQUAL", "<=", false, 4),
        ("NOT_EQUAL", "!=", true, 4),
        ("GREATER_OR_EQUAL", ">=", true, 4),
        ("GREATER", ">", true, 2),
    ];
    for (op, sym, only_group_one, per_row) in cases {
        let extra = if only_group_one {
            group_one.clone()
        } else {
            serde_json::json!({})
        };
        let f = compare("QualifierFilter", op, "BinaryComparator", q);
        shape(&scan_model(&c, &f, extra).await, NUM_ROWS / 2, per_row, &f);
        let params = if only_group_one {
            "&endrow=testRowTwo"
        } else {
            ""
        };
        let v = scan_lang(&c, &format!("QualifierFilter({sym}, 'binary:{q}')"), params).await;
        shape(&v, NUM_ROWS / 2, per_row, sym);
    }
    let f = compare("QualifierFilter", "NOT_EQUAL", "BinaryComparator", q);
    let v = scan_model(&c, &f, serde_json::json!({})).await;
    let per_row: Vec<usize> = v["Row"]
        .as_array()
        .expect("Row")
        .iter()
        .map(|r| r["Cell"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(per_row, vec![4, 4, 4, 6, 6, 6]);
    let f = compare(
        "QualifierFilter",
        "NOT_EQUAL",
        "RegexStringComparator",
        "test.+-2",
    );
    shape(
        &scan_model(&c, &f, serde_json::json!({})).await,
        NUM_ROWS,
        4,
        &f,
    );
}

#[actix_web::test]
async fn row_filter_with_every_operator_and_regex() {
    let c = table().await;
    let k = "testRowOne-2";
    let cases = [
        ("EQUAL", "=", 1),
        ("LESS", "<", 1),
        ("LESS_OR_EQUAL", "<=", 2),
        ("NOT_EQUAL", "!=", NUM_ROWS - 1),
        ("GREATER_OR_EQUAL", ">=", NUM_ROWS - 1),
        ("GREATER", ">", NUM_ROWS - 2),
    ];
    for (op, sym, rows) in cases {
        let f = compare("RowFilter", op, "BinaryComparator", k);
        shape(
            &scan_model(&c, &f, serde_json::json!({})).await,
            rows,
            COLS_PER_ROW,
            &f,
        );
        let v = scan_lang(&c, &format!("RowFilter({sym}, 'binary:{k}')"), "").await;
        shape(&v, rows, COLS_PER_ROW, sym);
    }
    let f = compare("RowFilter", "EQUAL", "RegexStringComparator", ".+-2");
    let v = scan_model(&c, &f, serde_json::json!({})).await;
    assert_eq!(row_keys(&v), vec!["testRowOne-2", "testRowTwo-2"]);
    shape(&v, 2, COLS_PER_ROW, &f);
}

#[actix_web::test]
async fn value_filter_with_every_operator_and_regex() {
    let c = table().await;
    let cases = [
        ("EQUAL", "=", VAL[0], NUM_ROWS / 2),
        ("EQUAL", "=", VAL[1], NUM_ROWS / 2),
        ("LESS", "<", VAL[1], NUM_ROWS / 2),
        ("LESS_OR_EQUAL", "<=", VAL[1], NUM_ROWS),
        ("LESS_OR_EQUAL", "<=", VAL[0], NUM_ROWS / 2),
        ("NOT_EQUAL", "!=", VAL[0], NUM_ROWS / 2),
        ("GREATER_OR_EQUAL", ">=", VAL[0], NUM_ROWS),
        ("GREATER", ">", VAL[0], NUM_ROWS / 2),
    ];
    for (op, sym, val, rows) in cases {
        let f = compare("ValueFilter", op, "BinaryComparator", val);
        shape(
            &scan_model(&c, &f, serde_json::json!({})).await,
            rows,
            COLS_PER_ROW,
            &f,
        );
        let v = scan_lang(&c, &format!("ValueFilter({sym}, 'binary:{val}')"), "").await;
        shape(&v, rows, COLS_PER_ROW, sym);
    }
    let f = compare(
        "ValueFilter",
        "EQUAL",
        "RegexStringComparator",
        "testValue((One)|(Two))",
    );
    shape(
        &scan_model(&c, &f, serde_json::json!({})).await,
        NUM_ROWS,
        COLS_PER_ROW,
        &f,
    );
}

#[actix_web::test]
async fn skip_filter_drops_rows_holding_the_qualifier() {
    let c = table().await;
    let inner = compare(
        "QualifierFilter",
        "NOT_EQUAL",
        "BinaryComparator",
        "testQualifierOne-2",
    );
    let f = format!(r#"{{"type":"SkipFilter","filters":[{inner}]}}"#);
    let v = scan_model(&c, &f, serde_json::json!({})).await;
    assert_eq!(
        row_keys(&v),
        vec!["testRowTwo-0", "testRowTwo-2", "testRowTwo-3"]
    );
    shape(&v, 3, COLS_PER_ROW, &f);
    let v = scan_lang(
        &c,
        "SKIP QualifierFilter(!=, 'binary:testQualifierOne-2')",
        "",
    )
    .await;
    assert_eq!(
        row_keys(&v),
        vec!["testRowTwo-0", "testRowTwo-2", "testRowTwo-3"]
    );
}

#[actix_web::test]
async fn filter_lists_must_pass_all_and_must_pass_one() {
    let c = table().await;
    let all = format!(
        r#"{{"type":"FilterList","op":"MUST_PASS_ALL","filters":[{},{},{}]}}"#,
        compare("RowFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare("QualifierFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare("ValueFilter", "EQUAL", "SubstringComparator", "One"),
    );
    let v = scan_model(&c, &all, serde_json::json!({"column": [b64s(FAM[0])]})).await;
    assert_eq!(
        flat(&v),
        vec!["testRowOne-2/testFamilyOne:testQualifierOne-2=testValueOne"]
    );
    let one = format!(
        r#"{{"type":"FilterList","op":"MUST_PASS_ONE","filters":[{},{},{}]}}"#,
        compare("RowFilter", "EQUAL", "RegexStringComparator", ".+Two.+"),
        compare("QualifierFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare("ValueFilter", "EQUAL", "SubstringComparator", "One"),
    );
    shape(
        &scan_model(&c, &one, serde_json::json!({})).await,
        NUM_ROWS,
        COLS_PER_ROW,
        &one,
    );
    let v = scan_lang(
        &c,
        "RowFilter(=,'regexstring:.+-2') AND QualifierFilter(=,'regexstring:.+-2') AND ValueFilter(=,'substring:One')",
        &format!("&column={}", FAM[0]),
    )
    .await;
    assert_eq!(
        flat(&v),
        vec!["testRowOne-2/testFamilyOne:testQualifierOne-2=testValueOne"]
    );
}

#[actix_web::test]
async fn first_key_only_filter_returns_the_first_cell_of_each_row() {
    let c = table().await;
    let expected = vec![
        "testRowOne-0/testFamilyOne:testQualifierOne-0=testValueOne",
        "testRowOne-2/testFamilyOne:testQualifierOne-0=testValueOne",
        "testRowOne-3/testFamilyOne:testQualifierOne-0=testValueOne",
        "testRowTwo-0/testFamilyOne:testQualifierTwo-0=testValueTwo",
        "testRowTwo-2/testFamilyOne:testQualifierTwo-0=testValueTwo",
        "testRowTwo-3/testFamilyOne:testQualifierTwo-0=testValueTwo",
    ];
    let v = scan_model(
        &c,
        r#"{"type":"FirstKeyOnlyFilter"}"#,
        serde_json::json!({}),
    )
    .await;
    assert_eq!(flat(&v), expected);
    assert_eq!(
        flat(&scan_lang(&c, "FirstKeyOnlyFilter()", "").await),
        expected
    );
}

#[actix_web::test]
async fn single_column_value_filter_sees_its_column_when_the_scan_selects_others() {
    let c = table().await;
    c.put_cell(T, "testRowOne-0", "testFamilyTwo:flag", None, "on")
        .await;
    // The scan asks for family one only; the filter tests a column of family two.
    let f = "SingleColumnValueFilter('testFamilyTwo', 'flag', =, 'binary:on', true, true)";
    let v = scan_lang(&c, f, &format!("&column={}", FAM[0])).await;
    assert_eq!(row_keys(&v), vec!["testRowOne-0"]);
    assert!(
        cells_of(&v)
            .iter()
            .all(|cell| cell.1.starts_with("testFamilyOne:")),
        "{v}"
    );
}

/// Table `f` for the filters TestScannersWithFilters does not cover: two families, versions.
async fn small_table() -> Client {
    let c = client().await;
    let r = c
        .put_json(
            "/f/schema",
            &serde_json::json!({"name": "f", "ColumnSchema": [
                {"name": "cf", "VERSIONS": "3"}, {"name": "x", "VERSIONS": "3"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    for (row, col, ts, v) in [
        ("r1", "cf:a", 10, "old"),
        ("r1", "cf:a", 20, "apple"),
        ("r1", "cf:b", 20, "Banana"),
        ("r1", "x:c", 20, "cherry"),
        ("r2", "cf:a", 30, "avocado"),
        ("r2", "x:c", 30, "coconut"),
        ("r3", "cf:b", 40, "blueberry"),
        ("r3", "x:d", 40, "date"),
    ] {
        c.put_cell("f", row, col, Some(ts), v).await;
    }
    c
}

async fn stateless(c: &Client, filter: &str) -> Vec<String> {
    let enc = utf8_percent_encode(filter, NON_ALPHANUMERIC);
    let r = c.get_json(&format!("/f/*?filter={enc}")).await;
    assert_eq!(r.status, 200, "{filter}: {}", r.text());
    flat(&r.json())
}

async fn scanner(c: &Client, filter: &str) -> Vec<String> {
    let r = c
        .put_json("/f/scanner", &serde_json::json!({ "filter": filter }))
        .await;
    assert_eq!(r.status, 201, "{filter}: {}", r.text());
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path"));
    let r = c.get_json(&path).await;
    match r.status {
        200 => flat(&r.json()),
        204 => Vec::new(),
        s => panic!("{filter}: {s} {}", r.text()),
    }
}

#[actix_web::test]
async fn column_filters_over_http() {
    let c = small_table().await;
    assert_eq!(
        stateless(&c, "FamilyFilter(=, 'binary:x')").await,
        vec!["r1/x:c=cherry", "r2/x:c=coconut", "r3/x:d=date"]
    );
    assert_eq!(
        stateless(&c, "ColumnPrefixFilter('b')").await,
        vec!["r1/cf:b=Banana", "r3/cf:b=blueberry"]
    );
    assert_eq!(
        stateless(&c, "MultipleColumnPrefixFilter('b', 'd')").await,
        vec!["r1/cf:b=Banana", "r3/cf:b=blueberry", "r3/x:d=date"]
    );
    assert_eq!(
        stateless(&c, "ColumnRangeFilter('b', true, 'c', false)").await,
        vec!["r1/cf:b=Banana", "r3/cf:b=blueberry"]
    );
    let f = format!(
        r#"{{"type":"ColumnRangeFilter","minColumn":"{}","minColumnInclusive":false,"maxColumn":"{}","maxColumnInclusive":true}}"#,
        b64s("b"),
        b64s("c")
    );
    assert_eq!(
        scanner(&c, &f).await,
        vec!["r1/x:c=cherry", "r2/x:c=coconut"]
    );
    assert_eq!(
        stateless(&c, "ColumnPaginationFilter(1, 1)").await,
        vec!["r1/cf:b=Banana", "r2/x:c=coconut", "r3/x:d=date"]
    );
    assert_eq!(
        stateless(&c, "ColumnCountGetFilter(1)").await,
        vec!["r1/cf:a=apple", "r2/cf:a=avocado", "r3/cf:b=blueberry"]
    );
}

#[actix_web::test]
async fn value_and_key_filters_over_http() {
    let c = small_table().await;
    assert_eq!(
        stateless(&c, "ValueFilter(=, 'substring:BAN')").await,
        vec!["r1/cf:b=Banana"]
    );
    assert_eq!(
        stateless(&c, "ValueFilter(=, 'binaryprefix:co')").await,
        vec!["r2/x:c=coconut"]
    );
    assert_eq!(
        stateless(&c, "KeyOnlyFilter() AND PrefixFilter('r3')").await,
        vec!["r3/cf:b=", "r3/x:d="]
    );
    let f = format!(
        r#"{{"type":"SingleColumnValueFilter","family":"{}","qualifier":"{}","op":"EQUAL","comparator":{{"type":"BinaryComparator","value":"{}"}},"ifMissing":true,"latestVersion":true}}"#,
        b64s("cf"),
        b64s("a"),
        b64s("avocado")
    );
    assert_eq!(
        scanner(&c, &f).await,
        vec!["r2/cf:a=avocado", "r2/x:c=coconut"]
    );
    assert_eq!(
        stateless(
            &c,
            "SingleColumnValueExcludeFilter('cf', 'a', =, 'binary:avocado', true, true)"
        )
        .await,
        vec!["r2/x:c=coconut"]
    );
    // The scanner reads every version by default, so the filter sees the older one.
    assert_eq!(
        scanner(&c, r#"{"type":"TimestampsFilter","timestamps":[10]}"#).await,
        vec!["r1/cf:a=old"]
    );
    assert_eq!(
        stateless(&c, "WHILE RowFilter(<, 'binary:r3')").await.len(),
        5
    );
}

#[actix_web::test]
async fn multiget_and_filter_b64_take_the_filter_language() {
    let c = small_table().await;
    let enc = utf8_percent_encode("ValueFilter(=,'binary:coconut')", NON_ALPHANUMERIC);
    let r = c
        .get_json(&format!("/f/multiget?row=r1&row=r2&filter={enc}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(flat(&r.json()), vec!["r2/x:c=coconut"]);
    use base64::Engine as _;
    let b = base64::engine::general_purpose::URL_SAFE.encode("PrefixFilter('r3')");
    let r = c.get_json(&format!("/f/*?filter_b64={b}")).await;
    assert_eq!(row_keys(&r.json()), vec!["r3"]);
}

#[actix_web::test]
async fn bad_filters_are_400s_that_say_why() {
    let c = small_table().await;
    for (filter, says) in [
        ("NoSuchFilter('a')", "unknown filter type: NoSuchFilter"),
        ("(PrefixFilter('a')", "parenthes"),
        ("RowFilter(=>, 'binary:a')", "invalid compare operator"),
        ("ValueFilter(<, 'substring:a')", "= and !="),
    ] {
        let enc = utf8_percent_encode(filter, NON_ALPHANUMERIC);
        let r = c.get_json(&format!("/f/*?filter={enc}")).await;
        assert_eq!(r.status, 400, "{filter}: {}", r.text());
        assert!(r.text().contains(says), "{filter}: {}", r.text());
    }
    for (filter, says) in [
        (
            r#"{"type":"NoSuchFilter"}"#,
            "unknown filter type: NoSuchFilter",
        ),
        (r#"{"type":"PrefixFilter","value":"%%%"}"#, "bad base64"),
        (
            r#"{"type":"RowFilter","op":"SORT_OF","comparator":{"type":"BinaryComparator","value":""}}"#,
            "SORT_OF",
        ),
    ] {
        let r = c
            .put_json("/f/scanner", &serde_json::json!({ "filter": filter }))
            .await;
        assert_eq!(r.status, 400, "{filter}: {}", r.text());
        assert!(r.text().contains(says), "{filter}: {}", r.text());
    }
}
