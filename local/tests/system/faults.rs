//! The indexer under fire: its DynamoDB client fails writes, throttles batches (returns them
//! as unprocessed) and stalls until invocations time out mid-batch; batches are delivered twice
//! and the whole stream is replayed. The faults are injected by an SDK interceptor on the real
//! client talking to the real engine — the only thing simulated is the fault itself. At the end
//! the index equals a recomputation from the records, with nothing lost.

use gridline::domain::ids::{IssueId, ProjectId};
use gridline::indexer::Indexer;
use gridline::store::Store;
use gridline_local::chaos::{Chaos, Rates};
use gridline_local::testing::TestApi;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::support::acme;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_converges_under_errors_throttling_timeouts_duplicates_and_replays() {
    for seed in [11u64, 12] {
        let api = TestApi::start().await;
        let chaos = Chaos::new(seed, Rates::default());
        let faulty = chaos.client(&api.stack.function_client("IndexerFunction"));
        let store = Store::new(faulty, &api.stack.tables.records, &api.stack.tables.index);
        let mut poller = api.stack.poller(Indexer::new(store)).await;
        poller.duplicate_delivery = true;
        // Stalls stop the invocation mid-batch, as its timeout would.
        poller.kill_switch = Some(chaos.kill_switch());
        // Faults this frequent need more retries than the default before giving up.
        poller.max_retries = 100;

        let mut rng = StdRng::seed_from_u64(seed);
        let p = api.project("p").await;
        let mut fields = Vec::new();
        for t in ["number", "text"] {
            fields.push((api.field(&p, json!({"name": t, "type": t})).await, t));
        }
        let mut live = Vec::new();
        for step in 0..50 {
            match rng.gen_range(0..6) {
                0..=2 => {
                    let (f, _) = &fields[0];
                    let issue = api.issue(&p, json!({"title": format!("t{step}"), "fields": {f: rng.gen_range(0..5)}})).await;
                    live.push(issue["id"].as_str().unwrap().to_string());
                }
                3 | 4 if !live.is_empty() => {
                    let id = &live[rng.gen_range(0..live.len())];
                    let (f, t) = &fields[rng.gen_range(0..fields.len())];
                    let v = match *t {
                        "number" => json!(rng.gen_range(-3..3)),
                        _ => json!(["x", "Y", "z"][rng.gen_range(0..3)]),
                    };
                    api.patch(
                        &format!("/issues/{id}"),
                        json!({"fields": {f: v}, "title": format!("p{step}")}),
                    )
                    .await;
                }
                5 if !live.is_empty() => {
                    let id = live.swap_remove(rng.gen_range(0..live.len()));
                    api.delete(&format!("/issues/{id}")).await;
                }
                _ => {}
            }
            if rng.gen_bool(0.3) {
                // Faults make some invocations fail; the mapping retries them.
                for _ in 0..200 {
                    if poller.poll_once().await.unwrap() == 0 {
                        break;
                    }
                }
            }
        }
        for _ in 0..2000 {
            if poller.poll_once().await.unwrap() == 0 {
                break;
            }
        }
        assert!(chaos.faults() > 5, "seed {seed}: faults were injected");
        assert!(
            poller.dead_letters.is_empty(),
            "seed {seed}: retries sufficed"
        );
        assert_eq!(
            api.index_entries().await,
            api.expected_entries(&acme(), &[ProjectId::parse(&p).unwrap()])
                .await,
            "seed {seed}"
        );

        // Replaying the whole stream (a new mapping from TRIM_HORIZON) changes nothing.
        let before = api.index_entries().await;
        let mut replay = api.stack.poller(api.stack.indexer()).await;
        replay.drain().await.unwrap();
        assert_eq!(
            api.index_entries().await,
            before,
            "seed {seed}: replay is a no-op"
        );
    }
}

