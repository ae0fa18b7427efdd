//! `replay`: re-drives what the indexer's on-failure queue names. Lambda's on-failure messages
//! for a stream describe the failed batch (stream, shard, first and last sequence numbers);
//! they do not carry the records. So replay reads that range of the shard back, collects the
//! issues (and projects, for field changes) it touched, and re-indexes each from its current
//! record — which is what the records say now, whatever the failed batch held. The batch's
//! issue records also rebuild the history entries of the versions they made (each the
//! difference between the record's old and new images, as the indexer makes it).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context, Result, bail};
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use gridline::domain::ids::{IssueId, ProjectId, TeamId, TenantId};
use gridline::indexer::Indexer;
use gridline::keys;
use gridline::model::event::StreamEvent;
use gridline::model::history::{self, HistoryEntry};
use gridline::model::stream::{self, Change};
use serde::Serialize;
use serde_json::Value;

/// The part of an on-failure message replay needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    pub stream_arn: String,
    pub shard_id: String,
    pub start: String,
    pub end: String,
}

/// Parses one message body (`DDBStreamBatchInfo`, as Lambda sends it).
pub fn parse_message(body: &str) -> Result<BatchInfo> {
    let v: Value = serde_json::from_str(body).context("the message is not JSON")?;
    let info = &v["DDBStreamBatchInfo"];
    let field = |name: &str| {
        info[name]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("the message has no DDBStreamBatchInfo.{name}"))
    };
    Ok(BatchInfo {
        stream_arn: field("streamArn")?,
        shard_id: field("shardId")?,
        start: field("startSequenceNumber")?,
        end: field("endSequenceNumber")?,
    })
}

/// What a stream record changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Touched {
    Issue {
        tenant: TenantId,
        issue_id: IssueId,
    },
    Project {
        tenant: TenantId,
        project_id: ProjectId,
    },
    /// A team's item: taken off everything if it is gone.
    Team {
        tenant: TenantId,
        team_id: TeamId,
    },
}

impl Touched {
    /// What a record read back from the stream names, by its keys (see
    /// [`stream::classify`]): an issue for any item of its partition (its description too: the
    /// failed batch may have held its summary's record as well), a project for a field
    /// definition; `None` for anything else, or keys that name nothing.
    fn by(change: &aws_sdk_dynamodbstreams::types::StreamRecord) -> Option<Self> {
        let key = |name: &str| change.keys()?.get(name)?.as_s().ok().map(String::as_str);
        Some(match stream::classify(key(keys::PK), key(keys::SK)).ok()? {
            Change::Issue { tenant, issue_id } | Change::IssueDetail { tenant, issue_id } => {
                Self::Issue { tenant, issue_id }
            }
            Change::Field {
                tenant, project_id, ..
            } => Self::Project { tenant, project_id },
            Change::Team { tenant, team_id } => Self::Team { tenant, team_id },
            // A project's own item: re-indexed (or purged, if it is gone) as a whole.
            Change::Project { tenant, project_id } => Self::Project { tenant, project_id },
            Change::Ignored => return None,
        })
    }
}

/// Sequence numbers are decimal strings of varying length: compare them as numbers.
fn seq_le(a: &str, b: &str) -> bool {
    (a.len(), a) <= (b.len(), b)
}

/// What a failed batch's range, read back, touched: the issues and projects to re-index, and
/// the history entries its issue records make.
#[derive(Debug, Default)]
pub struct ReadBack {
    pub touched: BTreeSet<Touched>,
    pub history: BTreeMap<(TenantId, IssueId), Vec<HistoryEntry>>,
}

/// A stream attribute value as DynamoDB's JSON writes it (what a Lambda event holds).
fn attr_json(v: &aws_sdk_dynamodbstreams::types::AttributeValue) -> Value {
    use aws_sdk_dynamodbstreams::types::AttributeValue as A;
    match v {
        A::S(s) => serde_json::json!({ "S": s }),
        A::N(n) => serde_json::json!({ "N": n }),
        A::Ss(v) => serde_json::json!({ "SS": v }),
        A::Ns(v) => serde_json::json!({ "NS": v }),
        A::M(m) => serde_json::json!({ "M": image_json(m) }),
        A::L(l) => serde_json::json!({ "L": l.iter().map(attr_json).collect::<Vec<_>>() }),
        A::Bool(b) => serde_json::json!({ "BOOL": b }),
        // No issue attribute is binary; a null stands in for anything else.
        _ => serde_json::json!({ "NULL": true }),
    }
}

fn image_json(m: &HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect())
}

