//! The indexer: turns the records table's change stream into the index table.
//!
//! A batch's records are classified by [`crate::model::stream::classify`] and planned into units (one per
//! issue touched, one per field change); each unit is then applied, or parked when no retry
//! can fix it. Distinct issues are independent, so a batch's issue units run concurrently (at
//! most [`Indexer::concurrency`] at once); a field change or a malformed record is a barrier:
//! the units before it finish first, and it runs alone.
//!
//! For each issue in a batch it takes the net change (the last record's new image, or the
//! deletion), computes the entries the issue should have, and writes only the difference from
//! what its watermark says was written last. The watermark carries the issue's version, so a
//! duplicate, a retry or a replay of an older record writes nothing, and the index converges to
//! exactly what the records say. Adding a field re-indexes its project (every issue gains a
//! missing entry); deleting one removes its values from the issues and re-indexes them.

mod apply;
mod batch;
mod defs;
mod error;
pub mod field_job;
mod metrics;
mod reindex;

use apply::Heads;
use batch::segment_end;
pub use batch::{Plan, Unit, plan};
use defs::Defs;
pub use error::IndexError;
pub use metrics::{BatchOutcome, Metrics};
pub use reindex::{REINDEX_PAGE, ReindexPage, ValueEdit};

use std::sync::Arc;

use futures::StreamExt;

use crate::domain::ids::{FieldId, ProjectId, TenantId};
use crate::indexer::field_job::{FieldJob, JobKind, JobQueue};
use crate::model::event::StreamEvent;
use crate::model::watermark::Basis;
use crate::store::Store;
use crate::store::index::Parked;
use crate::telemetry::now_ms;

pub use crate::model::watermark::DELETED;

/// Issues indexed at once by default: each is at least three round trips in a row (intent,
/// entries, commit; the watermarks are read for the whole batch first), so a shard's throughput is the concurrency over that latency;
/// the indexer's memory size (and so its CPU share) is chosen to keep up with the requests'
/// signing and JSON at this concurrency (`make bench` measures it).
pub const DEFAULT_CONCURRENCY: usize = 32;

#[derive(Clone)]
pub struct Indexer {
    store: Store,
    concurrency: usize,
    /// Where field jobs start (the Lambda's and the local stack's indexer). Without one
    /// (`gridctl`'s replays) a field change is re-indexed in place, as a job would.
    jobs: Option<Arc<dyn JobQueue>>,
    /// Entries carry the issues' summaries where they fit (always, but in the bench's
    /// measure of what they cost).
    summaries: bool,
    /// Bytes of a deleted issue's comments one attempt of its record deletes.
    purge_budget: usize,
}

