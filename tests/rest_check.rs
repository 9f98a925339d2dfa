//! `?check=put|delete|append|increment` with `rr=` (spec §5) on a real store.

mod support;

use actix_web::http::Method;
use support::*;

#[actix_web::test]
async fn check_put_writes_every_cell_only_when_the_check_passes() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:a", None, "old").await;
    // Pass: cf:a == "old" → cf:a=new and cf:b=extra written together.
    let body = cellset(&[(
        "r",
        &[
            ("cf:a", None, "new"),
            ("cf:b", None, "extra"),
            ("cf:a", None, "old"),
        ],
    )]);
    let r = c.put_json("/t/r?check=put", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"new");
    assert_eq!(c.get("/t/r/cf:b", "").await.body, b"extra");
    // Fail: 304 and nothing changes.
    let body = cellset(&[(
        "r",
        &[
            ("cf:a", None, "newer"),
            ("cf:b", None, "no"),
            ("cf:a", None, "old"),
        ],
    )]);
    let r = c.post_json("/t/r?check=put", &body).await;
    assert_eq!(r.status, 304);
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"new");
    assert_eq!(c.get("/t/r/cf:b", "").await.body, b"extra");
}

#[actix_web::test]
async fn an_empty_check_parameter_is_a_plain_put() {
    // HBase's RowResource checks only when `check` is non-empty.
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let body = cellset(&[("r", &[("cf:a", None, "v")])]);
    let r = c.put_json("/t/r?check=", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"v");
}

#[actix_web::test]
async fn check_put_with_empty_expected_value_means_absent() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let body = cellset(&[("r", &[("cf:a", None, "first"), ("cf:a", None, "")])]);
    assert_eq!(c.put_json("/t/r?check=put", &body).await.status, 200);
    assert_eq!(c.put_json("/t/r?check=put", &body).await.status, 304);
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"first");
}

#[actix_web::test]
async fn malformed_checks_are_400_and_missing_families_404() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let one = cellset(&[("r", &[("cf:a", None, "x")])]);
    assert_eq!(c.put_json("/t/r?check=put", &one).await.status, 400);
    let mismatch = cellset(&[("r", &[("cf:b", None, "x"), ("cf:a", None, "")])]);
    let r = c.put_json("/t/r?check=put", &mismatch).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("do not match"), "{}", r.text());
    let two_rows = cellset(&[
        ("r", &[("cf:a", None, "x"), ("cf:a", None, "")]),
        ("s", &[]),
    ]);
    assert_eq!(c.put_json("/t/r?check=put", &two_rows).await.status, 400);
    let r = c.put_json("/t/r?check=bogus", &one).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Invalid check value"), "{}", r.text());
    let family_check = cellset(&[("r", &[("cf", None, "")])]);
    assert_eq!(
        c.put_json("/t/r?check=delete", &family_check).await.status,
        400
    );
    let nofam = cellset(&[("r", &[("nofam:a", None, "")])]);
    assert_eq!(c.put_json("/t/r?check=delete", &nofam).await.status, 404);
    assert_eq!(c.put_json("/nope/r?check=put", &mismatch).await.status, 404);
}

#[actix_web::test]
async fn check_delete_with_only_the_check_cell_deletes_that_column() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r", "cf:a", Some(1), "v1").await;
    c.put_cell("t", "r", "cf:a", Some(2), "v2").await;
    c.put_cell("t", "r", "cf:b", Some(1), "keep").await;
    let wrong = cellset(&[("r", &[("cf:a", None, "v1")])]);
    assert_eq!(c.put_json("/t/r?check=delete", &wrong).await.status, 304);
    let right = cellset(&[("r", &[("cf:a", None, "v2")])]);
    assert_eq!(c.put_json("/t/r?check=delete", &right).await.status, 200);
    // Every version of cf:a is gone, cf:b stays.
    assert_eq!(c.get_json("/t/r/cf:a?v=3").await.status, 404);
    assert_eq!(c.get("/t/r/cf:b", "").await.body, b"keep");
}

