//! Test harness: a fresh in-memory engine and tables per test, requests through the real
//! router with real tokens.

use axum::Router;
use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{Data, Stack, StackOptions, TableNames};

/// An item as the SDK returns it.
type Item = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

pub const TEST_JWT_SECRET: &[u8] = b"test-jwt-secret";
pub const TEST_CURSOR_KEY: &[u8] = b"test-cursor-key-0123456789";

/// Set to an endpoint (AWS's DynamoDB Local, `make test-ddblocal`) to run the suite against
/// that engine instead of a fresh embedded one per test.
pub const TEST_ENDPOINT_VAR: &str = "GRIDLINE_TEST_DYNAMODB_ENDPOINT";

/// Where a test's tables live: a fresh in-memory engine, or fresh tables on the shared
/// external engine (its `-sharedDb` holds every test's tables, so names are unique).
fn test_data() -> (Data, TableNames) {
    match std::env::var(TEST_ENDPOINT_VAR)
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(endpoint) => {
            let run = ulid::Ulid::new().to_string().to_lowercase();
            (
                Data::External(endpoint),
                TableNames {
                    records: format!("records-{run}"),
                    index: format!("index-{run}"),
                },
            )
        }
        None => (
            Data::Memory,
            TableNames {
                records: "records".into(),
                index: "index".into(),
            },
        ),
    }
}

/// The origin tests call from as a browser would.
pub const TEST_ORIGIN: &str = "https://app.example.com";

fn test_cors() -> gridline::http::cors::Cors {
    gridline::http::cors::Cors::parse(TEST_ORIGIN)
}

/// A response, with the body parsed as JSON when it is JSON.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    /// The body as sent, for checks `Value` cannot make (a number's exact digits).
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A stack for tests and benchmarks: the test secrets, tables `records` and `index`, the
/// engine on any free port, data where `data` says.
/// No per-tenant rate limit: tests of other things send hundreds of requests a second as one
/// tenant ([`TestApi::with_tenant_limits`] tests the limit).
pub async fn test_stack(data: Data) -> anyhow::Result<Stack> {
    let mut stack = Stack::start(StackOptions {
        data,
        engine_port: 0,
        tables: TableNames {
            records: "records".into(),
            index: "index".into(),
        },
        jwt_secret: TEST_JWT_SECRET.to_vec(),
        cursor_key: TEST_CURSOR_KEY.to_vec(),
        cors: test_cors(),
    })
    .await?;
    stack.usage_plan = None;
    Ok(stack)
}

pub struct TestApi {
    pub stack: Stack,
    router: Router,
    poller: tokio::sync::Mutex<crate::stream::Poller>,
    /// The field-job queue's event source mapping.
    pub jobs: crate::jobs::Worker,
}

impl TestApi {
    /// A fresh engine with fresh tables, without a per-tenant rate limit.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// [`TestApi::start`] with API Gateway's usage plan: `limits` for each tenant.
    pub async fn with_tenant_limits(limits: crate::usage_plan::TenantLimits) -> Self {
        Self::start_with(Some(limits)).await
    }

    /// A fresh embedded engine, whatever engine the suite runs against otherwise: for a test
    /// of AWS's current limits where DynamoDB Local is older than them.
    pub async fn embedded() -> Self {
        Self::start_on((
            Data::Memory,
            TableNames {
                records: "records".into(),
                index: "index".into(),
            },
        ))
        .await
    }

    async fn start_with(limits: Option<crate::usage_plan::TenantLimits>) -> Self {
        let mut api = Self::start_on(test_data()).await;
        api.stack.usage_plan =
            limits.map(|l| crate::usage_plan::UsagePlan::new(l, TEST_JWT_SECRET));
        api.router = api.stack.router();
        api
    }

    async fn start_on((data, tables): (Data, TableNames)) -> Self {
        let stack = Stack::start(StackOptions {
            data,
            engine_port: 0,
            tables,
            jwt_secret: TEST_JWT_SECRET.to_vec(),
            cursor_key: TEST_CURSOR_KEY.to_vec(),
            cors: test_cors(),
        })
        .await
        .expect("local stack starts");
        let router = stack.router();
        let poller = tokio::sync::Mutex::new(stack.poller(stack.indexer()).await);
        let jobs = stack
            .job_worker()
            .expect("the template has the field-job function");
        Self {
            stack,
            router,
            poller,
            jobs,
        }
    }

