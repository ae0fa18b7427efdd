//! One issue reconciled with its watermark: the entries it should have written, the ones it
//! may have left deleted, from a step the model plans; catching up a watermark read under
//! older field definitions.

use std::collections::BTreeMap;

use crate::domain::ids::{IssueId, TenantId};
use crate::indexer::field_job::JobKind;
use crate::model::record::IssueRecord;
use crate::model::view::counts::{LiveViews, count_deltas};
use crate::model::watermark::{Basis, Buckets, CommitAt, Pending, Replaces, Watermark};

use super::defs::Defs;
use super::{DELETED, IndexError, Indexer, Metrics, Unit};

/// About how many bytes of a deleted issue's comments one attempt of its record deletes: a few
/// seconds of writes even at one partition's 1,000 WCU a second, so a record never holds its
/// batch near the function's timeout (4,000 comments of 1 KB an attempt).
pub const PURGE_BYTES_PER_ATTEMPT: usize = 4 << 20;

/// What the index should look like for an issue, and at which version.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    pub(super) version: u64,
    pub(super) issue: Option<&'a IssueRecord<'a>>,
    /// The issue's watermark head, if its batch read it already.
    pub(super) head: Head<'a>,
}

/// An issue's watermark head as its batch read it (see [`Heads`]).
#[derive(Clone, Copy)]
pub(super) enum Head<'a> {
    /// Not read yet: the issue reads it alone.
    Unread,
    /// Read with the batch's other issues (`None`: never indexed).
    Read(Option<&'a Watermark>),
}

/// The watermark heads of a segment's issues, read together before any of them is applied:
/// one round trip for up to 100 issues instead of one each. A head may change after this
/// read as it may after a read of its own: every watermark write is conditional on what was
/// read, so a stale head only loses its race and catches up.
#[derive(Default)]
pub(super) struct Heads(Option<BTreeMap<(TenantId, IssueId), Watermark>>);

impl Heads {
    /// Reads the heads of the issue units among `units`; when there are fewer than two, or
    /// the read fails, each issue reads its own.
    pub(super) async fn of(indexer: &Indexer, units: &[(&str, Unit<'_>)]) -> Self {
        let issues: Vec<(&TenantId, &IssueId)> = units
            .iter()
            .filter_map(|(_, u)| match u {
                Unit::Issue {
                    tenant, issue_id, ..
                } => Some((tenant, issue_id)),
                _ => None,
            })
            .collect();
        if issues.len() < 2 {
            return Self(None);
        }
        match indexer.store.index().get_watermarks(&issues).await {
            Ok(heads) => Self(Some(heads)),
            Err(e) => {
                tracing::warn!(error = %crate::telemetry::chain(&e), "batch read of watermarks failed; each issue reads its own");
                Self(None)
            }
        }
    }

    fn of_issue(&self, tenant: &TenantId, issue_id: &IssueId) -> Head<'_> {
        match &self.0 {
            None => Head::Unread,
            Some(heads) => Head::Read(heads.get(&(tenant.clone(), issue_id.clone()))),
        }
    }
}

/// The entries an issue should have, at which version, and the field-definition revision
/// they were derived under.
#[derive(Clone, Copy)]
pub(super) struct Desired<'a> {
    pub(super) version: u64,
    /// `None`: the issue is gone.
    pub(super) basis: Option<&'a Basis>,
    pub(super) fields_rev: u64,
    /// The views whose counts the commit keeps.
    pub(super) live: &'a LiveViews,
}

/// How a reconcile ended.
pub(super) enum Reconciled {
    Done,
    /// A newer watermark was recorded meanwhile: what this may have written, as pending.
    Overtaken(Pending),
}

