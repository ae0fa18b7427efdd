//! The grid end to end: writes through the API, the indexer fed from the engine's real stream,
//! pages read back through the API and compared with a reference computed from the issues.

use std::cmp::Ordering;

use gridline::domain::ids::ProjectId;
use gridline::encoding::text::fold;
use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::acme;

/// Every issue id of a grid, following `next_cursor` with pages of `limit`.
pub(crate) async fn page_all(
    api: &TestApi,
    project: &str,
    query: &str,
    limit: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let mut path = format!("/projects/{project}/issues?limit={limit}{query}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        for item in items {
            assert!(
                item.get("description").is_none(),
                "list views omit the description"
            );
            ids.push(item["id"].as_str().unwrap().to_string());
        }
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return ids,
        }
    }
    panic!("paging did not end")
}

/// Sort value of an issue in a column, comparable within the column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Text(String, String),
    Encoded(String),
}

pub(crate) fn key_of(
    issue: &Value,
    column: &str,
    field_type: Option<&str>,
    options: &[String],
) -> Option<Key> {
    let text = |s: &str| Key::Text(fold(s), s.to_string());
    match column {
        "num" => Some(Key::Encoded(format!(
            "{:020}",
            issue["num"].as_u64().unwrap()
        ))),
        "title" | "state" => Some(text(issue[column].as_str().unwrap())),
        "created_at" | "updated_at" => Some(Key::Encoded(issue[column].as_str().unwrap().into())),
        id => {
            let v = issue["fields"].get(id)?;
            Some(match field_type.unwrap() {
                "text" => text(v.as_str().unwrap()),
                // Numbers compare by the property-tested encoding, applied to the exact digits.
                "number" => Key::Encoded(gridline::encoding::number::encode(
                    &gridline::domain::decimal::DynNumber::parse(&v.to_string()).unwrap(),
                )),
                "select" => Key::Encoded(format!(
                    "{:03}",
                    options
                        .iter()
                        .position(|o| o == v.as_str().unwrap())
                        .unwrap()
                )),
                _ => Key::Encoded(v.as_str().unwrap().into()),
            })
        }
    }
}

/// The contract's order: values in order (ties by num), then issues without one by num, both
/// in the requested direction.
pub(crate) fn reference(
    issues: &[Value],
    column: &str,
    ft: Option<&str>,
    options: &[String],
    desc: bool,
) -> Vec<String> {
    let mut with: Vec<(Key, u64, String)> = Vec::new();
    let mut without: Vec<(u64, String)> = Vec::new();
    for i in issues {
        let num = i["num"].as_u64().unwrap();
        let id = i["id"].as_str().unwrap().to_string();
        match key_of(i, column, ft, options) {
            Some(k) => with.push((k, num, id)),
            None => without.push((num, id)),
        }
    }
    let dir = |o: Ordering| if desc { o.reverse() } else { o };
    with.sort_by(|a, b| dir(a.0.cmp(&b.0).then(a.1.cmp(&b.1))));
    without.sort_by(|a, b| dir(a.0.cmp(&b.0)));
    with.into_iter()
        .map(|x| x.2)
        .chain(without.into_iter().map(|x| x.1))
        .collect()
}

/// Every issue of the project as the API returns it now.
async fn current_issues(api: &TestApi, project: &str) -> Vec<Value> {
    let ids = page_all(api, project, "", 100).await;
    let mut out = Vec::new();
    for id in ids {
        out.push(api.get(&format!("/issues/{id}")).await.body);
    }
    out
}

