//! The local event source mapping: reads the records table's real change stream (DynamoDB
//! Streams API) and invokes the indexer's handler with the `aws_lambda_events` event Lambda
//! would deliver, with Lambda's semantics for partial batch failures: a reported failure is
//! retried from its sequence number, and after `max_retries` the batch from that record on —
//! every record of it, whatever issue or tenant — goes to the on-failure queue (here, a list
//! and the log) and the shard moves past it, as Lambda does.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use gridline::index::indexer::Indexer;
use serde_json::{Value, json};

/// Records per GetRecords call: Lambda's default batch size for DynamoDB streams.
pub const BATCH_SIZE: i32 = 100;

#[derive(Default)]
struct Shard {
    iterator: Option<String>,
    started: bool,
    done: bool,
    attempts: HashMap<String, u32>,
}

pub struct Poller {
    ddb: aws_sdk_dynamodb::Client,
    streams: aws_sdk_dynamodbstreams::Client,
    table: String,
    indexer: Indexer,
    stream_arn: Option<String>,
    shards: BTreeMap<String, Shard>,
    /// Retries of a failing record before it goes to the on-failure list.
    pub max_retries: u32,
    /// What went to the on-failure "queue": messages in the shape Lambda sends to an SQS
    /// on-failure destination (a `DDBStreamBatchInfo` naming the shard and sequence range).
    pub dead_letters: Vec<Value>,
    /// Print each invocation's EMF metrics line, as the Lambda does (off in benchmarks).
    pub emit_metrics: bool,
    /// Also append each message, one JSON per line, to this file (`make dev`), where
    /// `gridctl replay --file` reads them.
    pub on_failure_file: Option<std::path::PathBuf>,
    /// Deliver every batch twice (tests of at-least-once delivery).
    pub duplicate_delivery: bool,
    /// Like a Lambda timeout: an invocation still running after this is abandoned mid-batch
    /// and the whole batch is delivered again.
    pub invocation_timeout: Option<std::time::Duration>,
    /// The function's policy and its on-failure queue: the send is checked against
    /// `sqs:SendMessage` as AWS checks the function's role.
    pub on_failure_policy: Option<(std::sync::Arc<crate::guard::Policy>, String)>,
    /// The indexer's DynamoDB requests in flight, awaited after a timed-out invocation.
    pub in_flight: Option<crate::guard::InFlight>,
    /// Set by a fault injector to stop the running invocation as its timeout would (see
    /// [`KillSwitch`]).
    pub kill_switch: Option<KillSwitch>,
}