    /// A stack on the SQLite file `path` (the embedded engine, whatever engine the suite
    /// runs against otherwise), its poller keeping its checkpoint beside the file as
    /// `make dev`'s does.
    pub async fn on_file(path: &std::path::Path) -> Self {
        let stack = test_stack(Data::File(path.to_path_buf()))
            .await
            .expect("the stack starts on its data file");
        let router = stack.router();
        let mut poller = stack.poller(stack.indexer()).await;
        poller.checkpoint_file = Some(crate::stream::checkpoint_path(path));
        let jobs = stack
            .job_worker()
            .expect("the template has the field-job function");
        Self {
            stack,
            router,
            poller: tokio::sync::Mutex::new(poller),
            jobs,
        }
    }

    /// Stops the stack and waits until its engine has closed its data file.
    pub async fn stop(self) {
        drop(self.jobs);
        drop(self.poller);
        drop(self.router);
        self.stack.stop().await.expect("the engine stops");
    }

    /// One pass of the poller: how many records it delivered.
    pub async fn poll_once(&self) -> usize {
        self.poller
            .lock()
            .await
            .poll_once()
            .await
            .expect("the stream is read")
    }

    /// A fresh engine with fresh tables and one project of Alice's, named `name`: the stack
    /// and the project's id.
    pub async fn with_project(name: &str) -> (Self, String) {
        let api = Self::start().await;
        let project = api.project(name).await;
        (api, project)
    }

    /// Runs the indexer over everything the stream holds, as the event source mapping would,
    /// and the field jobs that starts, until neither has anything left.
    pub async fn sync(&self) {
        loop {
            self.sync_stream().await;
            let invocations = self.jobs.drain().await.expect("the field-job queue drains");
            if invocations == 0 {
                return;
            }
        }
    }

    /// Runs the indexer over everything the stream holds, leaving field jobs queued.
    pub async fn sync_stream(&self) {
        self.poller
            .lock()
            .await
            .drain()
            .await
            .expect("the stream drains");
    }

    /// The records the local on-failure queue received.
    pub async fn dead_letters(&self) -> usize {
        self.poller.lock().await.dead_letters.len()
    }

    pub fn router(&self) -> Router {
        self.router.clone()
    }

    pub fn token(user: &str, tenant: &str) -> String {
        gridline::auth::mint_hs256(user, tenant, TEST_JWT_SECRET, 3600)
    }

    /// A token from the local stack's `POST /local/token`, as Cognito would issue it to `user`
    /// with a verified `email`: the tenant is the one the token trigger sets (none before the
    /// user chose a workspace).
    pub async fn signed_in(&self, user: &str, email: &str) -> String {
        let body = serde_json::json!({"user": user, "email": email, "email_verified": true});
        let reply = self
            .send(
                Method::POST,
                crate::local_token::PATH,
                None,
                Some(&body.to_string()),
                &[],
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        reply.body["token"].as_str().expect("token").to_string()
    }

    /// Sends a request with `token` and a JSON body.
    pub async fn with_token(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let body = body.map(|b| b.to_string());
        self.send(method, path, Some(token), body.as_deref(), &[])
            .await
    }

    /// Sends a request; `body` is sent verbatim when given.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        send(self.router(), method, path, token, body, headers).await
    }

    /// Sends a request as `user` of `tenant` with a JSON body.
    pub async fn call(
        &self,
        user: (&str, &str),
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let token = Self::token(user.0, user.1);
        let body = body.map(|b| b.to_string());
        self.send(method, path, Some(&token), body.as_deref(), &[])
            .await
    }

