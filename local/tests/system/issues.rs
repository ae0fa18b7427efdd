//! Issues through the real router against the embedded engine.

use gridline_local::testing::{Reply, TestApi};
use http::{Method, StatusCode};
use serde_json::{Value, json};

async fn project_with_fields(api: &TestApi) -> (String, Value) {
    let p = api.project("p").await;
    let mut ids = serde_json::Map::new();
    for t in ["text", "number", "date", "datetime"] {
        ids.insert(
            t.into(),
            api.field(&p, json!({"name": t, "type": t})).await.into(),
        );
    }
    let sel = api
        .field(
            &p,
            json!({"name": "sel", "type": "select", "options": ["low", "high"]}),
        )
        .await;
    ids.insert("select".into(), sel.into());
    (p, Value::Object(ids))
}

/// Creates an issue in project `p` as Alice from a body sent verbatim (exact digits).
async fn create_raw(api: &TestApi, p: &str, body: &str) -> Reply {
    let path = format!("/projects/{p}/issues");
    api.send_as_alice(Method::POST, &path, Some(body), &[])
        .await
}

/// Reads issue `id` as Alice; its `text` is the body as sent.
async fn read_raw(api: &TestApi, id: &str) -> Reply {
    api.send_as_alice(Method::GET, &format!("/issues/{id}"), None, &[])
        .await
}

#[tokio::test]
async fn an_issue_is_created_with_the_next_number_and_the_caller_as_reporter() {
    let (api, p) = TestApi::with_project("p").await;
    let first = api.issue(&p, json!({"title": "one"})).await;
    let second = api
        .issue(&p, json!({"title": "two", "state": "closed"}))
        .await;
    assert_eq!(first["num"], 1);
    assert_eq!(second["num"], 2);
    assert_eq!(first["state"], "open");
    assert_eq!(second["state"], "closed");
    assert_eq!(first["version"], 1);
    assert_eq!(first["description"], Value::Null);
    assert_eq!(
        first["participants"],
        json!([{"kind": "user", "id": "alice", "role": "reporter"}])
    );
    assert_eq!(first["created_at"], first["updated_at"]);
    // Another project counts from 1 again.
    let q = api.project("q").await;
    assert_eq!(api.issue(&q, json!({"title": "x"})).await["num"], 1);
}

#[tokio::test]
async fn field_values_of_every_type_are_stored_exactly() {
    let api = TestApi::start().await;
    let (p, f) = project_with_fields(&api).await;
    let body = format!(
        r#"{{"title":"t","fields":{{"{}":"Hello","{}":123456789012345678901234567890.12345678,"{}":"2024-02-29","{}":"2026-11-21T22:42:03.5+02:00","{}":"high"}}}}"#,
        f["text"].as_str().unwrap(),
        f["number"].as_str().unwrap(),
        f["date"].as_str().unwrap(),
        f["datetime"].as_str().unwrap(),
        f["select"].as_str().unwrap()
    );
    let r = create_raw(&api, &p, &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();

    // Read the raw text to see the number's digits, not a float's.
    let r = read_raw(&api, &id).await;
    assert!(
        r.text.contains(":123456789012345678901234567890.12345678"),
        "{}",
        r.text
    );
    assert_eq!(
        r.body["fields"][f["datetime"].as_str().unwrap()],
        "2026-11-21T20:42:03.500Z"
    );
    assert_eq!(r.body["fields"][f["date"].as_str().unwrap()], "2024-02-29");
    assert_eq!(r.body["fields"][f["select"].as_str().unwrap()], "high");
    assert_eq!(r.body["fields"][f["text"].as_str().unwrap()], "Hello");
}

#[tokio::test]
async fn numbers_across_the_whole_dynamodb_range_round_trip_with_their_digits() {
    let (api, p) = TestApi::with_project("p").await;
    let n = api.field(&p, json!({"name": "n", "type": "number"})).await;
    for (input, expected) in [
        (
            "9.9999999999999999999999999999999999999E+125",
            "9.9999999999999999999999999999999999999E+125",
        ),
        (
            "-9.9999999999999999999999999999999999999E+125",
            "-9.9999999999999999999999999999999999999E+125",
        ),
        ("1E-130", "1E-130"),
        ("-1E-130", "-1E-130"),
        ("0", "0"),
        ("\"-12.50\"", "-12.5"),
        ("\"1E+100\"", "1E+100"),
        (
            "1.0000000000000000000000000000000000001",
            "1.0000000000000000000000000000000000001",
        ),
        (
            "12345678901234567890123456789012345678",
            "12345678901234567890123456789012345678",
        ),
    ] {
        let body = format!(r#"{{"title":"t","fields":{{"{n}":{input}}}}}"#);
        let r = create_raw(&api, &p, &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{input}: {:?}", r.body);
        let id = r.body["id"].as_str().unwrap();
        let r = read_raw(&api, id).await;
        assert!(
            r.text.contains(&format!("\"{n}\":{expected}")),
            "{input} -> {}",
            r.text
        );
    }
}

#[tokio::test]
async fn get_returns_an_etag_of_the_version() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api
        .issue(&p, json!({"title": "t", "description": "long text"}))
        .await;
    let r = api
        .get(&format!("/issues/{}", issue["id"].as_str().unwrap()))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("etag"), Some("\"1\""));
    assert_eq!(r.body["description"], "long text");
}

#[tokio::test]
async fn patch_is_a_json_merge_patch() {
    let api = TestApi::start().await;
    let (p, f) = project_with_fields(&api).await;
    let (text, number) = (f["text"].as_str().unwrap(), f["number"].as_str().unwrap());
    let issue = api
        .issue(
            &p,
            json!({"title": "t", "description": "d", "fields": {text: "a", number: 5}}),
        )
        .await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());

    let r = api
        .patch(&path, json!({"title": "new", "fields": {text: null}}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["title"], "new");
    assert_eq!(r.body["description"], "d");
    assert_eq!(r.body["fields"], json!({number: 5}));
    assert_eq!(r.body["version"], 2);
    assert_eq!(r.header("etag"), Some("\"2\""));
    assert!(r.body["updated_at"].as_str() >= issue["updated_at"].as_str());

    let r = api
        .patch(&path, json!({"description": null, "state": "closed"}))
        .await;
    assert_eq!(r.body["description"], Value::Null);
    assert_eq!(r.body["state"], "closed");
    assert_eq!(r.body["version"], 3);

    let r = api.patch(&path, json!({"fields": null})).await;
    assert_eq!(r.body["fields"], json!({}));

    // An empty patch changes nothing, not even the version.
    let r = api.patch(&path, json!({})).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["version"], 4);
}

