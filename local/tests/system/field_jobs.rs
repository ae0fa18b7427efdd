//! Field changes off the stream: the stream Lambda sends one message, the job function builds
//! the column a page at a time (checkpointed), the grid answers `409` with `Retry-After` until
//! the field is sortable, and a job cut short resumes where its checkpoint says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gridline::domain::ids::{FieldId, ProjectId};
use gridline::indexer::Metrics;
use gridline::indexer::field_job::{FieldJob, FieldJobs, JobKind, JobQueue, QueueError, Sending};
use gridline_local::jobs::FIELD_JOB_FUNCTION;
use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::json;

use crate::support::acme;

/// A project with `n` issues, issue `i` titled `t{i}` (indexed), and its id.
async fn project_with_issues(api: &TestApi, n: usize) -> String {
    let p = api.project("jobs").await;
    for i in 0..n {
        api.issue(&p, json!({"title": format!("t{i}")})).await;
    }
    api.sync().await;
    p
}

fn sortable(api_reply: &serde_json::Value, field: &str) -> Option<bool> {
    api_reply["fields"]
        .as_array()?
        .iter()
        .find(|f| f["id"] == field)?["sortable"]
        .as_bool()
}

async fn grid_ids(api: &TestApi, p: &str, field: &str) -> Vec<String> {
    let r = api
        .get(&format!("/projects/{p}/issues?sort={field}&limit=100"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // The page made its column hot: its fill runs before the test looks at the index.
    api.sync().await;
    r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_field_added_to_a_project_with_issues_is_sortable_once_its_job_has_built_the_column() {
    let api = TestApi::start().await;
    let p = project_with_issues(&api, 3).await;
    let created = api
        .post_field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["sortable"], false);
    let f = created.body["id"].as_str().unwrap().to_string();

    // Until the column is complete: 409 with Retry-After, never a partial list.
    let r = api.get(&format!("/projects/{p}/issues?sort={f}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.header("retry-after"), Some("5"));
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(r.body["type"], "urn:gridline:problem:column-incomplete");

    // The stream Lambda's share is one message, whatever the project's size.
    api.sync_stream().await;
    assert_eq!(api.stack.field_job_queue.len(), 1);
    assert_eq!(
        sortable(&api.get(&format!("/projects/{p}")).await.body, &f),
        Some(false)
    );

    api.sync().await;
    assert!(api.stack.field_job_queue.is_empty());
    assert_eq!(
        sortable(&api.get(&format!("/projects/{p}")).await.body, &f),
        Some(true)
    );
    assert_eq!(grid_ids(&api, &p, &f).await, ["t0", "t1", "t2"]);
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    let mut jobs = api
        .stack
        .state
        .store
        .index()
        .list_jobs(&acme())
        .await
        .unwrap();
    // Besides the add: the fill of the column the grid made hot, finished too.
    let fills = jobs.iter().filter(|j| j.kind == JobKind::Fill).count();
    assert_eq!(fills, 1);
    assert!(jobs.iter().all(|j| j.finished));
    jobs.retain(|j| j.kind != JobKind::Fill);
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].kind, jobs[0].issues, jobs[0].pages),
        (JobKind::Add, 3, 1)
    );
}

/// Fields added to a project in one batch are one message, named after one of them: whichever
/// of them is deleted before the job begins, the others are still built.
#[tokio::test]
async fn fields_added_in_one_batch_are_built_whichever_of_them_is_deleted_before_the_job() {
    let api = TestApi::start().await;
    let p = project_with_issues(&api, 3).await;
    let mut made = Vec::new();
    for name in ["first", "middle", "last"] {
        made.push(api.field(&p, json!({"name": name, "type": "number"})).await);
    }
    // The three records are one batch: one message.
    api.sync_stream().await;
    assert_eq!(api.stack.field_job_queue.len(), 1);
    for gone in [&made[0], &made[2]] {
        let r = api.delete(&format!("/projects/{p}/fields/{gone}")).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    }
    api.sync().await;
    let middle = &made[1];
    assert_eq!(
        sortable(&api.get(&format!("/projects/{p}")).await.body, middle),
        Some(true)
    );
    assert_eq!(grid_ids(&api, &p, middle).await, ["t0", "t1", "t2"]);
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
}

/// A batch that replays an old field's record (its job long finished) with a new field's is
/// still the new field's job.
#[tokio::test]
async fn a_new_field_batched_with_a_replayed_old_one_is_built() {
    let api = TestApi::start().await;
    let p = project_with_issues(&api, 2).await;
    let old = api
        .field(&p, json!({"name": "old", "type": "number"}))
        .await;
    api.sync().await;
    let new = api
        .field(&p, json!({"name": "new", "type": "number"}))
        .await;
    // A new mapping from the stream's start: the old field's record and the new one's in
    // one batch, whose one message is the only one (the first mapping never reads the new
    // record here).
    let mut replayer = api.stack.poller(api.stack.indexer()).await;
    replayer.drain().await.unwrap();
    assert_eq!(api.stack.field_job_queue.len(), 1);
    api.jobs.drain().await.unwrap();
    let project = api.get(&format!("/projects/{p}")).await.body;
    assert_eq!(sortable(&project, &old), Some(true));
    assert_eq!(sortable(&project, &new), Some(true), "{project}");
    assert_eq!(grid_ids(&api, &p, &new).await, ["t0", "t1"]);
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
}

#[tokio::test]
async fn a_field_added_to_a_project_without_issues_is_sortable_at_once() {
    let api = TestApi::start().await;
    let p = api.project("empty").await;
    let created = api
        .post_field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    assert_eq!(created.body["sortable"], true);
    let f = created.body["id"].as_str().unwrap().to_string();
    assert!(grid_ids(&api, &p, &f).await.is_empty());
    api.sync_stream().await;
    assert!(
        api.stack.field_job_queue.is_empty(),
        "no job for a complete column"
    );
    api.issue(&p, json!({"title": "later", "fields": {&f: 3}}))
        .await;
    api.sync().await;
    assert_eq!(grid_ids(&api, &p, &f).await, ["later"]);
}

/// A queue whose sends fail: the invocation dies after its checkpoint, before the next
/// step's message is out.
struct Unreachable;

impl JobQueue for Unreachable {
    fn send<'a>(&'a self, _: &'a FieldJob) -> Sending<'a> {
        Box::pin(async { Err(QueueError("the invocation was cut here".into())) })
    }
}

#[tokio::test]
async fn a_field_job_cut_short_resumes_from_its_checkpoint_and_finishes_exact() {
    let mut api = TestApi::start().await;
    let p = project_with_issues(&api, 7).await;
    let f = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    api.sync_stream().await;
    let job = FieldJob::start(
        acme(),
        ProjectId::parse(&p).unwrap(),
        FieldId::parse(&f).unwrap(),
        JobKind::Add,
    );

    // One page of two issues, its checkpoint written, then the invocation dies before the
    // next step's message is sent.
    let mut cut = FieldJobs::new(
        api.stack.function_store(FIELD_JOB_FUNCTION),
        Arc::new(Unreachable),
        4,
    );
    cut.pages_per_message = Some(1);
    cut.page_size = 2;
    let far = Instant::now() + Duration::from_secs(300);
    assert!(cut.run(&job, far, &mut Metrics::default()).await.is_err());
    let progress = api
        .stack
        .state
        .store
        .index()
        .get_job(&job)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (progress.step, progress.issues, progress.finished),
        (1, 2, false)
    );
    assert_eq!(
        api.get(&format!("/projects/{p}/issues?sort={f}"))
            .await
            .status,
        StatusCode::CONFLICT
    );

    // The step-0 message is still on the queue (it was never reported done): delivered again,
    // it finds the checkpoint one step on and sends that step's message; the job goes on two
    // issues per message to the end.
    api.jobs.jobs.pages_per_message = Some(1);
    api.jobs.jobs.page_size = 2;
    api.sync().await;
    let progress = api
        .stack
        .state
        .store
        .index()
        .get_job(&job)
        .await
        .unwrap()
        .unwrap();
    assert!(progress.finished);
    assert_eq!((progress.step, progress.issues, progress.pages), (3, 7, 4));
    assert_eq!(
        grid_ids(&api, &p, &f).await,
        ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]
    );
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;

    // A late duplicate of any step changes nothing.
    for step in 0..4 {
        let outcome = api
            .jobs
            .jobs
            .run(
                &FieldJob {
                    step,
                    ..job.clone()
                },
                far,
                &mut Metrics::default(),
            )
            .await
            .unwrap();
        assert_eq!(outcome, gridline::indexer::field_job::Outcome::Stale);
    }
    assert!(api.stack.field_job_queue.is_empty());
}

