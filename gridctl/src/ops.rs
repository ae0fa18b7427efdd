//! `verify` and `repair`: scans, comparisons and fixes, with progress for people and a report
//! for scripts.

use std::collections::BTreeMap;

use anyhow::Result;
use gridline::domain::ids::{IssueId, ProjectId};
use gridline::indexer::{IndexError, Indexer};
use gridline::keys::index::{ParkedUnit, parked_other};
use gridline::ops::drift::{self, Drift, Repaired};
use gridline::store::Store;
use gridline::store::index::Parked;
use indicatif::ProgressBar;
use serde::Serialize;

/// What `verify` found.
#[derive(Debug, Serialize)]
pub struct VerifyReport {
    pub records_scanned: usize,
    pub index_scanned: usize,
    pub issues: usize,
    pub missing: usize,
    pub extra: usize,
    pub stale: usize,
    /// Units the indexer parked (see `Drift::parked`): drift too.
    pub parked: usize,
    /// Relation problems: an edge without its inverse, dangling, or a wrong count.
    pub relations: usize,
    /// Tree problems: a sub-issue without its edge, a stray edge, a parent gone.
    pub tree: usize,
    /// Comment problems: comments of a deleted issue, or a wrong count.
    pub comments: usize,
    /// History problems: versions without their entry, entries of a deleted issue, entries
    /// past the issue's version.
    pub history: usize,
    /// Views' count items out of step with the memberships recorded.
    pub view_counts: usize,
    /// Count items left by a view or shape gone: inert, not drift (`repair` deletes them).
    pub stray_view_counts: usize,
    pub drifted_issues: usize,
    /// Watermarks still in a previous format (not drift; `gridctl upgrade` rewrites them).
    pub previous_layout_watermarks: usize,
    /// Their issues' entries in the `all` scope, which that layout had (not drift either).
    pub previous_layout_entries: usize,
    pub drift: Drift,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.drift.is_clean()
    }
}

/// Scans both tables (`segments` parallel segments each) and compares.
pub async fn verify(store: &Store, segments: u32, progress: &ProgressBar) -> Result<VerifyReport> {
    let snap = drift::snapshot(store, segments, &|n| progress.inc(n as u64)).await?;
    let drift = drift::compare(&snap);
    Ok(VerifyReport {
        records_scanned: snap.records_scanned,
        index_scanned: snap.index_scanned,
        issues: snap.issues.len(),
        missing: drift.missing.len(),
        extra: drift.extra.len(),
        stale: drift.stale.len(),
        parked: drift.parked.len(),
        relations: drift.relations.len(),
        tree: drift.tree.len(),
        comments: drift.comments.len(),
        history: drift.history.len(),
        view_counts: drift.view_counts.iter().filter(|d| !d.is_stray()).count(),
        stray_view_counts: drift.view_counts.iter().filter(|d| d.is_stray()).count(),
        drifted_issues: drift.issues().len(),
        previous_layout_watermarks: snap.previous_layout_watermarks,
        previous_layout_entries: snap.previous_layout_entries,
        drift,
    })
}

/// What `upgrade` did.
#[derive(Debug, Default, Serialize)]
pub struct UpgradeReport {
    /// Watermarks found in the previous format.
    pub found: usize,
    pub upgraded: usize,
    /// Issues whose re-index failed (logged); run again.
    pub failed: usize,
}