/// The history entry a read-back issue record makes, if it moved a version.
fn entry_of(change: &aws_sdk_dynamodbstreams::types::StreamRecord) -> Option<HistoryEntry> {
    let new = image_json(change.new_image.as_ref()?);
    let old = change.old_image.as_ref().map(image_json);
    let json = serde_json::json!({"Records": [{"dynamodb": {"NewImage": new, "OldImage": old}}]})
        .to_string();
    let event = StreamEvent::from_json(&json).ok()?;
    let d = &event.records.first()?.dynamodb;
    history::entry_of(d.old_image.as_ref(), d.new_image.as_ref()?)
}

/// Reads the batch's range back from the stream.
pub async fn touched_by(
    streams: &aws_sdk_dynamodbstreams::Client,
    batch: &BatchInfo,
) -> Result<ReadBack> {
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&batch.stream_arn)
        .shard_id(&batch.shard_id)
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .sequence_number(&batch.start)
        .send()
        .await
        .with_context(|| {
            format!(
                "the stream no longer holds shard {} from {} (streams keep 24 hours); run `gridctl repair` instead",
                batch.shard_id, batch.start
            )
        })?
        .shard_iterator;
    let mut read = ReadBack::default();
    let mut next = iterator;
    let mut empty_reads = 0;
    while let Some(it) = next.take() {
        let out = streams.get_records().shard_iterator(it).send().await?;
        let records = out.records.unwrap_or_default();
        if records.is_empty() {
            empty_reads += 1;
            if empty_reads > 5 {
                break;
            }
        }
        for r in &records {
            let Some(change) = r.dynamodb() else { continue };
            if change
                .sequence_number()
                .is_some_and(|s| !seq_le(s, &batch.end))
            {
                return Ok(read);
            }
            let is_issue = change
                .keys()
                .and_then(|k| k.get(keys::SK)?.as_s().ok())
                .is_some_and(|sk| sk == keys::records::ISSUE_SK);
            if let Some(t) = Touched::by(change) {
                if let (true, Touched::Issue { tenant, issue_id }, Some(entry)) =
                    (is_issue, &t, entry_of(change))
                {
                    read.history
                        .entry((tenant.clone(), issue_id.clone()))
                        .or_default()
                        .push(entry);
                }
                read.touched.insert(t);
            }
        }
        next = out.next_shard_iterator;
    }
    Ok(read)
}

/// What replay did.
#[derive(Debug, Default, Serialize)]
pub struct ReplayReport {
    pub messages: usize,
    pub issues: usize,
    pub projects: usize,
    pub index_writes: usize,
    /// History entries put from the range's records.
    pub history_entries: usize,
    pub touched: Vec<Touched>,
}

/// Re-indexes everything the read-back range touched from the current records, and puts the
/// history entries its records make (of issues that still exist).
pub async fn redrive(indexer: &Indexer, read: &ReadBack, report: &mut ReplayReport) -> Result<()> {
    for ((tenant, issue_id), entries) in &read.history {
        report.history_entries += indexer.rebuild_history(tenant, issue_id, entries).await?;
    }
    for t in &read.touched {
        let metrics = match t {
            Touched::Issue { tenant, issue_id } => {
                report.issues += 1;
                indexer.reindex_issue(tenant, issue_id).await?
            }
            Touched::Project { tenant, project_id } => {
                report.projects += 1;
                indexer.reindex_whole_project(tenant, project_id).await?
            }
            Touched::Team { tenant, team_id } => {
                let left = indexer.team_deleted(tenant, team_id).await?;
                gridline::indexer::Metrics {
                    writes: left.memberships + left.issues,
                    ..Default::default()
                }
            }
        };
        report.index_writes += metrics.writes;
        report.touched.push(t.clone());
    }
    Ok(())
}

/// Message bodies from a file: one JSON message per line (what `make dev` writes to
/// `.local/on-failure.jsonl`, or bodies saved from the queue).
pub fn messages_from_file(path: &std::path::Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect())
}

/// Drains the SQS queue: each message is replayed, then deleted unless `keep`.
pub async fn from_queue(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    streams: &aws_sdk_dynamodbstreams::Client,
    indexer: &Indexer,
    keep: bool,
    report: &mut ReplayReport,
) -> Result<()> {
    loop {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .context("receiving from the on-failure queue")?;
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            return Ok(());
        }
        for m in messages {
            let Some(body) = m.body() else { continue };
            let batch = parse_message(body)?;
            let touched = touched_by(streams, &batch).await?;
            redrive(indexer, &touched, report).await?;
            report.messages += 1;
            if !keep && let Some(handle) = m.receipt_handle() {
                sqs.delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .context("deleting a replayed message")?;
            }
        }
        if keep {
            // Kept messages come back after their visibility timeout; one pass is enough.
            return Ok(());
        }
    }
}

/// Fails clearly when neither source was given.
pub fn no_source() -> Result<()> {
    bail!(
        "give --queue-url (the stack's IndexerFailureQueueUrl) or --file (.local/on-failure.jsonl)"
    )
}
