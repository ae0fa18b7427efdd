//! The indexer: turns the records table's change stream into the index table.
//!
//! A batch's records are classified by [`stream::classify`] and planned into units (one per
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

pub mod field_job;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;

use crate::cursor::Position;
use crate::domain::Issue;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::indexer::field_job::{FieldJob, JobKind, JobQueue, QueueError};
use crate::keys;
use crate::keys::index::{ParkedUnit, Shards};
use crate::model::event::{StreamEvent, StreamRecord};
use crate::model::record::IssueRecord;
use crate::model::stream::{self, Change, Op};
use crate::model::watermark::{Basis, Layout, Pending, Watermark};
use crate::store::index::Parked;
use crate::store::records::items::attr::SORTABLE;
use crate::store::{Store, StoreError};
use crate::telemetry::{Emf, MetricUnit, now_ms};

/// Version recorded for a deleted issue: above every real version, so nothing older is
/// ever applied again.
pub const DELETED: u64 = u64::MAX;

/// Issues per page when a project is re-indexed: one BatchGetItem's worth, so a page takes
/// well under a second at the default concurrency and a field job checkpoints often.
pub const REINDEX_PAGE: i32 = 100;

/// What one page of a project's re-index did.
#[derive(Debug, Clone, PartialEq)]
pub struct ReindexPage {
    /// Issues read (and re-indexed, or parked).
    pub issues: usize,
    /// Where the next page starts; `None` after the last.
    pub next: Option<Position>,
}

/// One piece of work in a batch, at the sequence number of its first record; an issue's
/// state is borrowed from its record's image.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit<'a> {
    /// An issue's net change: its final state, or `None` if it was deleted.
    Issue {
        tenant: TenantId,
        issue_id: IssueId,
        last: Option<Box<IssueRecord<'a>>>,
    },
    /// A field whose column must be built (one not created sortable); the first such of a
    /// project in a batch stands for all of them (its job covers every field not yet sortable).
    FieldAdded {
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
    },
    FieldRemoved {
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
    },
    /// A record that cannot be understood: it is parked, and the batch goes on.
    Malformed {
        /// The tenant its keys name, or `-` when they name none.
        tenant: TenantId,
        /// The issue its keys name, or `#record#{sequence number}`.
        subject: String,
        reason: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("stream record {0} is malformed: {1}")]
    Malformed(String, String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(QueueError),
}

impl IndexError {
    /// Whether retrying cannot fix it: a DynamoDB limit or validation error (an item over
    /// 400 KB, a key too long), an item or record that cannot be read. Throttling, timeouts,
    /// 5xx, network errors and denied permissions (fixed by a deploy) are transient.
    pub fn is_permanent(&self) -> bool {
        use aws_sdk_dynamodb::error::ProvideErrorMetadata;
        match self {
            Self::Malformed(..) => true,
            Self::Store(StoreError::Dynamo { source, .. }) => {
                matches!(
                    source.as_ref(),
                    aws_sdk_dynamodb::Error::ItemCollectionSizeLimitExceededException(_)
                ) || matches!(
                    source.code(),
                    Some("ValidationException" | "SerializationException")
                )
            }
            Self::Store(StoreError::Mapping(_) | StoreError::Corrupt(_) | StoreError::Build(_)) => {
                true
            }
            Self::Store(StoreError::Contention(_)) | Self::Queue(_) => false,
        }
    }
}

/// A batch, planned: units at the sequence number of their first record (a record that could
/// not be understood is a [`Unit::Malformed`] at its own).
#[derive(Debug)]
pub struct Plan<'a> {
    pub units: Vec<(&'a str, Unit<'a>)>,
}

