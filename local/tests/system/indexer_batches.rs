//! A batch's distinct issues are indexed concurrently and each issue's records in order; a
//! failure reports the lowest failed sequence number while the rest of the batch still runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use gridline::domain::ids::ProjectId;
use gridline::indexer::Indexer;
use gridline::store::Store;
use gridline_local::testing::TestApi;
use serde_json::json;

use crate::support::acme;

/// Counts the indexer's requests between leaving and their answer, and the most at once.
#[derive(Debug, Default)]
struct Concurrency {
    now: AtomicUsize,
    peak: AtomicUsize,
}

#[derive(Debug, Clone)]
struct Counting(Arc<Concurrency>);

impl Intercept for Counting {
    fn name(&self) -> &'static str {
        "Counting"
    }

    fn read_before_transmit(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let now = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.peak.fetch_max(now, Ordering::SeqCst);
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        _: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The most requests the indexer had in flight at once while indexing a batch of 20 new
/// issues with at most `concurrency` issues at a time; the index is checked exact after.
async fn peak_while_indexing(concurrency: usize) -> usize {
    let (api, p) = TestApi::with_project("p").await;
    api.sync().await;
    let counts = Arc::new(Concurrency::default());
    let client = gridline_local::chaos::intercepted(
        &api.stack.function_client("IndexerFunction"),
        Counting(counts.clone()),
    );
    let store = Store::new(client, &api.stack.tables.records, &api.stack.tables.index);
    let mut poller = api
        .stack
        .poller(Indexer::new(store).with_concurrency(concurrency))
        .await;
    poller.emit_metrics = false;
    poller.drain().await.unwrap();
    for i in 0..20 {
        api.issue(&p, json!({"title": format!("issue {i}")})).await;
    }
    poller.drain().await.unwrap();
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    counts.peak.load(Ordering::SeqCst)
}

#[tokio::test]
async fn distinct_issues_of_a_batch_are_indexed_concurrently_and_bounded() {
    let peak = peak_while_indexing(8).await;
    assert!(
        (3..=16).contains(&peak),
        "several issues' requests in flight at once, bounded by the concurrency: {peak}"
    );
    // One issue at a time: its entries' writes, and its history entry's put beside them.
    let one = peak_while_indexing(1).await;
    assert!(
        (1..=2).contains(&one),
        "one issue at a time when the concurrency is 1: {one}"
    );
}

#[tokio::test]
async fn an_issues_records_in_one_batch_are_applied_as_its_last_state() {
    let (api, p) = TestApi::with_project("p").await;
    api.sync().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(api.issue(&p, json!({"title": format!("t{i}")})).await["id"].clone());
    }
    // Several records per issue, interleaved across issues, in one batch.
    for round in 0..3 {
        for id in &ids {
            let id = id.as_str().unwrap();
            let r = api
                .patch(
                    &format!("/issues/{id}"),
                    json!({"title": format!("r{round}-{id}")}),
                )
                .await;
            assert_eq!(r.status, http::StatusCode::OK);
        }
    }
    api.delete(&format!("/issues/{}", ids[0].as_str().unwrap()))
        .await;
    api.sync().await;
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    let r = api.get(&format!("/projects/{p}/issues?sort=title")).await;
    let titles: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 5);
    assert!(titles.iter().all(|t| t.starts_with("r2-")), "{titles:?}");
}

#[tokio::test]
async fn the_local_indexer_runs_with_the_templates_concurrency() {
    let value = gridline_local::gateway::function_env("IndexerFunction", "INDEXER_CONCURRENCY")
        .unwrap()
        .expect("the template sets it");
    let api = TestApi::start().await;
    assert_eq!(api.stack.indexer().concurrency().to_string(), value);
}

/// Records the operation (`X-Amz-Target`'s action) of each request the indexer sends.
#[derive(Debug, Clone, Default)]
struct Operations(Arc<std::sync::Mutex<Vec<String>>>);

impl Intercept for Operations {
    fn name(&self) -> &'static str {
        "Operations"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context.request().headers().get("x-amz-target");
        let action = target.and_then(|t| t.split_once('.')).map(|(_, a)| a);
        if let (Some(action), Ok(mut ops)) = (action, self.0.lock()) {
            ops.push(action.to_string());
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_batchs_watermark_heads_are_read_in_one_request() {
    let (api, p) = TestApi::with_project("p").await;
    api.sync().await;
    let ops = Operations::default();
    let client = gridline_local::chaos::intercepted(
        &api.stack.function_client("IndexerFunction"),
        ops.clone(),
    );
    let store = Store::new(client, &api.stack.tables.records, &api.stack.tables.index);
    let mut poller = api.stack.poller(Indexer::new(store)).await;
    poller.emit_metrics = false;
    poller.drain().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(api.issue(&p, json!({"title": format!("issue {i}")})).await["id"].clone());
    }
    poller.drain().await.unwrap();
    for id in &ids {
        let id = id.as_str().unwrap();
        let r = api
            .patch(&format!("/issues/{id}"), json!({"title": "again"}))
            .await;
        assert_eq!(r.status, http::StatusCode::OK);
    }
    poller.drain().await.unwrap();
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
    let ops = ops.0.lock().unwrap().clone();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    // 20 new issues, then 20 updates: one batch each (the mapping's batch is 100 records).
    assert_eq!(count("BatchGetItem"), 2, "{ops:?}");
    assert_eq!(
        count("GetItem"),
        0,
        "no issue reads its head alone: {ops:?}"
    );
}
