//! Counts what every DynamoDB call costs: an SDK interceptor asks each request for
//! `ReturnConsumedCapacity: TOTAL` and reads the engine's answer (capacity units, items
//! returned, write requests sent). The engine reports capacity by DynamoDB's rules (reads in
//! 4 KB units, half for eventually consistent reads; writes in 1 KB units). It also keeps
//! apart the capacity of writes (WCU) and of display-name reads (a BatchGetItem of profiles and
//! teams only), which results.json reports on their own.

use std::collections::HashMap;
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
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use gridline::keys;
use serde_json::Value;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) calls: u64,
    pub(crate) capacity: f64,
    pub(crate) items: u64,
    pub(crate) write_requests: u64,
    /// The part of `capacity` consumed by writes (PutItem, UpdateItem, DeleteItem,
    /// BatchWriteItem, TransactWriteItems): WCU.
    pub(crate) write_capacity: f64,
    /// The part of `capacity` consumed by display-name reads.
    pub(crate) names_capacity: f64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            calls: self.calls - o.calls,
            capacity: self.capacity - o.capacity,
            items: self.items - o.items,
            write_requests: self.write_requests - o.write_requests,
            write_capacity: self.write_capacity - o.write_capacity,
            names_capacity: self.names_capacity - o.names_capacity,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Meter {
    counts: Mutex<Counts>,
    /// Write requests sent per partition key (every table), for the partition-load figures.
    partitions: Mutex<HashMap<String, u64>>,
}

impl Meter {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(crate) fn now(&self) -> Counts {
        self.counts.lock().map(|c| *c).unwrap_or_default()
    }

    /// Write requests sent so far, per partition key.
    pub(crate) fn partition_writes(&self) -> HashMap<String, u64> {
        self.partitions
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// A client like `client` whose calls are counted here.
    pub(crate) fn client(
        self: &Arc<Self>,
        client: &aws_sdk_dynamodb::Client,
    ) -> aws_sdk_dynamodb::Client {
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

/// What a call is, for the capacity it consumes: decided from the request, read with the
/// response (kept in the call's own config bag, so concurrent calls cannot mix them up).
#[derive(Debug, Clone, Copy, Default)]
struct Kind {
    write: bool,
    names: bool,
}

impl Storable for Kind {
    type Storer = StoreReplace<Self>;
}

/// Whether a request body reads display names only: a BatchGetItem whose every key is a
/// directory entry, a user's profile or a team, or a Query of a tenant's directory (what
/// `Records::names` asks for, now and before the directory).
fn names_only(body: &Value) -> bool {
    let directory_pk = |pk: &str| pk.starts_with("T#") && pk.ends_with("#DIR");
    if let Some(Value::Object(values)) = body.get("ExpressionAttributeValues") {
        let pk = values
            .get(":pk")
            .and_then(|v| v.pointer("/S"))
            .and_then(Value::as_str);
        return body.get("KeyConditionExpression").is_some() && pk.is_some_and(directory_pk);
    }
    let keys_of = |t: &Value| t.get("Keys").and_then(Value::as_array).cloned();
    let Some(Value::Object(tables)) = body.get("RequestItems") else {
        return false;
    };
    let keys: Vec<Value> = tables.values().filter_map(keys_of).flatten().collect();
    !keys.is_empty()
        && keys.iter().all(|k| {
            let pk = k.pointer("/PK/S").and_then(Value::as_str).unwrap_or("");
            directory_pk(pk)
                || matches!(
                    k.pointer("/SK/S").and_then(Value::as_str),
                    Some(keys::records::PROFILE_SK | keys::records::TEAM_SK)
                )
        })
}

/// The partition key of each write a request body sends: a batch's puts and deletes, a
/// transaction's items, or a single write's item or key.
fn written_partitions(body: &Value) -> Vec<String> {
    let pk = |v: Option<&Value>| {
        v.and_then(|v| v.pointer("/PK/S"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut out = Vec::new();
    if let Some(Value::Object(tables)) = body.get("RequestItems") {
        for request in tables.values().filter_map(Value::as_array).flatten() {
            out.extend(pk(request.pointer("/PutRequest/Item")));
            out.extend(pk(request.pointer("/DeleteRequest/Key")));
        }
    }
    if let Some(items) = body.get("TransactItems").and_then(Value::as_array) {
        for item in items {
            for part in ["/Put/Item", "/Delete/Key", "/Update/Key"] {
                out.extend(pk(item.pointer(part)));
            }
        }
    }
    out.extend(pk(body.get("Item")).or_else(|| pk(body.get("Key"))));
    out
}

/// Adds `ReturnConsumedCapacity: TOTAL` to a request's body; the write requests it sends (a
/// batch's or transaction's items, or one for a single write), and what kind of call it is.
fn ask_for_capacity(request: &mut HttpRequest) -> Result<(u64, Kind, Vec<String>), BoxError> {
    let target = request
        .headers()
        .get("x-amz-target")
        .unwrap_or_default()
        .to_string();
    let is = |ops: &[&str]| ops.iter().any(|op| target.ends_with(&format!(".{op}")));
    let single_write = is(&["PutItem", "UpdateItem", "DeleteItem"]);
    let write = single_write || is(&["BatchWriteItem", "TransactWriteItems"]);
    let Some(bytes) = request.body().bytes() else {
        return Ok((0, Kind::default(), Vec::new()));
    };
    let mut body: Value = serde_json::from_slice(bytes)?;
    let partitions = if write {
        written_partitions(&body)
    } else {
        Vec::new()
    };
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
    let kind = Kind {
        write,
        names: is(&["BatchGetItem", "Query"]) && names_only(&body),
    };
    let bytes = serde_json::to_vec(&body)?;
    request
        .headers_mut()
        .insert("content-length", bytes.len().to_string());
    *request.body_mut() = SdkBody::from(bytes);
    Ok((writes, kind, partitions))
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
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (writes, kind, partitions) = ask_for_capacity(ctx.request_mut())?;
        cfg.interceptor_state().store_put(kind);
        self.0.add(|c| {
            c.calls += 1;
            c.write_requests += writes;
        });
        if !partitions.is_empty()
            && let Ok(mut counts) = self.0.partitions.lock()
        {
            for pk in partitions {
                *counts.entry(pk).or_default() += 1;
            }
        }
        Ok(())
    }

    /// The typed output, once parsed: its consumed capacity and the items it returned.
    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Ok(output)) = ctx.output_or_error() else {
            return Ok(());
        };
        let (capacity, items) = measure_output(output);
        let kind = cfg.load::<Kind>().copied().unwrap_or_default();
        self.0.add(|c| {
            c.capacity += capacity;
            c.items += items;
            if kind.write {
                c.write_capacity += capacity;
            }
            if kind.names {
                c.names_capacity += capacity;
            }
        });
        Ok(())
    }
}