/// Groups a batch's records into units, keeping per-issue order: each issue's unit sits at its
/// first record and holds its last record's outcome. A record that cannot be understood
/// becomes a unit of its own, to be parked: retrying it can never succeed, and the records
/// after it must not wait for it.
pub fn plan<'a>(records: &'a [StreamRecord<'a>]) -> Plan<'a> {
    let mut units: Vec<(&'a str, Unit<'a>)> = Vec::new();
    // foldhash, as the images: SipHash's resistance buys nothing for ids of one's own table.
    let mut issue_slot: HashMap<IssueId, usize, foldhash::fast::RandomState> = HashMap::default();
    // Projects whose re-index for an added field is already planned in this batch: where.
    let mut reindexed: HashMap<(TenantId, ProjectId), usize> = HashMap::new();
    for record in records {
        let seq = record.sequence_number();
        match plan_one(record) {
            Ok(None) => {}
            Ok(Some(unit)) => {
                // A re-index reads the project's fields when it runs, after every record of
                // the batch was written: one re-index covers every field the batch adds to the
                // project (a burst of 100 new fields is one pass over its issues, not 100).
                // It is named after the newest: a job whose field is built already built every
                // field before it, where the oldest may be a replayed record whose job
                // finished long ago, and the job would then be stale with the others unbuilt.
                // (It keeps the first's place: a failure retries from there.)
                if let Unit::FieldAdded {
                    tenant, project_id, ..
                } = &unit
                {
                    match reindexed.entry((tenant.clone(), project_id.clone())) {
                        std::collections::hash_map::Entry::Occupied(at) => {
                            units[*at.get()].1 = unit;
                            continue;
                        }
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(units.len());
                        }
                    }
                }
                if let Unit::Issue { issue_id, .. } = &unit {
                    if let Some(&i) = issue_slot.get(issue_id) {
                        units[i].1 = unit;
                        continue;
                    }
                    issue_slot.insert(issue_id.clone(), units.len());
                }
                units.push((seq, unit));
            }
            Err(message) => {
                let pk = record.key(keys::PK);
                let tenant = pk
                    .and_then(keys::tenant_of)
                    .and_then(TenantId::parse)
                    .unwrap_or_else(TenantId::unknown);
                let subject = pk
                    .and_then(keys::records::parse_issue_pk)
                    .map(|(_, issue)| issue.to_string())
                    .unwrap_or_else(|| keys::index::parked_sk(ParkedUnit::Record, seq));
                let reason = IndexError::Malformed(seq.to_string(), message).to_string();
                units.push((
                    seq,
                    Unit::Malformed {
                        tenant,
                        subject,
                        reason,
                    },
                ));
            }
        }
    }
    Plan { units }
}

/// The unit one record is, if it is the indexer's business (see [`stream::classify`]).
fn plan_one<'a>(record: &'a StreamRecord<'a>) -> Result<Option<Unit<'a>>, String> {
    let change =
        stream::classify(record.key(keys::PK), record.key(keys::SK)).map_err(|e| e.to_string())?;
    let op = record
        .event_name
        .as_ref()
        .and_then(|n| Op::parse(n.as_str()));
    Ok(match change {
        Change::Issue { tenant, issue_id } => {
            let last = if op == Some(Op::Remove) {
                None
            } else {
                let image = record.dynamodb.new_image.as_ref().ok_or("no NewImage")?;
                Some(Box::new(
                    IssueRecord::from_image(image).map_err(|e| e.to_string())?,
                ))
            };
            Some(Unit::Issue {
                tenant,
                issue_id,
                last,
            })
        }
        Change::Field {
            tenant,
            project_id,
            field_id,
        } => match op {
            // A field created sortable (its project had no issue yet) needs nothing; one
            // without the flag was created before it existed, and is built like any other.
            Some(Op::Insert) => {
                let sortable = record
                    .dynamodb
                    .new_image
                    .as_ref()
                    .and_then(|image| image.get(SORTABLE))
                    .is_some_and(|a| matches!(a, crate::model::event::Attr::Bool(true)));
                (!sortable).then_some(Unit::FieldAdded {
                    tenant,
                    project_id,
                    field_id,
                })
            }
            Some(Op::Remove) => Some(Unit::FieldRemoved {
                tenant,
                project_id,
                field_id,
            }),
            // A definition never changes in place.
            Some(Op::Modify) | None => None,
        },
        // Anything else (the template's filter keeps it out in AWS) is not the indexer's business.
        Change::IssueDetail { .. } | Change::Ignored => None,
    })
}

