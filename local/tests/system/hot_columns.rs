//! Hot columns: summaries only where pages read them. A column's entries are thin until a grid
//! page sorts by it; then the project records it (once), a fill job writes its entries'
//! summaries, and every later update rewrites those entries (and the inbox copies) only.

use gridline::domain::ids::ProjectId;
use gridline::keys;
use gridline::model::summary::ATTR;
use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::json;

use crate::support::acme;

/// The summaries of a column's entries, by issue id (`None`: the entry is thin).
async fn column_summaries(api: &TestApi, column: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for item in api.scan_all(&api.stack.tables.index).await {
        let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
        let pk = s("PK").unwrap_or_default();
        if pk.contains("#X#") && pk.contains(&format!("#{column}#")) {
            out.push((s("issue_id").unwrap_or_default(), s(ATTR)));
        }
    }
    out.sort();
    out
}

/// The project's hot columns, as its record says.
async fn hot_columns(api: &TestApi, project: &str) -> Vec<String> {
    let p = ProjectId::parse(project).unwrap();
    let (item, _) = api
        .stack
        .state
        .store
        .records()
        .project_with_fields(&acme(), &p)
        .await
        .unwrap()
        .unwrap();
    let mut hot = item.hot;
    hot.sort();
    hot
}

#[tokio::test]
async fn a_column_turns_hot_when_a_page_sorts_by_it_and_a_job_fills_its_summaries() {
    let (api, p) = TestApi::with_project("p").await;
    let points = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    let size = api
        .field(&p, json!({"name": "Size", "type": "number"}))
        .await;
    for n in 0..5 {
        api.issue(
            &p,
            json!({"title": format!("t{n}"), "fields": {&points: n, &size: n}}),
        )
        .await;
    }
    api.sync().await;
    let project = ProjectId::parse(&p).unwrap();
    // Nobody has sorted: every column is thin, the inbox copies carry summaries.
    assert!(hot_columns(&api, &p).await.is_empty());
    for column in ["num", points.as_str(), size.as_str()] {
        let s = column_summaries(&api, column).await;
        assert_eq!(s.len(), 5);
        assert!(s.iter().all(|(_, s)| s.is_none()), "{column}: {s:?}");
    }
    let copies = api.index_entries().await;
    assert!(
        copies
            .iter()
            .filter(|e| e.role.is_some())
            .all(|e| e.summary.is_some())
    );

    // A page sorted by Points makes it hot (and the default sort, by number, makes `num` hot);
    // the fill job gives their entries summaries.
    let sorted = format!("/projects/{p}/issues?sort={points}");
    let r = api.get(&sorted).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 5);
    assert_eq!(hot_columns(&api, &p).await, std::slice::from_ref(&points));
    api.sync().await;
    let filled = column_summaries(&api, &points).await;
    assert!(filled.iter().all(|(_, s)| s.is_some()), "{filled:?}");
    assert!(
        column_summaries(&api, &size)
            .await
            .iter()
            .all(|(_, s)| s.is_none())
    );
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;

    // Sorting again writes nothing: the project's record is as it was.
    let before = api.records_snapshot().await;
    assert_eq!(api.get(&sorted).await.status, StatusCode::OK);
    assert_eq!(api.records_snapshot().await, before);

    // An update rewrites the hot column's entries with the new summary, which a page shows.
    let first = r.body["items"][0]["id"].as_str().unwrap().to_string();
    let patched = api
        .patch(
            &format!("/issues/{first}"),
            json!({"title": "renamed", "fields": {&size: 9}}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    api.sync().await;
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
    let shown = api.get(&sorted).await;
    assert_eq!(shown.body["items"][0]["title"], "renamed");
    assert_eq!(shown.body["items"][0]["fields"][&size], json!(9));
    let summary = column_summaries(&api, &points)
        .await
        .into_iter()
        .find(|(id, _)| *id == first)
        .and_then(|(_, s)| s)
        .unwrap();
    assert!(summary.contains("renamed"), "{summary}");
    assert!(
        column_summaries(&api, &size)
            .await
            .iter()
            .all(|(_, s)| s.is_none())
    );

    // The default sort (by number) makes `num` hot too.
    assert_eq!(
        api.get(&format!("/projects/{p}/issues")).await.status,
        StatusCode::OK
    );
    api.sync().await;
    let mut both = vec![points.clone(), "num".to_string()];
    both.sort();
    assert_eq!(hot_columns(&api, &p).await, both);
    assert!(
        column_summaries(&api, "num")
            .await
            .iter()
            .all(|(_, s)| s.is_some())
    );
    // The fill job is done with the project: its marker is gone, so issue numbers handed out
    // later do not pass the stream filter.
    let project_item = api
        .scan_all(&api.stack.tables.records)
        .await
        .into_iter()
        .find(|i| {
            i.get(keys::SK)
                .and_then(|v| v.as_s().ok())
                .map(String::as_str)
                == Some(keys::records::PROJECT_SK)
        })
        .unwrap();
    assert!(!project_item.contains_key("hot_fill"));
    api.assert_index_matches_records(&acme(), &[project]).await;
}
