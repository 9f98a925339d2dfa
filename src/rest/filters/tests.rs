//! Unit tests of the filters: both syntaxes, HBase's semantics, malformed input.
//!
//! The `scanners_*` tests replay hbase-rest's `TestScannersWithFilters` (same table, same filters,
//! same expected rows and cells) through the JSON syntax the Java client sends and through the
//! equivalent filter-language strings.

use super::*;
use proptest::prelude::*;

fn cell(family: &str, qualifier: &str, ts: i64, value: &str) -> Cell {
    test_cell(family, qualifier, ts, value)
}

/// A row as the store holds it: key and visible cells in HBase order.
#[derive(Clone, Debug)]
struct TestRow {
    key: Vec<u8>,
    cells: Vec<Cell>,
}

fn row(key: &str, mut cells: Vec<Cell>) -> TestRow {
    cells.sort_by(|a, b| {
        (&a.family, &a.qualifier, std::cmp::Reverse(a.timestamp)).cmp(&(
            &b.family,
            &b.qualifier,
            std::cmp::Reverse(b.timestamp),
        ))
    });
    TestRow {
        key: key.as_bytes().to_vec(),
        cells,
    }
}

/// What the store and the REST layer do with a filter: `accept_key`, then `accept_row` on the
/// row's cells, then the caller's page limit.
fn scan(filter: &Filter, rows: &[TestRow]) -> Vec<(String, Vec<Cell>)> {
    let mut out = Vec::new();
    for r in rows {
        if !filter.accept_key(&r.key) {
            continue;
        }
        let mut cells = r.cells.clone();
        if filter.accept_row(&r.key, &mut cells) && !cells.is_empty() {
            out.push((String::from_utf8_lossy(&r.key).into_owned(), cells));
        }
        if filter.page_limit().is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    out
}

/// Rows in `[start, stop)` only (an empty bound is open).
fn scan_range(
    filter: &Filter,
    rows: &[TestRow],
    start: &str,
    stop: &str,
) -> Vec<(String, Vec<Cell>)> {
    let inside: Vec<TestRow> = rows
        .iter()
        .filter(|r| r.key.as_slice() >= start.as_bytes())
        .filter(|r| stop.is_empty() || r.key.as_slice() < stop.as_bytes())
        .cloned()
        .collect();
    scan(filter, &inside)
}

/// Only the cells of one family are read.
fn scan_family(filter: &Filter, rows: &[TestRow], family: &str) -> Vec<(String, Vec<Cell>)> {
    let only: Vec<TestRow> = rows
        .iter()
        .map(|r| TestRow {
            key: r.key.clone(),
            cells: r
                .cells
                .iter()
                .filter(|c| c.family == family.as_bytes())
                .cloned()
                .collect(),
        })
        .filter(|r| !r.cells.is_empty())
        .collect();
    scan(filter, &only)
}

fn keys(result: &[(String, Vec<Cell>)]) -> Vec<String> {
    result.iter().map(|(k, _)| k.clone()).collect()
}

/// `row/family:qualifier=value` for every cell, in order.
fn flat(result: &[(String, Vec<Cell>)]) -> Vec<String> {
    result
        .iter()
        .flat_map(|(k, cells)| {
            cells.iter().map(move |c| {
                format!(
                    "{k}/{}:{}={}",
                    String::from_utf8_lossy(&c.family),
                    String::from_utf8_lossy(&c.qualifier),
                    String::from_utf8_lossy(&c.value)
                )
            })
        })
        .collect()
}

fn json(s: &str) -> Filter {
    match parse_filter_json(s) {
        Ok(f) => f,
        Err(e) => panic!("{s} did not parse: {e}"),
    }
}

fn lang(s: &str) -> Filter {
    match parse_filter_language(s) {
        Ok(f) => f,
        Err(e) => panic!("{s} did not parse: {e}"),
    }
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

/// A JSON compare filter as hbase-rest's `stringifyFilter` writes it.
fn compare_json(ty: &str, op: &str, cmp_ty: &str, value: &str) -> String {
    let v = match cmp_ty {
        "BinaryComparator" | "BinaryPrefixComparator" => b64(value),
        _ => value.to_string(),
    };
    format!(r#"{{"type":"{ty}","op":"{op}","comparator":{{"type":"{cmp_ty}","value":"{v}"}}}}"#)
}

// ---------------------------------------------------------------------------------------------
// hbase-rest TestScannersWithFilters
// ---------------------------------------------------------------------------------------------

const FAM: [&str; 2] = ["testFamilyOne", "testFamilyTwo"];
const VAL: [&str; 2] = ["testValueOne", "testValueTwo"];

/// The table after the test's puts and deletes: rows `*-1` and qualifiers `*-1` are gone.
fn scanners_table() -> Vec<TestRow> {
    let mut rows = Vec::new();
    for (group, value) in [("One", VAL[0]), ("Two", VAL[1])] {
        for r in [0, 2, 3] {
            let mut cells = Vec::new();
            for fam in FAM {
                for q in [0, 2, 3] {
                    cells.push(cell(fam, &format!("testQualifier{group}-{q}"), 1, value));
                }
            }
            rows.push(row(&format!("testRow{group}-{r}"), cells));
        }
    }
    rows
}

const NUM_ROWS: usize = 6;
const COLS_PER_ROW: usize = 6;

fn assert_shape(result: &[(String, Vec<Cell>)], rows: usize, cells_per_row: usize) {
    assert_eq!(result.len(), rows, "rows: {:?}", keys(result));
    for (k, cells) in result {
        assert_eq!(
            cells.len(),
            cells_per_row,
            "cells of {k}: {:?}",
            flat(result)
        );
    }
}

#[test]
fn scanners_prefix_filter_returns_group_one() {
    let t = scanners_table();
    for f in [
        json(&format!(
            r#"{{"type":"PrefixFilter","value":"{}"}}"#,
            b64("testRowOne")
        )),
        lang("PrefixFilter('testRowOne')"),
    ] {
        let r = scan(&f, &t);
        assert_shape(&r, NUM_ROWS / 2, COLS_PER_ROW);
        assert!(keys(&r).iter().all(|k| k.starts_with("testRowOne")));
    }
}

#[test]
fn scanners_page_filter_returns_the_first_rows_whole() {
    let t = scanners_table();
    for n in [6usize, 4, 2, 1] {
        for f in [
            json(&format!(r#"{{"type":"PageFilter","value":"{n}"}}"#)),
            lang(&format!("PageFilter({n})")),
        ] {
            assert_eq!(f.page_limit(), Some(n));
            let r = scan(&f, &t);
            assert_shape(&r, n, COLS_PER_ROW);
            let all = keys(&scan(&lang("FirstKeyOnlyFilter()"), &t));
            assert_eq!(keys(&r), all[..n].to_vec());
        }
    }
}

#[test]
fn scanners_inclusive_stop_filter_includes_the_stop_row() {
    let t = scanners_table();
    assert_eq!(
        scan_range(
            &Filter::List(ListOp::MustPassAll, vec![]),
            &t,
            "testRowOne-0",
            "testRowOne-3"
        )
        .len(),
        2
    );
    for (start, stop) in [
        ("testRowOne-0", "testRowOne-3"),
        ("testRowTwo-0", "testRowTwo-3"),
    ] {
        for f in [
            json(&format!(
                r#"{{"type":"InclusiveStopFilter","value":"{}"}}"#,
                b64(stop)
            )),
            lang(&format!("InclusiveStopFilter('{stop}')")),
        ] {
            let r = scan_range(&f, &t, start, "");
            assert_shape(&r, NUM_ROWS / 2, COLS_PER_ROW);
            assert_eq!(keys(&r).last().map(String::as_str), Some(stop));
            assert_eq!(f.stop_row(), Some(stop.as_bytes().to_vec()));
        }
    }
}

#[test]
fn scanners_qualifier_filter_compares_the_cell_against_the_operand() {
    let t = scanners_table();
    let q = "testQualifierOne-2";
    let cases = [
        ("EQUAL", "=", "", 2),
        ("LESS", "<", "", 2),
        ("LESS_OR_EQUAL", "<=", "", 4),
        ("NOT_EQUAL", "!=", "testRowTwo", 4),
        ("GREATER_OR_EQUAL", ">=", "testRowTwo", 4),
        ("GREATER", ">", "testRowTwo", 2),
    ];
    for (op, sym, stop, per_row) in cases {
        for f in [
            json(&compare_json("QualifierFilter", op, "BinaryComparator", q)),
            lang(&format!("QualifierFilter({sym}, 'binary:{q}')")),
        ] {
            let r = scan_range(&f, &t, "", stop);
            assert_shape(&r, NUM_ROWS / 2, per_row);
        }
    }
}

#[test]
fn scanners_qualifier_filter_not_equal_keeps_other_groups_whole() {
    let t = scanners_table();
    let f = json(&compare_json(
        "QualifierFilter",
        "NOT_EQUAL",
        "BinaryComparator",
        "testQualifierOne-2",
    ));
    let r = scan(&f, &t);
    let counts: Vec<usize> = r.iter().map(|(_, c)| c.len()).collect();
    assert_eq!(counts, vec![4, 4, 4, 6, 6, 6]);
    assert_eq!(
        flat(&r)[..4].to_vec(),
        vec![
            "testRowOne-0/testFamilyOne:testQualifierOne-0=testValueOne",
            "testRowOne-0/testFamilyOne:testQualifierOne-3=testValueOne",
            "testRowOne-0/testFamilyTwo:testQualifierOne-0=testValueOne",
            "testRowOne-0/testFamilyTwo:testQualifierOne-3=testValueOne",
        ]
    );
    for f in [
        json(&compare_json(
            "QualifierFilter",
            "NOT_EQUAL",
            "RegexStringComparator",
            "test.+-2",
        )),
        lang("QualifierFilter(!=, 'regexstring:test.+-2')"),
    ] {
        assert_shape(&scan(&f, &t), NUM_ROWS, 4);
    }
}

#[test]
fn scanners_row_filter_matches_rows_by_key() {
    let t = scanners_table();
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
        for f in [
            json(&compare_json("RowFilter", op, "BinaryComparator", k)),
            lang(&format!("RowFilter({sym}, 'binary:{k}')")),
        ] {
            assert_shape(&scan(&f, &t), rows, COLS_PER_ROW);
        }
    }
    for f in [
        json(&compare_json(
            "RowFilter",
            "EQUAL",
            "RegexStringComparator",
            "testRow.+-2",
        )),
        lang("RowFilter(=, 'regexstring:testRow.+-2')"),
        lang("RowFilter(=, 'regexstring:.+-2')"),
    ] {
        let r = scan(&f, &t);
        assert_shape(&r, 2, COLS_PER_ROW);
        assert_eq!(keys(&r), vec!["testRowOne-2", "testRowTwo-2"]);
    }
}

#[test]
fn scanners_value_filter_compares_values() {
    let t = scanners_table();
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
    for (op, sym, v, rows) in cases {
        for f in [
            json(&compare_json("ValueFilter", op, "BinaryComparator", v)),
            lang(&format!("ValueFilter({sym}, 'binary:{v}')")),
        ] {
            assert_shape(&scan(&f, &t), rows, COLS_PER_ROW);
        }
    }
    let f = json(&compare_json(
        "ValueFilter",
        "EQUAL",
        "RegexStringComparator",
        "testValue((One)|(Two))",
    ));
    assert_shape(&scan(&f, &t), NUM_ROWS, COLS_PER_ROW);
    let r = scan(&lang("ValueFilter(!=, 'binary:testValueOne')"), &t);
    assert_eq!(
        keys(&r),
        vec!["testRowTwo-0", "testRowTwo-2", "testRowTwo-3"]
    );
}

#[test]
fn scanners_skip_filter_drops_rows_with_any_rejected_cell() {
    let t = scanners_table();
    let inner = compare_json(
        "QualifierFilter",
        "NOT_EQUAL",
        "BinaryComparator",
        "testQualifierOne-2",
    );
    for f in [
        json(&format!(r#"{{"type":"SkipFilter","filters":[{inner}]}}"#)),
        lang("SKIP QualifierFilter(!=, 'binary:testQualifierOne-2')"),
    ] {
        let r = scan(&f, &t);
        assert_shape(&r, 3, COLS_PER_ROW);
        assert_eq!(
            keys(&r),
            vec!["testRowTwo-0", "testRowTwo-2", "testRowTwo-3"]
        );
    }
}

#[test]
fn scanners_filter_list_must_pass_all_and_must_pass_one() {
    let t = scanners_table();
    let all = format!(
        r#"{{"type":"FilterList","op":"MUST_PASS_ALL","filters":[{},{},{}]}}"#,
        compare_json("RowFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare_json("QualifierFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare_json("ValueFilter", "EQUAL", "SubstringComparator", "One"),
    );
    for f in [
        json(&all),
        lang("RowFilter(=,'regexstring:.+-2') AND QualifierFilter(=,'regexstring:.+-2') AND ValueFilter(=,'substring:One')"),
    ] {
        let r = scan_family(&f, &t, FAM[0]);
        assert_eq!(flat(&r), vec!["testRowOne-2/testFamilyOne:testQualifierOne-2=testValueOne"]);
    }
    let one = format!(
        r#"{{"type":"FilterList","op":"MUST_PASS_ONE","filters":[{},{},{}]}}"#,
        compare_json("RowFilter", "EQUAL", "RegexStringComparator", ".+Two.+"),
        compare_json("QualifierFilter", "EQUAL", "RegexStringComparator", ".+-2"),
        compare_json("ValueFilter", "EQUAL", "SubstringComparator", "One"),
    );
    for f in [
        json(&one),
        lang("RowFilter(=,'regexstring:.+Two.+') OR QualifierFilter(=,'regexstring:.+-2') OR ValueFilter(=,'substring:One')"),
    ] {
        assert_shape(&scan(&f, &t), NUM_ROWS, COLS_PER_ROW);
    }
}

#[test]
fn scanners_first_key_only_filter_returns_one_cell_per_row() {
    let t = scanners_table();
    for f in [
        json(r#"{"type":"FirstKeyOnlyFilter"}"#),
        lang("FirstKeyOnlyFilter()"),
    ] {
        let r = scan(&f, &t);
        assert_eq!(
            flat(&r),
            vec![
                "testRowOne-0/testFamilyOne:testQualifierOne-0=testValueOne",
                "testRowOne-2/testFamilyOne:testQualifierOne-0=testValueOne",
                "testRowOne-3/testFamilyOne:testQualifierOne-0=testValueOne",
                "testRowTwo-0/testFamilyOne:testQualifierTwo-0=testValueTwo",
                "testRowTwo-2/testFamilyOne:testQualifierTwo-0=testValueTwo",
                "testRowTwo-3/testFamilyOne:testQualifierTwo-0=testValueTwo",
            ]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Per-filter semantics
// ---------------------------------------------------------------------------------------------

/// Three rows with two families, two qualifiers and, for `cf:a`, two versions.
fn small_table() -> Vec<TestRow> {
    vec![
        row(
            "r1",
            vec![
                cell("cf", "a", 20, "apple"),
                cell("cf", "a", 10, "old"),
                cell("cf", "b", 20, "Banana"),
                cell("x", "c", 20, "cherry"),
            ],
        ),
        row(
            "r2",
            vec![
                cell("cf", "a", 30, "avocado"),
                cell("x", "c", 30, "coconut"),
            ],
        ),
        row(
            "r3",
            vec![cell("cf", "b", 40, "blueberry"), cell("x", "d", 40, "date")],
        ),
    ]
}

#[test]
fn less_keeps_cells_below_the_operand() {
    let t = small_table();
    let r = scan(&lang("ValueFilter(<, 'binary:b')"), &t);
    assert_eq!(
        flat(&r),
        vec!["r1/cf:a=apple", "r1/cf:b=Banana", "r2/cf:a=avocado"]
    );
    let r = scan(&lang("ValueFilter(>=, 'binary:c')"), &t);
    assert_eq!(
        flat(&r),
        vec![
            "r1/cf:a=old",
            "r1/x:c=cherry",
            "r2/x:c=coconut",
            "r3/x:d=date"
        ]
    );
}

#[test]
fn no_op_keeps_nothing() {
    let t = small_table();
    let f = json(&compare_json(
        "ValueFilter",
        "NO_OP",
        "BinaryComparator",
        "apple",
    ));
    assert!(scan(&f, &t).is_empty());
}

#[test]
fn binary_prefix_comparator_compares_the_leading_bytes() {
    let t = small_table();
    let r = scan(&lang("ValueFilter(=, 'binaryprefix:co')"), &t);
    assert_eq!(flat(&r), vec!["r2/x:c=coconut"]);
    let r = scan(
        &json(&compare_json(
            "RowFilter",
            "GREATER",
            "BinaryPrefixComparator",
            "r1",
        )),
        &t,
    );
    assert_eq!(keys(&r), vec!["r2", "r3"]);
}

#[test]
fn substring_comparator_ignores_case() {
    let t = small_table();
    for f in [
        lang("ValueFilter(=, 'substring:BANANA')"),
        json(&compare_json(
            "ValueFilter",
            "EQUAL",
            "SubstringComparator",
            "nAn",
        )),
    ] {
        assert_eq!(flat(&scan(&f, &t)), vec!["r1/cf:b=Banana"]);
    }
}

#[test]
fn regex_comparator_finds_anywhere_and_dot_matches_newline() {
    let t = vec![row("k", vec![cell("f", "q", 1, "line1\nline2")])];
    assert_eq!(
        scan(&lang("ValueFilter(=, 'regexstring:1.line')"), &t).len(),
        1
    );
    assert_eq!(
        scan(&lang("ValueFilter(=, 'regexstring:ne2')"), &t).len(),
        1
    );
    assert_eq!(
        scan(&lang("ValueFilter(=, 'regexstring:^line2')"), &t).len(),
        0
    );
}

#[test]
fn bit_and_null_comparators_follow_hbase() {
    let t = vec![row(
        "k",
        vec![
            cell("f", "a", 1, "\u{1}"),
            cell("f", "b", 1, "\u{2}"),
            cell("f", "c", 1, ""),
        ],
    )];
    let bit = json(
        r#"{"type":"ValueFilter","op":"EQUAL","comparator":{"type":"BitComparator","value":"AQ==","op":"AND"}}"#,
    );
    assert_eq!(flat(&scan(&bit, &t)), vec!["k/f:a=\u{1}"]);
    let xor = json(
        r#"{"type":"ValueFilter","op":"EQUAL","comparator":{"type":"BitComparator","value":"AQ==","op":"XOR"}}"#,
    );
    assert_eq!(flat(&scan(&xor, &t)), vec!["k/f:b=\u{2}"]);
    let null_eq =
        json(r#"{"type":"ValueFilter","op":"EQUAL","comparator":{"type":"NullComparator"}}"#);
    assert!(scan(&null_eq, &t).is_empty());
    let null_ne =
        json(r#"{"type":"ValueFilter","op":"NOT_EQUAL","comparator":{"type":"NullComparator"}}"#);
    assert_eq!(scan(&null_ne, &t)[0].1.len(), 3);
}

#[test]
fn family_filter_keeps_matching_families() {
    let t = small_table();
    for f in [
        lang("FamilyFilter(=, 'binary:x')"),
        json(&compare_json(
            "FamilyFilter",
            "EQUAL",
            "BinaryComparator",
            "x",
        )),
    ] {
        assert_eq!(
            flat(&scan(&f, &t)),
            vec!["r1/x:c=cherry", "r2/x:c=coconut", "r3/x:d=date"]
        );
    }
    let r = scan(&lang("FamilyFilter(!=, 'binary:x')"), &t);
    assert_eq!(r.iter().map(|(_, c)| c.len()).sum::<usize>(), 5);
}

#[test]
fn single_column_value_filter_selects_whole_rows() {
    let t = small_table();
    let f = lang("SingleColumnValueFilter('cf', 'a', =, 'binary:apple')");
    // r1 matches; r2 has another value; r3 lacks the column and passes (filterIfMissing false).
    assert_eq!(keys(&scan(&f, &t)), vec!["r1", "r3"]);
    assert_eq!(scan(&f, &t)[0].1.len(), 4);
    let f = lang("SingleColumnValueFilter('cf', 'a', =, 'binary:apple', true, true)");
    assert_eq!(keys(&scan(&f, &t)), vec!["r1"]);
    assert_eq!(f.extra_columns(), vec![(b"cf".to_vec(), b"a".to_vec())]);
    let j = json(&format!(
        r#"{{"type":"SingleColumnValueFilter","family":"{}","qualifier":"{}","op":"EQUAL","comparator":{{"type":"BinaryComparator","value":"{}"}},"ifMissing":true,"latestVersion":true}}"#,
        b64("cf"),
        b64("a"),
        b64("apple")
    ));
    assert_eq!(keys(&scan(&j, &t)), vec!["r1"]);
}

#[test]
fn single_column_value_filter_tests_older_versions_only_when_asked() {
    let t = small_table();
    let latest = lang("SingleColumnValueFilter('cf', 'a', =, 'binary:old', true, true)");
    assert!(scan(&latest, &t).is_empty());
    let any = lang("SingleColumnValueFilter('cf', 'a', =, 'binary:old', true, false)");
    assert_eq!(keys(&scan(&any, &t)), vec!["r1"]);
    let j = json(&format!(
        r#"{{"type":"SingleColumnValueFilter","family":"{}","qualifier":"{}","op":"EQUAL","comparator":{{"type":"BinaryComparator","value":"{}"}},"ifMissing":true,"latestVersion":false}}"#,
        b64("cf"),
        b64("a"),
        b64("old")
    ));
    assert_eq!(keys(&scan(&j, &t)), vec!["r1"]);
}

#[test]
fn single_column_value_exclude_filter_removes_the_tested_column() {
    let t = small_table();
    let f = lang("SingleColumnValueExcludeFilter('cf', 'a', =, 'binary:apple', true, true)");
    assert_eq!(flat(&scan(&f, &t)), vec!["r1/cf:b=Banana", "r1/x:c=cherry"]);
}

#[test]
fn single_column_value_filters_in_an_or_list_select_either_value() {
    let t = small_table();
    let f = lang(
        "SingleColumnValueFilter('cf','a',=,'binary:apple',true,true) OR \
         SingleColumnValueFilter('cf','a',=,'binary:avocado',true,true)",
    );
    assert_eq!(keys(&scan(&f, &t)), vec!["r1", "r2"]);
    assert_eq!(scan(&f, &t)[0].1.len(), 4);
}

#[test]
fn column_prefix_filters_keep_matching_qualifiers() {
    let t = vec![row(
        "k",
        vec![
            cell("f", "aa", 1, "1"),
            cell("f", "ab", 1, "2"),
            cell("f", "b", 1, "3"),
            cell("g", "ab", 1, "4"),
            cell("g", "c", 1, "5"),
        ],
    )];
    for f in [
        lang("ColumnPrefixFilter('ab')"),
        json(&format!(
            r#"{{"type":"ColumnPrefixFilter","value":"{}"}}"#,
            b64("ab")
        )),
    ] {
        assert_eq!(flat(&scan(&f, &t)), vec!["k/f:ab=2", "k/g:ab=4"]);
    }
    for f in [
        lang("MultipleColumnPrefixFilter('c', 'aa')"),
        json(&format!(
            r#"{{"type":"MultipleColumnPrefixFilter","prefixes":["{}","{}"]}}"#,
            b64("c"),
            b64("aa")
        )),
    ] {
        assert_eq!(flat(&scan(&f, &t)), vec!["k/f:aa=1", "k/g:c=5"]);
    }
    // Overlapping prefixes: "ab" starts with "a" although "aa" is the largest prefix below it.
    let f = lang("MultipleColumnPrefixFilter('a', 'aa', 'aa')");
    assert_eq!(
        flat(&scan(&f, &t)),
        vec!["k/f:aa=1", "k/f:ab=2", "k/g:ab=4"]
    );
}

#[test]
fn column_range_filter_honours_inclusive_flags() {
    let t = vec![row(
        "k",
        vec![
            cell("f", "a", 1, "1"),
            cell("f", "b", 1, "2"),
            cell("f", "c", 1, "3"),
            cell("f", "d", 1, "4"),
        ],
    )];
    assert_eq!(
        flat(&scan(&lang("ColumnRangeFilter('b', true, 'd', false)"), &t)),
        vec!["k/f:b=2", "k/f:c=3"]
    );
    assert_eq!(
        flat(&scan(&lang("ColumnRangeFilter('b', false, 'd', true)"), &t)),
        vec!["k/f:c=3", "k/f:d=4"]
    );
    assert_eq!(
        flat(&scan(&lang("ColumnRangeFilter('', true, 'b', true)"), &t)),
        vec!["k/f:a=1", "k/f:b=2"]
    );
    assert_eq!(
        flat(&scan(&lang("ColumnRangeFilter('c', true, '', false)"), &t)),
        vec!["k/f:c=3", "k/f:d=4"]
    );
    let j = json(&format!(
        r#"{{"type":"ColumnRangeFilter","minColumn":"{}","minColumnInclusive":true,"maxColumn":"{}","maxColumnInclusive":true}}"#,
        b64("b"),
        b64("c")
    ));
    assert_eq!(flat(&scan(&j, &t)), vec!["k/f:b=2", "k/f:c=3"]);
}

#[test]
fn key_only_filter_empties_values_or_gives_their_length() {
    let t = small_table();
    let r = scan(&lang("KeyOnlyFilter()"), &t);
    assert_eq!(r.len(), 3);
    assert!(r.iter().flat_map(|(_, c)| c).all(|c| c.value.is_empty()));
    let r = scan(&lang("KeyOnlyFilter(true)"), &t);
    assert_eq!(r[0].1[0].value, 5i32.to_be_bytes().to_vec());
    assert!(scan(&json(r#"{"type":"KeyOnlyFilter"}"#), &t)
        .iter()
        .flat_map(|(_, c)| c)
        .all(|c| c.value.is_empty()));
}

#[test]
fn key_only_filter_after_a_value_filter_still_tests_the_real_value() {
    let t = small_table();
    let r = scan(
        &lang("ValueFilter(=, 'binary:date') AND KeyOnlyFilter()"),
        &t,
    );
    assert_eq!(flat(&r), vec!["r3/x:d="]);
}

#[test]
fn version_capped_filters_see_older_versions_then_cap() {
    let t = small_table();
    let f = VersionCapped::new(lang("ValueFilter(=, 'binary:old')"), 1);
    assert!(f.filter().needs_all_versions());
    let mut cells = t[0].cells.clone();
    assert!(f.accept_row(&t[0].key, &mut cells));
    assert_eq!(cells, vec![cell("cf", "a", 10, "old")]);
    let f = VersionCapped::new(lang("KeyOnlyFilter()"), 1);
    let mut cells = t[0].cells.clone();
    assert!(f.accept_row(&t[0].key, &mut cells));
    assert_eq!(
        cells.iter().map(|c| c.timestamp).collect::<Vec<_>>(),
        vec![20, 20, 20]
    );
    assert!(!lang("PrefixFilter('r') AND InclusiveStopFilter('z')").needs_all_versions());
}

#[test]
fn page_limit_is_found_at_the_top_and_in_and_lists_only() {
    assert_eq!(lang("PageFilter(3)").page_limit(), Some(3));
    assert_eq!(
        lang("PrefixFilter('a') AND PageFilter(5) AND PageFilter(2)").page_limit(),
        Some(2)
    );
    assert_eq!(
        lang("PrefixFilter('a') OR PageFilter(5)").page_limit(),
        None
    );
    assert_eq!(lang("PrefixFilter('a')").page_limit(), None);
    let t = small_table();
    let r = scan(&lang("ValueFilter(=, 'substring:o') AND PageFilter(1)"), &t);
    assert_eq!(keys(&r), vec!["r1"]);
}

#[test]
fn inclusive_stop_filter_rejects_keys_past_the_stop_in_the_scan_direction() {
    let mut f = lang("InclusiveStopFilter('r2')");
    assert!(f.accept_key(b"r1") && f.accept_key(b"r2") && !f.accept_key(b"r3"));
    f.set_reversed(true);
    assert!(!f.accept_key(b"r1") && f.accept_key(b"r2") && f.accept_key(b"r3"));
    assert_eq!(
        lang("InclusiveStopFilter('m') AND InclusiveStopFilter('c')").stop_row(),
        Some(b"c".to_vec())
    );
    assert_eq!(
        lang("InclusiveStopFilter('m') OR PrefixFilter('c')").stop_row(),
        None
    );
}

#[test]
fn timestamps_filter_keeps_listed_versions() {
    let t = small_table();
    for f in [
        lang("TimestampsFilter(10, 30)"),
        json(r#"{"type":"TimestampsFilter","timestamps":[30,"10"]}"#),
    ] {
        assert_eq!(
            flat(&scan(&f, &t)),
            vec!["r1/cf:a=old", "r2/cf:a=avocado", "r2/x:c=coconut"]
        );
    }
    assert!(scan(&lang("TimestampsFilter()"), &t).is_empty());
}

#[test]
fn column_count_and_pagination_take_newest_versions_of_leading_columns() {
    let t = small_table();
    assert_eq!(
        flat(&scan(&lang("ColumnCountGetFilter(2)"), &t)[..1]),
        vec!["r1/cf:a=apple", "r1/cf:b=Banana"]
    );
    for f in [
        lang("ColumnPaginationFilter(2, 1)"),
        json(r#"{"type":"ColumnPaginationFilter","limit":2,"offset":1}"#),
    ] {
        let r = scan(&f, &t);
        assert_eq!(
            flat(&r),
            vec![
                "r1/cf:b=Banana",
                "r1/x:c=cherry",
                "r2/x:c=coconut",
                "r3/x:d=date"
            ]
        );
    }
    assert!(scan(&json(r#"{"type":"ColumnCountGetFilter","limit":0}"#), &t).is_empty());
}

#[test]
fn while_match_drops_rows_the_wrapped_filter_rejects() {
    let t = small_table();
    for f in [
        lang("WHILE RowFilter(<=, 'binary:r2')"),
        json(&format!(
            r#"{{"type":"WhileMatchFilter","filters":[{}]}}"#,
            compare_json("RowFilter", "LESS_OR_EQUAL", "BinaryComparator", "r2")
        )),
    ] {
        assert_eq!(keys(&scan(&f, &t)), vec!["r1", "r2"]);
    }
    // r1 has a cell the wrapped filter rejects: the row goes (HBase would also end the scan).
    assert_eq!(
        keys(&scan(&lang("WHILE ValueFilter(!=, 'binary:old')"), &t)),
        vec!["r2", "r3"]
    );
}

#[test]
fn dependent_column_filter_keeps_cells_stamped_like_the_dependent_column() {
    let t = vec![row(
        "k",
        vec![
            cell("f", "dep", 5, "yes"),
            cell("f", "dep", 4, "no"),
            cell("f", "x", 5, "1"),
            cell("f", "x", 4, "2"),
            cell("g", "y", 3, "3"),
        ],
    )];
    assert_eq!(
        flat(&scan(&lang("DependentColumnFilter('f', 'dep')"), &t)),
        vec!["k/f:dep=yes", "k/f:dep=no", "k/f:x=1", "k/f:x=2"]
    );
    assert_eq!(
        flat(&scan(
            &lang("DependentColumnFilter('f', 'dep', true, =, 'binary:yes')"),
            &t
        )),
        vec!["k/f:x=1"]
    );
    let j = json(&format!(
        r#"{{"type":"DependentColumnFilter","family":"{}","qualifier":"{}","dropDependentColumn":true}}"#,
        b64("f"),
        b64("dep")
    ));
    assert_eq!(flat(&scan(&j, &t)), vec!["k/f:x=1", "k/f:x=2"]);
}

#[test]
fn column_value_filter_returns_only_the_matching_column() {
    let t = small_table();
    let f = lang("ColumnValueFilter('cf', 'a', =, 'binary:avocado')");
    assert_eq!(flat(&scan(&f, &t)), vec!["r2/cf:a=avocado"]);
}

#[test]
fn multi_row_range_fuzzy_and_random_row_filters_select_rows() {
    let t = small_table();
    let ranges = json(&format!(
        r#"{{"type":"MultiRowRangeFilter","ranges":[{{"startRow":"{}","startRowInclusive":false,"stopRow":"{}","stopRowInclusive":true}}]}}"#,
        b64("r1"),
        b64("r3")
    ));
    assert_eq!(keys(&scan(&ranges, &t)), vec!["r2", "r3"]);
    let fuzzy = json(&format!(
        r#"{{"type":"FuzzyRowFilter","fuzzyKeys":[{{"key":"{}","mask":"AAE="}}]}}"#,
        b64("r?")
    ));
    assert_eq!(keys(&scan(&fuzzy, &t)), vec!["r1", "r2", "r3"]);
    let fuzzy = json(&format!(
        r#"{{"type":"FuzzyRowFilter","fuzzyKeys":[{{"key":"{}","mask":"AQA="}}]}}"#,
        b64("?3")
    ));
    assert_eq!(keys(&scan(&fuzzy, &t)), vec!["r3"]);
    assert!(scan(&json(r#"{"type":"RandomRowFilter","chance":0.0}"#), &t).is_empty());
    assert_eq!(
        scan(&json(r#"{"type":"RandomRowFilter","chance":1.5}"#), &t).len(),
        3
    );
}

#[test]
fn and_binds_tighter_than_or() {
    let t = small_table();
    // = PrefixFilter('r1') OR (PrefixFilter('r2') AND ValueFilter(=, 'binary:nothing'))
    let f = lang("PrefixFilter('r1') OR PrefixFilter('r2') AND ValueFilter(=, 'binary:nothing')");
    assert_eq!(keys(&scan(&f, &t)), vec!["r1"]);
    let Filter::List(ListOp::MustPassOne, items) = &f else {
        panic!("expected OR at the top: {f:?}")
    };
    assert!(matches!(items[1], Filter::List(ListOp::MustPassAll, _)));
    // Parentheses override: (r1 OR r2) AND nothing -> no row.
    let f = lang("(PrefixFilter('r1') OR PrefixFilter('r2')) AND ValueFilter(=, 'binary:nothing')");
    assert!(scan(&f, &t).is_empty());
    let f = lang("PrefixFilter('r3') AND ValueFilter(=,'binary:date') OR PrefixFilter('r1')");
    assert_eq!(flat(&scan(&f, &t))[..1].to_vec(), vec!["r1/cf:a=apple"]);
    assert_eq!(keys(&scan(&f, &t)), vec!["r1", "r3"]);
}

#[test]
fn skip_and_while_bind_tighter_than_and() {
    let f = lang("SKIP ValueFilter(=,'binary:a') AND PrefixFilter('r')");
    let Filter::List(ListOp::MustPassAll, items) = &f else {
        panic!("{f:?}")
    };
    assert!(matches!(items[0], Filter::Skip(_)));
    let f = lang("WHILE (PrefixFilter('a') OR PrefixFilter('b'))");
    assert!(matches!(f, Filter::WhileMatch(_)));
}

#[test]
fn quoted_literals_escape_quotes_by_doubling() {
    let f = lang("PrefixFilter('it''s')");
    assert!(matches!(f, Filter::Prefix(ref p) if p == b"it's"));
    let f = lang("ValueFilter(=, 'binary:a)b,c''')");
    let Filter::Value(CompareOp::Equal, Comparator::Binary(v)) = f else {
        panic!()
    };
    assert_eq!(v, b"a)b,c'");
    let f =
        parse_filter_language_bytes(b"PrefixFilter('\xff\x00')").unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(f, Filter::Prefix(ref p) if p == b"\xff\x00"));
}

#[test]
fn language_accepts_hbase_spacing_variants() {
    for s in [
        "PrefixFilter ('row')",
        "  PrefixFilter('row')  ",
        "PrefixFilter('row')AND(KeyOnlyFilter())",
        "(PrefixFilter('row'))",
        "SingleColumnValueFilter(\n 'cf',\n 'a',\n =,\n 'binary:x'\n)",
        "KeyOnlyFilter() AND FirstKeyOnlyFilter()",
        "ColumnPaginationFilter(2,1)",
    ] {
        assert!(parse_filter_language(s).is_ok(), "{s}");
    }
}

#[test]
fn empty_filter_lists_pass_everything() {
    let t = small_table();
    assert_eq!(
        scan(
            &json(r#"{"type":"FilterList","op":"MUST_PASS_ONE","filters":[]}"#),
            &t
        )
        .len(),
        3
    );
    assert_eq!(
        scan(&json(r#"{"type":"FilterList","filters":[]}"#), &t).len(),
        3
    );
}

#[test]
fn json_accepts_jackson_style_coercions() {
    let f = json(r#"{"type":"PageFilter","value":7}"#);
    assert_eq!(f.page_limit(), Some(7));
    let f = json(r#"{"type":"ColumnPaginationFilter","limit":"2","offset":"0"}"#);
    assert!(matches!(
        f,
        Filter::ColumnPagination {
            limit: 2,
            offset: 0
        }
    ));
    let f = json(&format!(
        r#"{{"type":"SingleColumnValueFilter","family":"{}","qualifier":"{}","op":"equal","comparator":{{"type":"BinaryComparator","value":"YQ"}},"ifMissing":"true"}}"#,
        b64("cf"),
        b64("a")
    ));
    let Filter::SingleColumnValue(s) = f else {
        panic!()
    };
    assert!(s.filter_if_missing && s.latest_version_only && s.comparator.compare_to(b"a").is_eq());
}

// ---------------------------------------------------------------------------------------------
// Malformed input: always an error that says what to fix, never a panic
// ---------------------------------------------------------------------------------------------

fn lang_err(s: &str) -> String {
    match parse_filter_language(s) {
        Ok(f) => panic!("{s} parsed as {f:?}"),
        Err(e) => e,
    }
}

fn json_err(s: &str) -> String {
    match parse_filter_json(s) {
        Ok(f) => panic!("{s} parsed as {f:?}"),
        Err(e) => e,
    }
}

#[test]
fn unknown_filters_are_named_in_the_error() {
    assert_eq!(lang_err("FooFilter('x')"), "unknown filter type: FooFilter");
    assert_eq!(
        json_err(r#"{"type":"FooFilter"}"#),
        "unknown filter type: FooFilter"
    );
    assert!(
        lang_err("PrefixFilter('a') AND BarFilter()").contains("unknown filter type: BarFilter")
    );
    assert!(json_err(
        r#"{"type":"ValueFilter","op":"EQUAL","comparator":{"type":"FooComparator","value":""}}"#
    )
    .contains("unknown comparator type: FooComparator"));
    assert!(lang_err("ValueFilter(=, 'foo:bar')").contains("unknown comparator type 'foo'"));
}

#[test]
fn unbalanced_parentheses_are_errors() {
    for s in [
        "(PrefixFilter('a')",
        "PrefixFilter('a'))",
        "PrefixFilter('a'",
        "((PrefixFilter('a') AND KeyOnlyFilter())",
        ")",
        "PrefixFilter('a') AND (KeyOnlyFilter()",
        "()",
    ] {
        let e = lang_err(s);
        assert!(
            e.contains("parenthes") || e.contains("expected"),
            "{s}: {e}"
        );
    }
}

#[test]
fn bad_operators_and_arguments_are_errors() {
    assert!(lang_err("RowFilter(==, 'binary:a')").contains("invalid compare operator '=='"));
    assert!(lang_err("RowFilter(<, 'regexstring:a')").contains("only be used with = and !="));
    assert!(lang_err("RowFilter('=', 'binary:a')").contains("must not be quoted"));
    assert!(lang_err("RowFilter(=, binary:a)").contains("quoted"));
    assert!(lang_err("RowFilter(=, 'binary')").contains("must look like 'binary:value'"));
    assert!(lang_err("PrefixFilter('a', 'b')").contains("takes 1 argument"));
    assert!(lang_err("PageFilter(-1)").contains("negative"));
    assert!(lang_err("PageFilter(abc)").contains("integer"));
    assert!(lang_err("PageFilter(99999999999999999999)").contains("too large"));
    assert!(lang_err("ColumnCountGetFilter(3000000000)").contains("too large"));
    assert!(lang_err("KeyOnlyFilter(yes)").contains("true or false"));
    assert!(lang_err("TimestampsFilter(5, -1)").contains("negative"));
    assert!(lang_err("ValueFilter(=, 'regexstring:(a')").contains("invalid regular expression"));
    assert!(lang_err("PrefixFilter('abc").contains("unterminated"));
    assert!(lang_err("").contains("empty"));
    assert!(lang_err("   ").contains("empty"));
    assert!(lang_err("PrefixFilter('a') PrefixFilter('b')").contains("AND or OR"));
    assert!(lang_err("PrefixFilter('a') AND").contains("ends where a filter was expected"));
    assert!(lang_err("AND PrefixFilter('a')").contains("'('"));
    assert!(lang_err("PrefixFilter").contains("expected '('"));
    assert!(json_err(r#"{"type":"RowFilter","op":"ALMOST","comparator":{"type":"BinaryComparator","value":"YQ=="}}"#)
        .contains("invalid compare op 'ALMOST'"));
}

#[test]
fn bad_json_is_an_error() {
    assert!(json_err(r#"{"type":"PrefixFilter","value":"!!!"}"#)
        .contains("bad base64 in \"value\" of PrefixFilter"));
    assert!(json_err(r#"{"type":"ValueFilter","op":"EQUAL","comparator":{"type":"BinaryComparator","value":"*"}}"#)
        .contains("bad base64"));
    assert!(json_err(r#"{"type":"PrefixFilter"}"#).contains("needs the field \"value\""));
    assert!(json_err(r#"{"type":"RowFilter","op":"EQUAL"}"#).contains("comparator"));
    assert!(json_err(r#"{"type":"PageFilter","value":"ten"}"#).contains("page size"));
    assert!(
        json_err(r#"{"type":"FilterList","op":"SOMETIMES","filters":[]}"#).contains("SOMETIMES")
    );
    assert!(json_err(r#"{"type":"SkipFilter","filters":[]}"#).contains("wrapped filter"));
    assert!(json_err(r#"{"value":"YQ=="}"#).contains("\"type\""));
    assert!(json_err(r#"["PrefixFilter"]"#).contains("JSON object"));
    assert!(json_err("{not json").contains("not valid JSON"));
    assert!(json_err("").contains("not valid JSON"));
    assert!(json_err(r#"{"type":"TimestampsFilter","timestamps":[1,-2]}"#).contains("negative"));
    assert!(
        json_err(r#"{"type":"FuzzyRowFilter","fuzzyKeys":[{"key":"YWI=","mask":"AA=="}]}"#)
            .contains("same length")
    );
    assert!(
        json_err(r#"{"type":"MultiRowRangeFilter","ranges":[]}"#).contains("at least one range")
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}PrefixFilter('a'){}", "(".repeat(5000), ")".repeat(5000));
    assert!(lang_err(&deep).contains("nested"));
    let skips = format!("{}PrefixFilter('a')", "SKIP ".repeat(5000));
    assert!(lang_err(&skips).contains("nested"));
    let mut j = r#"{"type":"KeyOnlyFilter"}"#.to_string();
    for _ in 0..100 {
        j = format!(r#"{{"type":"FilterList","filters":[{j}]}}"#);
    }
    assert!(parse_filter_json(&j).is_err());
}

proptest! {
    #[test]
    fn parsers_never_panic_on_arbitrary_strings(s in ".{0,200}") {
        let _ = parse_filter_language(&s);
        let _ = parse_filter_json(&s);
    }

    #[test]
    fn language_parser_never_panics_on_filter_like_input(
        parts in proptest::collection::vec(prop_oneof![
            Just("PrefixFilter"), Just("ValueFilter"), Just("SingleColumnValueFilter"),
            Just("ColumnRangeFilter"), Just("PageFilter"), Just("TimestampsFilter"),
            Just("("), Just(")"), Just("'"), Just("''"), Just(","), Just(" "), Just("AND"),
            Just("OR"), Just("SKIP"), Just("WHILE"), Just("="), Just("!="), Just("<"),
            Just("'binary:a'"), Just("'regexstring:.*'"), Just("'substring:A'"), Just("true"),
            Just("1"), Just("-5"), Just("'cf'"), Just("KeyOnlyFilter()"),
            Just("FirstKeyOnlyFilter()"), Just("ColumnPaginationFilter(1,0)"),
        ], 0..24),
    ) {
        let s: String = parts.concat();
        if let Ok(f) = parse_filter_language(&s) {
            // Whatever parses must evaluate without panicking.
            let _ = scan(&f, &small_table());
        }
    }

    #[test]
    fn json_parser_never_panics_on_model_like_input(
        ty in prop_oneof![Just("PrefixFilter"), Just("FilterList"), Just("ValueFilter"),
            Just("SingleColumnValueFilter"), Just("ColumnRangeFilter"), Just("SkipFilter"),
            Just("PageFilter"), Just("TimestampsFilter"), Just("Nope")],
        value in prop_oneof![Just("\"YQ==\""), Just("1"), Just("null"), Just("[]"),
            Just("{}"), Just("\"%%\""), Just("-3"), Just("true")],
        key in prop_oneof![Just("value"), Just("op"), Just("comparator"), Just("filters"),
            Just("family"), Just("timestamps"), Just("minColumn"), Just("limit")],
    ) {
        let s = format!(r#"{{"type":"{ty}","{key}":{value}}}"#);
        if let Ok(f) = parse_filter_json(&s) {
            let _ = scan(&f, &small_table());
        }
    }
}

/// Well-formed filter strings over a small vocabulary, nested with AND, OR, SKIP and WHILE.
fn filter_strategy() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("PrefixFilter('r1')"),
        Just("RowFilter(<=, 'binary:r2')"),
        Just("RowFilter(=, 'regexstring:r[13]')"),
        Just("ValueFilter(=, 'binary:v1')"),
        Just("ValueFilter(=, 'substring:V2')"),
        Just("QualifierFilter(!=, 'binary:b')"),
        Just("FamilyFilter(=, 'binary:g')"),
        Just("ColumnPrefixFilter('b')"),
        Just("MultipleColumnPrefixFilter('a', 'c')"),
        Just("ColumnRangeFilter('b', true, 'c', false)"),
        Just("FirstKeyOnlyFilter()"),
        Just("KeyOnlyFilter()"),
        Just("KeyOnlyFilter(true)"),
        Just("PageFilter(2)"),
        Just("InclusiveStopFilter('r2')"),
        Just("TimestampsFilter(1, 3)"),
        Just("ColumnCountGetFilter(1)"),
        Just("ColumnPaginationFilter(1, 1)"),
        Just("SingleColumnValueFilter('f', 'a', =, 'binary:v1')"),
        Just("SingleColumnValueExcludeFilter('f', 'a', =, 'binary:v1', true, false)"),
        Just("DependentColumnFilter('f', 'a')"),
        Just("ColumnValueFilter('f', 'b', =, 'binary:v2')"),
    ]
    .prop_map(str::to_string);
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} AND {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} OR {b})")),
            inner.clone().prop_map(|a| format!("SKIP {a}")),
            inner.prop_map(|a| format!("WHILE {a}")),
        ]
    })
}

/// A row of cells over families f, g; qualifiers a, b, c; timestamps 1..3; values v1, v2.
fn row_strategy() -> impl Strategy<Value = TestRow> {
    let key = prop_oneof![Just("r1"), Just("r2"), Just("r3")];
    let one = (
        prop_oneof![Just("f"), Just("g")],
        prop_oneof![Just("a"), Just("b"), Just("c")],
        1i64..4,
        prop_oneof![Just("v1"), Just("v2")],
    );
    (key, proptest::collection::vec(one, 1..10)).prop_map(|(k, cells)| {
        let mut r = row(
            k,
            cells
                .into_iter()
                .map(|(f, q, ts, v)| cell(f, q, ts, v))
                .collect(),
        );
        r.cells.dedup_by(|a, b| {
            a.family == b.family && a.qualifier == b.qualifier && a.timestamp == b.timestamp
        });
        r
    })
}

fn cell_id(c: &Cell) -> (Vec<u8>, Vec<u8>, i64) {
    (c.family.clone(), c.qualifier.clone(), c.timestamp)
}

proptest! {
    #[test]
    fn evaluation_only_removes_cells_and_agrees_with_accept_key(
        text in filter_strategy(),
        r in row_strategy(),
    ) {
        let f = parse_filter_language(&text).map_err(TestCaseError::fail)?;
        let mut cells = r.cells.clone();
        let accepted = f.accept_row(&r.key, &mut cells);
        if !f.accept_key(&r.key) {
            prop_assert!(!accepted, "{text}: key rejected but row accepted");
        }
        if accepted {
            // The result is a subsequence of the input (same keys, same order).
            let ids: Vec<_> = r.cells.iter().map(cell_id).collect();
            let mut pos = 0;
            for c in &cells {
                let id = cell_id(c);
                match ids[pos..].iter().position(|x| *x == id) {
                    Some(p) => pos += p + 1,
                    None => prop_assert!(false, "{text}: {c:?} not in order in the input"),
                }
            }
            prop_assert!(!cells.is_empty());
        }
        // A filter holds no state between rows: the same row gets the same answer.
        let mut again = r.cells.clone();
        prop_assert_eq!(f.accept_row(&r.key, &mut again), accepted);
        if accepted {
            prop_assert_eq!(again, cells);
        }
    }
}
