//! Resharding a project: splitting its column partitions into more shards (or fewer) while
//! its grid stays exact, with the same protocol a field change uses to keep stale indexers
//! from undoing the work (the project's `fields_rev`).
//!
//! The project records the layout reads use (`shards`) and, during a reshard, the other one
//! the indexer keeps exact beside it (`shards_also`). From `A` shards to `B`:
//! 1. **Build**: `shards_also = B`. Every write indexes both layouts. After the settle (below),
//!    every issue is re-indexed, a page at a time, so layout `B` is complete; an issue that
//!    cannot be (parked) stops the reshard here. Reads still use `A`.
//! 2. **Switch**: `shards = B`, `shards_also = A`. Both layouts stay exact, so a grid read that
//!    still holds the old project item (an eventually consistent read) is right either way.
//! 3. **Retire**, after the settle (at least [`READS_MOVED`]): `shards_also` removed. Every write now indexes `B` only and
//!    deletes its issue's `A` entries; after the settle, a last pass re-indexes every issue so
//!    none is left behind.
//!
//! The settle follows each move: long enough for an indexer invocation that read the layouts
//! before it to have ended (the indexer's timeout) and for a read of the project item to be
//! fresh. An invocation holding old layouts that writes an issue a pass has already done reads
//! them again (the move advanced `fields_rev`); the settle covers the issue it creates, which
//! the pass's listing (GSI1, eventually consistent) may not show yet.
//!
//! Each move is conditioned on the stage before it and on the reshard's run id, recorded by
//! its first move, so two reshards cannot interleave: a run whose project was moved by another
//! stops. A reshard cut short anywhere is finished by running it again with the same count
//! (the run adopts the recorded id; the state is on the project item, and the passes are
//! idempotent re-indexes), or turned back by running it with the other count: the two layouts
//! of a project under way are both kept exact, so either can become the only one (before the
//! switch, the one being built is simply retired; after it, reads switch back first).

use std::time::Duration;

use serde::Serialize;

use crate::domain::ids::{ProjectId, TenantId};
use crate::indexer::{IndexError, Indexer, Metrics, REINDEX_PAGE};
use crate::keys::index::{MAX_SHARDS, Shards};
use crate::store::{Store, StoreError};

/// How long a reshard waits after each move by default: the indexer function's timeout (120 s
/// in template.yaml) and a margin, well past the delay of an eventually consistent read.
pub const SETTLE: Duration = Duration::from_secs(130);

/// The least a reshard waits between switching reads and retiring the layout they left,
/// whatever its settle: a grid instance serves a layout it read for
/// `read::HELD_PROJECT_MAX_AGE`, and the read it held may have been a moment stale.
pub const READS_MOVED: Duration =
    crate::read::HELD_PROJECT_MAX_AGE.saturating_add(Duration::from_secs(1));

/// A stage a reshard went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Both layouts written; every issue re-indexed into the new one.
    Build,
    /// Reads moved to the new layout.
    Switch,
    /// The old layout dropped; every issue re-indexed so its old entries are gone.
    Retire,
}

/// What a reshard did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub from: u16,
    pub to: u16,
    pub stages: Vec<Stage>,
    /// Issues re-indexed over all passes.
    pub issues: u64,
    pub writes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReshardError {
    #[error("the shard count must be 1 to {MAX_SHARDS}")]
    Count,
    #[error("no such project")]
    NotFound,
    #[error(
        "a reshard is under way for this project (reads use {reads} shards, {other} are kept beside them): run it again with {other} to finish it, or with {reads} to turn it back"
    )]
    InProgress { reads: u16, other: u16 },
    #[error(
        "{0} issues could not be indexed in the new layout (parked; `gridctl verify` lists them): repair them, then run the reshard again"
    )]
    Parked(usize),
    #[error("the project's shards changed meanwhile (another reshard?): run it again")]
    Moved,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// Reshards `project_id` to `to` shards (or finishes a reshard to `to` cut short), waiting
