//! Resharding a project: splitting its column partitions into more shards (or fewer) while
//! its grid stays exact, with the same protocol a field change uses to keep stale indexers
//! from undoing the work (the project's `fields_rev`).
//!
//! The project records the layout reads use (`shards`) and, during a reshard, the other one
//! the indexer keeps exact beside it (`shards_also`). From `A` shards to `B`:
//! 1. **Build**: `shards_also = B`. Every write indexes both layouts; then every issue is
//!    re-indexed, a page at a time, so layout `B` is complete. Reads still use `A`.
//! 2. **Switch**: `shards = B`, `shards_also = A`. Both layouts stay exact, so a grid read that
//!    still holds the old project item (an eventually consistent read) is right either way.
//! 3. **Settle**: wait until no read can still hold the layout of before the switch.
//! 4. **Retire**: `shards_also` removed. Every write now indexes `B` only and deletes its
//!    issue's `A` entries; a last pass re-indexes every issue so none is left behind.
//!
//! Each move is conditioned on the stage before it, so two reshards cannot interleave, and a
//! reshard cut short anywhere is finished by running it again with the same count (the state
//! is on the project item; the passes are idempotent re-indexes), or turned back by running it
//! with the count it came from: the two layouts of a project under way are both kept exact, so
//! either can become the only one.

use std::time::Duration;

use serde::Serialize;

use crate::domain::ids::{ProjectId, TenantId};
use crate::index::indexer::{IndexError, Indexer, Metrics, REINDEX_PAGE};
use crate::keys::index::{MAX_SHARDS, Shards};
use crate::store::{Store, StoreError};

/// How long a reshard waits after the switch by default: well past the delay of an eventually
/// consistent read of the project item (typically under a second).
pub const SETTLE: Duration = Duration::from_secs(5);

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
        "a reshard to {0} shards is in progress for this project: run it again with that count to finish it"
    )]
    InProgress(u16),
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
        .get_project(tenant, project_id)
        .await?
        .ok_or(ReshardError::NotFound)?;
    let (read, also) = (project.read_shards(), project.shards_also);
    let mut report = Report {
        from: read,
        to,
        ..Report::default()
    };
    let moved = |held: bool| {
        if held {
            Ok(())
        } else {
            Err(ReshardError::Moved)
        }
    };
    let stage = match also {
        // Nothing under way: start, unless already there (then only the last pass, which
        // finds nothing to do on a project that was never anything else).
        None if read == to => Stage::Retire,
        None => {
            moved(
                store
                    .move_shards(tenant, project_id, (read, None), (read, Some(to)))
                    .await?,
            )?;
            Stage::Build
        }
        Some(building) if building == to => Stage::Build,
        // Switched already: the old layout is being retired.
        Some(_) if read == to => Stage::Switch,
        Some(building) => return Err(ReshardError::InProgress(building)),
    };
    let old = if read == to { also.unwrap_or(to) } else { read };
    report.from = old;
    if stage == Stage::Build {
        pass(
            indexer,
            (tenant, project_id),
            Stage::Build,
            &mut report,
            on_page,
        )
        .await?;
        moved(
            store
                .move_shards(tenant, project_id, (old, Some(to)), (to, Some(old)))
                .await?,
        )?;
    }
    if stage != Stage::Retire {
        report.stages.push(Stage::Switch);
        tokio::time::sleep(settle).await;
        moved(
            store
                .move_shards(tenant, project_id, (to, Some(old)), (to, None))
                .await?,
        )?;
    }
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

/// Re-indexes every issue of the project with its layouts as they are now.
async fn pass(
    indexer: &Indexer,
    (tenant, project_id): (&TenantId, &ProjectId),
    stage: Stage,
    report: &mut Report,
    on_page: &(dyn Fn(Stage, usize) + Sync),
) -> Result<(), ReshardError> {
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
    Ok(())
}
