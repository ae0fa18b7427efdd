//! The local event source mapping: reads the records table's real change stream (DynamoDB
//! Streams API) and invokes the indexer's handler with the `aws_lambda_events` event Lambda
//! would deliver, with Lambda's semantics for partial batch failures: a reported failure is
//! retried from its sequence number, and after `max_retries` the batch from that record on —
//! every record of it, whatever issue or tenant — goes to the on-failure queue (here, a list
//! and the log) and the shard moves past it, as Lambda does.
//!
//! Like a mapping, it can keep its place across restarts ([`Poller::checkpoint_file`]): per
//! stream ARN and shard, the sequence number of the last record it has finished with. The
//! embedded engine keeps both names stable on a data file: the stream's label is stored with
//! the table when the table is created (so the ARN changes only when the table is recreated)
//! and the shard id is derived from the table's name (dynoxide has one shard per table).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodbstreams::error::SdkError;
use aws_sdk_dynamodbstreams::types::{Record, SequenceNumberRange, ShardIteratorType};
use gridline::indexer::Indexer;
use serde_json::{Value, json};

/// Records per GetRecords call: Lambda's default batch size for DynamoDB streams.
pub const BATCH_SIZE: i32 = 100;

/// The checkpoint file's name, beside the data file (`make dev`).
pub const CHECKPOINT_FILE: &str = "stream-checkpoint.json";

/// Where a stack on the data file `data` keeps its poller's checkpoint.
pub fn checkpoint_path(data: &Path) -> PathBuf {
    data.with_file_name(CHECKPOINT_FILE)
}

#[derive(Default)]
struct Shard {
    iterator: Option<String>,
    started: bool,
    done: bool,
    attempts: HashMap<String, u32>,
    /// The shard's sequence numbers as the stream last described them.
    range: Option<SequenceNumberRange>,
    /// The sequence number of the last record finished with: indexed, or sent to the
    /// on-failure list. What the checkpoint keeps.
    finished: Option<String>,
}