impl Indexer {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            concurrency: DEFAULT_CONCURRENCY,
            jobs: None,
            summaries: true,
            purge_budget: apply::PURGE_BYTES_PER_ATTEMPT,
        }
    }

    /// Another budget for a deleted issue's comments per attempt (tests reach its bound with
    /// a few comments).
    pub fn with_purge_budget(mut self, bytes: usize) -> Self {
        self.purge_budget = bytes;
        self
    }

    /// Every entry thin, as before entries carried summaries: what `gridline-bench` measures
    /// the summaries' write cost and read saving against. A stack indexed this way is drift
    /// to `gridctl verify`, which expects the summaries.
    pub fn without_summaries(mut self) -> Self {
        self.summaries = false;
        self
    }

    /// The basis as this indexer writes it (see [`Indexer::without_summaries`]).
    fn shaped(&self, mut basis: Option<Basis>) -> Option<Basis> {
        if !self.summaries
            && let Some(b) = basis.as_mut()
        {
            b.summary = crate::model::summary::Summary::THIN;
        }
        basis
    }

    /// Field changes start jobs on `queue` instead of re-indexing in place.
    pub fn with_jobs(mut self, queue: Arc<dyn JobQueue>) -> Self {
        self.jobs = Some(queue);
        self
    }

    /// At most `n` distinct issues indexed at once (1: one after another).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// How many distinct issues are indexed at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Handles one stream batch. A unit that fails for a reason no retry fixes is parked (a
    /// marker in the index table, the `Parked` metric) and the batch goes on, so one bad issue
    /// never holds up its neighbours. On a transient failure it reports the sequence number of
    /// the first unit that failed, so the event source retries from there (everything after is
    /// re-delivered and is idempotent); after the mapping's bounded retries the rest of the
    /// batch goes to the on-failure queue instead of blocking the shard.
    pub async fn handle(&self, event: &StreamEvent<'_>) -> BatchOutcome {
        let mut metrics = Metrics {
            records: event.records.len(),
            ..Metrics::default()
        };
        if let Some(created) = event.records.last().and_then(|r| r.dynamodb.created_ms()) {
            metrics.iterator_age_ms = (now_ms() - created).max(0);
        }
        let Plan { units } = plan(&event.records);
        metrics.units = units.len();
        let mut failed: Option<String> = None;
        let mut start = 0;
        while start < units.len() {
            let end = segment_end(&units, start);
            let segment = &units[start..end];
            if let Some(i) = self.run_segment(segment, &mut metrics).await {
                failed = Some(segment[i].0.to_string());
                break;
            }
            start = end;
        }
        metrics.failures = usize::from(failed.is_some());
        BatchOutcome {
            retry_from: failed,
            metrics,
        }
    }

    /// Runs a segment's units, at most [`Indexer::concurrency`] at once, each to its end (an
    /// issue's records are one unit, so its order holds). Returns the position of the first
    /// unit, in record order, that failed for a reason a retry may fix: the event source
    /// retries from its sequence number, and the units after it that succeeded are skipped
    /// then as duplicates.
    async fn run_segment(
        &self,
        units: &[(&str, Unit<'_>)],
        metrics: &mut Metrics,
    ) -> Option<usize> {
        let defs = Defs::default();
        let heads = Heads::of(self, units).await;
        // The futures are made first and then driven: a stream mapped by a closure over
        // borrowed units is not provably `Send` (a limit of the compiler's higher-ranked
        // lifetimes), and Lambda's runtime needs a `Send` handler.
        let runs: Vec<_> = units
            .iter()
            .enumerate()
            .map(|(i, (seq, unit))| self.run_counted(i, unit, seq, (&defs, &heads)))
            .collect();
        let outcomes: Vec<(usize, Result<(), IndexError>, Metrics)> = futures::stream::iter(runs)
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let mut first_failed: Option<usize> = None;
        for (i, outcome, unit_metrics) in outcomes {
            metrics.absorb(&unit_metrics);
            if let Err(e) = outcome {
                let seq = &units[i].0;
                tracing::error!(sequence_number = %seq, error = %crate::telemetry::chain(&e), "indexing failed");
                first_failed = Some(first_failed.map_or(i, |f| f.min(i)));
            }
        }
        first_failed
    }

    /// [`Indexer::run_unit`] with the unit's position and its own counters.
    async fn run_counted(
        &self,
        i: usize,
        unit: &Unit<'_>,
        seq: &str,
        shared: (&Defs, &Heads),
    ) -> (usize, Result<(), IndexError>, Metrics) {
        let mut metrics = Metrics::default();
        // Boxed: the per-unit future is deep, and Lambda's runtime nests it further.
        let outcome = Box::pin(self.run_unit(unit, seq, shared, &mut metrics)).await;
        (i, outcome, metrics)
    }

    /// Applies one unit; one that fails for good is parked (and then counts as done).
    async fn run_unit(
        &self,
        unit: &Unit<'_>,
        seq: &str,
        shared: (&Defs, &Heads),
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        match self.process(unit, seq, shared, metrics).await {
            Err(e) if e.is_permanent() => {
                let (tenant, subject, issue) = unit.subject();
                self.park(tenant, &subject, issue, &e, seq, metrics).await
            }
            other => other,
        }
    }

    /// Parks a unit that failed for good: logs it, writes its marker, counts it.
    async fn park(
        &self,
        tenant: &TenantId,
        subject: &str,
        issue: bool,
        error: &IndexError,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let reason = crate::telemetry::chain(error).to_string();
        tracing::error!(sequence_number = %seq, subject = %subject, error = %reason, "unit parked: retrying cannot fix it");
        let parked_at = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let parked = Parked {
            tenant: tenant.clone(),
            subject: subject.to_string(),
            // Markers stay small whatever the error says.
            reason: reason.chars().take(1000).collect(),
            sequence_number: seq.to_string(),
            parked_at,
        };
        self.store.index().park(&parked, issue).await?;
        metrics.parked += 1;
        Ok(())
    }

    /// A field change (or a column turned hot): its job's first message, or (without a queue)
    /// the whole job here: the project re-indexed, then an added field marked sortable.
    async fn start_job(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        field_id: &FieldId,
        kind: JobKind,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        if let Some(queue) = &self.jobs {
            let job = FieldJob::start(tenant.clone(), project_id.clone(), field_id.clone(), kind);
            queue.send(&job).await.map_err(IndexError::Queue)?;
            metrics.jobs_started += 1;
            return Ok(());
        }
        // A fill only saves reads: an indexer driven alone (tests, benchmarks) leaves it to
        // the issues' next updates, which write the hot columns' summaries anyway.
        if kind == JobKind::Fill {
            return Ok(());
        }
        if kind == JobKind::Purge {
            return self.purge(tenant, project_id).await;
        }
        let edit = match kind {
            JobKind::Remove => Some(ValueEdit::RemoveField(field_id.clone())),
            JobKind::Edit => {
                let rev = field_id.numbered_value();
                let Some((field, changes)) = self
                    .store
                    .records()
                    .pending_edit(tenant, project_id, rev)
                    .await?
                else {
                    return Ok(());
                };
                let edit = ValueEdit::Options {
                    field: field.clone(),
                    changes,
                };
                self.reindex_project(tenant, project_id, Some(&edit), seq, metrics)
                    .await?;
                self.store
                    .records()
                    .finish_edit(tenant, project_id, &field, rev)
                    .await?;
                return Ok(());
            }
            _ => None,
        };
        self.reindex_completing(tenant, project_id, edit.as_ref(), seq, metrics)
            .await
    }
}

impl Indexer {
    /// A deleted project's purge, whole (an indexer driven alone: tests, benchmarks; the job
    /// function runs it a page at a time, checkpointed).
    pub(crate) async fn purge(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<(), IndexError> {
        let records = self.store.records();
        if records.get_project(tenant, project_id).await?.is_some() {
            return Ok(());
        }
        let mut start = None;
        loop {
            let page = records
                .purge_issues(tenant, project_id, (start.as_ref(), REINDEX_PAGE))
                .await?;
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        records.purge_project_rest(tenant, project_id).await?;
        Ok(())
    }

    /// A deleted team taken off every issue and membership; nothing when the team exists
    /// (a record read back by `gridctl replay` may be its creation, not its removal).
    pub async fn team_deleted(
        &self,
        tenant: &TenantId,
        team_id: &crate::domain::ids::TeamId,
    ) -> Result<crate::store::records::team_delete::Left, IndexError> {
        let records = self.store.records();
        if records.get_team(tenant, team_id).await?.is_some() {
            return Ok(Default::default());
        }
        let now = crate::domain::values::format_timestamp(time::OffsetDateTime::now_utc());
        Ok(records
            .team_leaves_everything(tenant, team_id, &now)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::IssueId;
    use crate::store::StoreError;
    use serde_json::json;

    /// A batch's JSON, as Lambda sends it.
    fn batch(records: Vec<serde_json::Value>) -> String {
        json!({ "Records": records }).to_string()
    }

    fn record(seq: &str, name: &str, sk: &str, version: u64, title: &str) -> serde_json::Value {
        let image = json!({
            "PK": {"S": "T#acme#I#01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "SK": {"S": sk}, "GSI1PK": {"S": "x"}, "GSI1SK": {"S": "y"},
            "entity": {"S": "issue"}, "id": {"S": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "project_id": {"S": "01ARZ3NDEKTSV4RRFFQ69G5FAW"},
            "num": {"N": "1"}, "title": {"S": title}, "state": {"S": "open"}, "version": {"N": version.to_string()},
            "created_at": {"S": "2026-11-21T20:42:03.123Z"}, "updated_at": {"S": "2026-11-21T20:42:03.123Z"},
            "fields": {"M": {}}
        });
        json!({
            "eventID": seq, "eventName": name, "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": {
                "Keys": {"PK": {"S": "T#acme#I#01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "SK": {"S": sk}},
                "NewImage": if name == "REMOVE" { json!(null) } else { image.clone() },
                "OldImage": if name == "INSERT" { json!(null) } else { image },
                "SequenceNumber": seq, "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"
            }
        })
    }

    #[test]
    fn several_records_of_one_issue_become_one_unit_with_the_last_state() {
        let json = batch(vec![
            record("100", "INSERT", "#ISSUE", 1, "a"),
            record("200", "MODIFY", "#ISSUE", 2, "b"),
            record("300", "MODIFY", "#ISSUE", 3, "c"),
        ]);
        let event = StreamEvent::from_json(&json).unwrap();
        let Plan { units } = plan(&event.records);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].0, "100");
        let Unit::Issue {
            last: Some(issue), ..
        } = &units[0].1
        else {
            panic!()
        };
        assert_eq!((issue.version, issue.title), (3, "c"));
    }

    #[test]
    fn fields_added_to_one_project_in_a_batch_are_one_reindex_at_the_first_named_after_the_last() {
        let field = |seq: &str, name: &str, project: &str, field: u64| {
            let sk = format!("F#{}", FieldId::numbered(field));
            let pk = format!("T#acme#P#{project}");
            json!({
                "eventID": seq, "eventName": name, "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "Keys": {"PK": {"S": pk}, "SK": {"S": sk}},
                    "SequenceNumber": seq, "SizeBytes": 100,
                    "StreamViewType": "NEW_AND_OLD_IMAGES"
                }
            })
        };
        let (p, q) = ("01ARZ3NDEKTSV4RRFFQ69G5FAW", "01ARZ3NDEKTSV4RRFFQ69G5FAX");
        let json = batch(vec![
            field("1", "INSERT", p, 1),
            field("2", "INSERT", q, 2),
            field("3", "INSERT", p, 3),
            field("4", "REMOVE", p, 1),
            field("5", "INSERT", p, 4),
        ]);
        let event = StreamEvent::from_json(&json).unwrap();
        let planned = plan(&event.records);
        let units: Vec<(&str, &str)> = planned
            .units
            .iter()
            .map(|(seq, u)| {
                let kind = match u {
                    Unit::FieldAdded { project_id, .. } if project_id.as_str() == p => "added p",
                    Unit::FieldAdded { .. } => "added q",
                    Unit::FieldRemoved { .. } => "removed p",
                    _ => "other",
                };
                (*seq, kind)
            })
            .collect();
        assert_eq!(
            units,
            [("1", "added p"), ("2", "added q"), ("4", "removed p")]
        );
        // The one re-index is named after the newest field it covers (see `plan`).
        let Unit::FieldAdded { field_id, .. } = &planned.units[0].1 else {
            panic!("{:?}", planned.units[0]);
        };
        assert_eq!(field_id, &FieldId::numbered(4));
    }

    #[test]
    fn a_field_created_sortable_needs_no_job_and_one_without_the_flag_does() {
        let insert = |seq: &str, field: u64, image: serde_json::Value| {
            json!({
                "eventID": seq, "eventName": "INSERT", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "Keys": {
                        "PK": {"S": "T#acme#P#01ARZ3NDEKTSV4RRFFQ69G5FAW"},
                        "SK": {"S": format!("F#{}", FieldId::numbered(field))}
                    },
                    "NewImage": image,
                    "SequenceNumber": seq, "SizeBytes": 100,
                    "StreamViewType": "NEW_AND_OLD_IMAGES"
                }
            })
        };
        for (image, jobs) in [
            (json!({"sortable": {"BOOL": true}}), 0),
            (json!({"sortable": {"BOOL": false}}), 1),
            (json!({"name": {"S": "before the flag"}}), 1),
        ] {
            let json = batch(vec![insert("1", 1, image.clone())]);
            let event = StreamEvent::from_json(&json).unwrap();
            assert_eq!(plan(&event.records).units.len(), jobs, "{image}");
        }
    }

    #[test]
    fn a_deletion_after_changes_is_the_net_change() {
        let json = batch(vec![
            record("1", "MODIFY", "#ISSUE", 2, "a"),
            record("2", "REMOVE", "#ISSUE", 2, "a"),
        ]);
        let event = StreamEvent::from_json(&json).unwrap();
        let units = plan(&event.records).units;
        assert!(matches!(&units[0].1, Unit::Issue { last: None, .. }));
    }

    #[test]
    fn a_malformed_record_becomes_a_unit_of_its_own_and_the_plan_goes_on() {
        let mut bad = record("2", "MODIFY", "#ISSUE", 2, "a");
        bad["dynamodb"]["NewImage"]
            .as_object_mut()
            .unwrap()
            .remove("version");
        let json = batch(vec![
            record("1", "INSERT", "#ISSUE", 1, "a"),
            bad,
            record("3", "MODIFY", "#ISSUE", 3, "c"),
        ]);
        let event = StreamEvent::from_json(&json).unwrap();
        let Plan { units } = plan(&event.records);
        assert_eq!(units.len(), 2);
        assert_eq!(units[1].0, "2");
        let Unit::Malformed {
            tenant, subject, ..
        } = &units[1].1
        else {
            panic!("{:?}", units[1])
        };
        assert_eq!(
            (tenant.as_str(), subject.as_str()),
            ("acme", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
        );
        // The issue's own unit still holds its last good state.
        assert!(matches!(&units[0].1, Unit::Issue { last: Some(i), .. } if i.version == 3));
    }

    #[test]
    fn only_limits_and_unreadable_items_are_permanent() {
        use aws_sdk_dynamodb::error::ErrorMetadata;
        let dynamo = |code: &str| {
            let meta = ErrorMetadata::builder().code(code).message("m").build();
            IndexError::Store(StoreError::Dynamo {
                op: "PutItem",
                source: Box::new(aws_sdk_dynamodb::Error::from(
                    aws_sdk_dynamodb::operation::put_item::PutItemError::generic(meta),
                )),
            })
        };
        assert!(dynamo("ValidationException").is_permanent());
        assert!(!dynamo("ThrottlingException").is_permanent());
        assert!(!dynamo("InternalServerError").is_permanent());
        assert!(!dynamo("AccessDeniedException").is_permanent());
        assert!(IndexError::Malformed("1".into(), "no PK".into()).is_permanent());
        assert!(!IndexError::Store(StoreError::Contention(8)).is_permanent());
    }

    #[test]
    fn field_changes_and_malformed_records_are_segments_of_their_own_between_runs_of_issues() {
        let tenant = TenantId::parse("acme").unwrap();
        let issue = |n| Unit::Issue {
            tenant: tenant.clone(),
            issue_id: IssueId::numbered(n),
            last: None,
            history: Vec::new(),
        };
        let field = Unit::FieldAdded {
            tenant: tenant.clone(),
            project_id: ProjectId::numbered(1),
            field_id: FieldId::numbered(1),
        };
        let malformed = Unit::Malformed {
            tenant: tenant.clone(),
            subject: IssueId::numbered(2).to_string(),
            reason: "no version".into(),
        };
        let seqs: Vec<String> = (0..8).map(|i| i.to_string()).collect();
        let units: Vec<(&str, Unit)> = [
            issue(1),
            issue(2),
            field.clone(),
            field,
            issue(3),
            issue(4),
            malformed,
            issue(5),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, u)| (seqs[i].as_str(), u))
        .collect();
        let mut segments = Vec::new();
        let mut start = 0;
        while start < units.len() {
            let end = segment_end(&units, start);
            segments.push(start..end);
            start = end;
        }
        assert_eq!(segments, [0..2, 2..3, 3..4, 4..6, 6..7, 7..8]);
    }

    #[test]
    fn descriptions_and_projects_are_not_indexed() {
        let json = batch(vec![record("1", "INSERT", "DESCRIPTION", 1, "a")]);
        let event = StreamEvent::from_json(&json).unwrap();
        assert!(plan(&event.records).units.is_empty());
    }

    #[test]
    fn metrics_are_embedded_metric_format() {
        let m = Metrics {
            records: 3,
            writes: 7,
            ..Metrics::default()
        };
        let v: serde_json::Value = serde_json::from_str(&m.emf()).unwrap();
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Gridline");
        assert_eq!(v["IndexWrites"], 7);
    }
}