/// Rewrites every watermark still in a previous format (every entry key in a string set, or
/// column entries also in the `all` scope, which this deletes) in the current one, by re-indexing its issue from its current record, 16 at a time: safe
/// while traffic flows (each write is conditioned on the version it read, as the indexer's
/// are). The indexer reads both layouts, so this only retires the old one.
pub async fn upgrade(
    store: &Store,
    segments: u32,
    progress: &dyn Fn(&str, u64) -> ProgressBar,
) -> Result<UpgradeReport> {
    use futures::StreamExt;
    let scan = progress("scanning", 0);
    let items = store
        .scan_table(gridline::store::index::Table::Index, segments, &|n| {
            scan.inc(n as u64)
        })
        .await?;
    scan.finish_and_clear();
    let old: Vec<_> = items
        .iter()
        .filter_map(gridline::store::index::watermark_item::previous_format_head)
        .collect();
    let mut report = UpgradeReport {
        found: old.len(),
        ..UpgradeReport::default()
    };
    let bar = progress("upgrading", old.len() as u64);
    let indexer = Indexer::new(store.clone());
    let runs = old.iter().map(|(tenant, issue)| {
        let indexer = &indexer;
        async move { (issue, indexer.reindex_issue(tenant, issue).await) }
    });
    let mut done = futures::stream::iter(runs).buffer_unordered(16);
    while let Some((issue, result)) = done.next().await {
        match result {
            Ok(_) => report.upgraded += 1,
            Err(e) => {
                tracing::error!(issue = %issue, error = %e, "watermark upgrade failed");
                report.failed += 1;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(report)
}

/// What `repair` did.
#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub rounds: u32,
    pub fixed: usize,
    pub already_right: usize,
    pub in_flight: usize,
    pub puts: usize,
    pub deletes: usize,
    /// Parked projects re-indexed whole, and parked unreadable records acknowledged (their
    /// markers removed: a record that names nothing has nothing to re-index, and this repair
    /// recomputes every issue anyway).
    pub projects_reindexed: usize,
    pub records_acknowledged: usize,
    /// Relation problems acted on (see `gridline::ops::relations::repair`).
    pub relations: usize,
    /// Tree problems acted on (see `gridline::ops::tree::repair`).
    pub tree: usize,
    /// Comment problems acted on (see `gridline::ops::comments::repair`).
    pub comments: usize,
    /// History problems acted on (see `gridline::ops::history::repair`; a missing entry
    /// cannot be rebuilt here: `gridctl replay` rebuilds it from the stream within 24 hours).
    pub history: usize,
    /// Views' count items rewritten or deleted (see `gridline::ops::view_counts::repair`).
    pub view_counts: usize,
    /// Drift left after the last round (empty when clean).
    pub remaining: BTreeMap<String, usize>,
    pub clean: bool,
}

fn remaining(found: &VerifyReport) -> BTreeMap<String, usize> {
    BTreeMap::from([
        ("missing".to_string(), found.missing),
        ("extra".to_string(), found.extra),
        ("stale".to_string(), found.stale),
        ("parked".to_string(), found.parked),
        ("relations".to_string(), found.relations),
        ("tree".to_string(), found.tree),
        ("comments".to_string(), found.comments),
        ("history".to_string(), found.history),
        ("view_counts".to_string(), found.view_counts),
    ])
}

/// Verifies, fixes every drifted issue, and verifies again, up to `rounds` times: an issue
/// the stream was still writing (`in flight`) is looked at again in the next round.
pub async fn repair(
    store: &Store,
    segments: u32,
    rounds: u32,
    progress: &dyn Fn(&str, u64) -> ProgressBar,
) -> Result<RepairReport> {
    repair_with(store, (segments, rounds), false, progress).await
}

/// [`repair`]; with `accept_lost_history`, versions whose history entries cannot be rebuilt
/// are recorded as lost (see `gridline::ops::history::repair`).
pub async fn repair_with(
    store: &Store,
    (segments, rounds): (u32, u32),
    accept_lost_history: bool,
    progress: &dyn Fn(&str, u64) -> ProgressBar,
) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    // Views' count problems seen by the round before: only one seen twice is acted on.
    let mut counts_seen: Vec<gridline::ops::view_counts::ViewCountDrift> = Vec::new();
    for round in 1..=rounds.max(1) {
        report.rounds = round;
        let scan = progress("scanning", 0);
        let found = verify(store, segments, &scan).await?;
        scan.finish_and_clear();
        report.remaining = remaining(&found);
        // Stray count items are not drift, but repair still deletes them.
        if found.is_clean() && found.stray_view_counts == 0 {
            report.clean = true;
            return Ok(report);
        }
        settle_parked(store, &found.drift.parked, &mut report).await;
        let issues = found.drift.issues();
        let bar = progress("repairing", issues.len() as u64);
        for issue in &issues {
            let hints = found.drift.entries_of(issue);
            match drift::repair_issue(store, &issue.0, &issue.1, &hints).await? {
                Repaired::Fixed { puts, deletes } => {
                    report.fixed += 1;
                    report.puts += puts;
                    report.deletes += deletes;
                }
                Repaired::AlreadyRight => report.already_right += 1,
                Repaired::InFlight => report.in_flight += 1,
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        counts_seen = repair_checks(
            store,
            &found,
            (&counts_seen, accept_lost_history),
            &mut report,
        )
        .await?;
        let unowned = found.drift.unowned();
        if !unowned.is_empty() {
            report.deletes += store
                .index()
                .write_entries([], unowned.iter().map(|e| e.as_ref()))
                .await?;
        }
    }
    // The last round's fixes are checked once more.
    let scan = progress("scanning", 0);
    let found = verify(store, segments, &scan).await?;
    scan.finish_and_clear();
    report.remaining = remaining(&found);
    report.clean = found.is_clean();
    Ok(report)
}

/// Relations, the tree, comments, history and views' counts, each mended by its own repair;
/// returns the views' count problems this round saw (see `counts_seen`).
async fn repair_checks(
    store: &Store,
    found: &VerifyReport,
    (counts_seen, accept_lost_history): (&[gridline::ops::view_counts::ViewCountDrift], bool),
    report: &mut RepairReport,
) -> Result<Vec<gridline::ops::view_counts::ViewCountDrift>> {
    let now = gridline::domain::values::format_timestamp(time::OffsetDateTime::now_utc());
    if !found.drift.relations.is_empty() {
        report.relations +=
            gridline::ops::relations::repair(store, &found.drift.relations, &now).await?;
    }
    if !found.drift.tree.is_empty() {
        report.tree += gridline::ops::tree::repair(store, &found.drift.tree, &now).await?;
    }
    if !found.drift.comments.is_empty() {
        report.comments += gridline::ops::comments::repair(store, &found.drift.comments).await?;
    }
    if !found.drift.history.is_empty() {
        report.history +=
            gridline::ops::history::repair(store, &found.drift.history, accept_lost_history)
                .await?;
    }
    // A scan reads heads and counts at different instants, so under traffic a shard can
    // look wrong once while a commit lands: it is rewritten only when two scans in a row
    // found it wrong the same way (a repair of a count needs two rounds).
    let confirmed: Vec<_> = found
        .drift
        .view_counts
        .iter()
        .filter(|d| counts_seen.contains(d))
        .cloned()
        .collect();
    if !confirmed.is_empty() {
        report.view_counts += gridline::ops::view_counts::repair(store, &confirmed).await?;
    }
    Ok(found.drift.view_counts.clone())
}

/// A parked issue is re-indexed from its current record, a parked project whole; on success
/// the marker goes. A parked unreadable record is acknowledged. A unit that still fails stays
/// parked (and is logged), so the next verify reports it again.
async fn settle_parked(store: &Store, parked: &[Parked], report: &mut RepairReport) {
    let indexer = Indexer::new(store.clone());
    for p in parked {
        let result = match parked_other(&p.subject) {
            None => match IssueId::parse(&p.subject) {
                Some(issue) => indexer.reindex_issue(&p.tenant, &issue).await.map(|_| ()),
                None => {
                    tracing::warn!(unit = %p.subject, "a parked unit's subject is not a valid issue id");
                    continue;
                }
            },
            Some((ParkedUnit::Project, project)) => {
                let Some(project) = ProjectId::parse(project) else {
                    tracing::warn!(unit = %p.subject, "a parked project's id is not a valid project id");
                    continue;
                };
                match indexer.reindex_whole_project(&p.tenant, &project).await {
                    Ok(_) => {
                        report.projects_reindexed += 1;
                        unpark(store, p).await
                    }
                    Err(e) => Err(e),
                }
            }
            Some((ParkedUnit::Team, team)) => {
                let Some(team) = gridline::domain::ids::TeamId::parse(team) else {
                    tracing::warn!(unit = %p.subject, "a parked team's id is not a valid team id");
                    continue;
                };
                match indexer.team_deleted(&p.tenant, &team).await {
                    Ok(_) => unpark(store, p).await,
                    Err(e) => Err(e),
                }
            }
            Some((ParkedUnit::Record, _)) => {
                report.records_acknowledged += 1;
                unpark(store, p).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(unit = %p.subject, error = %e, "a parked unit still fails");
        }
    }
}

async fn unpark(store: &Store, p: &Parked) -> Result<(), IndexError> {
    store
        .index()
        .unpark(&p.tenant, &p.subject)
        .await
        .map_err(Into::into)
}
