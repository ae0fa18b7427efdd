//! An inbox page whole: the participation partitions it merges, the issues behind the copies
//! taken (from their summaries, or read), those still in the state read, up to the names
//! bound.

use crate::cursor::Position;
use crate::domain::ids::{ParticipantId, TeamId, TenantId, UserId};
use crate::domain::{Issue, IssueState, Participant, ParticipantKind, Role};
use crate::keys;
use crate::read::names::names_fit;
use crate::store::{Store, StoreError};

use std::collections::HashMap;

use super::{Merged, position_after, read_merged};

/// One partition of an inbox: whose inbox it is and, with `role`, only that role's copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub kind: ParticipantKind,
    pub id: ParticipantId,
    pub role: Option<Role>,
}

impl Source {
    /// A user's partitions: one holding every role's copies, or one per role asked (merged).
    pub fn user_roles(user: &UserId, roles: &[Role]) -> Vec<Self> {
        let source = |role| Self {
            kind: ParticipantKind::User,
            id: ParticipantId::from(user.clone()),
            role,
        };
        if roles.is_empty() {
            vec![source(None)]
        } else {
            roles.iter().map(|r| source(Some(*r))).collect()
        }
    }

    /// A team's partition.
    pub fn team(team: &TeamId) -> Self {
        Self {
            kind: ParticipantKind::Team,
            id: ParticipantId::from(team.clone()),
            role: None,
        }
    }

    /// The partition key of this source's issues in `state`.
    pub fn pk(&self, tenant: &TenantId, state: IssueState) -> String {
        keys::index::inbox_pk(tenant, self.kind, &self.id, state, self.role)
    }

    /// The participant this partition is the inbox of, in `role`.
    fn as_participant(&self, role: Role) -> Participant {
        Participant {
            kind: self.kind,
            id: self.id.clone(),
            role,
        }
    }
}

/// One inbox page to read.
#[derive(Debug)]
pub struct InboxRequest<'a> {
    pub tenant: &'a TenantId,
    /// The partitions merged, in the order a copy's `via` lists them.
    pub sources: &'a [Source],
    pub state: IssueState,
    pub limit: i32,
    /// The sort key the page resumes after (see [`super::after_of`]); `None` for the first.
    pub after: Option<String>,
}

/// An issue on an inbox page and the participants (of the sources) that put it there.
#[derive(Debug)]
pub struct InboxIssue {
    pub issue: Issue,
    pub via: Vec<Participant>,
}

/// An inbox page: its issues, newest first, each with the position that resumes right after
/// it (where a page the handler ends early resumes), and where the next one starts (`None`:
/// the end).
#[derive(Debug, Default)]
pub struct InboxPage {
    pub issues: Vec<(InboxIssue, Position)>,
    pub next: Option<Position>,
}

/// Reads one inbox page: the merged copies ([`read_merged`]), then their issues in one call.
pub async fn page(store: &Store, request: InboxRequest<'_>) -> Result<InboxPage, StoreError> {
    let InboxRequest {
        tenant,
        sources,
        state,
        limit,
        after,
    } = request;
    let pks: Vec<String> = sources.iter().map(|s| s.pk(tenant, state)).collect();
    let (merged, mut found) = merged_issues(store, tenant, &pks, limit, after).await?;
    let (cut, any_left) = (merged.last, merged.any_left);
    let issues: Vec<(String, InboxIssue)> = merged
        .taken
        .into_iter()
        .filter_map(|t| {
            let issue = found.remove(&t.issue_id)?;
            let via = t
                .via
                .into_iter()
                .map(|(i, role)| sources[i].as_participant(role))
                .collect();
            Some((t.sk, InboxIssue { issue, via }))
        })
        // Copies of issues deleted or moved to another state since they were indexed.
        .filter(|(_, i)| i.issue.state == state)
        .collect();
    let (issues, next) = end_at_names(issues, |i| &i.issue, (cut, any_left));
    Ok(InboxPage { issues, next })
}

/// One merged page of copies over the partitions `pks` ([`read_merged`]) and the issues
/// behind the copies taken (from their keyed summaries, or read in one call): what an inbox
/// page and a children page both read.
pub(crate) async fn merged_issues(
    store: &Store,
    tenant: &TenantId,
    pks: &[String],
    limit: i32,
    after: Option<String>,
) -> Result<(Merged, HashMap<String, Issue>), StoreError> {
    let merged = read_merged(pks.len(), limit, after, |i, limit, after| {
        let pk = &pks[i];
        async move { store.index().query_inbox(pk, limit, after.as_deref()).await }
    })
    .await?;
    let entries = merged
        .taken
        .iter()
        .map(|t| (t.issue_id.as_str(), t.summary.as_deref()));
    let reading = crate::model::summary::Reading::Inbox;
    let found = store
        .records()
        .issues_of_entries(tenant, entries, reading)
        .await?;
    Ok((merged, found))
}

/// A page's items (each after its last sort key), bounded by the names one page shows: past
/// them the page ends at the last item kept. With where the next page starts, from the last
/// key consumed (`cut`) and whether anything is left.
pub(crate) fn end_at_names<T>(
    mut items: Vec<(String, T)>,
    issue: impl Fn(&T) -> &Issue,
    (mut cut, mut any_left): (Option<String>, bool),
) -> (Vec<(T, Position)>, Option<Position>) {
    let fit = names_fit(items.iter().map(|(_, i)| issue(i)));
    if fit < items.len() {
        cut = Some(items[fit - 1].0.clone());
        any_left = true;
        items.truncate(fit);
    }
    let items = items
        .into_iter()
        .map(|(sk, i)| (i, position_after(sk)))
        .collect();
    (items, cut.filter(|_| any_left).map(position_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user's inbox without a role filter is one partition (every role's copies); with
    /// roles, one partition per role.
    #[test]
    fn a_user_reads_one_partition_or_one_per_role() {
        let (tenant, user) = (
            TenantId::parse("acme").unwrap(),
            UserId::parse("ann").unwrap(),
        );
        let pk = |role| {
            keys::index::inbox_pk(
                &tenant,
                ParticipantKind::User,
                "ann",
                IssueState::Closed,
                role,
            )
        };
        let pks = |roles: &[Role]| -> Vec<String> {
            Source::user_roles(&user, roles)
                .iter()
                .map(|s| s.pk(&tenant, IssueState::Closed))
                .collect()
        };
        assert_eq!(pks(&[]), [pk(None)]);
        assert_eq!(
            pks(&[Role::Assignee, Role::Watcher]),
            [pk(Some(Role::Assignee)), pk(Some(Role::Watcher))]
        );
        let team = TeamId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        assert_eq!(
            Source::team(&team).pk(&tenant, IssueState::Open),
            keys::index::inbox_pk(
                &tenant,
                ParticipantKind::Team,
                &team,
                IssueState::Open,
                None
            )
        );
    }
}