#[tokio::test]
async fn a_stale_if_match_is_412_and_changes_nothing() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());

    let r = api
        .send_as_alice(
            Method::PATCH,
            &path,
            Some(r#"{"title":"a"}"#),
            &[("if-match", "\"1\"")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let before = api.records_snapshot().await;
    for stale in ["\"1\"", "1", "W/\"1\"", "garbage"] {
        let r = api
            .send_as_alice(
                Method::PATCH,
                &path,
                Some(r#"{"title":"b"}"#),
                &[("if-match", stale)],
            )
            .await;
        assert_eq!(r.status, StatusCode::PRECONDITION_FAILED, "{stale}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
    }
    assert_eq!(api.records_snapshot().await, before);
    // Bare current version works too.
    let r = api
        .send_as_alice(
            Method::PATCH,
            &path,
            Some(r#"{"title":"c"}"#),
            &[("if-match", "2")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["title"], "c");
}

#[tokio::test]
async fn deleting_an_issue_removes_it_and_its_description() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api
        .issue(&p, json!({"title": "t", "description": "d"}))
        .await;
    let before = api.record_count().await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());
    assert_eq!(api.delete(&path).await.status, StatusCode::NO_CONTENT);
    assert_eq!(api.record_count().await, before - 2);
    assert_eq!(api.get(&path).await.status, StatusCode::NOT_FOUND);
    assert_eq!(api.delete(&path).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        api.patch(&path, json!({"title": "x"})).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_description_lives_in_its_own_item() {
    let (api, p) = TestApi::with_project("p").await;
    let before = api.record_count().await;
    api.issue(&p, json!({"title": "no description"})).await;
    assert_eq!(api.record_count().await, before + 1);
    api.issue(
        &p,
        json!({"title": "with", "description": "x".repeat(100_000)}),
    )
    .await;
    assert_eq!(api.record_count().await, before + 3);
}

#[tokio::test]
async fn a_deleted_fields_values_disappear_from_issues_at_once() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let g = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let issue = api
        .issue(&p, json!({"title": "t", "fields": {&f: 1, &g: "kept"}}))
        .await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());
    api.delete(&format!("/projects/{p}/fields/{f}")).await;
    let r = api.get(&path).await;
    assert_eq!(r.body["fields"], json!({&g: "kept"}));
    // And it can no longer be set.
    let r = api.patch(&path, json!({"fields": {&f: 2}})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn participants_in_the_create_body_are_kept_and_the_creator_can_choose_a_role() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api
        .issue(
            &p,
            json!({"title": "t", "participants": [
                {"kind": "user", "id": "alice", "role": "assignee"},
                {"kind": "user", "id": "bob", "role": "watcher"}
            ]}),
        )
        .await;
    assert_eq!(
        issue["participants"],
        json!([
            {"kind": "user", "id": "alice", "role": "assignee"},
            {"kind": "user", "id": "bob", "role": "watcher"}
        ])
    );
}

/// Records the operation (`x-amz-target`) of every request a client sends.
#[derive(Debug, Clone, Default)]
struct Operations(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl aws_sdk_dynamodb::config::Intercept for Operations {
    fn name(&self) -> &'static str {
        "Operations"
    }

    fn read_before_transmit(
        &self,
        ctx: &aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let op = gridline_local::chaos::target(ctx.request());
        let op = op.rsplit('.').next().unwrap_or_default().to_string();
        self.0.lock().unwrap().push(op);
        Ok(())
    }
}

#[tokio::test]
async fn a_patch_writes_with_one_update_item_and_a_description_change_with_a_transaction() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let issue = api
        .issue(&p, json!({"title": "t", "description": "d"}))
        .await;
    let id = issue["id"].as_str().unwrap();
    let ops = Operations::default();
    let router = api.stack.router_with(|function| {
        gridline_local::chaos::intercepted(&api.stack.function_client(function), ops.clone())
    });
    let token = TestApi::token("alice", "acme");
    let patch = |body: Value| {
        let router = router.clone();
        let (token, ops) = (token.clone(), ops.clone());
        async move {
            ops.0.lock().unwrap().clear();
            let r = gridline_local::testing::send(
                router,
                Method::PATCH,
                &format!("/issues/{id}"),
                Some(&token),
                Some(&body.to_string()),
                &[],
            )
            .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            let writes: Vec<String> = ops
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|op| !op.starts_with("Get") && *op != "Query" && !op.starts_with("Batch"))
                .cloned()
                .collect();
            writes
        }
    };
    assert_eq!(
        patch(json!({"fields": {&f: 3}, "title": "u"})).await,
        ["UpdateItem"],
        "half the capacity of a one-item transaction"
    );
    assert_eq!(
        patch(json!({"description": "new"})).await,
        ["TransactWriteItems"],
        "the summary and the description change together"
    );
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(
        (r.body["title"].as_str(), r.body["description"].as_str()),
        (Some("u"), Some("new"))
    );
    assert_eq!(r.body["fields"][&f], json!(3));
}

/// Answers the records table's first `conflicts` UpdateItems with DynamoDB's
/// `TransactionConflictException` (a transaction in progress on the item), writing nothing.
#[derive(Debug, Clone)]
struct Conflicting(std::sync::Arc<std::sync::atomic::AtomicUsize>);

#[derive(Debug, Clone)]
struct Conflicted(bool);

impl aws_smithy_types::config_bag::Storable for Conflicted {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl aws_sdk_dynamodb::config::Intercept for Conflicting {
    fn name(&self) -> &'static str {
        "Conflicting"
    }

    fn modify_before_transmit(
        &self,
        ctx: &mut aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        cfg: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let update = gridline_local::chaos::target(ctx.request()).ends_with(".UpdateItem");
        let conflict = update
            && self
                .0
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |left| left.checked_sub(1),
                )
                .is_ok();
        cfg.interceptor_state().store_put(Conflicted(conflict));
        if conflict {
            gridline_local::chaos::void_request(ctx.request_mut());
        }
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        ctx: &mut aws_sdk_dynamodb::config::interceptors::BeforeDeserializationInterceptorContextMut<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        cfg: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if !cfg.load::<Conflicted>().is_some_and(|c| c.0) {
            return Ok(());
        }
        gridline_local::chaos::answer_error(
            ctx.response_mut(),
            "TransactionConflictException",
            "Transaction is ongoing for the item",
        )
    }
}

#[tokio::test]
async fn a_patch_that_meets_a_transaction_on_its_issue_is_retried_and_applied_once() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let conflicts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(2));
    let router = api.stack.router_with(|function| {
        gridline_local::chaos::intercepted(
            &api.stack.function_client(function),
            Conflicting(conflicts.clone()),
        )
    });
    let r = gridline_local::testing::send(
        router,
        Method::PATCH,
        &format!("/issues/{id}"),
        Some(&TestApi::token("alice", "acme")),
        Some(&json!({"title": "u"}).to_string()),
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(conflicts.load(std::sync::atomic::Ordering::SeqCst), 0);
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.body["title"], "u");
    let before = issue["version"]
        .as_u64()
        .expect("an issue shows its version");
    assert_eq!(r.body["version"].as_u64(), Some(before + 1), "applied once");
}
