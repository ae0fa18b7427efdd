//! Relations checked from both sides, as `gridctl verify` reports them and `repair` mends
//! them: every edge has its inverse on the other issue, both issues exist, and each issue's
//! relation count is its number of edges.
//!
//! The API writes both edges and both counts in one transaction, so none of this happens but
//! for a moment after a delete (the indexer removes the deleted issue's relations within
//! seconds: repair does the same, idempotently) or after a fault outside the product (a hand
//! edit, a restore of one table's items). Repair removes a one-sided edge rather than guess
//! the side that is missing, and sets a count from the edges it finds.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::domain::ids::{IssueId, TenantId};
use crate::domain::relation::RelationKind;
use crate::keys;
use crate::store::records::relations::relations_of_items;
use crate::store::{Item, Store, StoreError};

/// `(tenant, issue id)`.
type IssueRef = (TenantId, IssueId);

/// The relation edges and counts a scan of the records table saw.
#[derive(Debug, Default)]
pub struct RelationScan {
    /// Each issue partition's edges: the other issue and the kind this one sees.
    pub edges: BTreeMap<IssueRef, BTreeMap<IssueId, RelationKind>>,
    /// Each issue's stored count (absent: none stored, 0).
    pub counts: BTreeMap<IssueRef, u32>,
}

impl RelationScan {
    /// Takes in one scanned item: a relation edge, or an issue's count.
    pub fn absorb(&mut self, item: &Item) {
        let Some((tenant, issue)) =
            crate::store::records::items::pk_of(item).and_then(keys::records::parse_issue_pk)
        else {
            return;
        };
        if let Some(r) = relations_of_items(std::slice::from_ref(item)).pop() {
            self.edges
                .entry((tenant, issue))
                .or_default()
                .insert(r.other, r.kind);
        } else if crate::store::records::items::sk_of(item) == Some(keys::records::ISSUE_SK) {
            let count = item
                .get(crate::model::codec::attr::RELATION_COUNT)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            self.counts.insert((tenant, issue), count);
        }
    }
}

/// What is wrong with an issue's relations.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum RelationProblem {
    /// An edge whose far side lacks its inverse (none, or another kind).
    OneSided { other: IssueId, kind: RelationKind },
    /// An edge of an issue that is gone, or to one: a clean-up not done yet.
    Dangling { other: IssueId, kind: RelationKind },
    /// The issue's stored count is not its number of edges.
    Count { stored: u32, edges: u32 },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RelationDrift {
    pub tenant: TenantId,
    pub issue: IssueId,
    #[serde(flatten)]
    pub problem: RelationProblem,
}

/// Every relation problem of the scan; `exists` tells which issues the scan found.
pub fn check(scan: &RelationScan, exists: &dyn Fn(&IssueRef) -> bool) -> Vec<RelationDrift> {
    let mut out = Vec::new();
    let drift = |(tenant, issue): &IssueRef, problem| RelationDrift {
        tenant: tenant.clone(),
        issue: issue.clone(),
        problem,
    };
    for (at, edges) in &scan.edges {
        for (other, kind) in edges {
            let far = (at.0.clone(), other.clone());
            if !exists(at) || !exists(&far) {
                let (other, kind) = (other.clone(), *kind);
                out.push(drift(at, RelationProblem::Dangling { other, kind }));
                continue;
            }
            let inverse = scan.edges.get(&far).and_then(|e| e.get(&at.1));
            if inverse != Some(&kind.inverse()) {
                let (other, kind) = (other.clone(), *kind);
                out.push(drift(at, RelationProblem::OneSided { other, kind }));
            }
        }
    }
    let issues: BTreeSet<&IssueRef> = scan.counts.keys().collect();
    for at in issues {
        let stored = scan.counts.get(at).copied().unwrap_or(0);
        let edges = scan.edges.get(at).map_or(0, |e| e.len() as u32);
        if stored != edges {
            out.push(drift(at, RelationProblem::Count { stored, edges }));
        }
    }
    out
}

/// Mends what [`check`] found: a dangling edge's clean-up done (as the indexer does it), a
/// one-sided edge removed, and then each touched existing issue's count set from its edges
/// (conditioned on the count it read, so a relate meanwhile is never undone). Returns how
/// many problems it acted on.
pub async fn repair(
    store: &Store,
    found: &[RelationDrift],
    now: &str,
) -> Result<usize, StoreError> {
    let records = store.records();
    let mut recount = BTreeSet::new();
    for d in found {
        let at = (&d.tenant, &d.issue);
        match &d.problem {
            RelationProblem::Dangling { other, kind } => {
                if records.get_issue_item(at.0, at.1).await?.is_none() {
                    // The deleted issue's clean-up, as the indexer does it.
                    records.drop_relations_of_deleted(at.0, at.1, now).await?;
                } else if records.get_issue_item(at.0, other).await?.is_none() {
                    // The other issue is gone: its own clean-up (if its edge is left), and
                    // this side's edge, which that clean-up did not reach.
                    records.drop_relations_of_deleted(at.0, other, now).await?;
                    records
                        .drop_one_sided(at.0, (at.1, *kind, other), now)
                        .await?;
                    recount.insert((d.tenant.clone(), d.issue.clone()));
                }
            }
            RelationProblem::OneSided { other, kind } => {
                records
                    .drop_one_sided(at.0, (at.1, *kind, other), now)
                    .await?;
                recount.insert((d.tenant.clone(), d.issue.clone()));
            }
            RelationProblem::Count { .. } => {
                recount.insert((d.tenant.clone(), d.issue.clone()));
            }
        }
    }
    for (tenant, issue) in &recount {
        recount_relations(store, tenant, issue).await?;
    }
    Ok(found.len())
}

/// Sets an existing issue's relation count to its number of edges, conditioned on the issue's
/// version as read before the edges (any relate or unrelate since moves it, and kept the
/// count right itself).
async fn recount_relations(
    store: &Store,
    tenant: &TenantId,
    issue: &IssueId,
) -> Result<(), StoreError> {
    let records = store.records();
    let Some(version) = records.issue_version(tenant, issue).await? else {
        return Ok(());
    };
    let edges = records.relations_of(tenant, issue).await?.len();
    records
        .set_relation_count(tenant, issue, (edges, version))
        .await
        .map(|_| ())
}