#[tokio::test]
async fn a_malformed_record_is_parked_and_does_not_block_the_shard() {
    let (api, p) = TestApi::with_project("p").await;
    // An issue item the API would never write (no version): the indexer cannot read it.
    let poison = IssueId::numbered(404);
    let poison_pk = gridline::keys::records::issue_pk(&acme(), &poison);
    let mut item = std::collections::HashMap::new();
    for (k, v) in [
        ("PK", poison_pk.as_str()),
        ("SK", "#ISSUE"),
        ("entity", "issue"),
        ("title", "bad"),
    ] {
        item.insert(
            k.to_string(),
            aws_sdk_dynamodb::types::AttributeValue::S(v.into()),
        );
    }
    api.put_record(item).await.unwrap();
    let good = api.issue(&p, json!({"title": "after the poison"})).await;
    api.sync().await;
    assert_eq!(
        api.dead_letters().await,
        0,
        "retrying cannot fix it: parked"
    );
    let parked = parked(&api).await;
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].subject, poison.as_str());
    assert!(parked[0].reason.contains("malformed"), "{:?}", parked[0]);
    let r = api.get(&format!("/projects/{p}/issues")).await;
    assert_eq!(
        r.body["items"][0]["id"], good["id"],
        "the record after the poison was indexed"
    );
}

/// The parked markers in the index table.
async fn parked(api: &TestApi) -> Vec<gridline::store::index::Parked> {
    let out = api
        .stack
        .client
        .scan()
        .table_name(&api.stack.tables.index)
        .send()
        .await
        .unwrap();
    out.items()
        .iter()
        .filter_map(gridline::store::index::parked_from_item)
        .collect()
}

/// Writes naming a poisoned issue fail: `permanent` ones as DynamoDB refuses an item over its
/// size limit (`ValidationException`, nothing written), `transient` ones as a network error.
#[derive(Debug, Default)]
struct Poison {
    permanent: std::sync::Mutex<Vec<String>>,
    transient: std::sync::Mutex<Vec<String>>,
}

/// Marks the one operation whose answer becomes the size refusal: in its own config bag, as
/// the indexer runs several issues' requests at once.
#[derive(Debug, Clone)]
struct Refuse(bool);

impl aws_smithy_types::config_bag::Storable for Refuse {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

#[derive(Debug, Clone)]
struct PoisonHandle(std::sync::Arc<Poison>);

impl Poison {
    fn client(
        self: &std::sync::Arc<Self>,
        client: &aws_sdk_dynamodb::Client,
    ) -> aws_sdk_dynamodb::Client {
        gridline_local::chaos::intercepted(client, PoisonHandle(self.clone()))
    }

    /// Whether a write touches a poisoned issue's entries or watermark (parking it, a small
    /// marker and a flag, is what works in AWS too).
    fn hit(list: &std::sync::Mutex<Vec<String>>, body: &str) -> bool {
        !body.contains("#PARKED")
            && !body.contains(":t")
            && list
                .lock()
                .unwrap()
                .iter()
                .any(|id| body.contains(id.as_str()))
    }
}

impl aws_sdk_dynamodb::config::Intercept for PoisonHandle {
    fn name(&self) -> &'static str {
        "Poison"
    }

    fn modify_before_transmit(
        &self,
        ctx: &mut aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextMut<'_>,
        _: &aws_sdk_dynamodb::config::RuntimeComponents,
        cfg: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if !gridline_local::chaos::is_write(&gridline_local::chaos::target(ctx.request())) {
            return Ok(());
        }
        // No attempt's refusal outlives it.
        cfg.interceptor_state().store_put(Refuse(false));
        let body = ctx
            .request()
            .body()
            .bytes()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .unwrap_or_default();
        if Poison::hit(&self.0.transient, &body) {
            return Err("injected: connection reset".into());
        }
        if Poison::hit(&self.0.permanent, &body) {
            // Nothing lands (the engine refuses an empty request), and the answer becomes the
            // one DynamoDB gives an item over its size limit.
            cfg.interceptor_state().store_put(Refuse(true));
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
        if !cfg.load::<Refuse>().is_some_and(|r| r.0) {
            return Ok(());
        }
        // The answer DynamoDB gives an item over its size limit.
        gridline_local::chaos::answer_error(
            ctx.response_mut(),
            "ValidationException",
            "Item size has exceeded the maximum allowed size",
        )
    }
}

/// A stack whose indexer's client goes through `poison`, and its poller.
async fn poisoned(
    api: &TestApi,
    poison: &std::sync::Arc<Poison>,
) -> gridline_local::stream::Poller {
    api.stack.poller(poisoned_indexer(api, poison)).await
}

/// The indexer, its client going through `poison`.
fn poisoned_indexer(api: &TestApi, poison: &std::sync::Arc<Poison>) -> Indexer {
    let store = Store::new(
        poison.client(&api.stack.function_client("IndexerFunction")),
        &api.stack.tables.records,
        &api.stack.tables.index,
    );
    Indexer::new(store)
}

#[tokio::test]
async fn an_issue_that_fails_for_good_is_parked_and_its_neighbours_are_indexed() {
    let (api, p) = TestApi::with_project("p").await;
    let poison = std::sync::Arc::new(Poison::default());
    let mut poller = poisoned(&api, &poison).await;
    poller.emit_metrics = false;
    poller.drain().await.unwrap();
    let before = api.issue(&p, json!({"title": "before"})).await;
    let bad = api.issue(&p, json!({"title": "bad"})).await;
    let after = api.issue(&p, json!({"title": "after"})).await;
    let bad_id = bad["id"].as_str().unwrap().to_string();
    poison.permanent.lock().unwrap().push(bad_id.clone());
    poller.drain().await.unwrap();

    assert!(poller.dead_letters.is_empty(), "{:?}", poller.dead_letters);
    let parked = parked(&api).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(
        (parked[0].tenant.as_str(), parked[0].subject.as_str()),
        ("acme", bad_id.as_str())
    );
    assert!(
        parked[0].reason.contains("ValidationException"),
        "{:?}",
        parked[0]
    );
    assert!(!parked[0].sequence_number.is_empty() && !parked[0].parked_at.is_empty());
    let r = api.get(&format!("/projects/{p}/issues?sort=title")).await;
    let ids: Vec<&Value> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["id"])
        .collect();
    assert_eq!(
        ids,
        [&after["id"], &before["id"]],
        "the neighbours were indexed"
    );

