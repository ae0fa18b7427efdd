//! Comments checked against their issues, as `gridctl verify` reports them and `repair` mends
//! them: no comment outlives its issue, and each issue's `comment_count` is its number of
//! comments.
//!
//! A comment's put or delete and its issue's count move in one transaction, so a count is off
//! only after a fault outside the product (a hand edit, a restore of some items). Orphans are
//! normal for the seconds after an issue's delete (the indexer deletes its comments) and stay
//! only when that clean-up ran out of retries: repair finishes it, idempotently.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::ids::{IssueId, TenantId};
use crate::keys::{self, records::entity};
use crate::model::codec::attr;
use crate::store::records::items::{pk_of, sk_of};
use crate::store::{Item, Store, StoreError};

/// `(tenant, issue id)`.
type IssueRef = (TenantId, IssueId);

/// The comments and counts a scan of the records table saw.
#[derive(Debug, Default)]
pub struct CommentScan {
    /// Each issue partition's number of comment items (an entry of 0: only a deleted
    /// issue's marks).
    pub comments: BTreeMap<IssueRef, u64>,
    /// Each issue's stored count (absent: 0).
    pub counts: BTreeMap<IssueRef, u64>,
}

impl CommentScan {
    /// Takes in one scanned item: a comment, or an issue's count.
    pub fn absorb(&mut self, item: &Item) {
        let Some(at) = pk_of(item).and_then(keys::records::parse_issue_pk) else {
            return;
        };
        let kind = item.get(attr::ENTITY).and_then(|v| v.as_s().ok());
        let in_range =
            sk_of(item).is_some_and(|sk| sk.starts_with(keys::records::COMMENT_SK_PREFIX));
        if kind.map(String::as_str) == Some(entity::COMMENT) {
            *self.comments.entry(at).or_default() += 1;
        } else if in_range {
            // A deleted issue's mark: left over only with its comments' clean-up.
            self.comments.entry(at).or_default();
        } else if sk_of(item) == Some(keys::records::ISSUE_SK) {
            let count = item
                .get(attr::COMMENT_COUNT)
                .and_then(|v| v.as_n().ok()?.parse().ok())
                .unwrap_or(0);
            self.counts.insert(at, count);
        }
    }
}

/// What is wrong with an issue's comments.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum CommentProblem {
    /// Comments of an issue that no longer exists (its clean-up not done).
    Orphaned { comments: u64 },
    /// The issue's stored count is not its number of comments.
    Count { stored: u64, comments: u64 },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CommentDrift {
    pub tenant: TenantId,
    pub issue: IssueId,
    #[serde(flatten)]
    pub problem: CommentProblem,
}

/// Every comment problem of the scan.
pub fn check(scan: &CommentScan) -> Vec<CommentDrift> {
    let drift = |(tenant, issue): &IssueRef, problem| CommentDrift {
        tenant: tenant.clone(),
        issue: issue.clone(),
        problem,
    };
    let mut out = Vec::new();
    for (at, &comments) in &scan.comments {
        if !scan.counts.contains_key(at) {
            out.push(drift(at, CommentProblem::Orphaned { comments }));
        }
    }
    for (at, &stored) in &scan.counts {
        let comments = scan.comments.get(at).copied().unwrap_or(0);
        if stored != comments {
            out.push(drift(at, CommentProblem::Count { stored, comments }));
        }
    }
    out
}

/// Mends what [`check`] found: a deleted issue's comments deleted (as the indexer does it,
/// only when the issue is still gone), a count set from a fresh count (conditioned on the
/// comment revision read before it, which every post and delete moves, so one meanwhile is
/// never undone). Returns how many problems it acted on.
pub async fn repair(store: &Store, found: &[CommentDrift]) -> Result<usize, StoreError> {
    let records = store.records();
    for d in found {
        let (tenant, issue) = (&d.tenant, &d.issue);
        match d.problem {
            CommentProblem::Orphaned { .. } => {
                if records.get_issue_item(tenant, issue).await?.is_none() {
                    records.purge_comments(tenant, issue, None).await?;
                }
            }
            CommentProblem::Count { .. } => {
                let Some((stored, rev)) = records.stored_comment_count(tenant, issue).await? else {
                    continue;
                };
                let counted = records.count_comments(tenant, issue).await?;
                if counted != stored {
                    records
                        .set_comment_count(tenant, issue, (rev, counted))
                        .await?;
                }
            }
        }
    }
    Ok(found.len())
}
