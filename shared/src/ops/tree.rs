//! The issue tree checked from both records, as `gridctl verify` reports it and `repair`
//! mends it: every sub-issue's `parent_id` has its child edge in the parent's children
//! partition, every edge names a sub-issue that says so, and no sub-issue's parent is gone.
//!
//! The API writes `parent_id` and the edges in one transaction, and the indexer detaches a
//! deleted parent's children within seconds, so none of this happens but for a moment after
//! a delete or after a fault outside the product. (The children partitions in the index are
//! entries like any column's: the drift comparison checks them.)

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::domain::Issue;
use crate::domain::ids::{IssueId, TenantId};
use crate::store::records::tree::child_edge_of;
use crate::store::{Item, Store, StoreError};

/// `(tenant, issue id)`.
type IssueRef = (TenantId, IssueId);

/// The child edges a scan of the records table saw: `(tenant, parent) → children`.
#[derive(Debug, Default)]
pub struct EdgeScan(pub BTreeMap<IssueRef, BTreeSet<IssueId>>);

impl EdgeScan {
    pub fn absorb(&mut self, item: &Item) {
        if let Some((tenant, parent, child)) = child_edge_of(item) {
            self.0.entry((tenant, parent)).or_default().insert(child);
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum TreeProblem {
    /// A sub-issue without its edge under its parent.
    MissingEdge { parent: IssueId },
    /// An edge naming an issue that is gone or not under this parent.
    StrayEdge { child: IssueId },
    /// A sub-issue whose parent is gone (its detaching not done yet).
    Orphan { parent: IssueId },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TreeDrift {
    pub tenant: TenantId,
    /// The sub-issue (or, for a stray edge, the parent whose partition holds it).
    pub issue: IssueId,
    #[serde(flatten)]
    pub problem: TreeProblem,
}

/// Every tree problem of the scan.
pub fn check(edges: &EdgeScan, issues: &BTreeMap<IssueRef, Issue>) -> Vec<TreeDrift> {
    let mut out = Vec::new();
    for ((tenant, id), issue) in issues {
        let Some(parent) = &issue.parent_id else {
            continue;
        };
        let at = (tenant.clone(), parent.clone());
        let problem = if !issues.contains_key(&at) {
            TreeProblem::Orphan {
                parent: parent.clone(),
            }
        } else if !edges.0.get(&at).is_some_and(|c| c.contains(id)) {
            TreeProblem::MissingEdge {
                parent: parent.clone(),
            }
        } else {
            continue;
        };
        out.push(TreeDrift {
            tenant: tenant.clone(),
            issue: id.clone(),
            problem,
        });
    }
    for ((tenant, parent), children) in &edges.0 {
        for child in children {
            let under = issues
                .get(&(tenant.clone(), child.clone()))
                .is_some_and(|c| c.parent_id.as_ref() == Some(parent));
            if !under {
                out.push(TreeDrift {
                    tenant: tenant.clone(),
                    issue: parent.clone(),
                    problem: TreeProblem::StrayEdge {
                        child: child.clone(),
                    },
                });
            }
        }
    }
    out
}

/// Mends what [`check`] found, each write conditioned on what it mends (the scan is no
/// snapshot, and a change made since makes it skip): an orphan detached while its parent is
/// still gone, a missing edge put while the child names the parent, a stray edge deleted
/// while the child does not. Returns how many problems it acted on.
pub async fn repair(store: &Store, found: &[TreeDrift], now: &str) -> Result<usize, StoreError> {
    let records = store.records();
    for d in found {
        match &d.problem {
            TreeProblem::Orphan { parent } => {
                records
                    .detach_orphan(&d.tenant, parent, &d.issue, now)
                    .await?;
            }
            TreeProblem::MissingEdge { parent } => {
                records
                    .restore_child_edge(&d.tenant, parent, &d.issue)
                    .await?;
            }
            TreeProblem::StrayEdge { child } => {
                records.drop_stray_edge(&d.tenant, &d.issue, child).await?;
            }
        }
    }
    Ok(found.len())
}
