//! The local IAM guard: each function's AWS clients are held to its role's grants in
//! `template.yaml` (its own `Role`'s, or its `Policies` and what SAM adds), as AWS holds them,
//! and the template grants nothing that no route uses.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::{BoxError, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use gridline::domain::ids::ProjectId;
use gridline_local::guard::iam::{self, Effect, wildcard};
use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use serde_json::json;

use crate::support::acme;

/// Counts the attempts the SDK makes (a retry is another attempt).
#[derive(Debug, Clone, Default)]
struct Attempts(Arc<AtomicUsize>);

impl Intercept for Attempts {
    fn name(&self) -> &'static str {
        "Attempts"
    }
    fn read_before_transmit(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_request_outside_the_functions_policy_is_refused_as_aws_does_and_writes_nothing() {
    let api = TestApi::start().await;
    let attempts = Attempts::default();
    let grid = api.stack.function_client("GridFunction");
    let grid = gridline_local::chaos::intercepted(&grid, attempts.clone());
    let before = api.record_count().await;
    let err = grid
        .put_item()
        .table_name(&api.stack.tables.records)
        .item("PK", AttributeValue::S("T#acme#x".into()))
        .item("SK", AttributeValue::S("x".into()))
        .send()
        .await
        .expect_err("the grid function may not write");
    let SdkError::ServiceError(service) = &err else {
        panic!("not a service error: {err:?}");
    };
    assert_eq!(service.raw().status().as_u16(), 400);
    assert_eq!(err.code(), Some("AccessDeniedException"));
    let message = err.message().unwrap_or_default();
    // The table's local name: `records`, or a unique one on a shared external engine.
    let expected_end = format!(
        "is not authorized to perform: dynamodb:PutItem on resource: \
         arn:aws:dynamodb:us-east-1:123456789012:table/{} because no \
         identity-based policy allows the dynamodb:PutItem action",
        api.stack.tables.records
    );
    assert!(
        message
            .starts_with("User: arn:aws:sts::123456789012:assumed-role/gridline-GridFunctionRole-")
            && message.ends_with(&expected_end),
        "{message}"
    );
    assert_eq!(attempts.0.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(api.record_count().await, before, "nothing written");

    // A batch is refused whole when one of its tables is not allowed.
    let err = api
        .stack
        .function_client("InboxFunction")
        .batch_write_item()
        .request_items(
            &api.stack.tables.index,
            vec![
                aws_sdk_dynamodb::types::WriteRequest::builder()
                    .delete_request(
                        aws_sdk_dynamodb::types::DeleteRequest::builder()
                            .key("PK", AttributeValue::S("x".into()))
                            .key("SK", AttributeValue::S("x".into()))
                            .build()
                            .unwrap(),
                    )
                    .build(),
            ],
        )
        .send()
        .await
        .expect_err("the inbox function may not write the index");
    assert_eq!(err.code(), Some("AccessDeniedException"));

    // A function the template does not have may do nothing.
    let err = api
        .stack
        .function_client("NoSuchFunction")
        .list_tables()
        .send()
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Some("AccessDeniedException"));
}

/// Grants nothing in the workload uses, each with why it stays: (function or `*`, action,
/// the end of the resource, reason).
const UNUSED_BUT_KEPT: &[(&str, &str, &str, &str)] = &[
    (
        "*",
        "secretsmanager:GetSecretValue",
        "",
        "the cursor key, read once at Lambda start-up; the local stack is given it",
    ),
    (
        "IndexerFunction",
        "sqs:SendMessage",
        "IndexerFailureQueue",
        "the on-failure send (the poller checks it): this workload sends no batch there; faults.rs does",
    ),
    (
        "IndexerFunction",
        "dynamodb:ListStreams",
        // The records table's stream, whatever the engine names it.
        "",
        "Lambda's stream poller's, one of the four actions AWS documents for it; the local poller lists no streams",
    ),
    (
        "*",
        "logs:CreateLogStream",
        "",
        "Lambda writes the function's log (its own role's grant); the local stack has no CloudWatch Logs",
    ),
    (
        "*",
        "logs:PutLogEvents",
        "",
        "Lambda writes the function's log (its own role's grant); the local stack has no CloudWatch Logs",
    ),
    (
        "*",
        "xray:PutTraceSegments",
        "*",
        "active tracing (its own role's grant); the local stack has no X-Ray",
    ),
    (
        "*",
        "xray:PutTelemetryRecords",
        "*",
        "active tracing (its own role's grant); the local stack has no X-Ray",
    ),
    (
        "*",
        "xray:GetSamplingRules",
        "*",
        "active tracing (its own role's grant); the local stack has no X-Ray",
    ),
    (
        "*",
        "xray:GetSamplingTargets",
        "*",
        "active tracing (its own role's grant); the local stack has no X-Ray",
    ),
    (
        "*",
        "xray:GetSamplingStatisticSummaries",
        "*",
        "active tracing (its own role's grant); the local stack has no X-Ray",
    ),
    (
        "PeopleFunction",
        "dynamodb:BatchGetItem",
        "table/{records}",
        "a team's members' names in a tenant past 250 directory entries (the page's own entries); the workload's tenant is small, and inbox.rs's a_large_directory_still_names_everyone takes that path through the grid",
    ),
    (
        "IndexerFunction",
        "dynamodb:GetItem",
        "table/{records}",
        "re-reads an issue changed while its entries were written (a race), and reindex_issue",
    ),
    (
        "FieldJobFunction",
        "sqs:SendMessage",
        "FieldJobQueue",
        "a job's next step, sent when its time runs low: this workload's jobs finish in one step; field_jobs.rs continues them",
    ),
    (
        "FieldJobFunction",
        "dynamodb:GetItem",
        "table/{records}",
        "re-reads an issue changed while the job indexed it (a race), as the indexer does",
    ),
    (
        "FieldJobFunction",
        "dynamodb:Query",
        // The index table, whatever its name (DynamoDB Local's runs name it per test).
        "",
        "reads every bucket of a wide issue's watermark when all its entries move, as the indexer does",
    ),
    (
        "IndexerFunction",
        "dynamodb:PutItem",
        "table/{records}",
        "the marks among the comments of an issue of a deleted project that its purge missed (one created as the project was deleted), deleted as DELETE /issues does; editing.rs's an_issue_left_by_a_deleted_project_is_deleted_when_indexed takes that path without comments",
    ),
    (
        "PeopleFunction",
        "apigateway:GET",
        "/apikeys",
        "a new workspace's usage-plan key, made in AWS only: the local stack throttles every tenant without a key (usage_keys' tests run the provisioning against an in-memory API)",
    ),
    (
        "PeopleFunction",
        "apigateway:POST",
        "/apikeys",
        "as above: making the key",
    ),
    (
        "PeopleFunction",
        "apigateway:POST",
        "/keys",
        "as above: adding the key to TenantUsagePlan",
    ),
    (
        "FieldJobFunction",
        "sqs:GetQueueAttributes",
        "FieldJobQueue",
        "the SQS event source mapping's, on its own queue; the local worker reads no attributes",
    ),
];

/// Runs every route and the indexer, then compares what each function used with what the
/// template grants it: a grant nothing used fails the test unless listed above.
#[tokio::test]
async fn every_grant_of_the_template_is_used_by_some_route_or_the_indexer() {
    let api = TestApi::start().await;
    workload(&api).await;

    let used = iam::used();
    let mut unused = Vec::new();
    let mut report = String::new();
    for (function, policy) in &api.stack.policies {
        let mine: BTreeSet<_> = used
            .iter()
            .filter(|(p, _, _)| p == function)
            .map(|(_, a, r)| (a.clone(), r.clone()))
            .collect();
        report.push_str(&format!("\n{function}\n  used:\n"));
        for (a, r) in &mine {
            report.push_str(&format!("    {a} {r}\n"));
        }
        report.push_str("  granted:\n");
        for s in policy
            .statements
            .iter()
            .filter(|s| s.effect == Effect::Allow)
        {
            for a in &s.actions {
                for r in &s.resources {
                    let hit = mine.iter().any(|(ua, ur)| {
                        wildcard(&a.to_lowercase(), &ua.to_lowercase()) && wildcard(r, ur)
                    });
                    let kept = UNUSED_BUT_KEPT.iter().find(|(f, ka, kr, _)| {
                        (*f == "*" || f == function)
                            && ka == a
                            && r.ends_with(&kr.replace("{records}", &api.stack.tables.records))
                    });
                    let mark = match (hit, kept) {
                        (true, _) => "used".to_string(),
                        (false, Some((_, _, _, why))) => format!("unused, kept: {why}"),
                        (false, None) => {
                            unused.push(format!("{function}: {a} on {r} ({})", s.origin));
                            "UNUSED".to_string()
                        }
                    };
                    report.push_str(&format!("    {a} {r} [{mark}]\n"));
                }
            }
        }
    }
    println!("{report}");
    assert!(
        unused.is_empty(),
        "grants no route or the indexer used:\n{}",
        unused.join("\n")
    );
}

/// Requests as one user that must succeed, each answering with its body.
struct Caller<'a> {
    api: &'a TestApi,
    user: (&'a str, &'a str),
}

