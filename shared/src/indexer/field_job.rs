//! Field changes off the stream: a field added to (or deleted from) a project whose issues
//! are already indexed needs every issue re-indexed, and that fan-out runs here, in a job of
//! its own, never in the stream Lambda or the request.
//!
//! - The request writes the definition (O(1)). A field added to a project that has never had
//!   an issue is `sortable` at once; otherwise `sortable: false`, and the grid sorted by it
//!   answers `409` with `Retry-After` until its column is complete.
//! - The stream indexer turns the definition's record into one queue message ([`FieldJob`],
//!   step 0): O(1) whatever the project's size.
//! - The job function takes a message and re-indexes the project a page of issues at a time
//!   ([`Indexer::reindex_page`]), writing a checkpoint ([`Progress`], in the index table) after
//!   each page. When its time budget runs low it advances the checkpoint's step and enqueues
//!   the next step's message; the last page marks the field(s) sortable.
//!
//! At-least-once delivery: a message whose step the checkpoint has moved past is stale; if the
//! checkpoint is exactly one step ahead, the continuation may never have been sent (the
//! invocation died between the two writes), so it is sent again. Two runs of one step do the
//! same idempotent re-index. A run cut short resumes from the last page checkpointed, when its
//! message is delivered again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::cursor::Position;
use crate::domain::ids::{FieldId, ProjectId, TenantId, ViewId};
use crate::domain::values::FieldDef;
use crate::indexer::{IndexError, Indexer, Metrics, REINDEX_PAGE, ValueEdit};
use crate::keys;
use crate::store::IndexTable;
use crate::store::{Item, Store, StoreError, condition_held};

/// A run stops starting pages when less than this is left of its invocation: a page of
/// [`crate::indexer::REINDEX_PAGE`] issues takes well under a second, so this leaves
/// room for a slow page, the checkpoint and the continuation's send.
pub const PAGE_MARGIN: Duration = Duration::from_secs(20);

/// What a job does to the project's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Gives every issue an entry in the new field's column, then marks it sortable.
    Add,
    /// Removes the deleted field's value from every issue, and its entries.
    Remove,
    /// Writes the summaries into the entries of a column that turned hot (its `field_id`
    /// is the project's `fields_rev` after the mark, as a field id of that number).
    Fill,
    /// Rewrites a select field's renamed and removed labels on every issue and rebuilds its
    /// column after an options edit, then marks it sortable (its `field_id` is the project's
    /// `fields_rev` at the edit, as a field id of that number; `store::records::field_edit`).
    Edit,
    /// Deletes a deleted project's issues, a page at a time, then everything else under it,
    /// its own checkpoint last (`store::records::project_delete`; its `field_id` is 0).
    Purge,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
            Self::Fill => "fill",
            Self::Edit => "edit",
            Self::Purge => "purge",
        }
    }
}

/// A queue message: which job, and which step of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldJob {
    pub tenant: TenantId,
    pub project_id: ProjectId,
    pub field_id: FieldId,
    pub kind: JobKind,
    pub step: u64,
}

impl FieldJob {
    pub fn start(
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
        kind: JobKind,
    ) -> Self {
        Self {
            tenant,
            project_id,
            field_id,
            kind,
            step: 0,
        }
    }

    fn sk(&self) -> String {
        keys::index::job_sk(&self.project_id, &self.field_id, self.kind.as_str())
    }

    fn at_step(&self, step: u64) -> Self {
        Self {
            step,
            ..self.clone()
        }
    }
}

fn now() -> String {
    crate::domain::values::format_timestamp(time::OffsetDateTime::now_utc())
}

/// A job's checkpoint: the item `gridctl jobs` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub tenant: TenantId,
    pub project_id: ProjectId,
    pub field_id: FieldId,
    pub kind: JobKind,
    /// The message step that owns the job; a message of another step is stale.
    pub step: u64,
    /// Where the next page starts (`None`: at the first issue, or after the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Position>,
    /// Issues re-indexed so far (a page run twice counts twice).
    pub issues: u64,
    pub pages: u64,
    pub finished: bool,
    /// An add: the fields not yet sortable when the job started, all marked sortable when it
    /// finishes (every page it runs indexes them), so a burst of new fields is one pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covers: Vec<FieldId>,
    /// A fill: the saved views not ready when it began, with the shape each had; marked
    /// ready at that shape when it finishes (a view reshaped since waits for its own job).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<(ViewId, u64)>,
    /// An edit: the field and what its values become, as its item held them when it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<(FieldId, crate::domain::options_edit::ValueChanges)>,
    pub started_at: String,
    pub updated_at: String,
}