/// The checkpoint file: per stream ARN, per shard id, the last sequence number finished with.
type Checkpoints = BTreeMap<String, BTreeMap<String, String>>;

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct CheckpointFile {
    streams: Checkpoints,
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
    /// Keep the place in the stream in this file (`make dev`: [`checkpoint_path`]), so a
    /// restart resumes after the last record finished with instead of at TRIM_HORIZON. Read
    /// when the poller first finds its stream; written (temp file and rename) after a pass that
    /// moved a shard on. `None` (tests, in-memory stacks): every start reads from the horizon.
    pub checkpoint_file: Option<PathBuf>,
    /// The checkpoints read from the file for this stream, by shard, until each shard starts.
    resume: BTreeMap<String, String>,
    /// What the file holds for other tables' streams, written back untouched.
    other_streams: Checkpoints,
    /// This stream's shards as last written, so an unchanged checkpoint is not rewritten.
    saved: BTreeMap<String, String>,
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

    pub(crate) fn reset(&self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The longest a batch whose invocation timed out waits for the invocation's requests to land
/// before it is delivered again.
pub(crate) const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A streams client for the same endpoint and credentials as the DynamoDB client.
pub async fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    aws_sdk_dynamodbstreams::Client::new(&gridline::store::sdk_config(Some(endpoint)).await)
}

impl Poller {
    /// Runs the rest of the stream through `indexer` instead (the benchmarks' metered one),
    /// from where this poller stopped.
    pub fn set_indexer(&mut self, indexer: Indexer) {
        self.indexer = indexer;
    }

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
            checkpoint_file: None,
            resume: BTreeMap::new(),
            other_streams: BTreeMap::new(),
            saved: BTreeMap::new(),
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
                self.load_checkpoint(&arn);
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
                self.shards.entry(id).or_default().range = shard.sequence_number_range;
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
        let delivered = self.poll_shards().await;
        // Also after a failed pass: a shard read before the failure has moved on.
        self.save_checkpoint();
        delivered
    }

    async fn poll_shards(&mut self) -> Result<usize> {
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
                match failed {
                    None => self.finish(&id, last_sequence(&event.records)),
                    Some(seq) => {
                        // Up to the record before the one retried (none of a timed-out
                        // batch); past the batch if it goes to the on-failure list.
                        self.finish(&id, before_sequence(&event.records, &seq));
                        next = self.after_failure(&arn, &id, &event, seq).await?;
                    }
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
            let it = self.first_iterator(arn, id).await?;
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

    /// Where a shard starts: after its checkpoint when the stream still holds that record,
    /// else at TRIM_HORIZON (delivering again what was indexed is safe: the indexer is
    /// idempotent).
    async fn first_iterator(&mut self, arn: &str, id: &str) -> Result<Option<String>> {
        if let Some(seq) = self.resume.get(id).cloned() {
            let range = self.shards.get(id).and_then(|s| s.range.as_ref());
            match unknown_checkpoint(&seq, range) {
                Some(why) => {
                    tracing::warn!(shard = %id, checkpoint = %seq, "{why}: reading the shard from TRIM_HORIZON");
                }
                None => {
                    let out = self
                        .streams
                        .get_shard_iterator()
                        .stream_arn(arn)
                        .shard_id(id)
                        .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                        .sequence_number(&seq)
                        .send()
                        .await;
                    match out {
                        Ok(out) => {
                            self.resume.remove(id);
                            self.finish(id, Some(seq));
                            return Ok(out.shard_iterator);
                        }
                        // The engine refused the number (trimmed, or not of this shard).
                        Err(SdkError::ServiceError(e)) => {
                            let e = e.into_err();
                            tracing::warn!(shard = %id, checkpoint = %seq, error = %e, "the stream refused to resume after the checkpoint: reading the shard from TRIM_HORIZON");
                        }
                        // No answer: try again on the next pass, checkpoint kept.
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            self.resume.remove(id);
        }
        self.iterator(arn, id, ShardIteratorType::TrimHorizon, None)
            .await
    }

    /// Records that the shard is done with every record up to `seq`.
    fn finish(&mut self, id: &str, seq: Option<String>) {
        if let Some(seq) = seq
            && let Some(s) = self.shards.get_mut(id)
        {
            s.finished = Some(seq);
        }
    }

    /// Reads the checkpoint file for the stream `arn`. A missing file is a first start; one
    /// that cannot be read is reported and ignored (every shard starts at TRIM_HORIZON). The
    /// checkpoint of another stream of the same table (the table was recreated) is dropped;
    /// other tables' are kept as they are.
    fn load_checkpoint(&mut self, arn: &str) {
        let Some(path) = &self.checkpoint_file else {
            return;
        };
        let file = match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<CheckpointFile>(&bytes) {
                Ok(file) => file,
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "unreadable stream checkpoint ignored: reading the stream from TRIM_HORIZON");
                    return;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "stream checkpoint not read: reading the stream from TRIM_HORIZON");
                return;
            }
        };
        for (stream, shards) in file.streams {
            if stream == arn {
                self.resume = shards.clone();
                self.saved = shards;
            } else if table_of(&stream) == table_of(arn) {
                tracing::warn!(stream = %stream, "ignoring the checkpoint of the table's earlier stream");
            } else {
                self.other_streams.insert(stream, shards);
            }
        }
    }

    /// Writes the checkpoint file if a shard moved on since it was last written: to a
    /// temporary file first, renamed over the old one, so a crash leaves one or the other.
    fn save_checkpoint(&mut self) {
        let (Some(path), Some(arn)) = (&self.checkpoint_file, &self.stream_arn) else {
            return;
        };
        // A shard not started yet keeps the checkpoint it was read with.
        let mut current = self.resume.clone();
        current.extend(
            self.shards
                .iter()
                .filter_map(|(id, s)| Some((id.clone(), s.finished.clone()?))),
        );
        if current == self.saved {
            return;
        }
        let mut streams = self.other_streams.clone();
        streams.insert(arn.clone(), current.clone());
        match write_atomically(path, &CheckpointFile { streams }) {
            Ok(()) => self.saved = current,
            Err(e) => {
                tracing::error!(error = %e, path = %path.display(), "could not write the stream checkpoint")
            }
        }
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
        self.finish(id, Some(last.clone()));
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
            // The handler gets the JSON Lambda would send, and decodes it as in Lambda.
            let (response, metrics) =
                gridline::runtime::handle_stream_event(&indexer, &event_copy).await;
            if emit {
                println!("{}", metrics.emf());
            }
            response
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

/// The sequence number of a batch's last record.
fn last_sequence(records: &[EventRecord]) -> Option<String> {
    records
        .last()
        .and_then(|r| r.change.sequence_number.clone())
}

/// The sequence number of the record before the one numbered `seq`, if the batch has one.
fn before_sequence(records: &[EventRecord], seq: &str) -> Option<String> {
    let at = records
        .iter()
        .position(|r| r.change.sequence_number.as_deref() == Some(seq))?;
    records
        .get(at.checked_sub(1)?)
        .and_then(|r| r.change.sequence_number.clone())
}

/// The table part of a stream ARN (`…:table/NAME/stream/LABEL`): the same for every stream
/// a table has had.
fn table_of(stream_arn: &str) -> &str {
    stream_arn
        .split_once("/stream/")
        .map_or(stream_arn, |(table, _)| table)
}

/// Why a shard cannot resume after `seq`, if it cannot. dynoxide hands out an
/// AFTER_SEQUENCE_NUMBER iterator for any well-formed number, even one past the shard's last
/// record, which would then skip every new record until the stream caught up with it; so the
/// number is checked against the shard's range here.
fn unknown_checkpoint(seq: &str, range: Option<&SequenceNumberRange>) -> Option<&'static str> {
    let Some(start) = range.and_then(|r| r.starting_sequence_number.as_deref()) else {
        return Some("the checkpoint names a record of a shard that holds none");
    };
    match compare_sequence(seq, start) {
        None => return Some("the checkpoint is not a sequence number"),
        Some(Ordering::Less) => {
            return Some("the checkpoint is older than the shard's oldest record (trimmed)");
        }
        Some(_) => {}
    }
    // An open shard in AWS has no ending number; dynoxide gives its last record's.
    let end = range.and_then(|r| r.ending_sequence_number.as_deref());
    if let Some(end) = end
        && compare_sequence(seq, end) == Some(Ordering::Greater)
    {
        return Some("the checkpoint is past the shard's last record");
    }
    None
}

/// Orders two sequence numbers: decimal strings of up to 40 digits, more than an integer
/// type holds. `None` if either is not one.
fn compare_sequence(a: &str, b: &str) -> Option<Ordering> {
    fn digits(s: &str) -> Option<&str> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.trim_start_matches('0'))
    }
    let (a, b) = (digits(a)?, digits(b)?);
    Some(a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// Writes `value` as JSON to `path` through a temporary file beside it and a rename.
fn write_atomically(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_order_by_value_past_what_an_integer_holds() {
        let long = "9".repeat(40);
        assert_eq!(compare_sequence(&long, "1"), Some(Ordering::Greater));
        assert_eq!(compare_sequence("0042", "42"), Some(Ordering::Equal));
        assert_eq!(compare_sequence("100", "99"), Some(Ordering::Greater));
        assert_eq!(compare_sequence("", "1"), None);
        assert_eq!(compare_sequence("12a", "1"), None);
    }

    #[test]
    fn a_checkpoint_resumes_only_inside_the_shards_range() {
        let range = |start: Option<&str>, end: Option<&str>| {
            SequenceNumberRange::builder()
                .set_starting_sequence_number(start.map(str::to_string))
                .set_ending_sequence_number(end.map(str::to_string))
                .build()
        };
        let closed = range(Some("200"), Some("300"));
        assert_eq!(unknown_checkpoint("200", Some(&closed)), None);
        assert_eq!(unknown_checkpoint("300", Some(&closed)), None);
        assert!(unknown_checkpoint("199", Some(&closed)).is_some());
        assert!(unknown_checkpoint("301", Some(&closed)).is_some());
        // An open shard in AWS: no end to check against.
        assert_eq!(
            unknown_checkpoint("9000", Some(&range(Some("200"), None))),
            None
        );
        assert!(unknown_checkpoint("200", Some(&range(None, None))).is_some());
        assert!(unknown_checkpoint("200", None).is_some());
    }

    #[test]
    fn every_stream_of_a_table_names_the_table() {
        let a = "arn:aws:dynamodb:dynoxide:000000000000:table/records/stream/1.5";
        let b = "arn:aws:dynamodb:dynoxide:000000000000:table/records/stream/2.5";
        let c = "arn:aws:dynamodb:dynoxide:000000000000:table/records2/stream/1.5";
        assert_eq!(table_of(a), table_of(b));
        assert_ne!(table_of(a), table_of(c));
    }
}
