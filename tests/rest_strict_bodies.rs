//! Request bodies are read as strictly as HBase's REST server reads them (`CellSetModel`,
//! `RowModel`, `CellModel` under Jackson and JAXB): each malformed body below is a 4xx whose
//! message says what is wrong, and nothing of it is written. The request-head limit (431) is
//! checked against the real binary, whose middleware stack it needs.

mod server_harness;
mod support;

use actix_web::http::Method;
use support::{assert_400, b64, client, Client};

async fn table() -> Client {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c
}

/// Nothing was written: the table has no rows at all.
async fn assert_table_empty(c: &Client) {
    let r = c.get_json("/t/*").await;
    let rows = if r.status == 200 {
        r.json()["Row"].as_array().map_or(0, Vec::len)
    } else {
        0
    };
    assert!(
        matches!(r.status, 200 | 404) && rows == 0,
        "the table should be empty: {} {}",
        r.status,
        r.text()
    );
}

async fn put_raw(c: &Client, content_type: &str, body: &str) -> support::Resp {
    c.req(
        Method::PUT,
        "/t/fakerow",
        &[
            ("Content-Type", content_type),
            ("Accept", "application/json"),
        ],
        body,
    )
    .await
}

#[actix_web::test]
async fn a_json_cell_given_as_an_object_is_400_and_writes_nothing() {
    let c = table().await;
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":{{"column":"{}","$":"{}"}}}}]}}"#,
        b64("r1"),
        b64("cf:a"),
        b64("v")
    );
    let r = put_raw(&c, "application/json", &body).await;
    assert_400(&r, "\"Cell\" must be a list, not an object");
    assert_table_empty(&c).await;
}

#[actix_web::test]
async fn a_json_row_given_as_an_object_is_400_and_writes_nothing() {
    let c = table().await;
    let body = format!(
        r#"{{"Row":{{"key":"{}","Cell":[{{"column":"{}","$":"{}"}}]}}}}"#,
        b64("r1"),
        b64("cf:a"),
        b64("v")
    );
    let r = put_raw(&c, "application/json", &body).await;
    assert_400(&r, "\"Row\" must be a list, not an object");
    assert_table_empty(&c).await;
}

#[actix_web::test]
async fn a_json_cell_without_its_value_is_400_and_writes_nothing() {
    let c = table().await;
    // Two rows, the second one's cell lacking "$": the first row is not written either.
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","$":"{}"}}]}},{{"key":"{}","Cell":[{{"column":"{}"}}]}}]}}"#,
        b64("r1"),
        b64("cf:a"),
        b64("v"),
        b64("r2"),
        b64("cf:a")
    );
    let r = put_raw(&c, "application/json", &body).await;
    assert_400(&r, "a Cell has no value \"$\"");
    assert_table_empty(&c).await;
    // The same through check=put: refused before anything is checked or written.
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}"}},{{"column":"{}","$":""}}]}}]}}"#,
        b64("r1"),
        b64("cf:a"),
        b64("cf:a")
    );
    let r = c
        .req(
            Method::PUT,
            "/t/r1?check=put",
            &[("Content-Type", "application/json")],
            body,
        )
        .await;
    assert_400(&r, "a Cell has no value \"$\"");
    assert_table_empty(&c).await;
}

#[actix_web::test]
async fn an_empty_value_is_still_a_value() {
    let c = table().await;
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","$":""}}]}}]}}"#,
        b64("r1"),
        b64("cf:a")
    );
    let r = put_raw(&c, "application/json", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get_json("/t/r1/cf:a").await.status, 200);
}