#[tokio::test]
async fn a_deleted_fields_values_and_entries_are_removed_by_its_job() {
    let api = TestApi::start().await;
    let p = api.project("delete").await;
    let f = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let issue = api
            .issue(&p, json!({"title": format!("t{i}"), "fields": {&f: i}}))
            .await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    assert_eq!(
        api.delete(&format!("/projects/{p}/fields/{f}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    api.sync_stream().await;
    assert_eq!(api.stack.field_job_queue.len(), 1);
    // Hidden from every read at once, still on the items until the job runs.
    let r = api.get(&format!("/issues/{}", ids[0])).await;
    assert!(r.body["fields"].get(&f).is_none(), "{}", r.text);
    let stored = |api: &TestApi, id: String| {
        let store = api.stack.state.store.clone();
        async move {
            store
                .records()
                .get_issue_item(
                    &acme(),
                    &gridline::domain::ids::IssueId::parse(&id).unwrap(),
                )
                .await
                .unwrap()
                .unwrap()
        }
    };
    assert!(
        stored(&api, ids[1].clone())
            .await
            .fields
            .contains_key(f.as_str())
    );

    api.sync().await;
    for id in &ids {
        assert!(
            !stored(&api, id.clone())
                .await
                .fields
                .contains_key(f.as_str())
        );
    }
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    let jobs = api
        .stack
        .state
        .store
        .index()
        .list_jobs(&acme())
        .await
        .unwrap();
    let removal = jobs.iter().find(|j| j.kind == JobKind::Remove).unwrap();
    assert!(removal.finished);
    assert_eq!(removal.issues, 3);
}

/// An HTTP client that holds the response of one chosen request until the test lets it go:
/// a race between two writers, played in a fixed order. Only the timing is staged; every
/// request reaches the real engine through the function's guard.
mod paused {
    use std::sync::{Arc, Mutex};

    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
        SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use tokio::sync::oneshot;

    /// The held request's two signals: it was answered; it may go on.
    type Gate = (oneshot::Sender<()>, oneshot::Receiver<()>);

    /// Whether a request (its `X-Amz-Target` and JSON body) is the one to hold.
    type Matcher = Arc<dyn Fn(&str, &serde_json::Value) -> bool + Send + Sync>;

    /// The first request `matches` picks is answered by the engine, then held: `reached`
    /// fires, and the answer goes back to the caller when `release` is sent.
    #[derive(Clone)]
    pub struct Pause {
        inner: SharedHttpClient,
        matches: Matcher,
        gate: Arc<Mutex<Option<Gate>>>,
    }

    impl std::fmt::Debug for Pause {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Pause")
        }
    }

    /// `client` whose first request `matches` picks is held; the test's two ends of the gate.
    pub fn client(
        client: &aws_sdk_dynamodb::Client,
        matches: impl Fn(&str, &serde_json::Value) -> bool + Send + Sync + 'static,
    ) -> (
        aws_sdk_dynamodb::Client,
        oneshot::Receiver<()>,
        oneshot::Sender<()>,
    ) {
        let (reached_tx, reached_rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel();
        let inner = client
            .config()
            .http_client()
            .expect("the function's client has its guard");
        let pause = Pause {
            inner,
            matches: Arc::new(matches),
            gate: Arc::new(Mutex::new(Some((reached_tx, release_rx)))),
        };
        let config = client.config().to_builder().http_client(pause).build();
        (
            aws_sdk_dynamodb::Client::from_conf(config),
            reached_rx,
            release_tx,
        )
    }

    /// A store as `function` has it, whose first read of a project's fields (the records
    /// table's only Query on the base table; issues are listed through GSI1) is held.
    pub fn store_held_at_fields_read(
        api: &gridline_local::testing::TestApi,
        function: &str,
    ) -> (
        gridline::store::Store,
        oneshot::Receiver<()>,
        oneshot::Sender<()>,
    ) {
        let records = api.stack.tables.records.clone();
        let (client, reached, release) =
            client(&api.stack.function_client(function), move |target, body| {
                target.ends_with(".Query")
                    && body["TableName"] == records.as_str()
                    && body.get("IndexName").is_none()
            });
        let tables = &api.stack.tables;
        let store = gridline::store::Store::new(client, &tables.records, &tables.index);
        (store, reached, release)
    }

    impl HttpClient for Pause {
        fn http_connector(
            &self,
            settings: &HttpConnectorSettings,
            components: &RuntimeComponents,
        ) -> SharedHttpConnector {
            SharedHttpConnector::new(Connector {
                inner: self.inner.http_connector(settings, components),
                pause: self.clone(),
            })
        }
    }

    #[derive(Debug)]
    struct Connector {
        inner: SharedHttpConnector,
        pause: Pause,
    }

    impl HttpConnector for Connector {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let target = gridline_local::chaos::target(&request);
            let body = request
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            let gate = if (self.pause.matches)(&target, &body) {
                self.pause.gate.lock().unwrap().take()
            } else {
                None
            };
            let sent = self.inner.call(request);
            HttpConnectorFuture::new(async move {
                let response = sent.await?;
                if let Some((reached, release)) = gate {
                    let _ = reached.send(());
                    let _ = release.await;
                }
                Ok(response)
            })
        }
    }
}

/// Two jobs of one project overlap: a redelivered message of an earlier field's job reads the
/// project's fields, a second field is added and its job indexes the issues, and only then does
/// the first job's page write. It must not take the second field's entries away (the issue's
/// watermark carries the revision of the fields it was indexed under, newer than the page's),
/// and the index ends exact. The same holds for a stream invocation whose definitions predate
/// a field whose job has been by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_write_with_definitions_older_than_the_issues_watermark_reads_them_again() {
    let api = TestApi::start().await;
    let p = project_with_issues(&api, 3).await;
    let first = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    api.sync().await;
    let project = ProjectId::parse(&p).unwrap();

    // The earlier job's page, held right after its read of the project's fields.
    let (store, reached, release) = paused::store_held_at_fields_read(&api, FIELD_JOB_FUNCTION);
    let late = gridline::indexer::Indexer::new(store).with_concurrency(1);
    let page = {
        let project = project.clone();
        tokio::spawn(async move {
            let mut metrics = Metrics::default();
            late.reindex_page(
                &acme(),
                &project,
                None,
                (None, 100),
                "redelivered",
                &mut metrics,
            )
            .await
            .map(|_| metrics.writes)
        })
    };
    reached.await.expect("the page reads the fields");

    // Meanwhile a second field, and its whole job (the issues keep their versions: the held
    // page's equal-version write is one a re-index may make).
    let second = api.field(&p, json!({"name": "Due", "type": "date"})).await;
    api.sync().await;
    assert_eq!(
        sortable(&api.get(&format!("/projects/{p}")).await.body, &second),
        Some(true)
    );

    // The held page goes on with the fields it read before the second one existed.
    release.send(()).expect("the page is waiting");
    page.await.unwrap().expect("the late page succeeds");
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
    // Every issue is in the second field's column (as a missing value) and in the first's.
    assert_eq!(grid_ids(&api, &p, &second).await.len(), 3);
    assert_eq!(grid_ids(&api, &p, &first).await.len(), 3);

    // Every field change moves the project's revision, a deletion too.
    assert_eq!(
        api.delete(&format!("/projects/{p}/fields/{first}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    api.sync().await;
    let stored = api
        .stack
        .state
        .store
        .records()
        .get_project(&acme(), &project)
        .await
        .unwrap()
        .unwrap();
    // Two adds and a deletion, and the two columns the grids above made hot.
    assert_eq!(stored.fields_rev, Some(5));
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
}

/// A job's page reads an issue (eventually consistent, so it may lag) before the issue is
/// updated; the update is indexed by a stream invocation whose definitions predate the job's
/// field; only then does the page write. The watermark is newer than the page's issue, but was
/// written without the field: the page reads the issue again rather than skip it, so the field
/// is never marked sortable with the issue missing from its column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_page_behind_a_newer_write_without_its_field_indexes_the_issue_as_it_is_now() {
    let api = TestApi::start().await;
    let p = project_with_issues(&api, 1).await;
    let project = ProjectId::parse(&p).unwrap();
    let id = api.get(&format!("/projects/{p}/issues")).await.body["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // The job's page, held right after it read the issues (at version 1).
    let (client, page_read, release_page) = paused::client(
        &api.stack.function_client(FIELD_JOB_FUNCTION),
        |target, _| target.ends_with(".BatchGetItem"),
    );
    let store =
        gridline::store::Store::new(client, &api.stack.tables.records, &api.stack.tables.index);
    let job = gridline::indexer::Indexer::new(store).with_concurrency(1);
    let page = {
        let project = project.clone();
        tokio::spawn(async move {
            let mut metrics = Metrics::default();
            job.reindex_page(&acme(), &project, None, (None, 100), "job", &mut metrics)
                .await
        })
    };
    page_read.await.expect("the page reads the issues");

    // The issue is updated; a stream invocation indexes version 2 with the project's fields
    // read before the field below exists.
    let r = api
        .patch(&format!("/issues/{id}"), json!({"title": "v2"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let (store, defs_read, release_stream) =
        paused::store_held_at_fields_read(&api, gridline_local::INDEXER_FUNCTION);
    let mut stale = api
        .stack
        .poller(gridline::indexer::Indexer::new(store))
        .await;
    let stream = tokio::spawn(async move { stale.drain().await });
    defs_read.await.expect("the invocation reads the fields");
    let f = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    release_stream.send(()).expect("the invocation is waiting");
    stream.await.unwrap().expect("the stream drains");

    // The page goes on with version 1 and the new field's definitions.
    release_page.send(()).expect("the page is waiting");
    page.await.unwrap().expect("the page succeeds");
    api.assert_index_matches_records(&acme(), std::slice::from_ref(&project))
        .await;
    let r = api.get(&format!("/projects/{p}/issues?sort={f}")).await;
    // Not sortable yet (no job finished here), but the column holds the issue.
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
}