    // Once the cause is gone, the next change indexes it and removes its marker.
    poison.permanent.lock().unwrap().clear();
    let r = api
        .patch(&format!("/issues/{bad_id}"), json!({"title": "fixed"}))
        .await;
    assert_eq!(r.status, http::StatusCode::OK);
    poller.drain().await.unwrap();
    let left = parked_after(&api).await;
    assert!(left.is_empty(), "{left:?}");
    // The grid page above made its column hot: the stack's own indexer and field-job queue
    // (this indexer has none) fill its summaries before the index is compared.
    api.sync().await;
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
}

async fn parked_after(api: &TestApi) -> Vec<gridline::store::index::Parked> {
    parked(api).await
}

use serde_json::Value;

#[tokio::test]
async fn a_transient_failure_is_reported_at_its_sequence_number_and_the_rest_dead_letters_as_lambda_does()
 {
    let (api, p) = TestApi::with_project("p").await;
    let poison = std::sync::Arc::new(Poison::default());
    let indexer = poisoned_indexer(&api, &poison);
    api.sync().await;
    let a = api.issue(&p, json!({"title": "a"})).await;
    let bad = api.issue(&p, json!({"title": "bad"})).await;
    let flaky = api.issue(&p, json!({"title": "flaky"})).await;
    let b = api.issue(&p, json!({"title": "b"})).await;
    poison
        .permanent
        .lock()
        .unwrap()
        .push(bad["id"].as_str().unwrap().into());
    poison
        .transient
        .lock()
        .unwrap()
        .push(flaky["id"].as_str().unwrap().into());

    // The handler itself: the poison is parked, the transient failure reported at its record.
    let mut direct = api.stack.poller(indexer.clone()).await;
    direct.emit_metrics = false;
    direct.max_retries = 0;
    let records = read_stream(&api, true).await;
    let event = gridline_local::stream::to_event(&records, "arn").unwrap();
    let seq_of = |id: &Value| seq_of(&event, id.as_str().unwrap());
    let (response, metrics) = gridline::runtime::handle_stream_event(&indexer, &event).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(failed, [seq_of(&flaky["id"])]);
    assert_eq!((metrics.parked, metrics.failures), (1, 1));

    // Through the poller, with retries exhausted: like Lambda, the batch from the failed
    // record to its end goes to the on-failure queue and the shard moves past it.
    direct.drain().await.unwrap();
    assert_eq!(direct.dead_letters.len(), 1, "{:?}", direct.dead_letters);
    let info = &direct.dead_letters[0]["DDBStreamBatchInfo"];
    // Every record of the stream from the failed one on (the project's and descriptions'
    // too: a batch is not one issue's), up to the batch's last.
    let all = read_stream(&api, false).await;
    let all_seqs: Vec<String> = all
        .iter()
        .filter_map(|r| r.dynamodb.as_ref().and_then(|d| d.sequence_number.clone()))
        .collect();
    let from = all_seqs
        .iter()
        .position(|s| *s == seq_of(&flaky["id"]))
        .unwrap();
    assert_eq!(info["startSequenceNumber"], json!(seq_of(&flaky["id"])));
    assert_eq!(info["endSequenceNumber"], json!(all_seqs.last().unwrap()));
    assert_eq!(info["batchSize"], json!(all_seqs.len() - from));
    // gridctl replay reads that range back: every record in it, b's included.
    let _ = (&a, &b);
    // And later records are delivered: the shard was not blocked.
    poison.transient.lock().unwrap().clear();
    let c = api.issue(&p, json!({"title": "c"})).await;
    direct.drain().await.unwrap();
    let r = api
        .get(&format!("/projects/{p}/issues?prefix=c&sort=title"))
        .await;
    assert_eq!(r.body["items"][0]["id"], c["id"]);
}