/// Where the segment starting at `start` ends: a field change is a segment of its own (it
/// re-indexes its project from the records as they are, so the units before it finish first
/// and the ones after it wait), and so is a malformed record (parking flags its issue's
/// watermark, which that issue's own unit, earlier in the batch, rewrites: in record order as
/// before, the flag is not lost); any other run of units is one segment.
fn segment_end(units: &[(&str, Unit<'_>)], start: usize) -> usize {
    let is_barrier = |u: &Unit| {
        matches!(
            u,
            Unit::FieldAdded { .. } | Unit::FieldRemoved { .. } | Unit::Malformed { .. }
        )
    };
    if units.get(start).is_some_and(|(_, u)| is_barrier(u)) {
        return start + 1;
    }
    units[start..]
        .iter()
        .position(|(_, u)| is_barrier(u))
        .map_or(units.len(), |p| start + p)
}

/// What the index should look like for an issue, and at which version.
#[derive(Clone, Copy)]
struct Target<'a> {
    version: u64,
    issue: Option<&'a IssueRecord<'a>>,
}

/// How a batch ended: the sequence number the event source must retry from (`None`: the
/// batch is done), and its counters.
#[derive(Debug)]
pub struct BatchOutcome {
    pub retry_from: Option<String>,
    pub metrics: Metrics,
}

/// Counters for one batch, reported as CloudWatch Embedded Metric Format.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Metrics {
    pub records: usize,
    pub units: usize,
    pub skipped: usize,
    pub writes: usize,
    pub failures: usize,
    /// Units parked: failed for a reason no retry fixes, marked, and passed over.
    pub parked: usize,
    /// Field jobs started (messages sent to the job queue).
    pub jobs_started: usize,
    pub iterator_age_ms: i64,
}

/// A batch's metrics: by function.
const BATCH_METRICS: Emf<'static> = Emf {
    dimensions: &[&["Function"]],
    metrics: &[
        ("Records", MetricUnit::Count),
        ("IndexWrites", MetricUnit::Count),
        ("SkippedUnits", MetricUnit::Count),
        ("Failures", MetricUnit::Count),
        ("Parked", MetricUnit::Count),
        ("FieldJobsStarted", MetricUnit::Count),
        ("IteratorAge", MetricUnit::Milliseconds),
    ],
};

impl Metrics {
    /// One EMF line: CloudWatch turns it into metrics in namespace `Gridline`.
    pub fn emf(&self) -> String {
        let members = serde_json::json!({
            "Function": "indexer",
            "Records": self.records,
            "IndexWrites": self.writes,
            "SkippedUnits": self.skipped,
            "Failures": self.failures,
            "Parked": self.parked,
            "FieldJobsStarted": self.jobs_started,
            "IteratorAge": self.iterator_age_ms,
        });
        BATCH_METRICS.document(now_ms(), members).to_string()
    }
}

impl Metrics {
    /// Adds a unit's counters to the batch's (the batch-level ones stay).
    fn absorb(&mut self, unit: &Metrics) {
        self.skipped += unit.skipped;
        self.writes += unit.writes;
        self.parked += unit.parked;
        self.jobs_started += unit.jobs_started;
    }
}

/// Issues indexed at once by default: each is at least four round trips in a row (watermark,
/// intent, entries, commit) of a few milliseconds each, so with 32 in flight one shard indexes
/// about 500 issues a second at 5 ms a round trip (`make bench`; 16 gave about 400). That is
/// about 2,000 requests a second, whose signing and JSON the indexer's 512 MB (about 0.3
/// vCPU) keeps up with.
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
}

