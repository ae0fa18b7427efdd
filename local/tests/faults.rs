//! The indexer under fire: its DynamoDB client fails writes, throttles batches (returns them
//! as unprocessed) and stalls until invocations time out mid-batch; batches are delivered twice
//! and the whole stream is replayed. The faults are injected by an SDK interceptor on the real
//! client talking to the real engine — the only thing simulated is the fault itself. At the end
//! the index equals a recomputation from the records, with nothing lost.

use std::time::Duration;

use gridline::indexer::Indexer;
use gridline::store::Store;
use gridline_local::chaos::{Chaos, Rates};
use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_converges_under_errors_throttling_timeouts_duplicates_and_replays() {
    for seed in [11u64, 12] {
        let api = TestApi::start().await;
        let chaos = Chaos::new(seed, Rates::default());
        let faulty = chaos.client(&api.stack.client);
        let store = Store::new(faulty, &api.stack.tables.records, &api.stack.tables.index);
        let mut poller = api.stack.poller(Indexer::new(store)).await;
        poller.duplicate_delivery = true;
        poller.invocation_timeout = Some(Duration::from_millis(100));
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
                    api.call(
                        ALICE,
                        Method::PATCH,
                        &format!("/issues/{id}"),
                        Some(json!({"fields": {f: v}, "title": format!("p{step}")})),
                    )
                    .await;
                }
                5 if !live.is_empty() => {
                    let id = live.swap_remove(rng.gen_range(0..live.len()));
                    api.call(ALICE, Method::DELETE, &format!("/issues/{id}"), None)
                        .await;
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
            api.expected_entries("acme", std::slice::from_ref(&p)).await,
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
async fn a_poison_record_goes_to_the_on_failure_queue_and_does_not_block_the_shard() {
    let api = TestApi::start().await;
    let p = api.project("p").await;
    // An issue item the API would never write (no version): the indexer cannot read it.
    let mut item = std::collections::HashMap::new();
    for (k, v) in [
        ("PK", "T#acme#I#01JDQ5S00000000000000POISN"),
        ("SK", "#ISSUE"),
        ("entity", "issue"),
        ("title", "bad"),
    ] {
        item.insert(
            k.to_string(),
            aws_sdk_dynamodb::types::AttributeValue::S(v.into()),
        );
    }
    api.stack
        .client
        .put_item()
        .table_name(&api.stack.tables.records)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
    let good = api.issue(&p, json!({"title": "after the poison"})).await;
    api.sync().await;
    assert_eq!(api.dead_letters().await, 1);
    let r = api.get(&format!("/projects/{p}/issues")).await;
    assert_eq!(
        r.body["items"][0]["id"], good["id"],
        "the record after the poison was indexed"
    );
}