/// Every record of the table's stream, read once from its start.
async fn read_stream(
    api: &TestApi,
    only_issues: bool,
) -> Vec<aws_sdk_dynamodbstreams::types::Record> {
    let streams = gridline_local::stream::streams_client(&api.stack.endpoint).await;
    let arn = api.records_table().await.latest_stream_arn.unwrap();
    let desc = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap();
    let mut out = Vec::new();
    for shard in desc.stream_description.unwrap().shards.unwrap_or_default() {
        let mut it = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id.unwrap())
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        while let Some(i) = it {
            let page = streams
                .get_records()
                .shard_iterator(i)
                .send()
                .await
                .unwrap();
            let records = page.records.unwrap_or_default();
            if records.is_empty() {
                break;
            }
            out.extend(records);
            it = page.next_shard_iterator;
        }
    }
    // Only the issues' records (projects and fields are not what this test is about).
    out.into_iter()
        .filter(|r| {
            !only_issues
                || r.dynamodb
                    .as_ref()
                    .and_then(|d| d.keys.as_ref())
                    .and_then(|k| k.get("SK"))
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|s| s == "#ISSUE")
        })
        .collect()
}

#[tokio::test]
async fn the_lowest_failed_sequence_number_is_reported_and_the_rest_of_the_batch_still_runs() {
    let (api, p) = TestApi::with_project("p").await;
    let poison = std::sync::Arc::new(Poison::default());
    let indexer = poisoned_indexer(&api, &poison);
    api.sync().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let issue = api.issue(&p, json!({"title": format!("t{i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    // Two issues fail for now: the later one (in record order) may well finish first.
    poison
        .transient
        .lock()
        .unwrap()
        .extend([ids[3].clone(), ids[1].clone()]);
    let records = read_stream(&api, true).await;
    let event = gridline_local::stream::to_event(&records, "arn").unwrap();
    let seq_of = |id: &str| seq_of(&event, id);
    let (response, metrics) = gridline::runtime::handle_stream_event(&indexer, &event).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(
        failed,
        [seq_of(&ids[1])],
        "the first failure in record order"
    );
    assert_eq!(metrics.failures, 1);
    let titles = |r: &gridline_local::testing::Reply| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["title"].as_str().unwrap().to_string())
            .collect()
    };
    let r = api.get(&format!("/projects/{p}/issues?sort=title")).await;
    assert_eq!(
        titles(&r),
        ["t0", "t2", "t4", "t5"],
        "the issues that did not fail were indexed in the same invocation"
    );

    // The retry from the reported record indexes the rest; the ones done are skipped.
    poison.transient.lock().unwrap().clear();
    let from = event
        .records
        .iter()
        .position(|r| r.change.sequence_number.as_deref() == Some(seq_of(&ids[1]).as_str()))
        .unwrap();
    let mut retry = event.clone();
    retry.records.drain(..from);
    let (response, metrics) = gridline::runtime::handle_stream_event(&indexer, &retry).await;
    assert!(response.batch_item_failures.is_empty());
    assert!(metrics.skipped >= 3, "{metrics:?}");
    // The grid page above made its column hot: the stack's own indexer and field-job queue
    // (this indexer has none) fill its summaries before the index is compared.
    api.sync().await;
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
        .await;
}

/// The sequence number of the first record in `event` about issue `id`.
fn seq_of(event: &aws_lambda_events::event::dynamodb::Event, id: &str) -> String {
    event
        .records
        .iter()
        .find(|r| {
            r.change.keys.get("PK").is_some_and(
                |pk| matches!(pk, serde_dynamo::AttributeValue::S(s) if s.ends_with(id)),
            )
        })
        .and_then(|r| r.change.sequence_number.clone())
        .unwrap()
}
