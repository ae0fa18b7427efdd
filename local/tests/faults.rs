//! The indexer under fire: its DynamoDB client fails writes, throttles batches (returns them
//! as unprocessed) and stalls until invocations time out mid-batch; batches are delivered twice
//! and the whole stream is replayed. The faults are injected by an SDK interceptor on the real
//! client talking to the real engine — the only thing simulated is the fault itself. At the end
//! the index equals a recomputation from the records, with nothing lost.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_types::body::SdkBody;
use gridline::indexer::Indexer;
use gridline::store::Store;
use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Fails, throttles or stalls a share of the index table's writes.
#[derive(Debug)]
struct Chaos {
    rng: Mutex<StdRng>,
    /// The last BatchWriteItem request body, to hand back as unprocessed.
    last_batch: Mutex<Option<Vec<u8>>>,
    throttle_next: Mutex<bool>,
    faults: AtomicU64,
}

fn target(ctx: &BeforeTransmitInterceptorContextRef<'_>) -> String {
    ctx.request()
        .headers()
        .get("x-amz-target")
        .unwrap_or_default()
        .to_string()
}

impl Intercept for Chaos {
    fn name(&self) -> &'static str {
        "Chaos"
    }

    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let op = target(ctx);
        let is_write = op.ends_with("BatchWriteItem") || op.ends_with("PutItem");
        if !is_write {
            return Ok(());
        }
        let roll: f64 = self.rng.lock().unwrap().r#gen();
        if roll < 0.10 {
            self.faults.fetch_add(1, Ordering::Relaxed);
            return Err("injected: connection reset".into());
        }
        if roll < 0.15 {
            // A slow write: long enough for the invocation to time out mid-batch.
            self.faults.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(120));
        }
        if op.ends_with("BatchWriteItem") && roll > 0.7 {
            *self.last_batch.lock().unwrap() = ctx.request().body().bytes().map(<[u8]>::to_vec);
            *self.throttle_next.lock().unwrap() = true;
        }
        Ok(())
    }

    /// Throttling as DynamoDB reports it in a batch: the items come back unprocessed (the
    /// engine did apply them, which a retry makes harmless: writes are idempotent).
    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if !std::mem::take(&mut *self.throttle_next.lock().unwrap()) {
            return Ok(());
        }
        let Some(request) = self.last_batch.lock().unwrap().take() else {
            return Ok(());
        };
        let request: Value = serde_json::from_slice(&request)?;
        let body = json!({ "UnprocessedItems": request["RequestItems"] }).to_string();
        self.faults.fetch_add(1, Ordering::Relaxed);
        let response = ctx.response_mut();
        response.headers_mut().remove("x-amz-crc32");
        *response.body_mut() = SdkBody::from(body);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_converges_under_errors_throttling_timeouts_duplicates_and_replays() {
    for seed in [11u64, 12] {
        let api = TestApi::start().await;
        let chaos = std::sync::Arc::new(Chaos {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            last_batch: Mutex::new(None),
            throttle_next: Mutex::new(false),
            faults: AtomicU64::new(0),
        });
        let config = api
            .stack
            .client
            .config()
            .to_builder()
            .interceptor(ChaosHandle(chaos.clone()))
            .build();
        let faulty = aws_sdk_dynamodb::Client::from_conf(config);
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
        assert!(
            chaos.faults.load(Ordering::Relaxed) > 5,
            "seed {seed}: faults were injected"
        );
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

/// Interceptors are registered by value; this shares one `Chaos` with the test.
#[derive(Debug, Clone)]
struct ChaosHandle(std::sync::Arc<Chaos>);

impl Intercept for ChaosHandle {
    fn name(&self) -> &'static str {
        "ChaosHandle"
    }

    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.read_before_transmit(ctx, rc, cfg)
    }

    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.modify_before_deserialization(ctx, rc, cfg)
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
