//! Text values end to end: composed and decomposed forms sort and match as one (NFC before
//! folding), and a value starting with the highest character (U+10FFFF) shows in descending,
//! `lte` and `prefix` pages of the grid.

use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::json;

/// Percent-encodes a query value (every byte but unreserved ASCII).
fn q(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The values of `field` on one grid page of up to 50 issues.
async fn values(api: &TestApi, project: &str, field: &str, query: &str) -> Vec<String> {
    let r = api
        .get(&format!(
            "/projects/{project}/issues?sort={field}&limit=50{query}"
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text);
    r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["fields"][field].as_str().unwrap_or("-").to_string())
        .collect()
}

const TOP: &str = "\u{10FFFF}";

#[tokio::test]
async fn the_highest_character_shows_in_descending_range_and_prefix_pages() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let top = format!("{TOP}top");
    let top2 = format!("{TOP}{TOP}x");
    for v in ["alpha", "zeta", &top, &top2, "\u{FFFF}"] {
        api.issue(&p, json!({"title": v, "fields": {&f: v}})).await;
    }
    api.sync().await;

    let desc = values(&api, &p, &f, "&order=desc").await;
    assert_eq!(desc, [top2.as_str(), &top, "\u{FFFF}", "zeta", "alpha"]);
    let asc = values(&api, &p, &f, "").await;
    assert_eq!(asc, ["alpha", "zeta", "\u{FFFF}", &top, &top2]);

    let lte = values(&api, &p, &f, &format!("&order=desc&lte={}", q(&top2))).await;
    assert_eq!(lte, [top2.as_str(), &top, "\u{FFFF}", "zeta", "alpha"]);
    let gte = values(&api, &p, &f, &format!("&gte={}", q("\u{FFFF}"))).await;
    assert_eq!(gte, ["\u{FFFF}", &top, &top2]);
    let prefix = values(&api, &p, &f, &format!("&order=desc&prefix={}", q(TOP))).await;
    assert_eq!(prefix, [top2.as_str(), &top]);
    let prefix = values(
        &api,
        &p,
        &f,
        &format!("&prefix={}", q(&format!("{TOP}{TOP}"))),
    )
    .await;
    assert_eq!(prefix, [top2.as_str()]);
    // The title column too.
    let r = api
        .get(&format!(
            "/projects/{p}/issues?sort=title&order=desc&prefix={}",
            q(TOP)
        ))
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2, "{}", r.text);
}

#[tokio::test]
async fn composed_and_decomposed_forms_sort_and_match_as_one() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let composed = "Caf\u{e9} au lait";
    let decomposed = "cafe\u{301} noir";
    for v in ["cafz", composed, decomposed, "cafa"] {
        api.issue(&p, json!({"title": "t", "fields": {&f: v}}))
            .await;
    }
    api.sync().await;
    // é (either form) sorts after z, as its NFC code point does.
    assert_eq!(
        values(&api, &p, &f, "").await,
        ["cafa", "cafz", composed, decomposed]
    );
    for prefix in ["caf\u{e9}", "CAFE\u{301}"] {
        assert_eq!(
            values(&api, &p, &f, &format!("&prefix={}", q(prefix))).await,
            [composed, decomposed],
            "prefix {prefix:?}"
        );
    }
    // A range bound in either form is the same bound.
    for bound in ["caf\u{e9}", "cafe\u{301}"] {
        assert_eq!(
            values(&api, &p, &f, &format!("&gte={}", q(bound))).await,
            [composed, decomposed],
            "gte {bound:?}"
        );
    }
}

#[tokio::test]
async fn bounds_and_prefixes_longer_than_a_key_hold_to_the_whole_value() {
    // Keys hold 64 bytes of encoding; these values agree on their first 70 characters.
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let stem = "Checkout flow fails for returning customers on the payment step of ".to_string();
    assert!(stem.len() > 64);
    let (x, y) = (format!("{stem}Xbox"), format!("{stem}yacht"));
    for v in [x.as_str(), &y, "alpha"] {
        api.issue(&p, json!({"title": v, "fields": {&f: v}})).await;
    }
    api.sync().await;

    let prefix = values(&api, &p, &f, &format!("&prefix={}", q(&format!("{stem}x")))).await;
    assert_eq!(prefix, [x.as_str()]);
    let lte = values(&api, &p, &f, &format!("&lte={}", q(&format!("{stem}XBOX")))).await;
    assert_eq!(lte, ["alpha", x.as_str()]);
    let gte = values(&api, &p, &f, &format!("&gte={}", q(&format!("{stem}Y")))).await;
    assert_eq!(gte, [y.as_str()]);
    // The title column is held the same way.
    let r = api
        .get(&format!(
            "/projects/{p}/issues?sort=title&prefix={}",
            q(&format!("{stem}Y"))
        ))
        .await;
    let titles: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, [y.as_str()]);
}