/// `settle` after the switch. `on_page` hears each page's issue count.
pub async fn reshard(
    indexer: &Indexer,
    store: &Store,
    (tenant, project_id): (&TenantId, &ProjectId),
    to: u16,
    settle: Duration,
    on_page: &(dyn Fn(Stage, usize) + Sync),
) -> Result<Report, ReshardError> {
    if Shards::of(to).is_none() {
        return Err(ReshardError::Count);
    }
    let project = store
        .records()
        .get_project(tenant, project_id)
        .await?
        .ok_or(ReshardError::NotFound)?;
    let (read, also) = (project.read_shards(), project.shards_also);
    let mover = Mover {
        store,
        tenant,
        project_id,
        // The run under way, adopted; or a new one.
        run: project
            .reshard_run
            .clone()
            .unwrap_or_else(|| ulid::Ulid::new().to_string()),
    };
    let stage = mover.start(read, also, to).await?;
    // The count the project comes from (or, turned back, the one it drops).
    let old = if read == to { also.unwrap_or(to) } else { read };
    let mut report = Report {
        from: old,
        to,
        ..Report::default()
    };
    if stage == Stage::Build {
        tokio::time::sleep(settle).await;
        let parked = pass(
            indexer,
            (tenant, project_id),
            Stage::Build,
            &mut report,
            on_page,
        )
        .await?;
        // Reads must not switch to a layout an issue is missing from.
        if parked > 0 {
            return Err(ReshardError::Parked(parked));
        }
        mover.step((old, Some(to)), (to, Some(old))).await?;
    }
    if stage != Stage::Retire {
        report.stages.push(Stage::Switch);
        // Retiring deletes the old layout's entries at once (every write after the move does):
        // no grid instance may still be reading it.
        tokio::time::sleep(settle.max(READS_MOVED)).await;
        mover.step((to, Some(old)), (to, None)).await?;
        tokio::time::sleep(settle).await;
    }
    // An issue parked here keeps entries of the old layout too: `gridctl verify` lists it.
    pass(
        indexer,
        (tenant, project_id),
        Stage::Retire,
        &mut report,
        on_page,
    )
    .await?;
    Ok(report)
}

/// Moves one project's layouts, each move naming the run, so a run another one overtook
/// stops instead of moving the project again.
struct Mover<'a> {
    store: &'a Store,
    tenant: &'a TenantId,
    project_id: &'a ProjectId,
    run: String,
}

impl Mover<'_> {
    /// `(read, also)` from one pair to the next, unless another run moved the project.
    async fn step(
        &self,
        from: (u16, Option<u16>),
        to: (u16, Option<u16>),
    ) -> Result<(), ReshardError> {
        let held = self
            .store
            .records()
            .move_shards(self.tenant, self.project_id, from, to, &self.run)
            .await?;
        if held {
            Ok(())
        } else {
            Err(ReshardError::Moved)
        }
    }

    /// The stage a reshard to `to` starts at, from the layouts the project has: a new one
    /// starts building (after its first move), one cut short goes on where it stood.
    async fn start(&self, read: u16, also: Option<u16>, to: u16) -> Result<Stage, ReshardError> {
        match also {
            // Nothing under way: start, unless already there (then only the last pass, which
            // finds nothing to do on a project that was never anything else).
            None if read == to => Ok(Stage::Retire),
            None => {
                self.step((read, None), (read, Some(to))).await?;
                Ok(Stage::Build)
            }
            Some(building) if building == to => Ok(Stage::Build),
            // Switched already: the old layout is being retired.
            Some(_) if read == to => Ok(Stage::Switch),
            Some(other) => Err(ReshardError::InProgress { reads: read, other }),
        }
    }
}

/// Re-indexes every issue of the project with its layouts as they are now; returns how many
/// issues were parked instead.
async fn pass(
    indexer: &Indexer,
    (tenant, project_id): (&TenantId, &ProjectId),
    stage: Stage,
    report: &mut Report,
    on_page: &(dyn Fn(Stage, usize) + Sync),
) -> Result<usize, ReshardError> {
    let mut metrics = Metrics::default();
    let mut after = None;
    loop {
        let page = indexer
            .reindex_page(
                tenant,
                project_id,
                None,
                (after.as_ref(), REINDEX_PAGE),
                "reshard",
                &mut metrics,
            )
            .await?;
        report.issues += page.issues as u64;
        on_page(stage, page.issues);
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    report.writes += metrics.writes as u64;
    report.stages.push(stage);
    Ok(metrics.parked)
}
