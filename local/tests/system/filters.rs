//! Filters on any columns end to end: `where` through the API, the indexer fed from the
//! engine's real stream, every page followed to its end and compared with a reference computed
//! from the issues themselves.

use gridline::encoding::text::fold;
use gridline_local::testing::TestApi;
use http::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::grid::{Key, key_of, page_all, reference};

/// `s` percent-encoded for a query string.
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The project's fields: id, type.
pub(crate) type Fields = Vec<(String, &'static str)>;

pub(crate) const OPTIONS: [&str; 3] = ["low", "mid", "high"];

pub(crate) fn options() -> Vec<String> {
    OPTIONS.iter().map(|o| o.to_string()).collect()
}

pub(crate) fn type_of(fields: &Fields, column: &str) -> Option<&'static str> {
    fields.iter().find(|(id, _)| id == column).map(|(_, t)| *t)
}

/// A value's comparable form in its column (text folded: text compares as it sorts).
fn flat(key: Key) -> String {
    match key {
        Key::Text(folded, _) => folded,
        Key::Encoded(e) => e,
    }
}

/// The comparable form of a condition's value: the value put in an issue of its own, read
/// as the grid's reference reads issues.
fn operand(column: &str, v: &Value, fields: &Fields) -> String {
    // Requests may give numbers as strings and datetimes at any offset.
    let literal = v.as_str().map_or_else(|| v.to_string(), String::from);
    match type_of(fields, column) {
        Some("number") => {
            let n = gridline::domain::decimal::DynNumber::parse(&literal).unwrap();
            return gridline::encoding::number::encode(&n);
        }
        Some("datetime") => return gridline::domain::values::parse_datetime(&literal).unwrap(),
        _ => {}
    }
    let holder = match column {
        "title" | "state" | "num" | "created_at" | "updated_at" => json!({ column: v }),
        id => json!({"fields": {id: v}}),
    };
    flat(key_of(&holder, column, type_of(fields, column), &options()).unwrap())
}

/// The contract's meaning of one condition, computed from the issue as `GET` returns it.
pub(crate) fn holds(issue: &Value, condition: &Value, fields: &Fields) -> bool {
    let (column, op) = (
        condition[0].as_str().unwrap(),
        condition[1].as_str().unwrap(),
    );
    let value = &condition[2];
    let values: Vec<&Value> = match value {
        Value::Array(vs) if op == "in" => vs.iter().collect(),
        v => vec![v],
    };
    if column == "participant" {
        let has = |v: &Value| {
            issue["participants"].as_array().unwrap().iter().any(|p| {
                p["kind"] == v["kind"]
                    && p["id"] == v["id"]
                    && v.get("role").is_none_or(|r| p["role"] == *r)
            })
        };
        let any = !issue["participants"].as_array().unwrap().is_empty();
        return match op {
            "eq" | "in" => values.iter().any(|v| has(v)),
            "ne" => !values.iter().any(|v| has(v)),
            "exists" => any,
            _ => !any,
        };
    }
    let own: Option<String> = if column == "parent" {
        issue["parent_id"].as_str().map(String::from)
    } else {
        key_of(issue, column, type_of(fields, column), &options()).map(flat)
    };
    let key = |v: &Value| {
        if column == "parent" {
            v.as_str().unwrap().to_string()
        } else if op == "prefix" {
            fold(v.as_str().unwrap())
        } else {
            operand(column, v, fields)
        }
    };
    let Some(own) = own else {
        return matches!(op, "ne" | "missing");
    };
    match op {
        "eq" => own == key(value),
        "ne" => own != key(value),
        "lt" => own < key(value),
        "lte" => own <= key(value),
        "gt" => own > key(value),
        "gte" => own >= key(value),
        "in" => values.iter().any(|v| own == key(v)),
        "prefix" => own.starts_with(&key(value)),
        "exists" => true,
        _ => false,
    }
}

