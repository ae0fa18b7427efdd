//! `gridctl verify` checks saved views' counts against the memberships the watermarks record,
//! and `repair` rewrites a wrong shard and deletes a stray one, with the permissions
//! `gridctl/iam-policy.json` gives the commands.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use gridctl::ops;
use gridline::domain::ids::TenantId;
use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::json;

use support::{hidden, verify};

/// A hand put of a count item, as a fault outside the product would make.
async fn put_count(api: &TestApi, view: &str, sk: String, n: i64) {
    let tenant = TenantId::parse("acme").unwrap();
    api.stack
        .client
        .put_item()
        .table_name(&api.stack.tables.index)
        .item(
            "PK",
            AttributeValue::S(gridline::keys::index::view_counts_pk(&tenant, view)),
        )
        .item("SK", AttributeValue::S(sk))
        .item("n", AttributeValue::N(n.to_string()))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn verify_finds_wrong_and_stray_view_counts_and_repair_mends_them() {
    let (api, p) = TestApi::with_project("p").await;
    let level = api
        .field(
            &p,
            json!({"name": "level", "type": "select", "options": ["low", "high"]}),
        )
        .await;
    for i in 0..6 {
        let option = ["low", "high"][i % 2];
        api.issue(
            &p,
            json!({"title": format!("i{i}"), "fields": {&level: option}}),
        )
        .await;
    }
    let r = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "Board", "group_by": level}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let view = r.body["id"].as_str().unwrap().to_string();
    api.sync().await;
    assert!(verify(&api).await.is_clean());
    assert_eq!(api.get(&format!("/views/{view}")).await.body["count"], 6);

    // Every shard of the view's shape knocked to 5 (one issue at most is in each), and an
    // item of a view that never was.
    for shard in 0..gridline::keys::index::VIEW_COUNT_SHARDS {
        put_count(
            &api,
            &view,
            gridline::keys::index::view_counts_sk(&view, 1, shard),
            5,
        )
        .await;
    }
    let gone = format!("{}{}", &view[..26], "01JDQ5S0000000000000000V99");
    put_count(
        &api,
        &gone,
        gridline::keys::index::view_counts_sk(&gone, 1, 0),
        3,
    )
    .await;
    let found = verify(&api).await;
    let problems: Vec<serde_json::Value> = found
        .drift
        .view_counts
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    let shards = gridline::keys::index::VIEW_COUNT_SHARDS as usize;
    assert_eq!(found.view_counts, shards, "{problems:?}");
    assert_eq!(found.stray_view_counts, 1, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|d| d["problem"] == "stray" && d["view"] == gone.as_str())
    );

    // Two rounds: a count problem is acted on once two scans in a row found it.
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 2, &hidden)
        .await
        .unwrap();
    assert_eq!(report.view_counts, shards + 1, "{report:?}");
    let after = verify(&api).await;
    assert!(after.is_clean(), "{:?}", after.drift);
    let r = api.get(&format!("/views/{view}")).await;
    assert_eq!(r.body["count"], 6);
    assert_eq!(r.body["groups"][0]["count"], 3);
    assert_eq!(r.body["groups"][1]["count"], 3);
}
