//! Re-indexing from the records table: one issue (`gridctl replay`), a page of a project
//! (field jobs, reshard), a whole project.

use futures::StreamExt;

use crate::cursor::Position;
use crate::domain::Issue;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::values::StoredValue;
use crate::model::record::IssueRecord;
use crate::model::watermark::Replaces;

use super::apply::{Head, Target};
use super::defs::Defs;
use super::{DELETED, IndexError, Indexer, Metrics};

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

impl Indexer {
    /// Re-indexes one issue from its current record (or its absence), whatever the watermark
    /// says about versions: what `gridctl replay` does for the issues a failed batch named.
    pub async fn reindex_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Metrics, IndexError> {
        let mut metrics = Metrics::default();
        let issue = self
            .store
            .records()
            .get_issue_item(tenant, issue_id)
            .await?;
        let record = issue.as_ref().map(IssueRecord::of);
        let target = Target {
            version: issue.as_ref().map_or(DELETED, |i| i.version),
            issue: record.as_ref(),
            head: Head::Unread,
        };
        self.apply(
            tenant,
            issue_id,
            &target,
            Replaces::OlderOrSame,
            &Defs::default(),
            &mut metrics,
        )
        .await?;
        if issue.is_none() {
            // As the stream's unit does.
            // All of it: an operator's replay finishes what the stream's attempts left.
            self.clean_up_deleted(tenant, issue_id, None, &mut metrics)
                .await?;
        }
        // Whatever parked it is behind it now.
        self.store.index().unpark(tenant, issue_id).await?;
        Ok(metrics)
    }

    /// Puts history entries made from stream records read back (`gridctl replay`), if the
    /// issue still exists (a deleted one's history is deleted, not rebuilt); how many.
    pub async fn rebuild_history(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        entries: &[crate::model::history::HistoryEntry],
    ) -> Result<usize, IndexError> {
        if entries.is_empty()
            || self
                .store
                .records()
                .get_issue_item(tenant, issue_id)
                .await?
                .is_none()
        {
            return Ok(0);
        }
        Ok(self
            .store
            .index()
            .put_history(tenant, issue_id, entries)
            .await?)
    }

    /// Re-indexes every issue of a project with its current fields (after a field change
    /// whose record failed, so no field job was sent), completing its columns.
    pub async fn reindex_whole_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Metrics, IndexError> {
        let mut metrics = Metrics::default();
        // A deleted project (a replayed removal): purged, not re-indexed.
        if self
            .store
            .records()
            .get_project(tenant, project_id)
            .await?
            .is_none()
        {
            self.purge(tenant, project_id).await?;
            return Ok(metrics);
        }
        self.reindex_completing(tenant, project_id, None, "replay", &mut metrics)
            .await?;
        // An options edit whose job a lost record never started: finished here, as its job
        // would (a field under edit is not marked sortable by the pass above).
        for (field, rev, changes) in self
            .store
            .records()
            .pending_edits(tenant, project_id)
            .await?
        {
            let edit = ValueEdit::Options {
                field: field.clone(),
                changes,
            };
            self.reindex_project(tenant, project_id, Some(&edit), "replay", &mut metrics)
                .await?;
            self.store
                .records()
                .finish_edit(tenant, project_id, &field, rev)
                .await?;
        }
        Ok(metrics)
    }

    /// The whole project re-indexed, then the fields that were not sortable when it began
    /// marked sortable: every issue has been indexed with them since, as a field job's last
    /// page would have left them. (Read first: a field added while it runs is not built.)
    pub(super) async fn reindex_completing(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        edit: Option<&ValueEdit>,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let pending: Vec<FieldId> = self
            .store
            .records()
            .project_with_fields(tenant, project_id)
            .await?
            .map(|(_, defs)| defs.into_iter().filter(|d| !d.sortable).map(|d| d.id))
            .into_iter()
            .flatten()
            .collect();
        self.reindex_project(tenant, project_id, edit, seq, metrics)
            .await?;
        for field in &pending {
            // A field deleted meanwhile is simply gone.
            self.store
                .records()
                .mark_sortable(tenant, project_id, field)
                .await?;
        }
        Ok(())
    }