/// [`Progress`] as its index-table item.
#[derive(Serialize, Deserialize)]
struct ProgressItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    progress: Progress,
}

/// How a message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The last page is done (and, for an add, its fields are sortable).
    Finished,
    /// Out of budget: the checkpoint moved to this step and its message was sent.
    Continued(u64),
    /// The checkpoint had moved past this message's step (a duplicate or a redelivery).
    Stale,
}

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("the message is not a field job: {0}")]
    Message(String),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// A send to the job queue that failed.
#[derive(Debug, thiserror::Error)]
#[error("sending to the field-job queue failed: {0}")]
pub struct QueueError(pub String);

/// Where job messages go: SQS in AWS ([`crate::runtime::SqsQueue`]); the local stack's own queue on this
/// machine, which checks the sender's policy as AWS would.
pub trait JobQueue: Send + Sync {
    fn send<'a>(&'a self, job: &'a FieldJob) -> Sending<'a>;
}

/// A send in flight.
pub type Sending<'a> = BoxFuture<'a, Result<(), QueueError>>;

/// The job function's work: runs messages against the index with the indexer's machinery.
pub struct FieldJobs {
    indexer: Indexer,
    store: Store,
    queue: Arc<dyn JobQueue>,
    /// At most this many pages per message (the time budget decides when `None`).
    pub pages_per_message: Option<u64>,
    /// Issues per page.
    pub page_size: i32,
}

impl FieldJobs {
    pub fn new(store: Store, queue: Arc<dyn JobQueue>, concurrency: usize) -> Self {
        Self {
            indexer: Indexer::new(store.clone()).with_concurrency(concurrency),
            store,
            queue,
            pages_per_message: None,
            page_size: REINDEX_PAGE,
        }
    }

    /// Runs one message: pages until the project is done or the budget runs low.
    pub async fn run(
        &self,
        job: &FieldJob,
        deadline: Instant,
        metrics: &mut Metrics,
    ) -> Result<Outcome, JobError> {
        let mut progress = match self.store.index().get_job(job).await? {
            Some(p) if p.finished => return Ok(Outcome::Stale),
            Some(p) if p.step == job.step + 1 => {
                // The checkpoint moved on and its message may never have been sent.
                self.queue.send(&job.at_step(p.step)).await?;
                return Ok(Outcome::Stale);
            }
            Some(p) if p.step != job.step => return Ok(Outcome::Stale),
            Some(p) => p,
            None if job.step == 0 => match self.begin(job).await? {
                Some(p) => p,
                None => return Ok(Outcome::Finished),
            },
            // A checkpoint is written before any later step's message is sent.
            None => return Ok(Outcome::Stale),
        };
        let edit = match (job.kind, &progress.edit) {
            (JobKind::Remove, _) => Some(ValueEdit::RemoveField(job.field_id.clone())),
            (JobKind::Edit, Some((field, changes))) => Some(ValueEdit::Options {
                field: field.clone(),
                changes: changes.clone(),
            }),
            _ => None,
        };
        let label = format!("job:{}", job.sk());
        let mut pages = 0;
        loop {
            // An edit that is no longer pending finished in another run (its field marked
            // sortable and the edit cleared): its changes are not made again, even on values
            // a later edit wrote.
            if job.kind == JobKind::Edit && !self.edit_pending(job, &progress).await? {
                progress.finished = true;
                self.store.index().save_job(job, &progress).await?;
                return Ok(Outcome::Stale);
            }
            let page = self
                .next_page(job, edit.as_ref(), &progress, (&label, metrics))
                .await?;
            pages += 1;
            metrics.units += page.issues;
            progress.issues += page.issues as u64;
            progress.pages += 1;
            progress.after = page.next;
            progress.updated_at = now();
            if progress.after.is_none() {
                return self.finish(job, progress).await;
            }
            let budget_left = deadline.saturating_duration_since(Instant::now()) > PAGE_MARGIN;
            let pages_left = self.pages_per_message.is_none_or(|n| pages < n);
            if !(budget_left && pages_left) {
                progress.step += 1;
                if !self.store.index().save_job(job, &progress).await? {
                    return Ok(Outcome::Stale);
                }
                self.queue.send(&job.at_step(progress.step)).await?;
                return Ok(Outcome::Continued(progress.step));
            }
            if !self.store.index().save_job(job, &progress).await? {
                return Ok(Outcome::Stale);
            }
        }
    }