/// A random value of a field's type, as a request gives it.
pub(crate) fn field_value(rng: &mut StdRng, t: &str) -> Value {
    match t {
        "text" => {
            json!(["alpha", "Alpha", "beta", "ALPHA!", "b", "é", "E\u{301}"][rng.gen_range(0..7)])
        }
        "number" => json!(["-1", "0", "2.5", "-0.25", "1E+100", "99", "10"][rng.gen_range(0..7)]),
        "date" => json!(format!(
            "2026-0{}-1{}",
            rng.gen_range(1..4),
            rng.gen_range(0..3)
        )),
        "datetime" => json!(format!(
            "2026-11-21T1{}:00:00+0{}:00",
            rng.gen_range(0..4),
            rng.gen_range(0..2)
        )),
        _ => json!(OPTIONS[rng.gen_range(0..3)]),
    }
}

fn participants(rng: &mut StdRng, team: &str) -> Value {
    let roles = ["assignee", "reporter", "watcher"];
    let mut out = Vec::new();
    for (kind, id) in [("user", "bob"), ("user", "carol"), ("team", team)] {
        if rng.gen_bool(0.4) {
            out.push(json!({"kind": kind, "id": id, "role": roles[rng.gen_range(0..3)]}));
        }
    }
    Value::Array(out)
}