#[tokio::test]
async fn issues_sort_by_a_custom_field_with_missing_values_last_in_both_orders() {
    let (api, p) = TestApi::with_project("p").await;
    let pts = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let mut ids = Vec::new();
    for v in [
        json!(5),
        Value::Null,
        json!(-1.5),
        json!(5),
        Value::Null,
        json!("1E+100"),
    ] {
        let mut body = json!({"title": "t"});
        if !v.is_null() {
            body["fields"] = json!({&pts: v});
        }
        ids.push(
            api.issue(&p, body).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    api.sync().await;
    // nums 1..6 hold 5, -, -1.5, 5, -, 1E+100
    let order = |is: &[usize]| is.iter().map(|i| ids[*i - 1].clone()).collect::<Vec<_>>();
    assert_eq!(
        page_all(&api, &p, &format!("&sort={pts}"), 2).await,
        order(&[3, 1, 4, 6, 2, 5])
    );
    assert_eq!(
        page_all(&api, &p, &format!("&sort={pts}&order=desc"), 2).await,
        order(&[6, 4, 1, 3, 5, 2])
    );
    assert_eq!(
        page_all(&api, &p, &format!("&sort={pts}&order=desc"), 4).await,
        order(&[6, 4, 1, 3, 5, 2])
    );
    assert_eq!(
        page_all(&api, &p, &format!("&sort={pts}&gte=0&lte=5"), 1).await,
        order(&[1, 4])
    );
    assert_eq!(
        page_all(&api, &p, &format!("&sort={pts}&gte=0&order=desc"), 10).await,
        order(&[6, 4, 1])
    );
    assert_eq!(
        page_all(&api, &p, "&order=desc", 4).await,
        order(&[6, 5, 4, 3, 2, 1])
    );
}

#[tokio::test]
async fn title_prefix_and_state_filters_are_key_conditions() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for (title, state) in [
        ("Apple", "open"),
        ("apricot", "closed"),
        ("banana", "open"),
        ("APPLE pie", "open"),
    ] {
        ids.push(
            api.issue(&p, json!({"title": title, "state": state})).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    api.sync().await;
    let pick = |is: &[usize]| is.iter().map(|i| ids[*i].clone()).collect::<Vec<_>>();
    assert_eq!(
        page_all(&api, &p, "&sort=title&prefix=ap", 10).await,
        pick(&[0, 3, 1])
    );
    assert_eq!(
        page_all(&api, &p, "&sort=title&prefix=APP&state=open", 1).await,
        pick(&[0, 3])
    );
    assert_eq!(page_all(&api, &p, "&state=closed", 10).await, pick(&[1]));
    assert_eq!(
        page_all(&api, &p, "&sort=state", 10).await,
        pick(&[1, 0, 2, 3])
    );
    // Closing an issue moves it between state scopes.
    api.patch(&format!("/issues/{}", ids[2]), json!({"state": "closed"}))
        .await;
    api.sync().await;
    assert_eq!(page_all(&api, &p, "&state=closed", 10).await, pick(&[1, 2]));
}

#[tokio::test]
async fn bad_grid_parameters_are_rejected() {
    let (api, p) = TestApi::with_project("p").await;
    let n = api.field(&p, json!({"name": "n", "type": "number"})).await;
    for q in [
        "sort=nope".to_string(),
        "order=up".into(),
        "state=done".into(),
        format!("sort={n}&gte=abc"),
        format!("sort={n}&prefix=1"),
        "sort=title&prefix=".into(),
        "limit=0".into(),
        "colour=red".into(),
    ] {
        let r = api.get(&format!("/projects/{p}/issues?{q}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{q}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
    }
    assert_eq!(
        api.get("/projects/01ARZ3NDEKTSV4RRFFQ69G5FAV/issues")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = api
        .call(
            ("mallory", "evil"),
            Method::GET,
            &format!("/projects/{p}/issues"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_grid_cursor_is_bound_to_its_parameters_and_tenant() {
    let (api, p) = TestApi::with_project("p").await;
    for i in 0..3 {
        api.issue(&p, json!({"title": format!("t{i}")})).await;
    }
    api.sync().await;
    let r = api
        .get(&format!("/projects/{p}/issues?sort=title&limit=1"))
        .await;
    let c = r.body["next_cursor"].as_str().unwrap().to_string();
    assert_eq!(
        api.get(&format!(
            "/projects/{p}/issues?sort=title&limit=2&cursor={c}"
        ))
        .await
        .status,
        StatusCode::OK
    );
    assert_eq!(
        api.get(&format!(
            "/projects/{p}/issues?sort=title&order=asc&cursor={c}"
        ))
        .await
        .status,
        StatusCode::OK
    );
    for other in ["sort=title&order=desc", "sort=num", "sort=title&state=open"] {
        let r = api
            .get(&format!("/projects/{p}/issues?{other}&cursor={c}"))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{other}");
    }
}

/// Random creates, patches, value removals, deletes and field deletions, then: the index
/// equals a recomputation from the records, and every column pages in the reference order.
#[tokio::test]
async fn random_histories_converge_and_page_in_reference_order() {
    for seed in [1u64, 2, 3] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (api, p) = TestApi::with_project("p").await;
        let options: Vec<String> = vec!["low".into(), "mid".into(), "high".into()];
        let mut fields: Vec<(String, &str)> = Vec::new();
        for t in ["text", "number", "date", "datetime", "select", "number"] {
            let body = if t == "select" {
                json!({"name": t, "type": t, "options": options})
            } else {
                json!({"name": t, "type": t})
            };
            fields.push((api.field(&p, body).await, t));
        }
        let value = |rng: &mut StdRng, t: &str| -> Value {
            match t {
                "text" => {
                    json!(["alpha", "Alpha", "beta", "ALPHA!", "b", "é"][rng.gen_range(0..6)])
                }
                "number" => {
                    json!(["-1", "0", "2.5", "-0.25", "1E+100", "99", "2.5"][rng.gen_range(0..7)])
                }
                "date" => json!(format!(
                    "2026-0{}-1{}",
                    rng.gen_range(1..10),
                    rng.gen_range(0..10)
                )),
                "datetime" => json!(format!(
                    "2026-11-21T1{}:00:00+0{}:00",
                    rng.gen_range(0..10),
                    rng.gen_range(0..3)
                )),
                _ => json!(options[rng.gen_range(0..3)]),
            }
        };
        let mut live: Vec<String> = Vec::new();
        for step in 0..60 {
            match rng.gen_range(0..10) {
                0..=3 => {
                    let mut vals = serde_json::Map::new();
                    for (id, t) in &fields {
                        if rng.gen_bool(0.6) {
                            vals.insert(id.clone(), value(&mut rng, t));
                        }
                    }
                    let title = ["Zeta", "alpha", "Alpha", "mid", "beta"][rng.gen_range(0..5)];
                    let issue = api.issue(&p, json!({"title": title, "fields": vals})).await;
                    live.push(issue["id"].as_str().unwrap().to_string());
                }
                4..=6 if !live.is_empty() => {
                    let id = live[rng.gen_range(0..live.len())].clone();
                    let (f, t) = fields[rng.gen_range(0..fields.len())].clone();
                    let v = if rng.gen_bool(0.3) {
                        Value::Null
                    } else {
                        value(&mut rng, t)
                    };
                    let mut patch = json!({"fields": {f: v}});
                    if rng.gen_bool(0.3) {
                        patch["state"] = json!(if rng.gen_bool(0.5) { "open" } else { "closed" });
                    }
                    let r = api.patch(&format!("/issues/{id}"), patch).await;
                    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
                }
                7 if !live.is_empty() => {
                    let id = live.swap_remove(rng.gen_range(0..live.len()));
                    api.delete(&format!("/issues/{id}")).await;
                }
                8 if step > 30 && fields.len() > 3 => {
                    let (f, _) = fields.remove(rng.gen_range(0..fields.len()));
                    api.delete(&format!("/projects/{p}/fields/{f}")).await;
                }
                _ => {}
            }
            // Seeds 2 and 3 split the project's columns into shards mid-history (and seed 3
            // merges them back to 2 later), with records of older layouts still on the stream:
            // the final pages are merged across shards.
            let to = match (seed, step) {
                (2, 25) => Some(3),
                (3, 20) => Some(4),
                (3, 45) => Some(2),
                _ => None,
            };
            if let Some(to) = to {
                let store = api.stack.state.store.clone();
                let indexer = gridline::indexer::Indexer::new(store.clone());
                let project = ProjectId::parse(&p).unwrap();
                let at = (&acme(), &project);
                let settle = std::time::Duration::ZERO;
                gridline::ops::reshard::reshard(&indexer, &store, at, to, settle, &|_, _| {})
                    .await
                    .unwrap();
            }
            // Let the indexer run now and then, so batches hold varied histories.
            if rng.gen_bool(0.2) {
                api.sync().await;
            }
        }
        api.sync().await;
        let (tenant, project) = (acme(), ProjectId::parse(&p).unwrap());
        api.assert_index_matches_records(&tenant, std::slice::from_ref(&project))
            .await;
        assert_eq!(api.dead_letters().await, 0);

        let issues = current_issues(&api, &p).await;
        assert_eq!(issues.len(), live.len(), "seed {seed}");
        // Deleted fields' values are gone from the issues themselves, not just hidden.
        let (_, defs) = api
            .stack
            .state
            .store
            .records()
            .project_with_fields(&tenant, &project)
            .await
            .unwrap()
            .unwrap();
        for i in api
            .stack
            .state
            .store
            .records()
            .issues_of_project(&tenant, &project, None, 1000)
            .await
            .unwrap()
            .items
        {
            assert!(
                i.fields.keys().all(|k| defs.iter().any(|d| &d.id == k)),
                "seed {seed}: stale value left on an issue"
            );
        }
        let mut columns: Vec<(String, Option<&str>)> =
            ["num", "title", "state", "created_at", "updated_at"]
                .iter()
                .map(|c| (c.to_string(), None))
                .collect();
        columns.extend(fields.iter().map(|(id, t)| (id.clone(), Some(*t))));
        for (column, ft) in &columns {
            for desc in [false, true] {
                let expected = reference(&issues, column, *ft, &options, desc);
                let order = if desc { "desc" } else { "asc" };
                let limit = rng.gen_range(1..5);
                let got = page_all(&api, &p, &format!("&sort={column}&order={order}"), limit).await;
                assert_eq!(
                    got, expected,
                    "seed {seed}: sort={column} order={order} limit={limit}"
                );
            }
        }
    }
}
