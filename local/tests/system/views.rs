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

/// Every issue id of a view's list (or one group's), following `next_cursor` with pages of
/// `limit`: every page but the last is full.
async fn view_all(api: &TestApi, view: &str, group: Option<&str>, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let group = group.map_or(String::new(), |g| format!("&group={g}"));
    for _ in 0..1000 {
        let mut path = format!("/views/{view}/issues?limit={limit}{group}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        let items = r.body["items"].as_array().unwrap();
        for item in items {
            ids.push(item["id"].as_str().unwrap().to_string());
        }
        match r.body["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(items.len(), limit, "a page that is not the last is full");
                cursor = Some(c.to_string());
            }
            None => return ids,
        }
    }
    panic!("paging did not end")
}

/// Every view lists exactly the reference's issues in order, in pages of every size, with
/// exact counts and groups (and each group's list).
async fn check_views(
    api: &TestApi,
    views: &[(String, Value)],
    (fields, ids): (&crate::filters::Fields, &[String]),
    round: usize,
) {
    use crate::filters::{OPTIONS as LEVELS, holds, options, type_of};
    let current = current(api, ids).await;
    for (view, _) in views {
        let got = api.get(&format!("/views/{view}")).await;
        assert_eq!(got.status, StatusCode::OK, "{}", got.text);
        assert_eq!(got.body["ready"], true, "round {round}");
        let body = &got.body;
        let conditions = body["where"].as_array().unwrap().clone();
        let state = body["state"].as_str();
        let matching: Vec<Value> = current
            .iter()
            .filter(|i| state.is_none_or(|s| i["state"] == s))
            .filter(|i| conditions.iter().all(|c| holds(i, c, fields)))
            .cloned()
            .collect();
        let sort = body["sort"].as_str().unwrap();
        let desc = body["order"] == "desc";
        let expected =
            crate::grid::reference(&matching, sort, type_of(fields, sort), &options(), desc);
        for limit in [1, 4, 50] {
            assert_eq!(
                view_all(api, view, None, limit).await,
                expected,
                "round {round} {body}"
            );
        }
        assert_eq!(body["count"], json!(expected.len()), "round {round} {body}");
        eprintln!(
            "DBG round {round} count {} {}",
            expected.len(),
            body["where"]
        );
        let Some(group_by) = body["group_by"].as_str() else {
            assert!(body["groups"].is_null());
            continue;
        };
        let values: Vec<Value> = if group_by == "state" {
            vec![json!("closed"), json!("open"), Value::Null]
        } else {
            LEVELS
                .iter()
                .map(|o| json!(o))
                .chain([Value::Null])
                .collect()
        };
        let groups = body["groups"].as_array().unwrap();
        assert_eq!(groups.len(), values.len());
        for (g, value) in groups.iter().zip(&values) {
            assert_eq!(&g["value"], value);
            let in_group: Vec<String> = matching
                .iter()
                .filter(|i| {
                    let v = if group_by == "state" {
                        &i["state"]
                    } else {
                        &i["fields"][group_by]
                    };
                    v == value || (value.is_null() && v.is_null())
                })
                .map(|i| i["id"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(g["count"], json!(in_group.len()), "round {round} {body}");
            let param = value.as_str().unwrap_or("");
            let listed = view_all(api, view, Some(param), 3).await;
            let want: Vec<String> = expected
                .iter()
                .filter(|id| in_group.contains(id))
                .cloned()
                .collect();
            assert_eq!(listed, want, "round {round} group {value} {body}");
        }
    }
}

/// Random views (filters over every operator and type, sorts, orders, states, groupings)
/// list exactly the issues the reference says, in order, in pages of every size, with exact
/// counts and groups; and still do after random updates, deletes and a reshape.
#[tokio::test]
async fn random_views_list_and_count_exactly_what_the_reference_says() {
    for seed in [21, 22] {
        random_views(seed).await;
    }
}

/// One project of random issues and views, checked before and after random changes.
async fn random_views(seed: u64) {
    use crate::filters::{field_value, random_condition, random_project};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let (api, p, fields, issues, team) = random_project(&mut rng, 30).await;
    let ids: Vec<String> = issues
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    let select = fields
        .iter()
        .find(|(_, t)| *t == "select")
        .unwrap()
        .0
        .clone();
    let mut views = Vec::new();
    for k in 0..8 {
        let n = rng.gen_range(0..2);
        let conditions: Vec<Value> = (0..n)
            .map(|_| random_condition(&mut rng, &fields, &issues, &team))
            .collect();
        let sorts: Vec<&str> = ["num", "title", "updated_at"]
            .into_iter()
            .chain(fields.iter().map(|(id, _)| id.as_str()))
            .collect();
        let mut body = json!({"name": format!("v{k}"), "where": conditions,
            "sort": sorts[rng.gen_range(0..sorts.len())],
            "order": if rng.gen_bool(0.5) { "desc" } else { "asc" }});
        if rng.gen_bool(0.3) {
            body["state"] = json!(if rng.gen_bool(0.5) { "open" } else { "closed" });
        }
        match k % 3 {
            0 => body["group_by"] = json!(select),
            1 => body["group_by"] = json!("state"),
            _ => {}
        }
        let r = api
            .post(&format!("/projects/{p}/views"), body.clone())
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        assert_eq!(r.body["ready"], false);
        views.push((r.body["id"].as_str().unwrap().to_string(), body));
    }
    api.sync().await;
    check_views(&api, &views, (&fields, &ids), 0).await;
    // Random updates and deletes, then a reshape of one view.
    for _ in 0..20 {
        let id = &ids[rng.gen_range(0..ids.len())];
        let (f, t) = &fields[rng.gen_range(0..fields.len())];
        let v = if rng.gen_bool(0.3) {
            Value::Null
        } else {
            field_value(&mut rng, t)
        };
        let mut patch = json!({"fields": {f: v}});
        if rng.gen_bool(0.3) {
            patch["state"] = json!(if rng.gen_bool(0.5) { "open" } else { "closed" });
        }
        api.patch(&format!("/issues/{id}"), patch).await;
    }
    for id in &ids[..3] {
        api.delete(&format!("/issues/{id}")).await;
    }
    let (view, _) = &views[0];
    let r = api
        .patch(
            &format!("/views/{view}"),
            json!({"order": "desc", "state": null}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    // A warm instance serves a view as it held it for a few seconds: past them, the new shape.
    tokio::time::sleep(gridline::http::fields_cache::ViewsCache::MAX_AGE).await;
    check_views(&api, &views, (&fields, &ids), 1).await;
    let project = ProjectId::parse(&p).unwrap();
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
}

#[tokio::test]
async fn a_views_routes_keep_the_contract() {
    let (api, p) = TestApi::with_project("board").await;
    let points = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let level = api
        .field(
            &p,
            json!({"name": "level", "type": "select", "options": OPTIONS}),
        )
        .await;
    // On a project without issues a view is ready at once, with zero counts.
    let r = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "Board", "group_by": level}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["ready"], true);
    assert_eq!(r.body["count"], 0);
    assert_eq!(r.body["groups"].as_array().unwrap().len(), 4);
    let board = r.body["id"].as_str().unwrap().to_string();
    for n in 0..5 {
        api.issue(
            &p,
            json!({"title": format!("i{n}"), "fields": {&points: n, &level: OPTIONS[n % 3]}}),
        )
        .await;
    }
    // Bad input: each a 400 naming the member, nothing written.
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "x", "group_by": points}), "group_by"),
        (
            json!({"name": "x", "where": [["nope", "eq", 1]]}),
            "where[0]",
        ),
        (json!({"name": "x", "sort": "nope"}), "sort"),
        (json!({"name": "x", "order": "up"}), "order"),
        (
            json!({"name": "x", "where": [["title", "in", vec!["y".repeat(200); 100]]]}),
            "where",
        ),
    ] {
        let r = api.post(&format!("/projects/{p}/views"), body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert_eq!(r.body["errors"][0]["field"], field, "{}", r.text);
    }
    // A view on a project with issues is built by its job: 409 with Retry-After until then.
    let r = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "Big", "where": [[points, "gte", 2]], "sort": points}),
        )
        .await;
    let big = r.body["id"].as_str().unwrap().to_string();
    assert!(r.body["count"].is_null());
    let r = api.get(&format!("/views/{big}/issues")).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.header("retry-after").is_some());
    api.sync().await;
    assert_eq!(api.get(&format!("/views/{big}")).await.body["count"], 3);
    // `group` on a view without grouping, or a value that is no group: 400.
    let r = api.get(&format!("/views/{big}/issues?group=low")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = api
        .get(&format!("/views/{board}/issues?group=urgent"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A rename keeps cursors; a reshape ends them.
    let r = api.get(&format!("/views/{big}/issues?limit=1")).await;
    let c = r.body["next_cursor"].as_str().unwrap().to_string();
    api.patch(&format!("/views/{big}"), json!({"name": "Bigger"}))
        .await;
    let r = api
        .get(&format!("/views/{big}/issues?limit=1&cursor={c}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = api
        .patch(&format!("/views/{big}"), json!({"order": "desc"}))
        .await;
    assert_eq!(r.body["ready"], false);
    api.sync().await;
    // Once the instance no longer holds the old shape (a few seconds at most).
    tokio::time::sleep(gridline::http::fields_cache::ViewsCache::MAX_AGE).await;
    let r = api
        .get(&format!("/views/{big}/issues?limit=1&cursor={c}"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Listed by name.
    let r = api.get(&format!("/projects/{p}/views?limit=1")).await;
    assert_eq!(r.body["items"][0]["name"], "Bigger");
    assert!(r.body["next_cursor"].is_string());
    // A field a view uses is deleted: so is the view.
    let r = api.delete(&format!("/projects/{p}/fields/{level}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        api.get(&format!("/views/{board}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.get(&format!("/views/{big}")).await.status,
        StatusCode::OK
    );
    let r = api.delete(&format!("/views/{big}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        api.get(&format!("/views/{big}")).await.status,
        StatusCode::NOT_FOUND
    );
    api.sync().await;
    let project = ProjectId::parse(&p).unwrap();
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
}

/// At most 50 views a project; an issue entering all 50 at once is one commit of 51 actions
/// (its head and a count item per view), within AWS's 100. Always the embedded engine, which
/// holds transactions to AWS's 100 actions: the DynamoDB Local the cross-check pins (1.x)
/// still holds them to 10, a limit AWS raised in 2022.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_views_each_holding_every_issue_count_them_all() {
    let api = TestApi::embedded().await;
    let p = api.project("many").await;
    for n in 0..5 {
        api.issue(&p, json!({"title": format!("i{n}")})).await;
    }
    let mut views = Vec::new();
    for k in 0..50 {
        let r = api
            .post(
                &format!("/projects/{p}/views"),
                json!({"name": format!("v{k:02}")}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        views.push(r.body["id"].as_str().unwrap().to_string());
    }
    let r = api
        .post(&format!("/projects/{p}/views"), json!({"name": "51st"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    api.sync().await;
    for view in &views {
        let r = api.get(&format!("/views/{view}")).await;
        assert_eq!(
            (&r.body["ready"], &r.body["count"]),
            (&json!(true), &json!(5))
        );
    }
    let project = ProjectId::parse(&p).unwrap();
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
}
