//! The bounds that keep every request's cost bounded (`openapi.yaml`): participants per issue,
//! field definitions per project, teams per user, inbox cursor length, names per page, the
//! grid's prefix, a PATCH of every field, and the issue size check.

use std::collections::{BTreeMap, BTreeSet};

use gridline::domain::ids::ProjectId;
use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{acme, delete_twice};

const KB64: usize = 64 * 1024;

fn user(i: usize) -> String {
    format!("user-{i:04}")
}

fn participants(users: impl IntoIterator<Item = String>) -> Value {
    users
        .into_iter()
        .map(|id| json!({"kind": "user", "id": id, "role": "watcher"}))
        .collect()
}

/// An issue body listing `n` participants besides its creator.
fn with_participants(n: usize) -> Value {
    json!({"title": "t", "participants": participants((0..n).map(user))})
}

async fn put_participant(api: &TestApi, issue: &str, id: &str, role: &str) -> StatusCode {
    api.put(
        &format!("/issues/{issue}/participants/user/{id}"),
        Some(json!({"role": role})),
    )
    .await
    .status
}

#[tokio::test]
async fn an_issue_has_at_most_100_participants() {
    let (api, p) = TestApi::with_project("p").await;

    // A create listing 101 is 400, naming `participants`, and writes nothing.
    let before = api.record_count().await;
    let r = api.post_issue(&p, with_participants(101)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["errors"][0]["field"], "participants", "{}", r.text);
    assert_eq!(api.record_count().await, before);
    // 100 listed plus the caller would make 101 too.
    let r = api.post_issue(&p, with_participants(100)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);

    // 99 listed plus the caller: exactly 100.
    let issue = api.issue(&p, with_participants(99)).await;
    assert_eq!(issue["participants"].as_array().unwrap().len(), 100);
    let id = issue["id"].as_str().unwrap();
    assert_eq!(
        put_participant(&api, id, "newcomer", "assignee").await,
        StatusCode::CONFLICT
    );
    // Re-roling one at 100 is fine; so is removing one and adding another.
    assert_eq!(
        put_participant(&api, id, &user(3), "assignee").await,
        StatusCode::OK
    );
    let r = api
        .delete(&format!("/issues/{id}/participants/user/{}", user(4)))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        put_participant(&api, id, "newcomer", "assignee").await,
        StatusCode::OK
    );
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.body["participants"].as_array().unwrap().len(), 100);
    // A participant PUT on a missing issue is still 404.
    let r = api
        .put(
            "/issues/01ARZ3NDEKTSV4RRFFQ69G5FAV/participants/user/x",
            Some(json!({"role": "watcher"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn concurrent_participant_puts_never_make_101() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, with_participants(89)).await;
    let id = issue["id"].as_str().unwrap().to_string();
    let results = futures::future::join_all((0..25).map(|i| {
        let api = &api;
        let id = id.clone();
        async move { put_participant(api, &id, &format!("racer-{i}"), "watcher").await }
    }))
    .await;
    let ok = results.iter().filter(|s| **s == StatusCode::OK).count();
    let conflict = results
        .iter()
        .filter(|s| **s == StatusCode::CONFLICT)
        .count();
    assert_eq!((ok, conflict), (10, 15), "{results:?}");
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.body["participants"].as_array().unwrap().len(), 100);
}

/// A select field whose definition is `name` plus `n` labels of `len` characters.
fn select(name: &str, n: usize, len: usize, tag: char) -> Value {
    let options: Vec<String> = (0..n)
        .map(|i| format!("{tag}{i:03}{}", "o".repeat(len - 4)))
        .collect();
    json!({"name": name, "type": "select", "options": options})
}

#[tokio::test]
async fn field_definitions_are_capped_at_64_kb_per_project() {
    let (api, p) = TestApi::with_project("p").await;
    // Six fields of 128 + 100 × 100 bytes, then one filling the rest exactly.
    let name = "n".repeat(128);
    let mut ids = Vec::new();
    for tag in ['a', 'b', 'c', 'd', 'e', 'f'] {
        ids.push(api.field(&p, select(&name, 100, 100, tag)).await);
    }
    let used = 6 * (128 + 100 * 100);
    let rest = KB64 - used; // 4,768 = 68 + 47 × 100
    assert_eq!(rest, 68 + 47 * 100);
    api.field(&p, select(&"m".repeat(68), 47, 100, 'g')).await;

    // One byte more is 409, and writes nothing.
    let before = api.record_count().await;
    let r = api
        .post_field(&p, json!({"name": "x", "type": "number"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(api.record_count().await, before);
    // Names count in UTF-8 bytes: a 1-character name of 4 bytes does not fit either.
    let r = api
        .post_field(&p, json!({"name": "\u{1F600}", "type": "number"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);

    // A deleted field gives its bytes back.
    delete_twice(&api, &format!("/projects/{p}/fields/{}", ids[0])).await;
    api.field(&p, select(&name, 100, 100, 'h')).await;
    let r = api
        .post_field(&p, json!({"name": "x", "type": "number"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
}

#[tokio::test]
async fn a_field_created_just_now_validates_in_the_next_write() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    for i in 0..5 {
        let f = api
            .field(&p, json!({"name": format!("f{i}"), "type": "number"}))
            .await;
        let r = api
            .patch(&format!("/issues/{id}"), json!({"fields": {&f: i}}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.body["fields"][&f], i);
        let created = api
            .issue(&p, json!({"title": "u", "fields": {&f: i}}))
            .await;
        assert_eq!(created["fields"][&f], i);
    }
}

#[tokio::test]
async fn a_user_belongs_to_at_most_50_teams() {
    let api = TestApi::start().await;
    let teams = api.teams(52).await;
    for t in &teams[..50] {
        assert_eq!(api.join(t, "bob").await, StatusCode::NO_CONTENT);
    }
    // Re-adding is idempotent and does not count twice.
    assert_eq!(api.join(&teams[0], "bob").await, StatusCode::NO_CONTENT);
    let before = api.record_count().await;
    let r = api
        .put(&format!("/teams/{}/members/bob", teams[50]), None)
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(api.record_count().await, before);
    // Another user is not affected; leaving a team makes room.
    assert_eq!(api.join(&teams[50], "carol").await, StatusCode::NO_CONTENT);
    delete_twice(&api, &format!("/teams/{}/members/bob", teams[7])).await;
    assert_eq!(api.join(&teams[50], "bob").await, StatusCode::NO_CONTENT);
    assert_eq!(api.join(&teams[51], "bob").await, StatusCode::CONFLICT);
    let r = api
        .call(("bob", "acme"), Method::GET, "/me/teams?limit=100", None)
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 50);
    // A missing team is still 404, full or not.
    assert_eq!(
        api.join("01ARZ3NDEKTSV4RRFFQ69G5FAV", "bob").await,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn concurrent_memberships_never_exceed_50() {
    let api = TestApi::start().await;
    let teams = api.teams(60).await;
    for t in &teams[..45] {
        assert_eq!(api.join(t, "bob").await, StatusCode::NO_CONTENT);
    }
    let results = futures::future::join_all(teams[45..].iter().map(|t| api.join(t, "bob"))).await;
    let ok = results
        .iter()
        .filter(|s| **s == StatusCode::NO_CONTENT)
        .count();
    assert_eq!(ok, 5, "{results:?}");
    let r = api
        .call(("bob", "acme"), Method::GET, "/me/teams?limit=100", None)
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 50);
}

#[tokio::test]
async fn my_teams_issues_cursors_stay_under_2_kb_with_50_teams() {
    let (api, p) = TestApi::with_project("p").await;
    let teams = api.teams(50).await;
    for t in &teams {
        assert_eq!(api.join(t, "alice").await, StatusCode::NO_CONTENT);
    }
    let mut rng = StdRng::seed_from_u64(11);
    let mut expected = BTreeSet::new();
    for i in 0..150 {
        let mut on: BTreeSet<&String> = BTreeSet::new();
        for _ in 0..rng.gen_range(1..=4) {
            on.insert(&teams[rng.gen_range(0..teams.len())]);
        }
        let ps: Vec<Value> = on
            .iter()
            .map(|t| json!({"kind": "team", "id": t, "role": "watcher"}))
            .collect();
        let issue = api
            .issue(&p, json!({"title": format!("i{i}"), "participants": ps}))
            .await;
        expected.insert(issue["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    for round in 0..6 {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut longest = 0;
        loop {
            let limit = if round == 0 {
                1
            } else {
                rng.gen_range(1..=100)
            };
            let mut path = format!("/me/teams/issues?limit={limit}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let r = api.get(&path).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            let items = r.body["items"].as_array().unwrap();
            assert!(items.len() <= limit);
            seen.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
            match r.body["next_cursor"].as_str() {
                Some(c) => {
                    longest = longest.max(c.len());
                    cursor = Some(c.to_string());
                }
                None => break,
            }
        }
        assert!(longest < 2048, "a cursor of {longest} bytes");
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "an issue came twice");
        assert_eq!(unique, expected, "round {round}");
    }
}

/// The grid or an inbox, followed to its end with pages of `limit`: the pages' items.
async fn pages(api: &TestApi, path: &str, limit: usize) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut p = format!("{path}{sep}limit={limit}");
        if let Some(c) = &cursor {
            p.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&p).await;
        assert_eq!(r.status, StatusCode::OK, "{p}: {}", r.text);
        out.push(r.body["items"].as_array().unwrap().clone());
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
        assert!(out.len() < 1000);
    }
}

#[tokio::test]
async fn display_name_lookups_are_bounded_per_page() {
    let (api, p) = TestApi::with_project("p").await;
    // Some users have names; each issue has 100 participants, 99 of them its own.
    for i in [0usize, 150, 399, 1100] {
        let who = user(i);
        let r = api
            .call(
                (&who, "acme"),
                Method::PUT,
                "/me",
                Some(json!({"display_name": format!("Name {i}")})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let mut ids = Vec::new();
    for n in 0..12 {
        let issue = api
            .issue(
                &p,
                json!({"title": format!("i{n}"), "participants": participants((n * 99..(n + 1) * 99).map(user))}),
            )
            .await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    // And some small issues that share a page.
    for n in 0..5 {
        let issue = api
            .issue(
                &p,
                json!({"title": format!("s{n}"), "participants": participants([user(0)])}),
            )
            .await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    let expected: BTreeSet<String> = ids.iter().cloned().collect();
    for path in [
        format!("/projects/{p}/issues"),
        format!("/projects/{p}/issues?order=desc"),
        "/me/issues".to_string(),
    ] {
        for limit in [100, 7] {
            let pages = pages(&api, &path, limit).await;
            let mut seen = Vec::new();
            for page in &pages {
                assert!(
                    !page.is_empty() || pages.len() == 1,
                    "{path}: an empty page"
                );
                let mut people = BTreeSet::new();
                for item in page {
                    seen.push(item["id"].as_str().unwrap().to_string());
                    for part in item["participants"].as_array().unwrap() {
                        people.insert(part["id"].as_str().unwrap().to_string());
                        // Every participant's current name is there.
                        let id = part["id"].as_str().unwrap();
                        let want = match id.strip_prefix("user-").map(|n| n.parse::<usize>()) {
                            Some(Ok(n)) if [0, 150, 399, 1100].contains(&n) => {
                                json!(format!("Name {n}"))
                            }
                            _ => Value::Null,
                        };
                        assert_eq!(part["display_name"], want, "{path}: {id}");
                    }
                }
                assert!(
                    people.len() <= 100,
                    "{path}: {} names on a page",
                    people.len()
                );
            }
            let unique: BTreeSet<String> = seen.iter().cloned().collect();
            assert_eq!(unique.len(), seen.len(), "{path}: an issue came twice");
            assert_eq!(unique, expected, "{path}");
            // The small issues share pages: the bound cuts pages, it does not shrink them all.
            assert!(pages.iter().any(|p| p.len() > 1), "{path}");
        }
    }
}

#[tokio::test]
async fn the_grid_prefix_is_1_to_256_characters() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let long = "\u{1F600}".repeat(256);
    api.issue(&p, json!({"title": &long, "fields": {&f: &long}}))
        .await;
    api.sync().await;
    for sort in ["title", f.as_str()] {
        let r = api
            .get(&format!(
                "/projects/{p}/issues?sort={sort}&prefix={}",
                urlencode(&long)
            ))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
        let longer = format!("{long}a");
        let r = api
            .get(&format!(
                "/projects/{p}/issues?sort={sort}&prefix={}",
                urlencode(&longer)
            ))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert_eq!(r.body["errors"][0]["field"], "prefix");
        let huge = "x".repeat(5000);
        let r = api
            .get(&format!("/projects/{p}/issues?sort={sort}&prefix={huge}"))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        let r = api
            .get(&format!("/projects/{p}/issues?sort={sort}&prefix="))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    }
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// 400 fields of every type, and each one's longest value.
async fn four_hundred_fields(api: &TestApi, p: &str) -> BTreeMap<String, Value> {
    let mut values = BTreeMap::new();
    let labels: Vec<String> = (0..3).map(|i| format!("{i}{}", "L".repeat(99))).collect();
    for i in 0..400 {
        let (def, value) = match i % 5 {
            0 => (json!({"type": "text"}), json!("w".repeat(1024))),
            1 => (
                json!({"type": "number"}),
                json!("-1.2345678901234567890123456789012345678E-130"),
            ),
            2 => (json!({"type": "date"}), json!("2024-02-29")),
            3 => (
                json!({"type": "datetime"}),
                json!("2026-11-21T22:42:03.123+02:00"),
            ),
            _ => (
                json!({"type": "select", "options": labels}),
                json!(labels[2]),
            ),
        };
        let mut def = def;
        def["name"] = json!(format!("field {i}"));
        let id = api.field(p, def).await;
        values.insert(id, value);
    }
    values
}

#[tokio::test]
async fn a_patch_may_set_and_remove_all_400_fields() {
    let (api, p) = TestApi::with_project("p").await;
    let values = four_hundred_fields(&api, &p).await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let r = api
        .patch(&format!("/issues/{id}"), json!({"fields": values}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["fields"].as_object().unwrap().len(), 400);
    assert_eq!(r.body["version"], 2);
    let nulls: BTreeMap<&String, Value> = values.keys().map(|k| (k, Value::Null)).collect();
    let r = api
        .patch(
            &format!("/issues/{id}"),
            json!({"title": "u", "fields": nulls}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["fields"], json!({}));
    assert_eq!(r.body["title"], "u");
    assert_eq!(r.body["version"], 3);
    // With If-Match too: a stale version is 412 and changes nothing.
    let r = api
        .send_as_alice(
            Method::PATCH,
            &format!("/issues/{id}"),
            Some(&json!({"fields": values}).to_string()),
            &[("if-match", "\"2\"")],
        )
        .await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED, "{}", r.text);
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.body["fields"], json!({}));
}

#[tokio::test]
async fn large_concurrent_patches_to_different_fields_both_survive() {
    let (api, p) = TestApi::with_project("p").await;
    let values = four_hundred_fields(&api, &p).await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let keys: Vec<&String> = values.keys().collect();
    let halves: Vec<BTreeMap<&String, &Value>> = keys
        .chunks(200)
        .map(|c| c.iter().map(|k| (*k, &values[*k])).collect())
        .collect();
    let path = format!("/issues/{id}");
    let results = futures::future::join_all(
        halves
            .iter()
            .map(|h| api.patch(&path, json!({ "fields": h }))),
    )
    .await;
    for r in &results {
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.body["fields"].as_object().unwrap().len(), 400);
    assert_eq!(r.body["version"], 3);
}

/// Writes the issue's stored issue item back with `extra` appended to one text value, as
/// the admin (no Gridline check): the engine refuses items over 400 KB as AWS does.
async fn rewrite_with(api: &TestApi, id: &str, field: &str, extra: &str) -> Result<(), String> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let key = |k: &str, v: String| (k.to_string(), AttributeValue::S(v));
    let out = api
        .stack
        .client
        .get_item()
        .table_name(&api.stack.tables.records)
        .set_key(Some(
            [
                key("PK", format!("T#acme#I#{id}")),
                key("SK", "#ISSUE".into()),
            ]
            .into(),
        ))
        .send()
        .await
        .expect("get");
    let mut item = out.item.expect("the issue");
    let Some(AttributeValue::M(fields)) = item.get_mut("fields") else {
        panic!("fields")
    };
    let Some(AttributeValue::S(text)) = fields.get_mut(field) else {
        panic!("the filler")
    };
    text.push_str(extra);
    api.put_record(item).await.map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn every_issue_that_fits_in_400_kb_is_accepted_and_one_byte_more_is_413() {
    let (api, p) = TestApi::with_project("p").await;
    let mut fields = Vec::new();
    for i in 0..100 {
        fields.push(
            api.field(&p, json!({"name": format!("f{i}"), "type": "text"}))
                .await,
        );
    }
    // 100 participants with the longest ids, stored twice (the edge set and the roles map).
    let long_user = |i: usize| format!("{i:03}{}", "u".repeat(125));
    let ps = participants((0..99).map(long_user));
    // 4-byte characters: 4,096 bytes a value; 92 such values, one of 2,048 bytes, and a filler
    // of `n` ASCII bytes, which brings the item to about 400 KB.
    let full = "\u{1F600}".repeat(1024);
    let body = |n: usize| {
        let mut values = serde_json::Map::new();
        for f in &fields[..92] {
            values.insert(f.clone(), json!(full));
        }
        values.insert(fields[92].clone(), json!("\u{e9}".repeat(1024)));
        values.insert(fields[93].clone(), json!("a".repeat(n)));
        json!({"title": "t".repeat(256), "participants": ps, "fields": values})
    };
    let create = |n: usize| {
        let body = body(n);
        let api = &api;
        let p = &p;
        async move { api.post_issue(p, body).await }
    };
    // The largest filler accepted.
    let (mut lo, mut hi) = (1usize, 1024usize);
    assert_eq!(create(lo).await.status, StatusCode::CREATED);
    let r = create(hi).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert_eq!(
        r.headers.get("content-type").unwrap(),
        "application/problem+json"
    );
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let r = create(mid).await;
        match r.status {
            StatusCode::CREATED => lo = mid,
            StatusCode::PAYLOAD_TOO_LARGE => hi = mid,
            s => panic!("{s}: {}", r.text),
        }
    }
    let r = create(lo).await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Accepted right up to DynamoDB's limit: the engine takes the item as it is and refuses
    // it one byte longer.
    let id = r.body["id"].as_str().unwrap();
    rewrite_with(&api, id, &fields[93], "")
        .await
        .expect("the item fits");
    let refused = rewrite_with(&api, id, &fields[93], "a").await.unwrap_err();
    assert!(refused.contains("size"), "{refused}");
    // A comment on it, whose count would not fit on it: 413, and no comment.
    let comments = format!("/issues/{id}/comments");
    let r = api.post(&comments, json!({"body": "x"})).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert_eq!(api.get(&comments).await.body["items"], json!([]));
    // Nor a relation, whose count would not fit on it either.
    let other = api.issue(&p, json!({"title": "other"})).await;
    let other = other["id"].as_str().unwrap();
    let r = api
        .put(&format!("/issues/{other}/relations/blocks/{id}"), None)
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    let r = api.get(&format!("/issues/{other}")).await;
    assert_eq!(r.body["relations"], json!([]), "nothing written");

    // A patch past the limit is 413 too, and so is a participant that would not fit.
    let r = api
        .patch(
            &format!("/issues/{id}"),
            json!({"fields": {&fields[98]: "b"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    let r = api
        .delete(&format!("/issues/{id}/participants/user/{}", long_user(0)))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = api
        .patch(
            &format!("/issues/{id}"),
            json!({"fields": {&fields[98]: "b".repeat(200)}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        put_participant(&api, id, &long_user(0), "watcher").await,
        StatusCode::PAYLOAD_TOO_LARGE
    );

    // The contract's largest issue (every text value at 1,024 four-byte characters) is a
    // clean 413, never a 500.
    let mut values = serde_json::Map::new();
    for f in &fields {
        values.insert(f.clone(), json!(full));
    }
    let r = api
        .post_issue(&p, json!({"title": "t", "fields": values}))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
}

#[tokio::test]
async fn deleting_a_field_of_a_project_from_before_the_byte_count_keeps_it_readable() {
    // A project deployed before the byte count existed has none: deleting its fields must not
    // drive a count below zero (which would no longer read back as a project).
    let (api, p) = TestApi::with_project("legacy").await;
    let f = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    api.stack
        .client
        .update_item()
        .table_name(&api.stack.tables.records)
        .key(
            "PK",
            aws_sdk_dynamodb::types::AttributeValue::S(gridline::keys::records::project_pk(
                &acme(),
                &ProjectId::parse(&p).unwrap(),
            )),
        )
        .key(
            "SK",
            aws_sdk_dynamodb::types::AttributeValue::S(gridline::keys::records::PROJECT_SK.into()),
        )
        .update_expression("REMOVE field_bytes")
        .send()
        .await
        .unwrap();
    let r = api.delete(&format!("/projects/{p}/fields/{f}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = api.get(&format!("/projects/{p}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["fields"], json!([]));
    // And a counted project's count comes back down to where it was.
    let g = api.field(&p, json!({"name": "Size", "type": "text"})).await;
    let r = api.delete(&format!("/projects/{p}/fields/{g}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let item = api
        .stack
        .state
        .store
        .records()
        .get_project(&acme(), &ProjectId::parse(&p).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.field_bytes, Some(0));
}
