//! Saved views end to end: definitions written, the indexer (fed from the engine's real stream)
//! and the view's job keep its list and counts, compared with a reference computed from the
//! issues.

use std::collections::BTreeMap;

use gridline::domain::ids::{ProjectId, ViewId};
use gridline::model::view::NewViewBody;
use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::{Value, json};

use crate::support::acme;

const OPTIONS: [&str; 3] = ["low", "mid", "high"];

/// A view created through the store (as the route does), on a project of `p`.
async fn store_view(api: &TestApi, p: &str, body: Value) -> ViewId {
    let project = ProjectId::parse(p).unwrap();
    let store = &api.stack.state.store;
    let (_, defs) = store
        .records()
        .project_with_fields(&acme(), &project)
        .await
        .unwrap()
        .unwrap();
    let body: NewViewBody = serde_json::from_value(body).unwrap();
    let (spec, _) = body.spec(&defs).unwrap();
    let id = ViewId::new(&project);
    store
        .records()
        .create_view(&acme(), &id, &spec, "2026-11-26T00:00:00.000Z")
        .await
        .unwrap();
    id
}

/// The view's counts as the index holds them: the total and each group's (by key).
async fn counts(api: &TestApi, view: &ViewId) -> (i64, BTreeMap<String, i64>) {
    let store = &api.stack.state.store;
    let item = store
        .records()
        .get_view(&acme(), view)
        .await
        .unwrap()
        .unwrap();
    let c = store
        .index()
        .view_counts(&acme(), view.as_str(), item.rev)
        .await
        .unwrap();
    let groups = c.groups.into_iter().filter(|(_, n)| *n != 0).collect();
    (c.total, groups)
}

/// A board of open issues with more than 1 point, grouped by the select field: the
/// reference counts from the issues as `GET` returns them.
fn reference(issues: &[Value], points: &str, level: &str) -> (i64, BTreeMap<String, i64>) {
    let mut groups: BTreeMap<String, i64> = BTreeMap::new();
    let mut total = 0;
    for i in issues {
        let open = i["state"] == "open";
        let more = i["fields"][points].as_f64().is_some_and(|p| p > 1.0);
        if !(open && more) {
            continue;
        }
        total += 1;
        let key = match i["fields"][level].as_str() {
            Some(label) => format!("{:03}", OPTIONS.iter().position(|o| *o == label).unwrap()),
            None => "-".to_string(),
        };
        *groups.entry(key).or_default() += 1;
    }
    (total, groups)
}

/// The issues still there, as `GET` returns them.
async fn current(api: &TestApi, ids: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for id in ids {
        let r = api.get(&format!("/issues/{id}")).await;
        if r.status == StatusCode::OK {
            out.push(r.body);
        }
    }
    out
}

#[tokio::test]
async fn a_views_list_and_counts_follow_its_issues_exactly() {
    let (api, p) = TestApi::with_project("views").await;
    let points = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let level = api
        .field(
            &p,
            json!({"name": "level", "type": "select", "options": OPTIONS}),
        )
        .await;
    let mut ids = Vec::new();
    for n in 0..12 {
        let mut fields = serde_json::Map::new();
        fields.insert(points.clone(), json!(n % 4));
        if n % 3 != 0 {
            fields.insert(level.clone(), json!(OPTIONS[n % 3]));
        }
        let issue = api
            .issue(&p, json!({"title": format!("i{n}"), "fields": fields}))
            .await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    let view = store_view(
        &api,
        &p,
        json!({"name": "Board", "where": [[points, "gt", 1]], "state": "open",
            "sort": points, "group_by": level}),
    )
    .await;
    let store = &api.stack.state.store;
    assert!(
        !store
            .records()
            .get_view(&acme(), &view)
            .await
            .unwrap()
            .unwrap()
            .ready
    );
    // The view's job builds its list for the issues there are, then marks it ready.
    api.sync().await;
    assert!(
        store
            .records()
            .get_view(&acme(), &view)
            .await
            .unwrap()
            .unwrap()
            .ready
    );
    let project = ProjectId::parse(&p).unwrap();
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
    assert_eq!(
        counts(&api, &view).await,
        reference(&current(&api, &ids).await, &points, &level)
    );
    // Issues enter, leave and move between groups; one is deleted.
    api.patch(
        &format!("/issues/{}", ids[0]),
        json!({"fields": {&points: 3}}),
    )
    .await;
    api.patch(
        &format!("/issues/{}", ids[2]),
        json!({"fields": {&level: "low"}}),
    )
    .await;
    api.patch(&format!("/issues/{}", ids[3]), json!({"state": "closed"}))
        .await;
    api.delete(&format!("/issues/{}", ids[7])).await;
    api.sync().await;
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
    assert_eq!(
        counts(&api, &view).await,
        reference(&current(&api, &ids).await, &points, &level)
    );
}