    /// Every item of `table`, page after page.
    pub async fn scan_all(&self, table: &str) -> Vec<Item> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .stack
                .client
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            items.extend(page.items().iter().cloned());
            start = page.last_evaluated_key;
            if start.is_none() {
                return items;
            }
        }
    }

    /// Writes `item` straight into the records table, as an admin would (no Gridline check).
    pub async fn put_record(&self, item: Item) -> Result<(), aws_sdk_dynamodb::Error> {
        self.put_into(&self.stack.tables.records, item).await
    }

    /// Writes `item` straight into the index table (a test staging drift or an old layout).
    pub async fn put_index(&self, item: Item) -> Result<(), aws_sdk_dynamodb::Error> {
        self.put_into(&self.stack.tables.index, item).await
    }

    async fn put_into(&self, table: &str, item: Item) -> Result<(), aws_sdk_dynamodb::Error> {
        self.stack
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .map(|_| ())
            .map_err(aws_sdk_dynamodb::Error::from)
    }

    /// Creates `n` teams as [`ALICE`], named `t0`, `t1`, …, and returns their ids.
    pub async fn teams(&self, n: usize) -> Vec<String> {
        let mut teams = Vec::new();
        for i in 0..n {
            teams.push(self.team(&format!("t{i}")).await);
        }
        teams
    }

    /// The records table as the engine describes it.
    pub async fn records_table(&self) -> aws_sdk_dynamodb::types::TableDescription {
        self.stack
            .client
            .describe_table()
            .table_name(&self.stack.tables.records)
            .send()
            .await
            .expect("describe the records table")
            .table
            .expect("the records table")
    }

    /// Counts the items in the records table: tests use it to prove a rejected request wrote nothing.
    pub async fn record_count(&self) -> usize {
        self.scan_all(&self.stack.tables.records).await.len()
    }

    /// A snapshot of every record, for comparing before and after a rejected request.
    pub async fn records_snapshot(&self) -> Vec<String> {
        let mut items: Vec<String> = self
            .scan_all(&self.stack.tables.records)
            .await
            .into_iter()
            // Through JSON, whose maps are ordered, so nested maps compare reliably.
            .map(|i| {
                serde_dynamo::from_item::<_, Value>(i)
                    .expect("an item maps to JSON")
                    .to_string()
            })
            .collect();
        items.sort();
        items
    }
}

pub async fn send(
    router: Router,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(
            body.map(|b| Body::from(b.to_string()))
                .unwrap_or_else(Body::empty),
        )
        .expect("request");
    let response = router.oneshot(req).await.expect("router is infallible");
    into_reply(response).await
}

pub async fn into_reply(response: http::Response<Body>) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(text.clone()))
    };
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// The default caller of the helpers below.
pub const ALICE: (&str, &str) = ("alice", "acme");

/// The body of a `201 Created`, which the request must have got.
fn created(r: Reply) -> Value {
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    r.body
}

/// The `id` of a created resource.
fn created_id(r: Reply) -> String {
    created(r)["id"].as_str().expect("id").to_string()
}

/// Requests as [`ALICE`], one method each, and the resources tests create as her.
impl TestApi {
    /// Sends a request as [`ALICE`]; `body` is sent verbatim when given.
    pub async fn send_as_alice(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let token = Self::token(ALICE.0, ALICE.1);
        self.send(method, path, Some(&token), body, headers).await
    }

    /// `GET path` as [`ALICE`].
    pub async fn get(&self, path: &str) -> Reply {
        self.call(ALICE, Method::GET, path, None).await
    }

    /// `DELETE path` as [`ALICE`].
    pub async fn delete(&self, path: &str) -> Reply {
        self.call(ALICE, Method::DELETE, path, None).await
    }