    /// Re-indexes every issue of a project with its current fields, first making `edit` on
    /// each issue it touches (a removed field's value, a select field's renamed or removed
    /// labels).
    /// An issue that fails for good is parked (at `seq`) and the others go on.
    pub(super) async fn reindex_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        edit: Option<&ValueEdit>,
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let mut start = None;
        loop {
            let page = self
                .reindex_page(
                    tenant,
                    project_id,
                    edit,
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

    /// One page of `Indexer::reindex_project`: at most `limit` of the project's issues after
    /// `start` by number, re-indexed with the fields as they are now. Returns how many issues
    /// it read and where the next page starts. The field job's unit of work.
    pub async fn reindex_page(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        edit: Option<&ValueEdit>,
        (start, limit): (Option<&Position>, i32),
        seq: &str,
        metrics: &mut Metrics,
    ) -> Result<ReindexPage, IndexError> {
        // Read after the change, so every issue is indexed with the project's fields as they are.
        let defs = Defs::default();
        let page = self
            .store
            .records()
            .issues_of_project(tenant, project_id, start, limit)
            .await?;
        let issues = page.items.len();
        let runs: Vec<_> = page
            .items
            .into_iter()
            .map(|issue| self.reindex_counted(tenant, issue, edit, seq, &defs))
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
    pub(super) async fn reindex_counted(
        &self,
        tenant: &TenantId,
        issue: Issue,
        edit: Option<&ValueEdit>,
        seq: &str,
        defs: &Defs,
    ) -> (Result<(), IndexError>, Metrics) {
        let mut metrics = Metrics::default();
        let outcome =
            Box::pin(self.reindex_one(tenant, issue, edit, seq, defs, &mut metrics)).await;
        (outcome, metrics)
    }

    /// One issue of a project being re-indexed: with `edit` made on it, if any, and with the
    /// project's current fields; parked at `seq` if that fails for good.
    pub(super) async fn reindex_one(
        &self,
        tenant: &TenantId,
        mut issue: Issue,
        edit: Option<&ValueEdit>,
        seq: &str,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        match edit {
            Some(ValueEdit::RemoveField(field))
                if issue.fields.remove(field.as_str()).is_some() =>
            {
                self.store
                    .records()
                    .remove_field_value(tenant, &issue.id, field)
                    .await?;
                metrics.writes += 1;
            }
            Some(ValueEdit::Options { field, changes }) => {
                if let Some(StoredValue::S(label)) = issue.fields.get(field).cloned()
                    && changes.apply(&label) != Some(label.as_str())
                {
                    let to = changes.apply(&label).map(str::to_string);
                    let now =
                        crate::domain::values::format_timestamp(time::OffsetDateTime::now_utc());
                    // Conditioned on the label read: a value written since is the writer's.
                    if self
                        .store
                        .records()
                        .replace_select_value(
                            tenant,
                            &issue.id,
                            field,
                            (&label, to.as_deref()),
                            &now,
                        )
                        .await?
                    {
                        match to {
                            Some(to) => issue.fields.insert(field.clone(), StoredValue::S(to)),
                            None => issue.fields.remove(field),
                        };
                        // As written: the next version, at `now`.
                        issue.version += 1;
                        issue.updated_at = now;
                        metrics.writes += 1;
                    }
                }
            }
            _ => {}
        }
        let record = IssueRecord::of(&issue);
        let target = Target {
            version: issue.version,
            issue: Some(&record),
            head: Head::Unread,
        };
        match self
            .apply(
                tenant,
                &issue.id,
                &target,
                Replaces::OlderOrSame,
                defs,
                metrics,
            )
            .await
        {
            Err(e) if e.is_permanent() => {
                self.park(tenant, &issue.id, true, &e, seq, metrics).await
            }
            other => other,
        }
    }
}

/// What a re-index changes on an issue before it indexes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueEdit {
    /// A deleted field: its value goes.
    RemoveField(FieldId),
    /// A select field's options edit: renamed labels become their new ones, removed labels go.
    Options {
        field: FieldId,
        changes: crate::domain::options_edit::ValueChanges,
    },
}