#[actix_web::test]
async fn an_xml_row_without_its_cellset_root_is_400_and_writes_nothing() {
    let c = table().await;
    let body = format!(
        r#"<?xml version="1.0"?><Row key="{}"><Cell column="{}">{}</Cell></Row>"#,
        b64("r1"),
        b64("cf:a"),
        b64("v")
    );
    let r = put_raw(&c, "text/xml", &body).await;
    assert_400(&r, "must have <CellSet> as its root element, not <Row>");
    assert_table_empty(&c).await;
    // With its root, the same row is written.
    let r = put_raw(
        &c,
        "text/xml",
        &format!("<CellSet>{}</CellSet>", &body[21..]),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[actix_web::test]
async fn base64_with_a_space_inside_a_row_key_is_400_and_writes_nothing() {
    let c = table().await;
    for key in ["cm93 MQ==", "cm9 3MQ==", "cm93\tMQ=="] {
        let body = serde_json::json!({"Row": [{"key": key, "Cell": [{"column": b64("cf:a"), "$": b64("v")}]}]});
        let r = c.put_json("/t/fakerow", &body).await;
        assert_400(&r, "row key is not valid base64");
        assert!(r.text().contains("space or tab"), "{}", r.text());
        let xml = format!(
            r#"<CellSet><Row key="{key}"><Cell column="{}">{}</Cell></Row></CellSet>"#,
            b64("cf:a"),
            b64("v")
        );
        assert_400(&put_raw(&c, "text/xml", &xml).await, "space or tab");
    }
    assert_table_empty(&c).await;
}

#[actix_web::test]
async fn other_invalid_base64_is_400_and_writes_nothing() {
    let c = table().await;
    let cases = [
        ("cm93MQ=!", "row key"),
        ("cm9\n3MQ==", "row key"),
        ("c", "row key"),
        ("cm93MQ==", "column"),
        ("cm93MQ==", "cell value"),
    ];
    for (bad, what) in cases {
        let (key, col, val) = match what {
            "row key" => (bad.to_string(), b64("cf:a"), b64("v")),
            "column" => (b64("r1"), "Y2Y6YQ=*".to_string(), b64("v")),
            _ => (b64("r1"), b64("cf:a"), "dm Fs".to_string()),
        };
        let body = serde_json::json!({"Row": [{"key": key, "Cell": [{"column": col, "$": val}]}]});
        let r = c.put_json("/t/fakerow", &body).await;
        assert_400(&r, &format!("{what} is not valid base64"));
    }
    assert_table_empty(&c).await;
}

#[actix_web::test]
async fn base64_wrapped_at_76_columns_is_still_read() {
    let c = table().await;
    let value = "A".repeat(61);
    let wrapped = {
        let s = b64(&value);
        format!("{}\n{}\n", &s[..76], &s[76..])
    };
    let body = serde_json::json!({"Row": [{"key": b64("r1"), "Cell": [{"column": b64("cf:a"), "$": wrapped}]}]});
    let r = c.put_json("/t/fakerow", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get("/t/r1/cf:a", "application/octet-stream").await;
    assert_eq!(r.body, value.as_bytes());
}

/// A 70 KiB header on a write: 431 naming the limit, and the write is not applied; the same
/// write with ordinary headers then succeeds on a fresh connection.
#[test]
fn a_70_kib_request_header_is_431_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server_harness::Server::start(dir.path(), &[]);
    let mut http = server.client();
    server_harness::create_table(&mut http, "h", &["cf"]);
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","$":"{}"}}]}}]}}"#,
        b64("r1"),
        b64("cf:a"),
        b64("v")
    );
    let big = "x".repeat(70 * 1024);
    let r = http
        .request(
            "PUT",
            "/h/r1",
            &[("Content-Type", "application/json"), ("X-Big", &big)],
            body.as_bytes(),
        )
        .expect("answered");
    assert_eq!(r.status, 431, "{}", r.text());
    assert!(r.text().contains("at most 65536"), "{}", r.text());
    let r = http
        .request("GET", "/h/r1", &[("Accept", "application/json")], b"")
        .expect("answered");
    assert_eq!(r.status, 404, "the refused put wrote nothing: {}", r.text());
    // Under /apps/ the refusal is the applications' JSON error.
    let r = http
        .request(
            "POST",
            "/apps/counter/hits",
            &[("Content-Type", "application/json"), ("X-Big", &big)],
            br#"{"url":"http://example.jp/a"}"#,
        )
        .expect("answered");
    assert_eq!(r.status, 431, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON error");
    assert_eq!(v["error"]["code"], "header_too_large");
    // A head just under the limit is served.
    let fits = "x".repeat(60 * 1024);
    let r = http
        .request(
            "PUT",
            "/h/r1",
            &[("Content-Type", "application/json"), ("X-Fits", &fits)],
            body.as_bytes(),
        )
        .expect("answered");
    assert_eq!(r.status, 200, "{}", r.text());
}
