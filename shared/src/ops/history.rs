//! Issues' history checked against the issues, as `gridctl verify` reports it and `repair`
//! mends what can be mended: every version from 1 to the issue's current one has its entry, no
//! entry is of a version the issue has not reached, and no history outlives its issue.
//!
//! The indexer makes an entry from each stream record that moves a version, idempotently, so
//! retries and replays of the stream never lose or double one. A version lacks its entry only
//! when its record never reached the indexer: a batch that ran out of retries (then `gridctl
//! replay` reads the batch back from the stream, which keeps records 24 hours, and rebuilds its
//! entries from their images), or a version made before the stack kept history. Past the
//! stream's retention the difference a version made is nowhere any more: `repair` cannot
//! rebuild it, and verify keeps reporting it, so the gap is known rather than hidden.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::domain::Issue;
use crate::domain::ids::{IssueId, TenantId};
use crate::keys;
use crate::store::records::items::{pk_of, sk_of};
use crate::store::{Item, Store, StoreError};

/// `(tenant, issue id)`.
type IssueRef = (TenantId, IssueId);

/// The history entries a scan of the index table saw: each issue's versions, and those
/// acknowledged as lost.
#[derive(Debug, Default)]
pub struct HistoryScan {
    pub versions: BTreeMap<IssueRef, BTreeSet<u64>>,
    pub lost: BTreeMap<IssueRef, BTreeSet<u64>>,
}

impl HistoryScan {
    /// Takes in one scanned index item, if it is a history entry or a lost-versions item.
    pub fn absorb(&mut self, item: &Item) {
        let Some(sk) = sk_of(item) else { return };
        let Some(at) = pk_of(item).and_then(keys::index::parse_watermark_pk) else {
            return;
        };
        if let Some(version) = keys::index::parse_history_sk(sk) {
            self.versions.entry(at).or_default().insert(version);
        } else if sk == keys::index::HISTORY_LOST_SK {
            let lost = item
                .get(crate::store::index::history::LOST)
                .and_then(|v| v.as_ns().ok())
                .map(|ns| ns.iter().filter_map(|n| n.parse().ok()).collect())
                .unwrap_or_default();
            self.versions.entry(at.clone()).or_default();
            self.lost.insert(at, lost);
        }
    }
}

/// What is wrong with an issue's history.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum HistoryProblem {
    /// Entries of an issue that no longer exists (its clean-up not done).
    Orphaned { entries: u64 },
    /// Versions without their entry (at most the first 20 named), of `count`.
    Missing { versions: Vec<u64>, count: u64 },
    /// Entries of versions the issue has not reached (a hand edit or a restore).
    Stray { versions: Vec<u64> },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HistoryDrift {
    pub tenant: TenantId,
    pub issue: IssueId,
    #[serde(flatten)]
    pub problem: HistoryProblem,
}

/// Every history problem of the scan, against the issues the records hold.
pub fn check(scan: &HistoryScan, issues: &BTreeMap<IssueRef, Issue>) -> Vec<HistoryDrift> {
    let drift = |(tenant, issue): &IssueRef, problem| HistoryDrift {
        tenant: tenant.clone(),
        issue: issue.clone(),
        problem,
    };
    let none = BTreeSet::new();
    let mut out = Vec::new();
    for (at, versions) in &scan.versions {
        if !issues.contains_key(at) {
            let entries = versions.len() as u64;
            out.push(drift(at, HistoryProblem::Orphaned { entries }));
        }
    }
    for (at, issue) in issues {
        let have = scan.versions.get(at).unwrap_or(&none);
        let lost = scan.lost.get(at).unwrap_or(&none);
        let missing: Vec<u64> = (1..=issue.version)
            .filter(|v| !have.contains(v) && !lost.contains(v))
            .collect();
        if !missing.is_empty() {
            let count = missing.len() as u64;
            let versions = missing.into_iter().take(20).collect();
            out.push(drift(at, HistoryProblem::Missing { versions, count }));
        }
        let stray: Vec<u64> = have.range(issue.version + 1..).copied().collect();
        if !stray.is_empty() {
            out.push(drift(at, HistoryProblem::Stray { versions: stray }));
        }
    }
    out
}

/// Mends what [`check`] found and can be mended: a deleted issue's history deleted (only when
/// the issue is still gone), entries past the issue's version deleted (only those still past
/// it). A missing entry is left as it is (see the module's note), unless `accept_lost`: then
/// the versions still missing are recorded as lost, and verify stops reporting them (what an
/// operator does once `gridctl replay` can no longer rebuild them, or once after upgrading a
/// stack whose issues' versions predate history). Returns how many problems it acted on.
pub async fn repair(
    store: &Store,
    found: &[HistoryDrift],
    accept_lost: bool,
) -> Result<usize, StoreError> {
    let (records, index) = (store.records(), store.index());
    let mut acted = 0;
    for d in found {
        let (tenant, issue) = (&d.tenant, &d.issue);
        match &d.problem {
            HistoryProblem::Orphaned { .. } => {
                if records.get_issue_item(tenant, issue).await?.is_none() {
                    index.purge_history(tenant, issue, None).await?;
                    acted += 1;
                }
            }
            HistoryProblem::Stray { versions } => {
                let Some(now) = records.get_issue_item(tenant, issue).await? else {
                    continue;
                };
                let past: Vec<u64> = versions
                    .iter()
                    .copied()
                    .filter(|v| *v > now.version)
                    .collect();
                index.delete_history(tenant, issue, &past).await?;
                acted += 1;
            }
            HistoryProblem::Missing { .. } if accept_lost => {
                let Some(now) = records.get_issue_item(tenant, issue).await? else {
                    continue;
                };
                let have: BTreeSet<u64> = index
                    .history_versions(tenant, issue)
                    .await?
                    .into_iter()
                    .collect();
                let missing: Vec<u64> = (1..=now.version).filter(|v| !have.contains(v)).collect();
                if !missing.is_empty() {
                    index.accept_lost_history(tenant, issue, &missing).await?;
                }
                acted += 1;
            }
            HistoryProblem::Missing { .. } => {}
        }
    }
    Ok(acted)
}