impl Indexer {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            concurrency: DEFAULT_CONCURRENCY,
            jobs: None,
            summaries: true,
        }
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
        // The futures are made first and then driven: a stream mapped by a closure over
        // borrowed units is not provably `Send` (a limit of the compiler's higher-ranked
        // lifetimes), and Lambda's runtime needs a `Send` handler.
        let runs: Vec<_> = units
            .iter()
            .enumerate()
            .map(|(i, (seq, unit))| self.run_counted(i, unit, seq, &defs))
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
        defs: &Defs,
    ) -> (usize, Result<(), IndexError>, Metrics) {
        let mut metrics = Metrics::default();
        // Boxed: the per-unit future is deep, and Lambda's runtime nests it further.
        let outcome = Box::pin(self.run_unit(unit, seq, defs, &mut metrics)).await;
        (i, outcome, metrics)
    }

    /// Applies one unit; one that fails for good is parked (and then counts as done).
    async fn run_unit(
        &self,
        unit: &Unit<'_>,
        seq: &str,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        match self.process(unit, seq, defs, metrics).await {
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
        self.store.park(&parked, issue).await?;
        metrics.parked += 1;
        Ok(())
    }

    async fn process(
        &self,
        unit: &Unit<'_>,
        seq: &str,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        match unit {
            Unit::Issue {
                tenant,
                issue_id,
                last,
            } => {
                let target = Target {
                    version: last.as_ref().map_or(DELETED, |i| i.version),
                    issue: last.as_deref(),
                };
                self.apply(tenant, issue_id, &target, false, defs, metrics)
                    .await
            }
            // A field change starts its job: one message, whatever the project's size.
            Unit::FieldAdded {
                tenant,
                project_id,
                field_id,
            } => {
                self.start_job(tenant, project_id, field_id, JobKind::Add, seq, metrics)
                    .await
            }
            Unit::FieldRemoved {
                tenant,
                project_id,
                field_id,
            } => {
                self.start_job(tenant, project_id, field_id, JobKind::Remove, seq, metrics)
                    .await
            }
            Unit::Malformed { reason, .. } => {
                Err(IndexError::Malformed(seq.to_string(), reason.clone()))
            }
        }
    }

    /// A field change: its job's first message, or (without a queue) the whole job here: the
    /// project re-indexed, then an added field marked sortable.
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
        let removed = (kind == JobKind::Remove).then_some(field_id);
        self.reindex_completing(tenant, project_id, removed, seq, metrics)
            .await
    }

    /// Re-indexes one issue from its current record (or its absence), whatever the watermark
    /// says about versions: what `gridctl replay` does for the issues a failed batch named.
    pub async fn reindex_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Metrics, IndexError> {
        let mut metrics = Metrics::default();
        let issue = self.store.get_issue_summary(tenant, issue_id).await?;
        let record = issue.as_ref().map(IssueRecord::of);
        let target = Target {
            version: issue.as_ref().map_or(DELETED, |i| i.version),
            issue: record.as_ref(),
        };
        self.apply(
            tenant,
            issue_id,
            &target,
            true,
            &Defs::default(),
            &mut metrics,
        )
        .await?;
        // Whatever parked it is behind it now.
        self.store.unpark(tenant, issue_id).await?;
        Ok(metrics)
    }

    /// Re-indexes every issue of a project with its current fields (after a field change
    /// whose record failed, so no field job was sent), completing its columns.
    pub async fn reindex_whole_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Metrics, IndexError> {
        let mut metrics = Metrics::default();
        self.reindex_completing(tenant, project_id, None, "replay", &mut metrics)
            .await?;
        Ok(metrics)
    }

    /// The whole project re-indexed, then the fields that were not sortable when it began
    /// marked sortable: every issue has been indexed with them since, as a field job's last
    /// page would have left them. (Read first: a field added while it runs is not built.)
    async fn reindex_completing(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        removed: Option<&FieldId>,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let pending: Vec<FieldId> = self
            .store
            .project_with_fields(tenant, project_id)
            .await?
            .map(|(_, defs)| defs.into_iter().filter(|d| !d.sortable).map(|d| d.id))
            .into_iter()
            .flatten()
            .collect();
        self.reindex_project(tenant, project_id, removed, seq, metrics)
            .await?;
        for field in &pending {
            // A field deleted meanwhile is simply gone.
            self.store.mark_sortable(tenant, project_id, field).await?;
        }
        Ok(())
    }

    /// Makes the index hold exactly `target`'s entries for the issue, writing only the
    /// difference from its watermark. Skips a target older than the watermark (and an equal
    /// one unless `allow_equal`, which re-indexing uses after a field change).
    async fn apply(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        target: &Target<'_>,
        allow_equal: bool,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let wm = self.store.get_watermark(tenant, issue_id).await?;
        let behind = |wm: &Watermark, target: &Target<'_>| {
            wm.version > target.version || (wm.version == target.version && !allow_equal)
        };
        let (reread, reread_record);
        let mut target = *target;
        if let Some(w) = &wm
            && behind(w, &target)
        {
            // Re-indexing after a field change, from a read that lagged behind a newer write
            // (a job's page reads issues eventually consistently). If that write used
            // definitions older than these, it may lack the new column: index the record as
            // it is now (a strongly consistent read), or the field would be marked sortable
            // with this issue missing from it.
            if allow_equal && let Some(issue) = target.issue {
                let held = defs.get(&self.store, tenant, &issue.project_id).await?;
                if w.fields_rev.unwrap_or(0) < held.rev {
                    reread = self.store.get_issue_summary(tenant, issue_id).await?;
                    reread_record = reread.as_ref().map(IssueRecord::of);
                    target = Target {
                        version: reread.as_ref().map_or(DELETED, |i| i.version),
                        issue: reread_record.as_ref(),
                    };
                }
            }
            if behind(w, &target) {
                metrics.skipped += 1;
                return Ok(());
            }
        }
        // A parked issue being indexed again: its marker goes first (the watermark write below
        // drops the flag); if this fails for good too, it is parked again.
        if wm.as_ref().is_some_and(|w| w.parked) {
            self.store.unpark(tenant, issue_id).await?;
        }
        let wm = wm.unwrap_or_default();
        let (desired, fields_rev) = defs
            .basis(
                &self.store,
                tenant,
                target.issue,
                wm.fields_rev.unwrap_or(0),
            )
            .await?;
        let desired = self.shaped(desired);
        let done = self
            .reconcile(
                tenant,
                issue_id,
                (target.version, desired.as_ref(), fields_rev),
                wm,
                &Pending::default(),
                allow_equal,
                metrics,
            )
            .await?;
        if let Err(written) = done {
            self.catch_up(tenant, issue_id, written, metrics).await?;
        }
        Ok(())
    }

    /// After a newer version was recorded while `written` was being written: what this wrote
    /// may be stale, so re-index from the issue as it is now, counting those writes as
    /// entries that may be in the index. The field definitions are read again too: the newer
    /// write may have come from a field change (another shard's, with a parallelization
    /// factor above 1) that this unit's definitions predate.
    async fn catch_up(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        written: Pending,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let defs = Defs::default();
        let now = self.store.get_issue_summary(tenant, issue_id).await?;
        let wm = self
            .store
            .get_watermark(tenant, issue_id)
            .await?
            .unwrap_or_default();
        let version = now.as_ref().map_or(DELETED, |i| i.version.max(wm.version));
        let (desired, fields_rev) = defs
            .basis(
                &self.store,
                tenant,
                now.as_ref().map(IssueRecord::of).as_ref(),
                wm.fields_rev.unwrap_or(0),
            )
            .await?;
        let desired = self.shaped(desired);
        // Whatever this finds, it does not start over: the stream redelivers what it misses.
        let _ = self
            .reconcile(
                tenant,
                issue_id,
                (version, desired.as_ref(), fields_rev),
                wm,
                &written,
                true,
                metrics,
            )
            .await?;
        Ok(())
    }

    /// Reads the watermark's buckets the change needs, writes the desired entries not known
    /// to be written, deletes every entry that may be in the index but is not desired (with
    /// `extra`: what an earlier attempt may have written), then commits the watermark with the
    /// field-definition revision `desired` was derived under. On `Err`, a newer watermark was
    /// recorded meanwhile: what this may have written, as pending.
    #[allow(clippy::too_many_arguments)]
    async fn reconcile(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        (version, desired, fields_rev): (u64, Option<&Basis>, u64),
        mut wm: Watermark,
        extra: &Pending,
        allow_equal: bool,
        metrics: &mut Metrics,
    ) -> Result<Result<(), Pending>, IndexError> {
        let buckets = desired.map_or(0, |d| Layout::choose(wm.layout.buckets, d));
        let read = wm.buckets_to_read(desired, buckets, extra);
        self.store
            .read_buckets(tenant, issue_id, &mut wm, &read)
            .await?;
        // Buckets not read hold no change: their fields are left out of the comparison.
        let mut compared = desired.cloned();
        if let Some(d) = compared.as_mut() {
            d.retain_columns(|c| wm.has_read(c));
        }
        let step = wm.step(tenant, issue_id, compared.as_ref(), extra);
        let converts = wm.legacy.is_some() || buckets != wm.layout.buckets;
        if step.puts.is_empty() && step.deletes.is_empty() && allow_equal && !converts {
            return Ok(Ok(()));
        }
        let written = || compared.as_ref().map(Pending::all_of).unwrap_or_default();
        // The pending set as this attempt leaves it: as read, and its own intent (a compact
        // head's; a previous layout's intent goes elsewhere).
        let mut pending = if wm.legacy.is_some() {
            0
        } else {
            wm.pending_count
        };
        // The watermark learns what this write may change before it happens (see
        // `record_intent`), so a write cut short never leaves it wrong.
        if !(step.puts.is_empty() && step.deletes.is_empty()) {
            if wm.legacy.is_none() {
                let had = wm.pending.tokens();
                pending += step.intent.tokens().difference(&had).count();
            }
            metrics.writes += 1;
            if !self
                .store
                .record_intent(tenant, issue_id, &wm, &step, version, allow_equal)
                .await?
            {
                return Ok(Err(Pending::default()));
            }
        }
        metrics.writes += self
            .store
            .write_entries(step.puts.iter(), step.deletes.iter())
            .await?;
        let (held, writes) = self
            .store
            .commit_watermark(
                tenant,
                issue_id,
                &wm,
                desired,
                (version, buckets, fields_rev, pending),
                allow_equal,
            )
            .await?;
        metrics.writes += writes;
        Ok(if held { Ok(()) } else { Err(written()) })
    }

    /// Re-indexes every issue of a project with its current fields; when a field was
    /// removed, first removes that field's value from each issue that has one.
    /// An issue that fails for good is parked (at `seq`) and the others go on.
    async fn reindex_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        removed_field: Option<&FieldId>,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let mut start = None;
        loop {
            let page = self
                .reindex_page(
                    tenant,
                    project_id,
                    removed_field,
                    (start.as_ref(), REINDEX_PAGE),
                    seq,
                    metrics,
                )
                .await?;
            start = page.next;
            if start.is_none() {
                return Ok(());
            }
        }
    }

    /// One page of [`Indexer::reindex_project`]: at most `limit` of the project's issues after
    /// `start` by number, re-indexed with the fields as they are now. Returns how many issues
    /// it read and where the next page starts. The field job's unit of work.
    pub async fn reindex_page(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        removed_field: Option<&FieldId>,
        (start, limit): (Option<&Position>, i32),
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<ReindexPage, IndexError> {
        // Read after the change, so every issue is indexed with the project's fields as they are.
        let defs = Defs::default();
        let page = self
            .store
            .issues_of_project(tenant, project_id, start, limit)
            .await?;
        let issues = page.items.len();
        let runs: Vec<_> = page
            .items
            .into_iter()
            .map(|issue| self.reindex_counted(tenant, issue, removed_field, seq, &defs))
            .collect();
        let outcomes: Vec<(Result<(), IndexError>, Metrics)> = futures::stream::iter(runs)
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        // Every issue's counters first: the ones that wrote count even if another failed.
        let mut first_error = None;
        for (outcome, issue_metrics) in outcomes {
            metrics.absorb(&issue_metrics);
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(ReindexPage {
                issues,
                next: page.next,
            }),
        }
    }

    /// [`Indexer::reindex_one`] with the issue's own counters.
    async fn reindex_counted(
        &self,
        tenant: &TenantId,
        issue: Issue,
        removed_field: Option<&FieldId>,
        seq: &str,
        defs: &Defs,
    ) -> (Result<(), IndexError>, Metrics) {
        let mut metrics = Metrics::default();
        let outcome =
            Box::pin(self.reindex_one(tenant, issue, removed_field, seq, defs, &mut metrics)).await;
        (outcome, metrics)
    }

    /// One issue of a project being re-indexed: without the removed field's value, if any,
    /// and with the project's current fields; parked at `seq` if that fails for good.
    async fn reindex_one(
        &self,
        tenant: &TenantId,
        mut issue: Issue,
        removed_field: Option<&FieldId>,
        seq: &str,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        if let Some(field) = removed_field
            && issue.fields.remove(field.as_str()).is_some()
        {
            self.store
                .remove_field_value(tenant, &issue.id, field)
                .await?;
            metrics.writes += 1;
        }
        let record = IssueRecord::of(&issue);
        let target = Target {
            version: issue.version,
            issue: Some(&record),
        };
        match self
            .apply(tenant, &issue.id, &target, true, defs, metrics)
            .await
        {
            Err(e) if e.is_permanent() => {
                self.park(tenant, &issue.id, true, &e, seq, metrics).await
            }
            other => other,
        }
    }
}