impl Indexer {
    pub(super) async fn process(
        &self,
        unit: &Unit<'_>,
        seq: &str,
        (defs, heads): (&Defs, &Heads),
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        match unit {
            Unit::Issue {
                tenant,
                issue_id,
                last,
                history,
            } => {
                let issue = (tenant, issue_id, last.as_deref());
                self.process_issue(issue, history, (defs, heads), metrics)
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
            Unit::ProjectDeleted { tenant, project_id } => {
                let job = crate::domain::ids::FieldId::numbered(0);
                self.start_job(tenant, project_id, &job, JobKind::Purge, seq, metrics)
                    .await
            }
            Unit::TeamDeleted { tenant, team_id } => {
                let left = self.team_deleted(tenant, team_id).await?;
                metrics.writes += left.memberships + left.issues;
                Ok(())
            }
            Unit::FieldEdited {
                tenant,
                project_id,
                job,
            } => {
                self.start_job(tenant, project_id, job, JobKind::Edit, seq, metrics)
                    .await
            }
            Unit::HotAdded {
                tenant,
                project_id,
                job,
            } => {
                self.start_job(tenant, project_id, job, JobKind::Fill, seq, metrics)
                    .await
            }
            Unit::Malformed { reason, .. } => {
                Err(IndexError::Malformed(seq.to_string(), reason.clone()))
            }
        }
    }

    /// An issue's net change: its entries made exact, its versions' history entries put, and,
    /// when it was deleted, what it leaves behind deleted.
    async fn process_issue(
        &self,
        (tenant, issue_id, last): (&TenantId, &IssueId, Option<&IssueRecord<'_>>),
        history: &[crate::model::history::HistoryEntry],
        (defs, heads): (&Defs, &Heads),
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        // An issue of a deleted project (one its purge missed: created as the project was
        // deleted, or not yet in the index of issues by number it read) is deleted, not
        // indexed; its removal comes back through the stream and clears what it left.
        if let Some(issue) = last
            && !defs
                .get(&self.store, tenant, &issue.project_id)
                .await?
                .exists
        {
            self.store.records().delete_issue(tenant, issue_id).await?;
            metrics.writes += 1;
            return Ok(());
        }
        // Each version's history entry, put beside the entries' writes (one more round trip
        // in parallel, not in a row). Not for an issue the batch deletes (its history is
        // deleted next) or one the index knows is gone already (an old record delivered
        // again after the delete, as a bisected batch's first half is): so its head is read
        // first when the batch did not read it.
        let read_alone;
        let head = match heads.of_issue(tenant, issue_id) {
            Head::Unread if last.is_some() && !history.is_empty() => {
                read_alone = self.store.index().get_watermark(tenant, issue_id).await?;
                Head::Read(read_alone.as_ref())
            }
            head => head,
        };
        let target = Target {
            version: last.map_or(DELETED, |i| i.version),
            issue: last,
            head,
        };
        let gone = matches!(target.head, Head::Read(Some(w)) if w.version == DELETED);
        let entries = if last.is_some() && !gone {
            history
        } else {
            &[]
        };
        let put_history = async {
            if entries.is_empty() {
                return Ok(0);
            }
            self.store
                .index()
                .put_history(tenant, issue_id, entries)
                .await
                .map_err(IndexError::from)
        };
        let applied = self.apply(tenant, issue_id, &target, Replaces::Older, defs, metrics);
        // Both run to their end (neither is dropped mid-request when the other fails); the
        // first error is the unit's.
        let (written, applied) = futures::join!(put_history, applied);
        applied?;
        let written = written?;
        metrics.writes += written;
        metrics.history += written;
        if last.is_none() {
            let budget = Some(self.purge_budget);
            self.clean_up_deleted(tenant, issue_id, budget, metrics)
                .await?;
        }
        Ok(())
    }

    /// After an issue was deleted: its relations leave the other issues, its children are
    /// detached (each a system change on the other issue) and its comments and history are deleted, about
    /// `budget` bytes of them per attempt (more left is an error the stream retries, each
    /// retry going on from what is left; `None`, as replays and repairs run: all).
    /// Idempotent: a replay finds nothing left to do.
    pub(super) async fn clean_up_deleted(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        budget: Option<usize>,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let now = crate::domain::values::format_timestamp(time::OffsetDateTime::now_utc());
        let records = self.store.records();
        metrics.writes += records
            .drop_relations_of_deleted(tenant, issue_id, &now)
            .await?;
        metrics.writes += records
            .detach_children_of_deleted(tenant, issue_id, &now)
            .await?;
        let (purged, comments_done) = records.purge_comments(tenant, issue_id, budget).await?;
        metrics.writes += purged;
        let (purged, history_done) = self
            .store
            .index()
            .purge_history(tenant, issue_id, budget)
            .await?;
        metrics.writes += purged;
        if !(comments_done && history_done) {
            return Err(IndexError::Unfinished(issue_id.to_string()));
        }
        Ok(())
    }

    /// Makes the index hold exactly `target`'s entries for the issue, writing only the
    /// difference from its watermark. Skips a target whose version the watermark's is not one
    /// it `replaces` (re-indexing after a field change replaces the same version too).
    pub(super) async fn apply(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        target: &Target<'_>,
        replaces: Replaces,
        defs: &Defs,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let wm = match target.head {
            Head::Read(head) => head.cloned(),
            Head::Unread => self.store.index().get_watermark(tenant, issue_id).await?,
        };
        let (reread, reread_record);
        let mut target = *target;
        if let Some(w) = &wm
            && !replaces.admits(w.version, target.version)
        {
            if self
                .lags_definitions(w, &target, replaces, defs, tenant)
                .await?
            {
                reread = self
                    .store
                    .records()
                    .get_issue_item(tenant, issue_id)
                    .await?;
                reread_record = reread.as_ref().map(IssueRecord::of);
                target = Target {
                    version: reread.as_ref().map_or(DELETED, |i| i.version),
                    issue: reread_record.as_ref(),
                    head: target.head,
                };
            }
            if !replaces.admits(w.version, target.version) {
                metrics.skipped += 1;
                return Ok(());
            }
        }
        // A parked issue being indexed again: its marker goes first (the watermark write below
        // drops the flag); if this fails for good too, it is parked again.
        if wm.as_ref().is_some_and(|w| w.parked) {
            self.store.index().unpark(tenant, issue_id).await?;
        }
        let wm = wm.unwrap_or_default();
        let committed_in = wm.committed.as_ref().map(|c| &c.placement.project);
        let (desired, fields_rev, live) = defs
            .basis(
                &self.store,
                tenant,
                target.issue,
                (wm.fields_rev.unwrap_or(0), committed_in),
            )
            .await?;
        let desired = self.shaped(desired);
        let desired = Desired {
            version: target.version,
            basis: desired.as_ref(),
            fields_rev,
            live: &live,
        };
        let done = self
            .reconcile(
                (tenant, issue_id),
                desired,
                wm,
                &Pending::default(),
                replaces,
                metrics,
            )
            .await?;
        if let Reconciled::Overtaken(written) = done {
            self.catch_up(tenant, issue_id, written, metrics).await?;
        }
        Ok(())
    }

    /// Re-indexing after a field change, from a read that lagged behind a newer write (a
    /// job's page reads issues eventually consistently): if that write used definitions older
    /// than these, it may lack the new column, so the record is indexed as it is now (a
    /// strongly consistent read), or the field would be marked sortable with this issue
    /// missing from it.
    async fn lags_definitions(
        &self,
        wm: &Watermark,
        target: &Target<'_>,
        replaces: Replaces,
        defs: &Defs,
        tenant: &TenantId,
    ) -> Result<bool, IndexError> {
        let (Replaces::OlderOrSame, Some(issue)) = (replaces, target.issue) else {
            return Ok(false);
        };
        let held = defs.get(&self.store, tenant, &issue.project_id).await?;
        Ok(wm.fields_rev.unwrap_or(0) < held.rev)
    }

    /// After a newer version was recorded while `written` was being written: what this wrote
    /// may be stale, so re-index from the issue as it is now, counting those writes as
    /// entries that may be in the index. The field definitions are read again too: the newer
    /// write may have come from a field change (another shard's, with a parallelization
    /// factor above 1) that this unit's definitions predate.
    pub(super) async fn catch_up(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        written: Pending,
        metrics: &mut Metrics,
    ) -> Result<(), IndexError> {
        let defs = Defs::default();
        let now = self
            .store
            .records()
            .get_issue_item(tenant, issue_id)
            .await?;
        let wm = self
            .store
            .index()
            .get_watermark(tenant, issue_id)
            .await?
            .unwrap_or_default();
        let version = now.as_ref().map_or(DELETED, |i| i.version.max(wm.version));
        let committed_in = wm.committed.as_ref().map(|c| &c.placement.project);
        let (desired, fields_rev, live) = defs
            .basis(
                &self.store,
                tenant,
                now.as_ref().map(IssueRecord::of).as_ref(),
                (wm.fields_rev.unwrap_or(0), committed_in),
            )
            .await?;
        let desired = self.shaped(desired);
        // Whatever this finds, it does not start over: the stream redelivers what it misses.
        let desired = Desired {
            version,
            basis: desired.as_ref(),
            fields_rev,
            live: &live,
        };
        let _ = self
            .reconcile(
                (tenant, issue_id),
                desired,
                wm,
                &written,
                Replaces::OlderOrSame,
                metrics,
            )
            .await?;
        Ok(())
    }

    /// Reads the watermark's buckets the change needs, writes the desired entries not known
    /// to be written, deletes every entry that may be in the index but is not desired (with
    /// `extra`: what an earlier attempt may have written), then commits the watermark with the
    /// field-definition revision `desired` was derived under.
    pub(super) async fn reconcile(
        &self,
        (tenant, issue_id): (&TenantId, &IssueId),
        desired: Desired<'_>,
        mut wm: Watermark,
        extra: &Pending,
        replaces: Replaces,
        metrics: &mut Metrics,
    ) -> Result<Reconciled, IndexError> {
        let Desired {
            version,
            basis: desired,
            fields_rev,
            live,
        } = desired;
        let buckets = desired.map_or(0, |d| Buckets::choose(wm.buckets.count, d));
        let read = wm.buckets_to_read(desired, buckets, extra);
        self.store
            .index()
            .read_buckets(tenant, issue_id, &mut wm, &read)
            .await?;
        // Buckets not read hold no change: their fields are left out of the comparison.
        let mut compared = desired.cloned();
        if let Some(d) = compared.as_mut() {
            d.retain_columns(|c| wm.has_read(c));
        }
        let step = wm.step(tenant, issue_id, compared.as_ref(), extra);
        let converts = wm.legacy.is_some() || buckets != wm.buckets.count;
        let same_version = replaces == Replaces::OlderOrSame;
        if step.puts.is_empty() && step.deletes.is_empty() && same_version && !converts {
            return Ok(Reconciled::Done);
        }
        let written = || compared.as_ref().map(Pending::all_of).unwrap_or_default();
        let pending = wm.pending_after(&step);
        let index = self.store.index();
        // The watermark learns what this write may change before it happens (see
        // `record_intent`), so a write cut short never leaves it wrong.
        if !(step.puts.is_empty() && step.deletes.is_empty()) {
            metrics.writes += 1;
            // The intent raises the head's field revision to this write's: a write cut short
            // may have put entries derived from newer definitions (a column just made hot,
            // whose entries now carry the summary), so a writer holding older ones must read
            // them again rather than take those entries as certain.
            wm.fields_rev = Some(wm.fields_rev.unwrap_or(0).max(fields_rev));
            let intent = (version, replaces);
            if !index
                .record_intent(tenant, issue_id, &wm, &step, intent)
                .await?
            {
                return Ok(Reconciled::Overtaken(Pending::default()));
            }
        }
        metrics.writes += index
            .write_entries(step.puts.iter(), step.deletes.iter())
            .await?;
        // The views the issue enters or leaves: their counts move with the head that records
        // it (the memberships are head columns, read whole whatever the buckets read).
        let counts = count_deltas(wm.committed.as_ref(), desired, live);
        let (held, writes) = index
            .commit_watermark(
                (tenant, issue_id),
                &wm,
                desired,
                CommitAt {
                    version,
                    buckets,
                    fields_rev,
                    pending_count: pending,
                },
                (replaces, &counts),
            )
            .await?;
        metrics.writes += writes;
        Ok(if held {
            Reconciled::Done
        } else {
            Reconciled::Overtaken(written())
        })
    }
}
