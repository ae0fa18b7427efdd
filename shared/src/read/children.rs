//! An issue's direct children, by number: one of its children partitions in the index (one
//! per state and one of every state, keyed by the parent, so nothing is read first), read as
//! the inboxes read theirs ([`super::inbox::read_merged`]: the children's sort keys are
//! inverted numbers, so its newest-first order is ascending number), the issues from the
//! entries' summaries.

use crate::cursor::Position;
use crate::domain::ids::{IssueId, TenantId};
use crate::domain::{Issue, IssueState};
use crate::keys;
use crate::read::inbox::page::{end_at_names, merged_issues};
use crate::store::{Store, StoreError};

/// One page of an issue's children to read.
#[derive(Debug)]
pub struct ChildrenRequest<'a> {
    pub tenant: &'a TenantId,
    pub parent: &'a IssueId,
    /// `None`: children of every state.
    pub state: Option<IssueState>,
    pub limit: i32,
    /// The sort key the page resumes after; `None` for the first.
    pub after: Option<String>,
}

/// A page of children, each with the position resuming right after it, and where the next
/// page starts (`None`: the end).
#[derive(Debug, Default)]
pub struct ChildrenPage {
    pub issues: Vec<(Issue, Position)>,
    pub next: Option<Position>,
}

/// Reads one page of children.
pub async fn page(store: &Store, request: ChildrenRequest<'_>) -> Result<ChildrenPage, StoreError> {
    let ChildrenRequest {
        tenant,
        parent,
        state,
        limit,
        after,
    } = request;
    let pks = [keys::index::children_pk(tenant, parent.as_str(), state)];
    let (merged, mut found) = merged_issues(store, tenant, &pks, limit, after).await?;
    let (cut, any_left) = (merged.last, merged.any_left);
    let issues: Vec<(String, Issue)> = merged
        .taken
        .into_iter()
        .filter_map(|t| Some((t.sk, found.remove(&t.issue_id)?)))
        // Entries of issues moved, deleted or in another state since they were indexed.
        .filter(|(_, i)| i.parent_id.as_ref() == Some(parent))
        .filter(|(_, i)| state.is_none_or(|s| i.state == s))
        .collect();
    let (issues, next) = end_at_names(issues, |i| i, (cut, any_left));
    Ok(ChildrenPage { issues, next })
}