impl Unit<'_> {
    /// `(tenant, marker subject, whether the subject is one issue)` for parking this unit.
    fn subject(&self) -> (&TenantId, String, bool) {
        match self {
            Self::Issue {
                tenant, issue_id, ..
            } => (tenant, issue_id.to_string(), true),
            Self::FieldAdded {
                tenant, project_id, ..
            }
            | Self::FieldRemoved {
                tenant, project_id, ..
            } => (
                tenant,
                keys::index::parked_sk(ParkedUnit::Project, project_id),
                false,
            ),
            Self::Malformed {
                tenant, subject, ..
            } => {
                let issue = !subject.starts_with('#');
                (tenant, subject.clone(), issue)
            }
        }
    }
}

/// Field definitions per project, read once per segment of a batch by whichever unit needs
/// them first (the others wait for that read), and again after a field change.
#[derive(Default)]
struct Defs(Mutex<HashMap<(TenantId, ProjectId), Arc<DefsCell>>>);

/// One project's field definitions and their revision (the project's `fields_rev`, which a
/// reshard advances too), and its shard layouts.
#[derive(Clone)]
struct Fields {
    rev: u64,
    defs: Arc<[FieldDef]>,
    shards: Shards,
}

/// One project's definitions, read once.
type DefsCell = tokio::sync::OnceCell<Fields>;

