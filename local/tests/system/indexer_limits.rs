//! The largest issue the contract allows indexes, end to end through the stream, and its
//! watermark (a head and field buckets) stays far below DynamoDB's 400 KB item limit, at rest
//! and at its largest (the head during the intent of a change that moves every entry). Sizes are
//! computed by DynamoDB's rules here, so the test does not depend on the engine refusing items.

use aws_sdk_dynamodb::types::AttributeValue;
use gridline::domain::ids::{IssueId, ProjectId, TenantId};
use gridline::domain::values::StoredValue;
use gridline::keys;
use gridline::model::entries;
use gridline::model::watermark::{Basis, Pending};
use gridline::store::index::intent_head_item;
use gridline::store::stored_size as item_size;
use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use serde_json::{Map, Value, json};

const LIMIT: usize = 400 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_issue_indexes_and_its_watermark_fits() {
    let api = TestApi::start().await;
    let tenant = "t".repeat(128);
    // The caller has a 128-character id too: with 99 others listed, 100 participants.
    let caller = format!("{}{}", "c", "u".repeat(127));
    let who = (caller.as_str(), tenant.as_str());
    let r = api
        .call(who, Method::POST, "/projects", Some(json!({"name": "big"})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let p = r.body["id"].as_str().unwrap().to_string();
    let mut fields = Vec::new();
    for i in 0..400 {
        let r = api
            .call(
                who,
                Method::POST,
                &format!("/projects/{p}/fields"),
                Some(json!({"name": format!("f{i}"), "type": "text"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        fields.push(r.body["id"].as_str().unwrap().to_string());
    }
    // Values of 1,024 four-byte characters cannot all fit in one issue item (400 of them are
    // 1.6 MB); every value of 16 or more such characters fills the text encoding's bound, so
    // these keys are as large as any issue's can be.
    let top = "\u{10FFFF}";
    let values: Map<String, Value> = fields
        .iter()
        .map(|f| (f.clone(), json!(top.repeat(100))))
        .collect();
    let participants: Vec<Value> = (0..99)
        .map(|i| json!({"kind": "user", "id": format!("{i:03}{}", "u".repeat(125)), "role": "assignee"}))
        .collect();
    let r = api
        .call(
            who,
            Method::POST,
            &format!("/projects/{p}/issues"),
            Some(json!({"title": top.repeat(256), "fields": values, "participants": participants})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let id = r.body["id"].as_str().unwrap().to_string();
    api.sync().await;
    assert_eq!(api.dead_letters().await, 0);

    let store = &api.stack.state.store;
    let (tenant_id, project_id, issue_id) = (
        TenantId::parse(&tenant).unwrap(),
        ProjectId::parse(&p).unwrap(),
        IssueId::parse(&id).unwrap(),
    );
    let raw = api
        .stack
        .client
        .get_item()
        .table_name(&api.stack.tables.index)
        .key(
            keys::PK,
            AttributeValue::S(keys::index::watermark_pk(&tenant_id, &issue_id)),
        )
        .key(
            keys::SK,
            AttributeValue::S(keys::index::WATERMARK_SK.into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .expect("the issue was indexed");
    assert!(!raw.contains_key("parked"));
    let stored = item_size(&raw);

    // At its largest: closing the issue and changing every value moves every entry.
    let wm = store
        .index()
        .get_full_watermark(&tenant_id, &issue_id)
        .await
        .unwrap()
        .unwrap();
    let mut issue = store
        .records()
        .get_issue_item(&tenant_id, &issue_id)
        .await
        .unwrap()
        .unwrap();
    let (project, defs) = store
        .records()
        .project_with_fields(&tenant_id, &project_id)
        .await
        .unwrap()
        .unwrap();
    let now = entries(
        &tenant_id,
        &issue,
        &defs,
        gridline::keys::index::Shards::ONE,
        &project.hot(),
    );
    // The watermark derives exactly the issue's entries.
    assert_eq!(wm.certain(&tenant_id, &issue_id), now);
    let bucket_sizes = bucket_sizes(&api, &tenant_id, &issue_id).await;
    issue.state = gridline::domain::IssueState::Closed;
    issue.updated_at = "2099-01-01T00:00:00.000Z".into();
    for v in issue.fields.values_mut() {
        *v = StoredValue::S("\u{10FFFE}".repeat(100));
    }
    let next = Basis::of(&issue, &defs, gridline::keys::index::Shards::ONE);
    let step = wm.step(&tenant_id, &issue_id, Some(&next), &Pending::default());
    let during = item_size(&intent_head_item(&tenant_id, &issue_id, &wm, &step.intent));
    let largest_bucket = bucket_sizes.iter().copied().max().unwrap_or(0);
    println!(
        "largest issue ({} entries): watermark head {stored} bytes and {} buckets of at most {largest_bucket} bytes; head {during} bytes during a change moving every entry ({} puts, {} deletes); limit {LIMIT}",
        now.len(),
        bucket_sizes.len(),
        step.puts.len(),
        step.deletes.len()
    );
    assert!(stored < LIMIT / 10, "{stored}");
    assert!(largest_bucket < 4 * 1024, "{largest_bucket}");
    assert!(during < LIMIT / 2, "{during}");

    // And a real change of that size goes through the stream: close it, retitle it.
    let r = api
        .call(
            who,
            Method::PATCH,
            &format!("/issues/{id}"),
            Some(json!({"state": "closed", "title": "\u{10FFFE}".repeat(256)})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    assert_eq!(api.dead_letters().await, 0);
    let r = api
        .call(
            who,
            Method::GET,
            &format!("/projects/{p}/issues?state=closed&sort={}", fields[399]),
            None,
        )
        .await;
    assert_eq!(r.body["items"][0]["id"], json!(id), "{}", r.text);
    api.assert_index_matches_records(&tenant_id, &[project_id])
        .await;
}

/// Sizes of the issue's watermark buckets, as stored.
async fn bucket_sizes(api: &TestApi, tenant: &TenantId, issue: &IssueId) -> Vec<usize> {
    let out = api
        .stack
        .client
        .query()
        .table_name(&api.stack.tables.index)
        .key_condition_expression("PK = :pk AND begins_with(SK, :b)")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S(keys::index::watermark_pk(tenant, issue)),
        )
        .expression_attribute_values(":b", AttributeValue::S("B".into()))
        .send()
        .await
        .unwrap();
    out.items().iter().map(item_size).collect()
}