    /// The job's next page: a purge's issues deleted, or a page of issues re-indexed (with
    /// `edit` made on each).
    async fn next_page(
        &self,
        job: &FieldJob,
        edit: Option<&ValueEdit>,
        progress: &Progress,
        (label, metrics): (&str, &mut Metrics),
    ) -> Result<crate::indexer::ReindexPage, JobError> {
        let at = (progress.after.as_ref(), self.page_size);
        if job.kind == JobKind::Purge {
            let page = self
                .store
                .records()
                .purge_issues(&job.tenant, &job.project_id, at)
                .await?;
            return Ok(crate::indexer::ReindexPage {
                issues: page.items.len(),
                next: page.next,
            });
        }
        Ok(self
            .indexer
            .reindex_page(&job.tenant, &job.project_id, edit, at, label, metrics)
            .await?)
    }

    /// A job's first checkpoint; `None` when there is nothing to do (an add whose field is
    /// already sortable, or gone when no other field waits; a removal whose field is still
    /// defined).
    async fn begin(&self, job: &FieldJob) -> Result<Option<Progress>, JobError> {
        // A project that exists was never deleted (ids are never reused): nothing to purge.
        if job.kind == JobKind::Purge && self.project_exists(job).await? {
            return Ok(None);
        }
        if job.kind == JobKind::Fill {
            // Begun: the project's later records need not start it again.
            self.store
                .records()
                .clear_hot_fill(&job.tenant, &job.project_id)
                .await?;
        }
        let defs = match self
            .store
            .records()
            .project_with_fields(&job.tenant, &job.project_id)
            .await?
        {
            Some((_, defs)) => defs,
            // A deleted project: its purge deletes everything (its fields' removals, which
            // its purge writes, have nothing to do).
            None if job.kind != JobKind::Purge => return Ok(None),
            None => Vec::new(),
        };
        let Some(covers) = covers(job, defs) else {
            return Ok(None);
        };
        let views = match job.kind {
            JobKind::Fill => self.views_to_build(job).await?,
            _ => Vec::new(),
        };
        // An edit finished (its field sortable again, the edit cleared) or its field gone:
        // nothing to do.
        let edit = self.begin_edit(job).await?;
        if job.kind == JobKind::Edit && edit.is_none() {
            return Ok(None);
        }
        let now = now();
        let progress = Progress {
            tenant: job.tenant.clone(),
            project_id: job.project_id.clone(),
            field_id: job.field_id.clone(),
            kind: job.kind,
            step: 0,
            after: None,
            issues: 0,
            pages: 0,
            finished: false,
            covers,
            views,
            edit,
            started_at: now.clone(),
            updated_at: now,
        };
        // Another delivery of the first message may have begun it: then go on from its
        // checkpoint.
        if self.store.index().create_job(job, &progress).await? {
            return Ok(Some(progress));
        }
        Ok(self
            .store
            .index()
            .get_job(job)
            .await?
            .filter(|p| !p.finished))
    }

    async fn project_exists(&self, job: &FieldJob) -> Result<bool, StoreError> {
        Ok(self
            .store
            .records()
            .get_project(&job.tenant, &job.project_id)
            .await?
            .is_some())
    }

    /// Whether the edit `job` runs is still the one pending on its field.
    async fn edit_pending(&self, job: &FieldJob, progress: &Progress) -> Result<bool, StoreError> {
        let pending = self
            .store
            .records()
            .pending_edit(&job.tenant, &job.project_id, job.field_id.numbered_value())
            .await?;
        Ok(match (pending, &progress.edit) {
            (Some((field, _)), Some((ours, _))) => &field == ours,
            _ => false,
        })
    }