impl Defs {
    fn cell(&self, tenant: &TenantId, project_id: &ProjectId) -> Arc<DefsCell> {
        let mut cells = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cells
            .entry((tenant.clone(), project_id.clone()))
            .or_default()
            .clone()
    }

    async fn get(
        &self,
        store: &Store,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Fields, StoreError> {
        let cell = self.cell(tenant, project_id);
        // A failed read leaves the cell empty: the next unit that needs it reads again. The
        // project item sorts first in the Query, so the revision read is never newer than
        // the definitions read with it.
        let fields = cell
            .get_or_try_init(|| async {
                Ok::<_, StoreError>(match store.project_with_fields(tenant, project_id).await? {
                    Some((project, defs)) => Fields {
                        rev: project.fields_rev.unwrap_or(0),
                        shards: project.layouts(),
                        defs: Arc::from(defs),
                    },
                    None => Fields {
                        rev: 0,
                        defs: Arc::from(Vec::new()),
                        shards: Shards::ONE,
                    },
                })
            })
            .await?;
        Ok(fields.clone())
    }

    /// The project's definitions, read again (for every unit of the segment) when the ones
    /// held are older than revision `rev`: an issue's watermark recorded under a newer one
    /// means a field changed after they were read, and the field's job has already been
    /// here; indexing with the old ones would undo its work.
    async fn at_least(
        &self,
        store: &Store,
        tenant: &TenantId,
        project_id: &ProjectId,
        rev: u64,
    ) -> Result<Fields, StoreError> {
        let held = self.get(store, tenant, project_id).await?;
        if held.rev >= rev {
            return Ok(held);
        }
        tracing::debug!(
            held = held.rev,
            seen = rev,
            "field definitions changed meanwhile; reading them again"
        );
        {
            let mut cells = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (tenant.clone(), project_id.clone());
            // Unless another unit has already replaced them.
            if cells
                .get(&key)
                .and_then(|c| c.get())
                .is_none_or(|f| f.rev < rev)
            {
                cells.insert(key, Arc::default());
            }
        }
        // Read after the watermark, so at least as new as its revision (unless the project is
        // gone, and then there is nothing newer to read).
        self.get(store, tenant, project_id).await
    }

    /// What `issue`'s entries derive from under its project's fields (none when deleted), with
    /// definitions at least as new as revision `min_rev`, and their revision.
    async fn basis(
        &self,
        store: &Store,
        tenant: &TenantId,
        issue: Option<&IssueRecord<'_>>,
        min_rev: u64,
    ) -> Result<(Option<Basis>, u64), StoreError> {
        Ok(match issue {
            Some(issue) => {
                let fields = self
                    .at_least(store, tenant, &issue.project_id, min_rev)
                    .await?;
                (
                    Some(Basis::of_record(issue, &fields.defs, fields.shards)),
                    fields.rev,
                )
            }
            None => (None, 0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