/// A fault injector's signal that the running invocation has been stopped at its timeout: once
/// set, the injector fails every request the invocation still makes, and the poller treats the
/// invocation as timed out. It cuts an invocation at the same point on a slow machine as on a
/// fast one, where a short wall-clock timeout would cut a slow machine's every invocation.
#[derive(Debug, Clone, Default)]
pub struct KillSwitch(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl KillSwitch {
    pub fn kill(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_killed(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn reset(&self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The longest a batch whose invocation timed out waits for the invocation's requests to land
/// before it is delivered again.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A streams client for the same endpoint and credentials as the DynamoDB client.
pub async fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    aws_sdk_dynamodbstreams::Client::new(&gridline::store::sdk_config(Some(endpoint)).await)
}

impl Poller {
    pub fn new(
        ddb: aws_sdk_dynamodb::Client,
        streams: aws_sdk_dynamodbstreams::Client,
        table: impl Into<String>,
        indexer: Indexer,
        max_retries: u32,
    ) -> Self {
        Self {
            ddb,
            streams,
            table: table.into(),
            indexer,
            stream_arn: None,
            shards: BTreeMap::new(),
            max_retries,
            dead_letters: Vec::new(),
            on_failure_file: None,
            emit_metrics: true,
            duplicate_delivery: false,
            invocation_timeout: None,
            on_failure_policy: None,
            in_flight: None,
            kill_switch: None,
        }
    }

    async fn refresh_shards(&mut self) -> Result<String> {
        let arn = match &self.stream_arn {
            Some(a) => a.clone(),
            None => {
                let out = self
                    .ddb
                    .describe_table()
                    .table_name(&self.table)
                    .send()
                    .await?;
                let arn = out
                    .table
                    .and_then(|t| t.latest_stream_arn)
                    .context("the records table has no stream")?;
                self.stream_arn = Some(arn.clone());
                arn
            }
        };
        let out = self
            .streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await?;
        for shard in out
            .stream_description
            .map(|d| d.shards.unwrap_or_default())
            .unwrap_or_default()
        {
            if let Some(id) = shard.shard_id {
                self.shards.entry(id).or_default();
            }
        }
        Ok(arn)
    }

    async fn iterator(
        &self,
        arn: &str,
        shard: &str,
        kind: ShardIteratorType,
        seq: Option<&str>,
    ) -> Result<Option<String>> {
        let out = self
            .streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(seq.map(str::to_string))
            .send()
            .await?;
        Ok(out.shard_iterator)
    }

    /// One pass over every shard; returns how many records were delivered.
    pub async fn poll_once(&mut self) -> Result<usize> {
        let arn = self.refresh_shards().await?;
        let mut delivered = 0;
        let ids: Vec<String> = self.shards.keys().cloned().collect();
        for id in ids {
            let Some(iterator) = self.current_iterator(&arn, &id).await? else {
                continue;
            };
            let out = self
                .streams
                .get_records()
                .shard_iterator(iterator)
                .limit(BATCH_SIZE)
                .send()
                .await?;
            let records = out.records.unwrap_or_default();
            let mut next = out.next_shard_iterator;
            if !records.is_empty() {
                delivered += records.len();
                let event = to_event(&records, &arn)?;
                let mut failed = self.invoke(&event).await;
                if self.duplicate_delivery && failed.is_none() {
                    failed = self.invoke(&event).await;
                }
                if let Some(seq) = failed {
                    next = self.after_failure(&arn, &id, &event, seq).await?;
                }
            }
            if let Some(s) = self.shards.get_mut(&id) {
                s.done = next.is_none();
                s.iterator = next;
            }
        }
        Ok(delivered)
    }

    /// The shard's iterator, from its start the first time; `None` (and the shard marked
    /// done) once it is closed and read to its end.
    async fn current_iterator(&mut self, arn: &str, id: &str) -> Result<Option<String>> {
        let (started, done) = {
            let s = &self.shards[id];
            (s.started, s.done)
        };
        if done {
            return Ok(None);
        }
        if !started {
            let it = self
                .iterator(arn, id, ShardIteratorType::TrimHorizon, None)
                .await?;
            if let Some(s) = self.shards.get_mut(id) {
                s.iterator = it;
                s.started = true;
            }
        }
        let iterator = self.shards.get(id).and_then(|s| s.iterator.clone());
        if iterator.is_none()
            && let Some(s) = self.shards.get_mut(id)
        {
            s.done = true;
        }
        Ok(iterator)
    }

    /// Where the shard goes on after the batch failed at `seq`: back to `seq` for a retry, or
    /// past the batch once its retries are spent.
    async fn after_failure(
        &mut self,
        arn: &str,
        id: &str,
        event: &Event,
        seq: String,
    ) -> Result<Option<String>> {
        let attempts = {
            let s = self.shards.entry(id.to_string()).or_default();
            let a = s.attempts.entry(seq.clone()).or_default();
            *a += 1;
            *a
        };
        if attempts <= self.max_retries {
            return self
                .iterator(arn, id, ShardIteratorType::AtSequenceNumber, Some(&seq))
                .await;
        }
        // Like the mapping's on-failure destination: the batch being retried (the failed
        // record and every one after it in the batch) is described to the queue and the shard
        // moves past all of it.
        let from = event
            .records
            .iter()
            .position(|r| r.change.sequence_number.as_deref() == Some(seq.as_str()))
            .unwrap_or(0);
        let range = &event.records[from..];
        let last = range
            .last()
            .and_then(|r| r.change.sequence_number.clone())
            .unwrap_or_else(|| seq.clone());
        tracing::error!(start = %seq, end = %last, records = range.len(), shard = %id, "batch sent to the on-failure queue");
        let message = on_failure_message(arn, id, attempts, range);
        if let Some((policy, queue)) = &self.on_failure_policy {
            policy
                .check("sqs:SendMessage", queue)
                .map_err(|d| anyhow::anyhow!("AccessDeniedException: {}", d.message()))?;
        }
        if let Some(path) = &self.on_failure_file {
            append_line(path, &message);
        }
        self.dead_letters.push(message);
        self.iterator(arn, id, ShardIteratorType::AfterSequenceNumber, Some(&last))
            .await
    }

    /// Invokes the handler once: `None` on success, else the sequence number to retry from
    /// (the batch's first record when the invocation timed out).
    async fn invoke(&self, event: &Event) -> Option<String> {
        let indexer = self.indexer.clone();
        let emit = self.emit_metrics;
        let event_copy = event.clone();
        let call = async move {
            if emit {
                indexer.handle_and_report(event_copy).await
            } else {
                indexer.handle(event_copy).await.0
            }
        };
        if let Some(switch) = &self.kill_switch {
            switch.reset();
        }
        let response = match self.invocation_timeout {
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(r) => r,
                Err(_) => return self.timed_out(event).await,
            },
            None => call.await,
        };
        if self.kill_switch.as_ref().is_some_and(KillSwitch::is_killed) {
            return self.timed_out(event).await;
        }
        response
            .batch_item_failures
            .first()
            .and_then(|f| f.item_identifier.clone())
    }

    /// After an invocation was stopped at its timeout: the whole batch is delivered again,
    /// once what the invocation had sent has landed.
    async fn timed_out(&self, event: &Event) -> Option<String> {
        tracing::warn!("indexer invocation timed out; the batch will be retried");
        // Lambda stops a timed-out invocation and retries the batch later, by which time what
        // the invocation had sent has landed (DynamoDB applies a write within milliseconds).
        // The local engine may still be applying a request the abandoned invocation sent (on a
        // busy machine, for longer than any fixed pause); retrying first would let it land
        // after the retry's own writes, which no Lambda retry sees.
        if let Some(in_flight) = &self.in_flight {
            in_flight.settled(SETTLE_LIMIT).await;
        }
        event
            .records
            .first()
            .and_then(|r| r.change.sequence_number.clone())
    }

    /// Polls until a pass delivers nothing (bounded, so a stuck stream fails a test rather
    /// than hanging it).
    pub async fn drain(&mut self) -> Result<()> {
        for _ in 0..10_000 {
            if self.poll_once().await? == 0 {
                return Ok(());
            }
        }
        anyhow::bail!("the stream did not drain")
    }

    /// Polls forever, as the event source mapping would (the local stack).
    pub async fn run(mut self, every: std::time::Duration) {
        loop {
            if let Err(e) = self.poll_once().await {
                tracing::warn!(error = %e, "stream poll failed; retrying");
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// The event Lambda delivers for these stream records.
pub fn to_event(records: &[Record], stream_arn: &str) -> Result<Event> {
    let records: Vec<EventRecord> = records
        .iter()
        .map(|r| {
            let d = r.dynamodb.as_ref().context("stream record without dynamodb")?;
            let image = |i: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
                i.map(|m| serde_json::to_value(serde_dynamo::Item::from(m.clone())))
                    .transpose()
                    .map(|v| v.unwrap_or(Value::Null))
            };
            let value = json!({
                "eventID": r.event_id,
                "eventName": r.event_name.as_ref().map(|n| n.as_str()),
                "eventVersion": r.event_version,
                "eventSource": "aws:dynamodb",
                "awsRegion": r.aws_region.clone().unwrap_or_else(|| "us-east-1".into()),
                "eventSourceARN": stream_arn,
                "dynamodb": {
                    "ApproximateCreationDateTime": d.approximate_creation_date_time.map(|t| t.as_secs_f64()),
                    "Keys": image(d.keys.as_ref())?,
                    "NewImage": image(d.new_image.as_ref())?,
                    "OldImage": image(d.old_image.as_ref())?,
                    "SequenceNumber": d.sequence_number,
                    "SizeBytes": d.size_bytes.unwrap_or_default(),
                    "StreamViewType": d.stream_view_type.as_ref().map(|v| v.as_str()),
                }
            });
            serde_json::from_value(value).context("building the Lambda event")
        })
        .collect::<Result<_>>()?;
    let mut event = Event::default();
    event.records = records;
    Ok(event)
}

/// The message Lambda sends to a stream mapping's on-failure destination: it describes the
/// batch that exhausted its retries (from the failed record to the batch's last), it does not
/// carry the records.
pub fn on_failure_message(
    stream_arn: &str,
    shard_id: &str,
    attempts: u32,
    records: &[EventRecord],
) -> Value {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let arrival = |r: Option<&EventRecord>| {
        r.map(|r| r.change.approximate_creation_date_time.to_rfc3339())
            .unwrap_or_else(|| now.clone())
    };
    let seq = |r: Option<&EventRecord>| {
        r.and_then(|r| r.change.sequence_number.clone())
            .unwrap_or_default()
    };
    let (first, last) = (records.first(), records.last());
    json!({
        "requestContext": {
            "requestId": ulid::Ulid::new().to_string(),
            "functionArn": "arn:aws:lambda:local:000000000000:function:indexer",
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": attempts + 1
        },
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled"
        },
        "version": "1.0",
        "timestamp": now,
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": seq(first),
            "endSequenceNumber": seq(last),
            "approximateArrivalOfFirstRecord": arrival(first),
            "approximateArrivalOfLastRecord": arrival(last),
            "batchSize": records.len(),
            "streamArn": stream_arn
        }
    })
}

fn append_line(path: &std::path::Path, message: &Value) {
    use std::io::Write;
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{message}"));
    if let Err(e) = result {
        tracing::error!(error = %e, path = %path.display(), "could not record the on-failure message");
    }
}
