//! Field changes off the stream: the stream Lambda sends one message, the job function builds
//! the column a page at a time (checkpointed), the grid answers `409` with `Retry-After` until
//! the field is sortable, and a job cut short resumes where its checkpoint says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gridline::domain::ids::{FieldId, ProjectId};
use gridline::index::field_job::{FieldJob, FieldJobs, JobKind, JobQueue, QueueError, Sending};
use gridline::index::indexer::Metrics;
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
    let jobs = api.stack.state.store.list_jobs(&acme()).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].finished);
    assert_eq!(
        (jobs[0].kind, jobs[0].issues, jobs[0].pages),
        (JobKind::Add, 3, 1)
    );
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
    let progress = api.stack.state.store.get_job(&job).await.unwrap().unwrap();
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
    let progress = api.stack.state.store.get_job(&job).await.unwrap().unwrap();
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
        assert_eq!(outcome, gridline::index::field_job::Outcome::Stale);
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
                .get_issue_summary(
                    &acme(),
                    &gridline::domain::ids::IssueId::parse(&id).unwrap(),
                )
                .await
                .unwrap()
                .unwrap()
        }
    };
    assert!(stored(&api, ids[1].clone()).await.fields.contains_key(&f));

    api.sync().await;
    for id in &ids {
        assert!(!stored(&api, id.clone()).await.fields.contains_key(&f));
    }
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    let jobs = api.stack.state.store.list_jobs(&acme()).await.unwrap();
    let removal = jobs.iter().find(|j| j.kind == JobKind::Remove).unwrap();
    assert!(removal.finished);
    assert_eq!(removal.issues, 3);
}
