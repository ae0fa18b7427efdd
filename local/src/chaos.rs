//! Faults for the indexer's DynamoDB client, injected by an SDK interceptor on the real client
//! talking to the real engine: errors, stalls that time an invocation out mid-batch (a kill,
//! signalled to the poller through its [`KillSwitch`]), throttling (a batch handed back as
//! unprocessed), and outages (every write fails). Only the fault is simulated; everything else
//! is the real request path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::stream::KillSwitch;

/// Shares of write requests that fail, stall (the invocation is stopped at its timeout) or
/// come back throttled.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub error: f64,
    pub stall: f64,
    pub throttle: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Self {
            error: 0.10,
            stall: 0.05,
            throttle: 0.30,
        }
    }
}

#[derive(Debug)]
pub struct Chaos {
    rates: Rates,
    rng: Mutex<StdRng>,
    /// The last BatchWriteItem request body, to hand back as unprocessed.
    /// While set, every write fails (an outage of the table or the network).
    pub outage: AtomicBool,
    /// Faults injected so far.
    pub faults: AtomicU64,
    /// Thrown by a stall once handed to a poller, which resets it before each invocation.
    killed: KillSwitch,
    /// Whether [`Chaos::kill_switch`] was called: without a poller to reset it, a thrown switch
    /// would fail every later request.
    switch_taken: AtomicBool,
}

impl Chaos {
    pub fn new(seed: u64, rates: Rates) -> Arc<Self> {
        Arc::new(Self {
            rates,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            outage: AtomicBool::new(false),
            faults: AtomicU64::new(0),
            killed: KillSwitch::default(),
            switch_taken: AtomicBool::new(false),
        })
    }

    /// The switch a stall throws: give it to the poller (`Poller::kill_switch`), which then
    /// treats the invocation as timed out. Without it a stall is only an error.
    pub fn kill_switch(&self) -> KillSwitch {
        self.switch_taken.store(true, Ordering::SeqCst);
        self.killed.clone()
    }

    pub fn faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    /// A client like `client` whose requests pass through this chaos.
    pub fn client(self: &Arc<Self>, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        intercepted(client, ChaosHandle(self.clone()))
    }

    fn roll(&self) -> f64 {
        self.rng.lock().map(|mut r| r.r#gen()).unwrap_or(1.0)
    }
}

/// A client like `client` whose requests also pass through `interceptor` (this module's
/// faults, or a test's own).
pub fn intercepted(
    client: &aws_sdk_dynamodb::Client,
    interceptor: impl Intercept + 'static,
) -> aws_sdk_dynamodb::Client {
    let config = client
        .config()
        .to_builder()
        .interceptor(interceptor)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// The operation a request calls (`DynamoDB_20120810.PutItem`), from its `x-amz-target`.
pub fn target(request: &HttpRequest) -> String {
    request
        .headers()
        .get("x-amz-target")
        .unwrap_or_default()
        .to_string()
}

/// Empties a request so that nothing it asked for is written (the engine refuses an empty
/// body); a test then answers it with [`answer_error`], as DynamoDB would have refused it.
pub fn void_request(request: &mut HttpRequest) {
    request.headers_mut().insert("content-length", "2");
    *request.body_mut() = SdkBody::from("{}");
}

/// Replaces a response with DynamoDB's error `error_type` (its short name, such as
/// `TransactionConflictException`) and `message`, as a 400.
pub fn answer_error(
    response: &mut aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    error_type: &str,
    message: &str,
) -> Result<(), BoxError> {
    response.headers_mut().remove("x-amz-crc32");
    *response.status_mut() = 400u16.try_into()?;
    *response.body_mut() = SdkBody::from(
        json!({
            "__type": format!("com.amazonaws.dynamodb.v20120810#{error_type}"),
            "message": message,
        })
        .to_string(),
    );
    Ok(())
}

/// Whether the operation writes items: the requests faults are injected into.
pub fn is_write(target: &str) -> bool {
    target.ends_with("BatchWriteItem")
        || target.ends_with("PutItem")
        || target.ends_with("UpdateItem")
}

/// The request body of a batch this attempt hands back as unprocessed (`None`: it does not).
#[derive(Debug, Clone)]
struct Throttled(Option<Vec<u8>>);

impl Storable for Throttled {
    type Storer = StoreReplace<Self>;
}

/// Interceptors are registered by value; the handle shares one `Chaos` with the test.
#[derive(Debug, Clone)]
struct ChaosHandle(Arc<Chaos>);

impl Intercept for ChaosHandle {
    fn name(&self) -> &'static str {
        "Chaos"
    }

    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let chaos = &self.0;
        if chaos.killed.is_killed() {
            // The invocation was stopped: nothing it would still send leaves.
            return Err("injected: the invocation was stopped at its timeout".into());
        }
        let op = target(ctx.request());
        if !is_write(&op) {
            return Ok(());
        }
        // No attempt's throttling outlives it (a retried attempt decides again).
        cfg.interceptor_state().store_put(Throttled(None));
        if chaos.outage.load(Ordering::Relaxed) {
            chaos.faults.fetch_add(1, Ordering::Relaxed);
            return Err("injected: the table is unreachable".into());
        }
        let r = chaos.rates;
        let roll = chaos.roll();
        if roll < r.error {
            chaos.faults.fetch_add(1, Ordering::Relaxed);
            return Err("injected: connection reset".into());
        }
        if roll < r.error + r.stall {
            // A write slow enough for the invocation to time out mid-batch. Lambda then stops
            // the invocation: what it sent before has landed (requests already in flight run
            // to their end), this and later requests never leave. (Letting it go out after the
            // timeout would model an invocation that outlives its own kill, which Lambda does
            // not allow.) A switch rather than a sleep past a short timeout: the cut falls at
            // the same request however slow the machine.
            chaos.faults.fetch_add(1, Ordering::Relaxed);
            if chaos.switch_taken.load(Ordering::SeqCst) {
                chaos.killed.kill();
            }
            return Err("injected: the invocation was stopped at its timeout".into());
        }
        if op.ends_with("BatchWriteItem") && roll > 1.0 - r.throttle {
            let batch = ctx.request().body().bytes().map(<[u8]>::to_vec);
            cfg.interceptor_state().store_put(Throttled(batch));
        }
        Ok(())
    }

    /// Throttling as DynamoDB reports it in a batch: the items come back unprocessed (the
    /// engine did apply them, which a retry makes harmless: writes are idempotent). Only the
    /// response of the very batch chosen is changed: the choice lives in that operation's
    /// config bag. (Kept on the shared `Chaos`, a choice whose invocation was cut before its
    /// response was read fell on the next response of any kind — the retried invocation's
    /// watermark read came back empty, which no DynamoDB does, and the chaos test failed.)
    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let chaos = &self.0;
        let Some(Throttled(Some(request))) = cfg.load::<Throttled>().cloned() else {
            return Ok(());
        };
        cfg.interceptor_state().store_put(Throttled(None));
        let request: Value = serde_json::from_slice(&request)?;
        let body = json!({ "UnprocessedItems": request["RequestItems"] }).to_string();
        chaos.faults.fetch_add(1, Ordering::Relaxed);
        let response = ctx.response_mut();
        response.headers_mut().remove("x-amz-crc32");
        *response.body_mut() = SdkBody::from(body);
        Ok(())
    }
}