    /// An edit's field and value changes, with the saved views made to follow them; `None`
    /// when the edit is no longer pending (or `job` is not an edit).
    async fn begin_edit(
        &self,
        job: &FieldJob,
    ) -> Result<Option<(FieldId, crate::domain::options_edit::ValueChanges)>, StoreError> {
        if job.kind != JobKind::Edit {
            return Ok(None);
        }
        let edit = self
            .store
            .records()
            .pending_edit(&job.tenant, &job.project_id, job.field_id.numbered_value())
            .await?;
        if let Some(edit) = &edit {
            self.views_follow(job, edit).await?;
        }
        Ok(edit)
    }

    /// Saved views follow an options edit of `field`, before any issue is rewritten: one
    /// whose `where` names a removed label is deleted; one that names a renamed label, or is
    /// sorted or grouped by the field, is reshaped with the new labels (its list rebuilt by
    /// the fill job its reshape starts; its old cursors are `400`). Run again on a message
    /// delivered again: a view already following names no old label, and one reshaped is not
    /// ready, so neither is touched twice.
    async fn views_follow(
        &self,
        job: &FieldJob,
        (field, changes): &(FieldId, crate::domain::options_edit::ValueChanges),
    ) -> Result<(), StoreError> {
        use crate::domain::options_edit::WhereFate;
        use crate::store::records::views::ViewWriteError;
        let records = self.store.records();
        for view in records.list_views(&job.tenant, &job.project_id).await? {
            let uses = view.sort == field.as_str() || view.group_by.as_deref() == Some(field);
            let mut spec = view.spec();
            let outcome = match changes.where_fate(&view.filter, field.as_str()) {
                WhereFate::Deleted => records.delete_view(&job.tenant, &view.id).await,
                WhereFate::Follows(filter) => {
                    spec.filter = filter;
                    records
                        .replace_view(&job.tenant, &view, (&spec, true))
                        .await
                        .map(|_| ())
                }
                WhereFate::Unchanged if uses && view.ready => records
                    .replace_view(&job.tenant, &view, (&spec, true))
                    .await
                    .map(|_| ()),
                WhereFate::Unchanged => Ok(()),
            };
            match outcome {
                // Changed or deleted meanwhile: its writer's, not this job's.
                Ok(()) | Err(ViewWriteError::NotFound | ViewWriteError::Changed) => {}
                Err(ViewWriteError::TooManyViews) => {}
                Err(ViewWriteError::Store(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// The project's views whose lists are not built, with their shapes: a fill begun after
    /// their definitions were written indexes every issue for them.
    async fn views_to_build(&self, job: &FieldJob) -> Result<Vec<(ViewId, u64)>, StoreError> {
        let views = self
            .store
            .records()
            .list_views(&job.tenant, &job.project_id)
            .await?;
        Ok(views
            .into_iter()
            .filter(|v| !v.ready)
            .map(|v| (v.id, v.rev))
            .collect())
    }

    /// The last page is done: an add's fields become sortable, then the checkpoint says so.
    async fn finish(&self, job: &FieldJob, mut progress: Progress) -> Result<Outcome, JobError> {
        for field in &progress.covers {
            // A field deleted meanwhile is simply gone.
            self.store
                .records()
                .mark_sortable(&job.tenant, &job.project_id, field)
                .await?;
        }
        for (view, rev) in &progress.views {
            // A view deleted or reshaped meanwhile is not this job's to mark.
            self.store
                .records()
                .mark_view_ready(&job.tenant, view, *rev)
                .await?;
        }
        if let Some((field, _)) = &progress.edit {
            // Every issue holds the new labels and is indexed at the new places.
            self.store
                .records()
                .finish_edit(
                    &job.tenant,
                    &job.project_id,
                    field,
                    job.field_id.numbered_value(),
                )
                .await?;
        }
        if job.kind == JobKind::Fill {
            // Every issue is indexed under definitions that no longer count the views or
            // shapes gone: their count items go.
            self.store
                .index()
                .drop_dead_view_counts(&job.tenant, &job.project_id)
                .await?;
        }
        if job.kind == JobKind::Purge {
            // The issues are gone: the rest goes, this job's checkpoint with it.
            let items = self
                .store
                .records()
                .purge_project_rest(&job.tenant, &job.project_id)
                .await?;
            tracing::info!(job = %job.sk(), issues = progress.issues, items, "project purged");
            return Ok(Outcome::Finished);
        }
        progress.finished = true;
        self.store.index().save_job(job, &progress).await?;
        tracing::info!(job = %job.sk(), issues = progress.issues, pages = progress.pages, "field job finished");
        Ok(Outcome::Finished)
    }
}

/// The fields an add job marks sortable when it finishes (every field not sortable yet);
/// `None` when `job` has nothing to do given the project's `defs`.
fn covers(job: &FieldJob, defs: Vec<FieldDef>) -> Option<Vec<FieldId>> {
    let defined = defs.iter().find(|d| d.id == job.field_id);
    match job.kind {
        // A sortable field's job finished, and built every field before it.
        JobKind::Add if defined.is_some_and(|d| d.sortable) => None,
        // A field gone meanwhile may have been named for a batch's other fields too: build
        // whatever waits.
        JobKind::Add => {
            let waiting: Vec<FieldId> = defs
                .into_iter()
                .filter(|d| !d.sortable)
                .map(|d| d.id)
                .collect();
            (!waiting.is_empty()).then_some(waiting)
        }
        // Field ids are never reused, so a defined field was never deleted: a message
        // naming one is not a removal's, and removes nothing.
        JobKind::Remove if defined.is_some() => None,
        JobKind::Remove | JobKind::Fill | JobKind::Edit | JobKind::Purge => Some(Vec::new()),
    }
}

/// The checkpoints' index-table I/O.
impl IndexTable<'_> {
    fn job_key(job: &FieldJob) -> Item {
        Item::from([
            (
                keys::PK.to_string(),
                AttributeValue::S(keys::index::jobs_pk(&job.tenant)),
            ),
            (keys::SK.to_string(), AttributeValue::S(job.sk())),
        ])
    }

    fn job_item(job: &FieldJob, progress: &Progress) -> Result<Item, StoreError> {
        Ok(serde_dynamo::to_item(ProgressItem {
            pk: keys::index::jobs_pk(&job.tenant),
            sk: job.sk(),
            progress: progress.clone(),
        })?)
    }

    /// A job's checkpoint (strongly consistent).
    #[tracing::instrument(skip_all, fields(op = "get_job"))]
    pub async fn get_job(&self, job: &FieldJob) -> Result<Option<Progress>, StoreError> {
        let out = self
            .store
            .client
            .get_item()
            .table_name(&self.store.index)
            .set_key(Some(Self::job_key(job)))
            .consistent_read(true)
            .send()
            .await
            .map_err(crate::store::sdk("GetItem"))?;
        out.item
            .map(|i| serde_dynamo::from_item::<_, ProgressItem>(i).map(|p| p.progress))
            .transpose()
            .map_err(StoreError::from)
    }

    /// Writes a job's first checkpoint; `false` if it already has one.
    #[tracing::instrument(skip_all, fields(op = "create_job"))]
    pub async fn create_job(
        &self,
        job: &FieldJob,
        progress: &Progress,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .put_item()
            .table_name(&self.store.index)
            .set_item(Some(Self::job_item(job, progress)?))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        condition_held("PutItem", result)
    }

    /// Writes a checkpoint if the job is still at `job.step`; `false` if another run has
    /// moved it on (or finished it).
    #[tracing::instrument(skip_all, fields(op = "save_job"))]
    pub async fn save_job(&self, job: &FieldJob, progress: &Progress) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .put_item()
            .table_name(&self.store.index)
            .set_item(Some(Self::job_item(job, progress)?))
            .condition_expression("#step = :step AND #finished = :no")
            .expression_attribute_names("#step", "step")
            .expression_attribute_names("#finished", "finished")
            .expression_attribute_values(":step", AttributeValue::N(job.step.to_string()))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .send()
            .await;
        condition_held("PutItem", result)
    }

    /// A tenant's field jobs, finished or not (`gridctl jobs`).
    #[tracing::instrument(skip_all, fields(op = "list_jobs"))]
    pub async fn list_jobs(&self, tenant: &TenantId) -> Result<Vec<Progress>, StoreError> {
        let query =
            crate::store::query::Query::partition(&self.store.index, keys::index::jobs_pk(tenant))
                .consistent(true);
        self.store
            .query_all(query)
            .await?
            .into_iter()
            .map(|i| {
                serde_dynamo::from_item::<_, ProgressItem>(i)
                    .map(|p| p.progress)
                    .map_err(StoreError::from)
            })
            .collect()
    }
}