#[actix_web::test]
async fn check_delete_extra_cells_delete_versions_and_families() {
    let c = client().await;
    c.create_table("t", &["cf", "g"], 3).await;
    c.put_cell("t", "r", "cf:a", Some(1), "a1").await;
    c.put_cell("t", "r", "cf:a", Some(2), "a2").await;
    c.put_cell("t", "r", "cf:chk", Some(1), "go").await;
    c.put_cell("t", "r", "g:x", Some(5), "gx").await;
    // Extra cells: cf:a at ts 2 (that one version) and family g (<= 9); check cf:chk == go.
    let body = cellset(&[(
        "r",
        &[
            ("cf:a", Some(2), ""),
            ("g", Some(9), ""),
            ("cf:chk", None, "go"),
        ],
    )]);
    let r = c.put_json("/t/r?check=delete", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let cells = cells_of(&c.get_json("/t/r?v=3").await.json());
    let got: Vec<_> = cells.iter().map(|c| (c.1.as_str(), c.2)).collect();
    // cf:a@1 resurfaces, the checked column stays, family g is gone.
    assert_eq!(got, vec![("cf:a", 1), ("cf:chk", 1)]);
}

#[actix_web::test]
async fn check_delete_on_the_empty_qualifier_column() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:", Some(1), "e").await;
    c.put_cell("t", "r", "cf:x", Some(1), "x").await;
    let body = cellset(&[("r", &[("cf:", None, "e")])]);
    assert_eq!(c.put_json("/t/r?check=delete", &body).await.status, 200);
    assert_eq!(c.get_json("/t/r/cf:").await.status, 404);
    assert_eq!(c.get_json("/t/r/cf:x").await.status, 200);
}

#[actix_web::test]
async fn check_append_concatenates_and_returns_new_values_with_rr() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:s", None, "abc").await;
    let body = cellset(&[("r", &[("cf:s", None, "def"), ("cf:n", None, "new")])]);
    let r = c.put_json("/t/r?check=append", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body.is_empty());
    assert_eq!(c.get("/t/r/cf:s", "").await.body, b"abcdef");
    assert_eq!(c.get("/t/r/cf:n", "").await.body, b"new");
    let body = cellset(&[("r", &[("cf:s", None, "!")])]);
    let r = c
        .req(
            Method::PUT,
            "/t/r?check=append&rr=true",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200);
    let cells = cells_of(&r.json());
    assert_eq!(
        (cells[0].1.as_str(), cells[0].3.as_str()),
        ("cf:s", "abcdef!")
    );
}

#[actix_web::test]
async fn check_increment_adds_decimal_amounts_to_8_byte_counters() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    // "NQ==" is "5", then "6": the stored value is AAAAAAAAAAs= (11).
    let five = serde_json::json!({"Row":[{"key": b64("r"), "Cell":[{"column": b64("cf:n"), "$": "NQ=="}]}]});
    assert_eq!(c.put_json("/t/r?check=increment", &five).await.status, 200);
    let six = cellset(&[("r", &[("cf:n", None, "6")])]);
    let r = c
        .req(
            Method::POST,
            "/t/r?check=increment&rr=true",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ],
            six.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Row"][0]["Cell"][0]["$"], "AAAAAAAAAAs=");
    let r = c.get_json("/t/r/cf:n").await;
    assert_eq!(r.json()["Row"][0]["Cell"][0]["$"], "AAAAAAAAAAs=");
    // Negative amounts work; non-numeric amounts and non-counter values are 400.
    let minus = cellset(&[("r", &[("cf:n", None, "-11")])]);
    assert_eq!(c.put_json("/t/r?check=increment", &minus).await.status, 200);
    assert_eq!(c.get("/t/r/cf:n", "").await.body, 0i64.to_be_bytes());
    let bad = cellset(&[("r", &[("cf:n", None, "five")])]);
    assert_eq!(c.put_json("/t/r?check=increment", &bad).await.status, 400);
    c.put_cell("t", "r", "cf:text", None, "abc").await;
    let on_text = cellset(&[("r", &[("cf:text", None, "1")])]);
    let r = c.put_json("/t/r?check=increment", &on_text).await;
    assert_eq!(r.status, 400, "{}", r.text());
}

#[actix_web::test]
async fn check_modes_accept_xml_bodies() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let xml = format!(
        r#"<CellSet><Row key="{}"><Cell column="{}">{}</Cell><Cell column="{}"></Cell></Row></CellSet>"#,
        b64("r"),
        b64("cf:a"),
        b64("v"),
        b64("cf:a")
    );
    let r = c.put_xml("/t/r?check=put", &xml).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"v");
}