/// A project with a field of every type and `count` issues of random values, states,
/// participants and parents, some patched after; the issues as `GET` returns them, once the
/// grid has caught up.
pub(crate) async fn random_project(
    rng: &mut StdRng,
    count: usize,
) -> (TestApi, String, Fields, Vec<Value>, String) {
    let (api, p) = TestApi::with_project("filters").await;
    let team = api.team("crew").await;
    let mut fields: Fields = Vec::new();
    for t in ["text", "number", "date", "datetime", "select"] {
        let body = if t == "select" {
            json!({"name": t, "type": t, "options": OPTIONS})
        } else {
            json!({"name": t, "type": t})
        };
        fields.push((api.field(&p, body).await, t));
    }
    let mut ids: Vec<String> = Vec::new();
    for _ in 0..count {
        let mut values = serde_json::Map::new();
        for (id, t) in &fields {
            if rng.gen_bool(0.6) {
                values.insert(id.clone(), field_value(rng, t));
            }
        }
        let title = ["Zeta", "alpha", "Alpha", "mid", "beta", "Émile"][rng.gen_range(0..6)];
        let state = if rng.gen_bool(0.3) { "closed" } else { "open" };
        let mut body = json!({"title": title, "state": state, "fields": values,
            "participants": participants(rng, &team)});
        if ids.len() > 4 && rng.gen_bool(0.3) {
            body["parent_id"] = json!(ids[rng.gen_range(0..4)]);
        }
        ids.push(
            api.issue(&p, body).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for _ in 0..count / 3 {
        let id = &ids[rng.gen_range(0..ids.len())];
        let (f, t) = &fields[rng.gen_range(0..fields.len())];
        let v = if rng.gen_bool(0.3) {
            Value::Null
        } else {
            field_value(rng, t)
        };
        let r = api
            .patch(&format!("/issues/{id}"), json!({"fields": {f: v}}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    api.sync().await;
    let mut issues = Vec::new();
    for id in &ids {
        issues.push(api.get(&format!("/issues/{id}")).await.body);
    }
    (api, p, fields, issues, team)
}

/// A random condition on any column, with a value drawn from the issues' own (so conditions
/// match some issues) and an operator that fits the column.
pub(crate) fn random_condition(
    rng: &mut StdRng,
    fields: &Fields,
    issues: &[Value],
    team: &str,
) -> Value {
    let mut columns: Vec<&str> = vec![
        "title",
        "state",
        "num",
        "created_at",
        "updated_at",
        "parent",
        "participant",
    ];
    columns.extend(fields.iter().map(|(id, _)| id.as_str()));
    let column = columns[rng.gen_range(0..columns.len())];
    let is_text = column == "title" || type_of(fields, column) == Some("text");
    let mut ops = vec!["eq", "ne", "in", "exists", "missing"];
    if !matches!(column, "parent" | "participant") {
        ops.extend(["lt", "lte", "gt", "gte"]);
    }
    if is_text {
        ops.push("prefix");
    }
    let op = ops[rng.gen_range(0..ops.len())];
    if matches!(op, "exists" | "missing") {
        return json!([column, op]);
    }
    let pick = |rng: &mut StdRng| -> Value {
        let issue = &issues[rng.gen_range(0..issues.len())];
        match column {
            "participant" => {
                let (kind, id) = [
                    ("user", "bob"),
                    ("user", "carol"),
                    ("team", team),
                    ("user", "alice"),
                ][rng.gen_range(0..4)];
                let mut v = json!({"kind": kind, "id": id});
                if rng.gen_bool(0.3) {
                    v["role"] = json!(["assignee", "reporter", "watcher"][rng.gen_range(0..3)]);
                }
                v
            }
            "parent" => issues[rng.gen_range(0..5)]["id"].clone(),
            "title" | "state" | "num" | "created_at" | "updated_at" => issue[column].clone(),
            id => match issue["fields"].get(id) {
                Some(v) => v.clone(),
                None => field_value(rng, type_of(fields, id).unwrap()),
            },
        }
    };
    match op {
        "in" => {
            let n = rng.gen_range(1..4);
            json!([column, op, (0..n).map(|_| pick(rng)).collect::<Vec<_>>()])
        }
        "prefix" => {
            let v = pick(rng);
            let s: String = v
                .as_str()
                .unwrap()
                .chars()
                .take(rng.gen_range(1..3))
                .collect();
            json!([column, op, s.to_uppercase()])
        }
        _ => json!([column, op, pick(rng)]),
    }
}

/// Random filters over every operator and type, sorted by random columns in both orders and
/// paged in sizes from 1 up: every page is at most `limit`, and following the cursors gives
/// exactly the issues the reference says, in the grid's order.
#[tokio::test]
async fn random_filters_page_exactly_the_reference_matches() {
    for seed in [11u64, 12] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (api, p, fields, issues, team) = random_project(&mut rng, 40).await;
        let select = fields
            .iter()
            .find(|(_, t)| *t == "select")
            .unwrap()
            .0
            .clone();
        for round in 0..50 {
            let n = rng.gen_range(1..3);
            let mut conditions: Vec<Value> = (0..n)
                .map(|_| random_condition(&mut rng, &fields, &issues, &team))
                .collect();
            let mut sorts: Vec<&str> = vec!["num", "title", "updated_at"];
            sorts.extend(fields.iter().map(|(id, _)| id.as_str()));
            let mut sort = sorts[rng.gen_range(0..sorts.len())];
            if round % 5 == 0 {
                // Sorted by num with an option's equality: read from the option's entries.
                sort = "num";
                conditions.push(json!([select, "eq", OPTIONS[rng.gen_range(0..3)]]));
            }
            let desc = rng.gen_bool(0.5);
            let state = [None, Some("open"), Some("closed")][rng.gen_range(0..3)];
            let limit = [1, 2, 5, 50][rng.gen_range(0..4)];
            let matching: Vec<Value> = issues
                .iter()
                .filter(|i| state.is_none_or(|s| i["state"] == s))
                .filter(|i| conditions.iter().all(|c| holds(i, c, &fields)))
                .cloned()
                .collect();
            let ft = type_of(&fields, sort);
            let expected = reference(&matching, sort, ft, &options(), desc);
            let filter = Value::Array(conditions).to_string();
            let mut query = format!("&sort={sort}&where={}", enc(&filter));
            if desc {
                query.push_str("&order=desc");
            }
            if let Some(s) = state {
                query.push_str(&format!("&state={s}"));
            }
            let got = page_all(&api, &p, &query, limit).await;
            assert_eq!(
                got, expected,
                "seed {seed} round {round}: sort {sort} where {filter}"
            );
        }
    }
}

/// Matches too rare for one page's read: pages end short, even empty, with a cursor, and
/// following it to the end returns every match exactly once.
#[tokio::test]
async fn rare_matches_make_short_pages_that_still_return_every_match() {
    let (api, p) = TestApi::with_project("rare").await;
    let total = 1_050;
    for chunk in (1..=total).collect::<Vec<_>>().chunks(50) {
        let creates = chunk.iter().map(|n| {
            let title = if [5, 1_040].contains(n) {
                "needle"
            } else {
                "hay"
            };
            api.post_issue(&p, json!({"title": title}))
        });
        for r in futures::future::join_all(creates).await {
            assert_eq!(r.status, StatusCode::CREATED);
        }
    }
    api.sync().await;
    let filter = enc(r#"[["title","eq","Needle"]]"#);
    let r = api
        .get(&format!("/projects/{p}/issues?limit=10&where={filter}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let first = r.body["items"].as_array().unwrap().len();
    assert!(first < 2, "a page reads at most its budget of entries");
    assert!(r.body["next_cursor"].is_string());
    let all = page_all(&api, &p, &format!("&where={filter}"), 10).await;
    assert_eq!(all.len(), 2);
    let none = page_all(
        &api,
        &p,
        &format!("&where={}", enc(r#"[["title","eq","gone"]]"#)),
        10,
    )
    .await;
    assert!(none.is_empty());
}

#[tokio::test]
async fn bad_filters_are_400_naming_the_condition() {
    let (api, p) = TestApi::with_project("p").await;
    let n = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let s = api
        .field(
            &p,
            json!({"name": "s", "type": "select", "options": ["a", "b"]}),
        )
        .await;
    let eleven = format!("[{}]", [r#"["title","exists"]"#; 11].join(","));
    for (filter, field) in [
        ("[[\"title\"".to_string(), "where"),
        (eleven, "where"),
        (r#"[["colour","eq","red"]]"#.into(), "where[0]"),
        (
            format!(r#"[["title","exists"],["{n}","prefix","1"]]"#),
            "where[1]",
        ),
        (format!(r#"[["{n}","gt","many"]]"#), "where[0]"),
        (format!(r#"[["{s}","eq","c"]]"#), "where[0]"),
        (r#"[["num","in",[]]]"#.into(), "where[0]"),
        (
            r#"[["participant","gt",{"kind":"user","id":"bob"}]]"#.into(),
            "where[0]",
        ),
    ] {
        let r = api
            .get(&format!("/projects/{p}/issues?where={}", enc(&filter)))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{filter}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert_eq!(r.body["errors"][0]["field"], field, "{filter}: {}", r.text);
    }
}

#[tokio::test]
async fn a_cursor_is_bound_to_the_filter_as_interpreted() {
    let (api, p) = TestApi::with_project("p").await;
    for t in ["a", "A", "a", "b"] {
        api.issue(&p, json!({"title": t})).await;
    }
    api.sync().await;
    let lower = enc(r#"[["title","in",["a","x"]]]"#);
    let r = api
        .get(&format!("/projects/{p}/issues?limit=1&where={lower}"))
        .await;
    let c = r.body["next_cursor"].as_str().unwrap().to_string();
    // Another spelling of the same filter keeps the cursor; another filter does not.
    let upper = enc(r#"[["title","in",["X","A"]]]"#);
    let r = api
        .get(&format!(
            "/projects/{p}/issues?limit=5&where={upper}&cursor={c}"
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    let other = enc(r#"[["title","in",["b"]]]"#);
    let r = api
        .get(&format!("/projects/{p}/issues?where={other}&cursor={c}"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = api.get(&format!("/projects/{p}/issues?cursor={c}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}
