//! Counts what every DynamoDB call costs: an SDK interceptor asks each request for
//! `ReturnConsumedCapacity: TOTAL` and reads the engine's answer (capacity units, items
//! returned, write requests sent). The engine reports capacity by DynamoDB's rules (reads in
//! 4 KB units, half for eventually consistent reads; writes in 1 KB units).

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeTransmitInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemOutput, batch_write_item::BatchWriteItemOutput,
    delete_item::DeleteItemOutput, get_item::GetItemOutput, put_item::PutItemOutput,
    query::QueryOutput, scan::ScanOutput, transact_write_items::TransactWriteItemsOutput,
    update_item::UpdateItemOutput,
};
use aws_sdk_dynamodb::types::ConsumedCapacity;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::body::SdkBody;
use serde_json::Value;

#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub calls: u64,
    pub capacity: f64,
    pub items: u64,
    pub write_requests: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            calls: self.calls - o.calls,
            capacity: self.capacity - o.capacity,
            items: self.items - o.items,
            write_requests: self.write_requests - o.write_requests,
        }
    }
}

#[derive(Debug, Default)]
pub struct Meter {
    counts: Mutex<Counts>,
}

impl Meter {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn now(&self) -> Counts {
        self.counts.lock().map(|c| *c).unwrap_or_default()
    }

    /// A client like `client` whose calls are counted here.
    pub fn client(self: &Arc<Self>, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        gridline_local::with_interceptor(client, Handle(self.clone()))
    }

    fn add(&self, f: impl FnOnce(&mut Counts)) {
        if let Ok(mut c) = self.counts.lock() {
            f(&mut c);
        }
    }
}

fn units(c: Option<&ConsumedCapacity>) -> f64 {
    c.and_then(|c| c.capacity_units()).unwrap_or(0.0)
}

fn units_all(cs: &[ConsumedCapacity]) -> f64 {
    cs.iter().map(|c| c.capacity_units().unwrap_or(0.0)).sum()
}

/// Capacity units and items read, from whichever operation's output this is.
fn measure_output(
    output: &aws_smithy_runtime_api::client::interceptors::context::Output,
) -> (f64, u64) {
    // Items read, not returned: a FilterExpression discards after reading (and charging).
    if let Some(o) = output.downcast_ref::<QueryOutput>() {
        return (
            units(o.consumed_capacity()),
            o.scanned_count().max(0) as u64,
        );
    }
    if let Some(o) = output.downcast_ref::<ScanOutput>() {
        return (
            units(o.consumed_capacity()),
            o.scanned_count().max(0) as u64,
        );
    }
    if let Some(o) = output.downcast_ref::<GetItemOutput>() {
        return (units(o.consumed_capacity()), u64::from(o.item().is_some()));
    }
    if let Some(o) = output.downcast_ref::<BatchGetItemOutput>() {
        let items = o
            .responses()
            .map_or(0, |r| r.values().map(|v| v.len() as u64).sum());
        return (units_all(o.consumed_capacity()), items);
    }
    if let Some(o) = output.downcast_ref::<PutItemOutput>() {
        return (units(o.consumed_capacity()), 0);
    }
    if let Some(o) = output.downcast_ref::<UpdateItemOutput>() {
        return (units(o.consumed_capacity()), 0);
    }
    if let Some(o) = output.downcast_ref::<DeleteItemOutput>() {
        return (units(o.consumed_capacity()), 0);
    }
    if let Some(o) = output.downcast_ref::<BatchWriteItemOutput>() {
        return (units_all(o.consumed_capacity()), 0);
    }
    if let Some(o) = output.downcast_ref::<TransactWriteItemsOutput>() {
        return (units_all(o.consumed_capacity()), 0);
    }
    (0.0, 0)
}

/// Adds `ReturnConsumedCapacity: TOTAL` to a request's body; the write requests it sends (a
/// batch's or transaction's items, or one for a single write).
fn ask_for_capacity(request: &mut HttpRequest) -> Result<u64, BoxError> {
    let target = request
        .headers()
        .get("x-amz-target")
        .unwrap_or_default()
        .to_string();
    let single_write = ["PutItem", "UpdateItem", "DeleteItem"]
        .iter()
        .any(|op| target.ends_with(&format!(".{op}")));
    let Some(bytes) = request.body().bytes() else {
        return Ok(0);
    };
    let mut body: Value = serde_json::from_slice(bytes)?;
    let writes = match body.get("RequestItems") {
        Some(Value::Object(tables)) => tables
            .values()
            .filter_map(Value::as_array)
            .map(|a| a.len() as u64)
            .sum(),
        _ => 0,
    } + body
        .get("TransactItems")
        .and_then(Value::as_array)
        .map_or(0, |a| a.len() as u64)
        + u64::from(single_write);
    if let Value::Object(o) = &mut body {
        o.insert(
            "ReturnConsumedCapacity".into(),
            Value::String("TOTAL".into()),
        );
    }
    let bytes = serde_json::to_vec(&body)?;
    request
        .headers_mut()
        .insert("content-length", bytes.len().to_string());
    *request.body_mut() = SdkBody::from(bytes);
    Ok(writes)
}

/// Interceptors are registered by value; the handle shares one `Meter` with the bench.
#[derive(Debug, Clone)]
struct Handle(Arc<Meter>);

impl Intercept for Handle {
    fn name(&self) -> &'static str {
        "BenchMeter"
    }

    fn modify_before_signing(
        &self,
        ctx: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let writes = ask_for_capacity(ctx.request_mut())?;
        self.0.add(|c| {
            c.calls += 1;
            c.write_requests += writes;
        });
        Ok(())
    }

    /// The typed output, once parsed: its consumed capacity and the items it returned.
    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Ok(output)) = ctx.output_or_error() else {
            return Ok(());
        };
        let (capacity, items) = measure_output(output);
        self.0.add(|c| {
            c.capacity += capacity;
            c.items += items;
        });
        Ok(())
    }
}