    /// `POST path` with a JSON body as [`ALICE`].
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.call(ALICE, Method::POST, path, Some(body)).await
    }

    /// `PATCH path` with a JSON body as [`ALICE`].
    pub async fn patch(&self, path: &str, body: Value) -> Reply {
        self.call(ALICE, Method::PATCH, path, Some(body)).await
    }

    /// `PUT path`, with a JSON body when given, as [`ALICE`].
    pub async fn put(&self, path: &str, body: Option<Value>) -> Reply {
        self.call(ALICE, Method::PUT, path, body).await
    }

    /// Creates a project as [`ALICE`] and returns its id.
    pub async fn project(&self, name: &str) -> String {
        created_id(self.post("/projects", json!({ "name": name })).await)
    }

    /// Creates a team as [`ALICE`] and returns its id.
    pub async fn team(&self, name: &str) -> String {
        created_id(self.post("/teams", json!({ "name": name })).await)
    }

    /// Adds `user` to `team` as [`ALICE`]; the status it got.
    pub async fn join(&self, team: &str, user: &str) -> StatusCode {
        self.put(&format!("/teams/{team}/members/{user}"), None)
            .await
            .status
    }

    /// `POST /projects/{project_id}/fields` as [`ALICE`]: a field create, whatever it answers.
    pub async fn post_field(&self, project_id: &str, body: Value) -> Reply {
        self.post(&format!("/projects/{project_id}/fields"), body)
            .await
    }

    /// Creates a field as [`ALICE`] and returns its id.
    pub async fn field(&self, project_id: &str, body: Value) -> String {
        created_id(self.post_field(project_id, body).await)
    }

    /// `POST /projects/{project_id}/issues` as [`ALICE`]: an issue create, whatever it answers.
    pub async fn post_issue(&self, project_id: &str, body: Value) -> Reply {
        self.post(&format!("/projects/{project_id}/issues"), body)
            .await
    }

    /// Creates an issue as [`ALICE`] and returns it.
    pub async fn issue(&self, project_id: &str, body: Value) -> Value {
        created(self.post_issue(project_id, body).await)
    }
}

impl TestApi {
    /// Every entry of the index table (watermarks and job checkpoints aside), as the indexer
    /// wrote it.
    pub async fn index_entries(&self) -> std::collections::BTreeSet<gridline::model::Entry> {
        let mut out = std::collections::BTreeSet::new();
        for item in self.scan_all(&self.stack.tables.index).await {
            let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
            let pk = s("PK").unwrap_or_default();
            // Watermarks, field jobs' checkpoints and views' counts are the indexer's
            // bookkeeping, not entries.
            if pk.contains("#W#")
                || gridline::keys::index::is_jobs_pk(&pk)
                || gridline::keys::index::is_view_counts_pk(&pk)
            {
                continue;
            }
            out.insert(gridline::model::Entry {
                pk,
                sk: s("SK").unwrap_or_default(),
                issue_id: s("issue_id").unwrap_or_default(),
                role: s("role"),
                summary: s(gridline::model::summary::ATTR),
            });
        }
        out
    }

    /// The entries a fresh computation from the records gives for these projects.
    pub async fn expected_entries(
        &self,
        tenant: &gridline::domain::ids::TenantId,
        projects: &[gridline::domain::ids::ProjectId],
    ) -> std::collections::BTreeSet<gridline::model::Entry> {
        let store = &self.stack.state.store;
        let mut expected = std::collections::BTreeSet::new();
        for p in projects {
            let (project, defs, views) = store
                .records()
                .project_definitions(tenant, p)
                .await
                .expect("read")
                .expect("project");
            let views = gridline::store::records::views::indexed_views(&views, &defs);
            let (shards, hot) = (project.layouts(), project.hot());
            let mut start = None;
            loop {
                let page = store
                    .records()
                    .issues_of_project(tenant, p, start.as_ref(), 1000)
                    .await
                    .expect("read");
                for issue in &page.items {
                    let with = (defs.as_slice(), views.as_slice());
                    expected.extend(gridline::model::entries_in_views(
                        tenant, issue, with, shards, &hot,
                    ));
                }
                start = page.next;
                if start.is_none() {
                    break;
                }
            }
        }
        expected
    }

    /// Asserts the index equals a recomputation from the records.
    pub async fn assert_index_matches_records(
        &self,
        tenant: &gridline::domain::ids::TenantId,
        projects: &[gridline::domain::ids::ProjectId],
    ) {
        let expected = self.expected_entries(tenant, projects).await;
        let actual = self.index_entries().await;
        let missing: Vec<_> = expected.difference(&actual).take(5).collect();
        let extra: Vec<_> = actual.difference(&expected).take(5).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "missing {missing:?}\nextra {extra:?}"
        );
    }
}
