//! Deleting a team. The request deletes the team's item and its directory entry at once (the
//! team is `404`, and its name gone from every list); the team's item's removal reaches the
//! indexer through the stream, which takes the team off everything else
//! ([`Records::team_leaves_everything`]): every member's team list, and every issue it
//! participated in, each a system change (a new version whose history names no actor).
//! Idempotent: a membership or participation already gone is not found again, so a batch
//! delivered twice, or retried after a failure half-way, converges.

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use super::directory;
use super::items::key;
use crate::domain::ids::{IssueId, TeamId, TenantId, UserId};
use crate::domain::{IssueState, ParticipantKind};
use crate::keys;
use crate::store::query::Query;
use crate::store::{Records, StoreError, Tx, build_err};

/// What a deleted team was taken off.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub memberships: usize,
    pub issues: usize,
}

impl Records<'_> {
    /// Deletes the team's item and its directory entry; `false` when there is no such team.
    #[tracing::instrument(skip_all, fields(op = "delete_team"))]
    pub async fn delete_team(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
    ) -> Result<bool, StoreError> {
        let team = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::team_pk(tenant, team_id),
                keys::records::TEAM_SK,
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let entry = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(directory::entry_key(
                tenant,
                ParticipantKind::Team,
                team_id.as_str(),
            )))
            .build()
            .map_err(build_err)?;
        let items = vec![
            TransactWriteItem::builder().delete(team).build(),
            TransactWriteItem::builder().delete(entry).build(),
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// A deleted team taken off every member's team list and every issue it participated in
    /// (found by its participation copies in the index, open and closed). Run by the indexer
    /// on the team item's removal.
    #[tracing::instrument(skip_all, fields(op = "team_leaves_everything"))]
    pub async fn team_leaves_everything(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
        now: &str,
    ) -> Result<Left, StoreError> {
        let mut left = Left::default();
        let members =
            Query::partition(&self.store.records, keys::records::team_pk(tenant, team_id))
                .sk_begins_with(keys::records::MEMBER_SK_PREFIX)
                .consistent(true);
        for item in self.store.query_all(members).await? {
            let Some(user) = item
                .get("user_id")
                .and_then(|v| v.as_s().ok())
                .and_then(|u| UserId::parse(u))
            else {
                continue;
            };
            if self.remove_member(tenant, team_id, &user).await? {
                left.memberships += 1;
            }
        }
        for state in [IssueState::Open, IssueState::Closed] {
            let pk =
                keys::index::inbox_pk(tenant, ParticipantKind::Team, team_id.as_str(), state, None);
            let copies = Query::partition(self.store.index_table(), pk).consistent(true);
            for copy in self.store.query_all(copies).await? {
                let Some(issue) = copy
                    .get("issue_id")
                    .and_then(|v| v.as_s().ok())
                    .and_then(|i| IssueId::parse(i))
                else {
                    continue;
                };
                // A system change: no actor.
                if self
                    .delete_participant(
                        tenant,
                        &issue,
                        ParticipantKind::Team,
                        team_id.as_str(),
                        (now, None),
                    )
                    .await?
                {
                    left.issues += 1;
                }
            }
        }
        Ok(left)
    }
}
