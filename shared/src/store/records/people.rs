//! Profiles, teams and memberships. A membership is an adjacency list written in both
//! directions in one transaction, so a team's members and a user's teams are each one Query.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::directory;
use super::items::{attr, key, string};
use crate::cursor::Position;
use crate::domain::ids::{TeamId, TenantId, UserId};
use crate::domain::{MAX_TEAMS_PER_USER, ParticipantKind};
use crate::keys;
use crate::store::Records;
use crate::store::query::Query;
use crate::store::{Item, Page, StoreError, Tx, build_err};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub id: UserId,
    pub display_name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: TeamId,
    pub name: String,
    pub created_at: String,
}

/// A user's edge to a team; it carries the team's creation time and its name when the user
/// joined (a rename changes the team's item and directory entry, which lists read the name
/// from, not every member's edge).
#[derive(Serialize, Deserialize)]
struct UserTeamEdge {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    team_id: TeamId,
    name: String,
    created_at: String,
}

#[derive(Serialize, Deserialize)]
struct MemberEdge {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    user_id: UserId,
}

#[derive(Debug, thiserror::Error)]
pub enum AddMemberError {
    #[error("the user belongs to the most teams they may")]
    TooManyTeams,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Key of the user's membership counter.
/// A membership's two edges: the member in the team's partition, the team (with its name and
/// creation time) in the user's.
fn membership_edges(
    tenant: &TenantId,
    team: &Team,
    user_id: &UserId,
) -> Result<(Item, Item), StoreError> {
    let member = serde_dynamo::to_item(MemberEdge {
        pk: keys::records::team_pk(tenant, &team.id),
        sk: keys::records::member_sk(user_id),
        entity: "member".into(),
        user_id: user_id.clone(),
    })?;
    let user_team = serde_dynamo::to_item(UserTeamEdge {
        pk: keys::records::user_pk(tenant, user_id),
        sk: keys::records::user_team_sk(&team.id),
        entity: "user_team".into(),
        team_id: team.id.clone(),
        name: team.name.clone(),
        created_at: team.created_at.clone(),
    })?;
    Ok((member, user_team))
}

fn team_count_key(tenant: &TenantId, user_id: &UserId) -> Item {
    key(
        keys::records::user_pk(tenant, user_id),
        keys::records::USER_TEAM_COUNT_SK,
    )
}

impl Records<'_> {
    /// An update of the user's membership counter (`#n`, with `:zero` and `:one`), for a
    /// membership transaction to finish.
    fn team_count(
        &self,
        tenant: &TenantId,
        user_id: &UserId,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(team_count_key(tenant, user_id)))
            .expression_attribute_names("#n", attr::TEAM_COUNT)
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
    }

    #[tracing::instrument(skip_all, fields(op = "put_profile"))]
    pub async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &Profile,
    ) -> Result<(), StoreError> {
        let mut item = key(
            keys::records::user_pk(tenant, &profile.id),
            keys::records::PROFILE_SK,
        );
        item.insert("entity".into(), string("user"));
        item.insert("id".into(), string(&profile.id));
        if let Some(name) = &profile.display_name {
            item.insert("display_name".into(), string(name));
        }
        // The directory's copy in the same transaction: a page never shows a name the
        // profile no longer has.
        let (kind, id) = (ParticipantKind::User, profile.id.as_str());
        let copy = match &profile.display_name {
            Some(name) => TransactWriteItem::builder()
                .put(
                    self.store
                        .put_in_tx(directory::entry(tenant, kind, id, name), None)?,
                )
                .build(),
            None => TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&self.store.records)
                        .set_key(Some(directory::entry_key(tenant, kind, id)))
                        .build()
                        .map_err(build_err)?,
                )
                .build(),
        };
        let profile = TransactWriteItem::builder()
            .put(self.store.put_in_tx(item, None)?)
            .build();
        match self.store.transact(vec![profile, copy]).await? {
            Tx::Committed => Ok(()),
            // Neither write has a condition.
            Tx::ConditionFailed => Err(StoreError::Contention(1)),
        }
    }

    #[tracing::instrument(skip_all, fields(op = "get_profile"))]
    pub async fn get_profile(
        &self,
        tenant: &TenantId,
        user_id: &UserId,
    ) -> Result<Profile, StoreError> {
        let key = key(
            keys::records::user_pk(tenant, user_id),
            keys::records::PROFILE_SK,
        );
        let display_name = self
            .store
            .get_item(&self.store.records, key)
            .await?
            .as_ref()
            .and_then(|i| match i.get("display_name") {
                Some(AttributeValue::S(n)) => Some(n.clone()),
                _ => None,
            });
        Ok(Profile {
            id: user_id.clone(),
            display_name,
        })
    }

    #[tracing::instrument(skip_all, fields(op = "create_team"))]
    pub async fn create_team(&self, tenant: &TenantId, team: &Team) -> Result<(), StoreError> {
        let mut item = key(
            keys::records::team_pk(tenant, &team.id),
            keys::records::TEAM_SK,
        );
        item.insert("entity".into(), string("team"));
        item.insert("id".into(), string(&team.id));
        item.insert("name".into(), string(&team.name));
        item.insert("created_at".into(), string(&team.created_at));
        let copy = directory::entry(tenant, ParticipantKind::Team, team.id.as_str(), &team.name);
        match self.store.put_new_with(item, copy).await? {
            Tx::Committed => Ok(()),
            // A new id cannot be taken.
            Tx::ConditionFailed => Err(StoreError::Contention(1)),
        }
    }

    #[tracing::instrument(skip_all, fields(op = "get_team"))]
    pub async fn get_team(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
    ) -> Result<Option<Team>, StoreError> {
        let key = key(
            keys::records::team_pk(tenant, team_id),
            keys::records::TEAM_SK,
        );
        Ok(self
            .store
            .get_item(&self.store.records, key)
            .await?
            .map(serde_dynamo::from_item)
            .transpose()?)
    }

    /// Adds a member: both edges and the user's team count in one transaction, conditioned on
    /// the team existing, the user's edge being new and the count under the cap — so a re-add
    /// counts once and concurrent adds never pass 50. Idempotent: when a condition fails, reads
    /// tell a missing team (`false`), an existing membership (`true`, nothing written) and a
    /// full user apart.
    #[tracing::instrument(skip_all, fields(op = "add_member"))]
    pub async fn add_member(
        &self,
        tenant: &TenantId,
        team: &Team,
        user_id: &UserId,
    ) -> Result<bool, AddMemberError> {
        let check = ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::team_pk(tenant, &team.id),
                keys::records::TEAM_SK,
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let (member, user_team) = membership_edges(tenant, team, user_id)?;
        let count = self
            .team_count(tenant, user_id)
            .update_expression("SET #n = if_not_exists(#n, :zero) + :one")
            .condition_expression("attribute_not_exists(#n) OR #n < :max")
            .expression_attribute_values(":max", AttributeValue::N(MAX_TEAMS_PER_USER.to_string()))
            .build()
            .map_err(build_err)?;
        let tx = self
            .store
            .transact(vec![
                TransactWriteItem::builder().condition_check(check).build(),
                TransactWriteItem::builder()
                    .put(self.store.put_in_tx(member, None)?)
                    .build(),
                TransactWriteItem::builder()
                    .put(
                        self.store
                            .put_in_tx(user_team, Some("attribute_not_exists(PK)"))?,
                    )
                    .build(),
                TransactWriteItem::builder().update(count).build(),
            ])
            .await?;
        if tx == Tx::Committed {
            return Ok(true);
        }
        if self.get_team(tenant, &team.id).await?.is_none() {
            return Ok(false);
        }
        let edge = key(
            keys::records::user_pk(tenant, user_id),
            &keys::records::user_team_sk(&team.id),
        );
        if self
            .store
            .get_item(&self.store.records, edge)
            .await?
            .is_some()
        {
            return Ok(true); // Already a member: nothing to do.
        }
        Err(AddMemberError::TooManyTeams)
    }

    /// Removes both edges in one transaction; `false` when the user was not a member.
    #[tracing::instrument(skip_all, fields(op = "remove_member"))]
    pub async fn remove_member(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
        user_id: &UserId,
    ) -> Result<bool, StoreError> {
        let member = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::team_pk(tenant, team_id),
                &keys::records::member_sk(user_id),
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let user_team = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::user_pk(tenant, user_id),
                &keys::records::user_team_sk(team_id),
            )))
            .build()
            .map_err(build_err)?;
        // Memberships from before the count have none: it starts from zero, and never goes
        // below it.
        let count = self
            .team_count(tenant, user_id)
            .update_expression("SET #n = #n - :one")
            .condition_expression("#n > :zero")
            .build()
            .map_err(build_err)?;
        let mut items = vec![
            TransactWriteItem::builder().delete(member).build(),
            TransactWriteItem::builder().delete(user_team).build(),
        ];
        if self
            .store
            .get_item(&self.store.records, team_count_key(tenant, user_id))
            .await?
            .is_some_and(
                |c| matches!(c.get(attr::TEAM_COUNT), Some(AttributeValue::N(n)) if n != "0"),
            )
        {
            items.push(TransactWriteItem::builder().update(count).build());
        }
        let tx = self.store.transact(items).await?;
        Ok(tx == Tx::Committed)
    }

    /// A page of a team's member ids: one Query of the team's partition; each with the
    /// position that resumes after it.
    #[tracing::instrument(skip_all, fields(op = "list_members"))]
    pub async fn list_members(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(UserId, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, keys::records::team_pk(tenant, team_id))
            .sk_begins_with(keys::records::MEMBER_SK_PREFIX)
            .limit(Some(limit))
            .after(start);
        self.store
            .query_keyed(query, |e: MemberEdge| e.user_id)
            .await
    }

    /// A page of a user's teams: one Query of the user's partition; each with the position
    /// that resumes after it.
    #[tracing::instrument(skip_all, fields(op = "teams_of_user"))]
    pub async fn teams_of_user(
        &self,
        tenant: &TenantId,
        user_id: &UserId,
        limit: Option<i32>,
        start: Option<&Position>,
    ) -> Result<Page<(Team, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, keys::records::user_pk(tenant, user_id))
            .sk_begins_with(keys::records::USER_TEAM_SK_PREFIX)
            .limit(limit)
            .consistent(true)
            .after(start);
        self.store
            .query_keyed(query, |e: UserTeamEdge| Team {
                id: e.team_id,
                name: e.name,
                created_at: e.created_at,
            })
            .await
    }
}