impl Caller<'_> {
    async fn ok(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let r = self.api.call(self.user, method.clone(), path, body).await;
        assert!(
            r.status.is_success(),
            "{method} {path}: {} {}",
            r.status,
            r.text
        );
        r.body
    }

    async fn get(&self, path: &str) -> serde_json::Value {
        self.ok(Method::GET, path, None).await
    }

    async fn delete(&self, path: &str) -> serde_json::Value {
        self.ok(Method::DELETE, path, None).await
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        self.ok(Method::POST, path, Some(body)).await
    }

    async fn patch(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        self.ok(Method::PATCH, path, Some(body)).await
    }

    async fn put(&self, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        self.ok(Method::PUT, path, body).await
    }
}

/// Every route, the indexer over each kind of change, and the grid and inbox reads of what it
/// wrote.
async fn workload(api: &TestApi) {
    let alice = Caller { api, user: ALICE };
    let bob = Caller {
        api,
        user: ("bob", "acme"),
    };
    alice
        .put("/me", Some(json!({"display_name": "Alice"})))
        .await;
    bob.put("/me", Some(json!({"display_name": "Bob"}))).await;
    alice.get("/me").await;
    let team = alice.post("/teams", json!({"name": "core"})).await;
    let team = team["id"].as_str().unwrap().to_string();
    alice.get(&format!("/teams/{team}")).await;
    alice.put(&format!("/teams/{team}/members/bob"), None).await;
    alice.get(&format!("/teams/{team}/members")).await;
    bob.get("/me/teams").await;
    alice.get("/users/bob/teams").await;

    workspace_workload(api).await;

    let p = api.project("guarded").await;
    alice.get("/projects").await;
    alice.get(&format!("/projects/{p}")).await;
    let n = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let t = api
        .field(&p, json!({"name": "notes", "type": "text"}))
        .await;
    let s = api
        .field(
            &p,
            json!({"name": "sev", "type": "select", "options": ["low", "high"]}),
        )
        .await;
    alice.get(&format!("/projects/{p}/fields")).await;

    let mut issues = Vec::new();
    for i in 0..4 {
        // The last too wide for a summary in its entries: pages fetch it (BatchGetItem).
        let notes = if i == 3 { "x".repeat(1000) } else { "x".into() };
        let issue = api
            .issue(
                &p,
                json!({"title": format!("issue {i}"), "description": "d",
                       "fields": {n.clone(): i, t.clone(): notes, s.clone(): "low"}}),
            )
            .await;
        issues.push(issue["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    let first = &issues[0];
    alice.get(&format!("/issues/{first}")).await;
    alice
        .patch(
            &format!("/issues/{first}"),
            json!({"title": "renamed", "fields": {n.clone(): 9}}),
        )
        .await;
    alice
        .put(
            &format!("/issues/{first}/participants/user/bob"),
            Some(json!({"role": "assignee"})),
        )
        .await;
    alice
        .put(
            &format!("/issues/{first}/participants/team/{team}"),
            Some(json!({"role": "watcher"})),
        )
        .await;
    api.sync().await;
    alice
        .patch(
            &format!("/issues/{}", issues[2]),
            json!({"state": "closed"}),
        )
        .await;
    api.sync().await;
    let mine = bob.get("/me/issues").await;
    assert_eq!(mine["items"].as_array().map(Vec::len), Some(1), "{mine}");
    bob.get("/me/teams/issues").await;
    alice.get(&format!("/teams/{team}/issues")).await;
    // Alice reported the wide issue too: its copy is thin, so her page fetches it.
    alice.get("/me/issues").await;
    alice
        .delete(&format!("/issues/{first}/participants/user/bob"))
        .await;
    // Relations: both sides in one transaction; a read with the other issues' titles; the
    // deleted issue's relations cleaned from the others by the indexer (below).
    for other in &issues[1..3] {
        alice
            .put(&format!("/issues/{first}/relations/blocks/{other}"), None)
            .await;
    }
    alice
        .delete(&format!("/issues/{first}/relations/blocks/{}", issues[2]))
        .await;
    let related = alice.get(&format!("/issues/{first}")).await;
    assert_eq!(
        related["relations"].as_array().map(Vec::len),
        Some(1),
        "{related}"
    );
    // Sub-issues: a parent change (a transaction with the tree), the children page, the
    // parent's counts; the deleted issue below detaches its child (the indexer).
    alice
        .patch(
            &format!("/issues/{}", issues[2]),
            json!({"parent_id": issues[1]}),
        )
        .await;
    api.sync().await;
    alice.get(&format!("/issues/{}/children", issues[1])).await;
    alice.get(&format!("/issues/{}/children", issues[3])).await;
    let parent = alice.get(&format!("/issues/{}", issues[1])).await;
    assert_eq!(parent["sub_issues"]["closed"], 1, "{parent}");
    // Comments: posts (a transaction with the issue's count), a page with the names, an
    // edit (conditioned on the issue), a delete; the deleted issue's comments go with it
    // (the indexer, below).
    for i in 0..2 {
        let said = alice
            .post(
                &format!("/issues/{}/comments", issues[1]),
                json!({"body": format!("comment {i}")}),
            )
            .await;
        let id = said["id"].as_str().unwrap_or_default().to_string();
        if i == 0 {
            alice
                .patch(&format!("/comments/{id}"), json!({"body": "edited"}))
                .await;
        } else {
            alice.delete(&format!("/comments/{id}")).await;
        }
    }
    alice
        .post(
            &format!("/issues/{first}/comments"),
            json!({"body": "stays"}),
        )
        .await;
    let page = alice
        .get(&format!("/issues/{}/comments?order=desc", issues[1]))
        .await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");

    for q in [
        "limit=2".to_string(),
        format!("sort={n}&order=desc&limit=2"),
        "sort=title&prefix=iss".into(),
        "state=open".into(),
        format!("sort={t}&prefix=x"),
        // A filter: reads sized by its matches, on the same partitions.
        format!(
            "limit=1&where={}",
            crate::filters::enc(&format!(r#"[["{n}","exists"],["participant","exists"]]"#))
        ),
    ] {
        let page = alice.get(&format!("/projects/{p}/issues?{q}")).await;
        if let Some(c) = page["next_cursor"].as_str() {
            alice
                .get(&format!("/projects/{p}/issues?{q}&cursor={c}"))
                .await;
        }
    }
    // Saved views: a definition and its counts (the index's count items), its list.
    let view = alice
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "mine", "where": [["state", "eq", "open"]], "group_by": "state"}),
        )
        .await;
    let view = view["id"].as_str().expect("a view").to_string();
    api.sync().await;
    alice.get(&format!("/projects/{p}/views")).await;
    alice.get(&format!("/views/{view}")).await;
    alice.get(&format!("/views/{view}/issues?group=open")).await;
    alice
        .patch(&format!("/views/{view}"), json!({"order": "desc"}))
        .await;
    api.sync().await;
    alice.delete(&format!("/views/{view}")).await;
    // An options edit: its job rewrites the issues' labels, deletes the view that named the
    // removed label and reshapes the one that named the renamed label.
    for (name, label) in [("keeps", "high"), ("loses", "low")] {
        alice
            .post(
                &format!("/projects/{p}/views"),
                json!({"name": name, "where": [[&s, "eq", label]]}),
            )
            .await;
    }
    api.sync().await;
    alice
        .patch(
            &format!("/projects/{p}/fields/{s}"),
            json!({"name": "severity", "options": [{"label": "top", "was": "high"}, "mid"]}),
        )
        .await;
    api.sync().await;
    // History: a page from the index (the head and its entries), a later page beside the
    // head's read, and an issue the index does not know yet (read from the records).
    api.sync().await;
    let page = alice
        .get(&format!("/issues/{}/history?limit=1", issues[1]))
        .await;
    let c = page["next_cursor"].as_str().expect("more than one version");
    alice
        .get(&format!("/issues/{}/history?limit=1&cursor={c}", issues[1]))
        .await;
    let fresh = alice
        .post(&format!("/projects/{p}/issues"), json!({"title": "new"}))
        .await;
    alice
        .get(&format!(
            "/issues/{}/history",
            fresh["id"].as_str().unwrap()
        ))
        .await;
    alice.delete(&format!("/projects/{p}/fields/{t}")).await;
    alice.delete(&format!("/issues/{}", issues[1])).await;
    alice.delete(&format!("/teams/{team}/members/bob")).await;
    api.sync().await;
    alice.get(&format!("/projects/{p}/issues?sort={n}")).await;
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;

    // A project with enough fields that watermarks keep them in buckets: closing an issue
    // moves every entry, so the indexer reads all its buckets at once (a Query).
    let (wide, issue) = crate::support::wide_issue(api, "wide").await;
    api.sync().await;
    let id = issue["id"].as_str().unwrap();
    alice
        .patch(&format!("/issues/{id}"), json!({"state": "closed"}))
        .await;
    api.sync().await;
    let both = [&p, &wide].map(|p| ProjectId::parse(p).unwrap());
    api.assert_index_matches_records(&acme(), &both).await;
    // A project deleted: its purge job deletes its issues, then its fields and the rest.
    alice.delete(&format!("/projects/{wide}")).await;
    // A team deleted: the indexer takes it off its members' lists and its issues.
    let gone = alice.post("/teams", json!({"name": "gone"})).await;
    let gone = gone["id"].as_str().unwrap().to_string();
    alice.put(&format!("/teams/{gone}/members/bob"), None).await;
    alice.delete(&format!("/teams/{gone}")).await;
    api.sync().await;
    assert_eq!(api.dead_letters().await, 0);
}

/// Every workspace route, and the token trigger minting a token for the chosen workspace.
async fn workspace_workload(api: &TestApi) {
    let ok = |r: gridline_local::testing::Reply, what: &str| {
        assert!(r.status.is_success(), "{what}: {} {}", r.status, r.text);
        r.body
    };
    let ana = api.signed_in("ana", "ana@example.com").await;
    let ws = ok(
        api.with_token(
            &ana,
            Method::POST,
            "/workspaces",
            Some(json!({"name": "W"})),
        )
        .await,
        "create",
    )["id"]
        .clone();
    ok(
        api.with_token(&ana, Method::GET, "/me/workspaces", None)
            .await,
        "mine",
    );
    ok(
        api.with_token(&ana, Method::PUT, "/me/workspace", Some(json!({"id": ws})))
            .await,
        "choose",
    );
    let ana = api.signed_in("ana", "ana@example.com").await;
    ok(
        api.with_token(&ana, Method::GET, "/workspace", None).await,
        "get",
    );
    let body = json!({"email": "ben@example.com", "role": "member"});
    let inv = ok(
        api.with_token(&ana, Method::POST, "/workspace/invitations", Some(body))
            .await,
        "invite",
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(
        api.with_token(&ana, Method::GET, "/workspace/invitations", None)
            .await,
        "invitations",
    );
    let ben = api.signed_in("ben", "ben@example.com").await;
    ok(
        api.with_token(&ben, Method::GET, "/me/invitations", None)
            .await,
        "my invitations",
    );
    ok(
        api.with_token(
            &ben,
            Method::POST,
            &format!("/invitations/{inv}/accept"),
            None,
        )
        .await,
        "accept",
    );
    let body = json!({"email": "cy@example.com", "role": "viewer"});
    let inv = ok(
        api.with_token(&ana, Method::POST, "/workspace/invitations", Some(body))
            .await,
        "invite",
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let revoke = format!("/workspace/invitations/{inv}");
    ok(
        api.with_token(&ana, Method::DELETE, &revoke, None).await,
        "revoke",
    );
    let role = Some(json!({"role": "admin"}));
    ok(
        api.with_token(&ana, Method::PUT, "/workspace/members/ben", role)
            .await,
        "role",
    );
    ok(
        api.with_token(&ana, Method::GET, "/workspace/members", None)
            .await,
        "members",
    );
    ok(
        api.with_token(&ana, Method::DELETE, "/workspace/members/ben", None)
            .await,
        "remove",
    );
}
