//! Workspaces, their members and invitations.
//!
//! A membership is two edges written in one transaction: the member in the workspace's
//! partition (with its role, and its rank in GSI1), the workspace in the person's (with its
//! name and the role), so a workspace's members and a person's workspaces are each one Query.
//! The workspace's item counts its owners, and every change that makes or unmakes an owner
//! moves the count in the same transaction, conditioned to stay above zero: two owners
//! demoting each other at once cannot leave the workspace without one.
//!
//! An invitation is three items written and deleted together: by id (to accept it), under the
//! email (to list a person's, and to refuse a second one of the workspace for the email by
//! its key) and under the workspace (to list and revoke).

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};
use serde::{Deserialize, Serialize};

use super::items::key;
use crate::cursor::Position;
use crate::domain::ids::{InvitationId, TenantId, UserId};
use crate::domain::role::Role;
use crate::keys::workspaces as k;
use crate::store::query::Query;
use crate::store::{Item, Page, Records, StoreError, Tx, build_err};

/// A workspace as its routes show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub id: TenantId,
    pub name: String,
}

/// One of a person's workspaces, with their role in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub id: TenantId,
    pub name: String,
    pub role: Role,
}

/// A member of a workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub user_id: UserId,
    pub role: Role,
}

/// A pending invitation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invitation {
    pub id: InvitationId,
    /// Normalised (`domain::email::normalise`).
    pub email: String,
    pub role: Role,
    pub created_at: String,
    pub workspace: Workspace,
}

#[derive(Serialize, Deserialize)]
struct WorkspaceItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    id: TenantId,
    name: String,
    created_at: String,
    created_by: UserId,
    /// How many members are owners; never below one.
    owners: u32,
}

#[derive(Serialize, Deserialize)]
struct MemberItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    entity: String,
    user_id: UserId,
    role: Role,
}

#[derive(Serialize, Deserialize)]
struct PersonEdge {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    id: TenantId,
    name: String,
    role: Role,
}

#[derive(Serialize, Deserialize)]
struct InvitationItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    #[serde(flatten)]
    invitation: FlatInvitation,
}

/// An invitation's attributes, flat, as each of its three items holds them.
#[derive(Serialize, Deserialize)]
struct FlatInvitation {
    id: InvitationId,
    email: String,
    role: Role,
    created_at: String,
    workspace_id: TenantId,
    workspace_name: String,
}

impl From<FlatInvitation> for Invitation {
    fn from(f: FlatInvitation) -> Self {
        Invitation {
            id: f.id,
            email: f.email,
            role: f.role,
            created_at: f.created_at,
            workspace: Workspace {
                id: f.workspace_id,
                name: f.workspace_name,
            },
        }
    }
}

/// Why a membership change was refused.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The change would leave the workspace without an owner.
    #[error("the workspace's last owner cannot leave or stop being an owner")]
    LastOwner,
    /// The member's role changed since it was read: the decision made on it no longer holds.
    #[error("the member's role changed meanwhile; read the members again")]
    Changed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What accepting an invitation came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    Joined(Membership),
    /// No such invitation (or already accepted or revoked).
    NotFound,
    /// The caller is already a member of the invitation's workspace; the invitation stays.
    AlreadyMember,
}

/// A member edge to put (its item) or delete (its key).
enum MemberWrite {
    Put(Item),
    Delete(Item),
}

/// Workspaces a person may create (workspaces are never deleted, and each one is a usage-plan
/// key in AWS, of which an account holds 10,000 per region).
pub const MAX_WORKSPACES_CREATED: u32 = 10;

/// Sort key, in the person's partition, of how many workspaces they created.
const CREATED_SK: &str = "#CREATED";

impl Records<'_> {
    /// The records-table item at (`pk`, `sk`), read as a `T` (strongly consistent).
    async fn get_as<T: serde::de::DeserializeOwned>(
        &self,
        pk: String,
        sk: &str,
    ) -> Result<Option<T>, StoreError> {
        let item = self
            .store
            .get_item(&self.store.records, key(pk, sk))
            .await?;
        Ok(item.map(serde_dynamo::from_item).transpose()?)
    }

    fn tx_put(&self, item: Item, condition: Option<&str>) -> Result<TransactWriteItem, StoreError> {
        Ok(TransactWriteItem::builder()
            .put(self.store.put_in_tx(item, condition)?)
            .build())
    }

    fn tx_delete(
        &self,
        key: Item,
        condition: Option<&str>,
    ) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key))
            .set_condition_expression(condition.map(str::to_string))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// A write of a member edge conditioned on the edge still holding `old` (absent when
    /// `None`): a change decided on a role read a moment ago applies only to that role.
    fn member_write(
        &self,
        write: MemberWrite,
        old: Option<Role>,
    ) -> Result<TransactWriteItem, StoreError> {
        let (condition, names, values) = match old {
            Some(role) => (
                "#role = :was",
                Some(std::collections::HashMap::from([(
                    "#role".into(),
                    "role".into(),
                )])),
                Some(std::collections::HashMap::from([(
                    ":was".into(),
                    AttributeValue::S(role.as_str().into()),
                )])),
            ),
            None => ("attribute_not_exists(PK)", None, None),
        };
        let item = match write {
            MemberWrite::Put(item) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.store.records)
                    .set_item(Some(item))
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .build()
                    .map_err(build_err)?,
            ),
            MemberWrite::Delete(key) => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(&self.store.records)
                    .set_key(Some(key))
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .build()
                    .map_err(build_err)?,
            ),
        };
        Ok(item.build())
    }

    /// The two edges of `user`'s membership of `ws` with `role`.
    fn membership_items(
        &self,
        ws: &Workspace,
        user: &UserId,
        role: Role,
    ) -> Result<(Item, Item), StoreError> {
        let member = serde_dynamo::to_item(MemberItem {
            pk: k::workspace_pk(&ws.id),
            sk: k::member_sk(user),
            gsi1pk: k::ranked_members_gsi1_pk(&ws.id),
            gsi1sk: k::ranked_member_gsi1_sk(role, user),
            entity: "ws_member".into(),
            user_id: user.clone(),
            role,
        })?;
        let edge = serde_dynamo::to_item(PersonEdge {
            pk: k::person_pk(user),
            sk: k::person_workspace_sk(&ws.id),
            entity: "person_workspace".into(),
            id: ws.id.clone(),
            name: ws.name.clone(),
            role,
        })?;
        Ok((member, edge))
    }

    /// An update of the workspace's owner count by `delta` (±1); a decrease is conditioned on
    /// another owner remaining.
    fn owners_update(&self, ws: &TenantId, delta: i32) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(k::workspace_pk(ws), k::WORKSPACE_SK)))
            .update_expression("SET owners = owners + :d")
            .expression_attribute_values(":d", AttributeValue::N(delta.to_string()));
        update = if delta < 0 {
            update
                .condition_expression("owners > :one")
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
        } else {
            update.condition_expression("attribute_exists(PK)")
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(build_err)?)
            .build())
    }

    /// Creates a workspace with `owner` as its one owner: the workspace's item, both edges of
    /// the membership and the owner's count of workspaces created, in one transaction;
    /// `false` (nothing written) when they created [`MAX_WORKSPACES_CREATED`] already.
    #[tracing::instrument(skip_all, fields(op = "create_workspace"))]
    pub async fn create_workspace(
        &self,
        ws: &Workspace,
        owner: &UserId,
        created_at: &str,
    ) -> Result<bool, StoreError> {
        let item = serde_dynamo::to_item(WorkspaceItem {
            pk: k::workspace_pk(&ws.id),
            sk: k::WORKSPACE_SK.into(),
            entity: "workspace".into(),
            id: ws.id.clone(),
            name: ws.name.clone(),
            created_at: created_at.into(),
            created_by: owner.clone(),
            owners: 1,
        })?;
        let (member, edge) = self.membership_items(ws, owner, Role::Owner)?;
        let created = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(k::person_pk(owner), CREATED_SK)))
            .update_expression("SET #n = if_not_exists(#n, :zero) + :one")
            .condition_expression("attribute_not_exists(#n) OR #n < :max")
            .expression_attribute_names("#n", "created")
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(
                ":max",
                AttributeValue::N(MAX_WORKSPACES_CREATED.to_string()),
            )
            .build()
            .map_err(build_err)?;
        let items = vec![
            self.tx_put(item, Some("attribute_not_exists(PK)"))?,
            self.tx_put(member, None)?,
            self.tx_put(edge, None)?,
            TransactWriteItem::builder().update(created).build(),
        ];
        // A new id cannot be taken: a failed condition is the count's.
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The workspace whose tenant is `ws`; `None` for a tenant an operator provisioned.
    #[tracing::instrument(skip_all, fields(op = "get_workspace"))]
    pub async fn workspace(&self, ws: &TenantId) -> Result<Option<Workspace>, StoreError> {
        let item: Option<WorkspaceItem> = self.get_as(k::workspace_pk(ws), k::WORKSPACE_SK).await?;
        Ok(item.map(|w| Workspace {
            id: w.id,
            name: w.name,
        }))
    }

    /// `user`'s role in `ws` (one strongly consistent GetItem: a removal is seen at once).
    #[tracing::instrument(skip_all, fields(op = "role_of"))]
    pub async fn role_of(&self, ws: &TenantId, user: &UserId) -> Result<Option<Role>, StoreError> {
        let item: Option<MemberItem> = self
            .get_as(k::workspace_pk(ws), &k::member_sk(user))
            .await?;
        Ok(item.map(|m| m.role))
    }

    /// A page of `user`'s workspaces, by workspace id.
    #[tracing::instrument(skip_all, fields(op = "workspaces_of"))]
    pub async fn workspaces_of(
        &self,
        user: &UserId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(Membership, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, k::person_pk(user))
            .sk_begins_with(k::PERSON_WORKSPACE_SK_PREFIX)
            .limit(Some(limit))
            .consistent(true)
            .after(start);
        self.store
            .query_keyed(query, |e: PersonEdge| Membership {
                id: e.id,
                name: e.name,
                role: e.role,
            })
            .await
    }

    /// Makes `ws` the workspace `user`'s next token names, if they are a member (`false`
    /// otherwise, nothing written).
    #[tracing::instrument(skip_all, fields(op = "choose_workspace"))]
    pub async fn choose_workspace(&self, user: &UserId, ws: &TenantId) -> Result<bool, StoreError> {
        let member = ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(k::person_pk(user), &k::person_workspace_sk(ws))))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let mut choice = key(k::person_pk(user), k::CHOICE_SK);
        choice.insert(
            "entity".into(),
            AttributeValue::S("workspace_choice".into()),
        );
        choice.insert("workspace_id".into(), AttributeValue::S(ws.to_string()));
        let items = vec![
            TransactWriteItem::builder().condition_check(member).build(),
            self.tx_put(choice, None)?,
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The tenant `user`'s next token carries: the workspace they chose, while they are still
    /// a member of it. One Query of the person's partition (the choice sorts first, then the
    /// edges), read-only: what the token trigger runs within Cognito's 5 seconds.
    #[tracing::instrument(skip_all, fields(op = "chosen_tenant"))]
    pub async fn chosen_tenant(&self, user: &UserId) -> Result<Option<TenantId>, StoreError> {
        let query = Query::partition(&self.store.records, k::person_pk(user)).consistent(true);
        let items = self.store.query_all(query).await?;
        let sk = |i: &Item| match i.get(crate::keys::SK) {
            Some(AttributeValue::S(s)) => s.clone(),
            _ => String::new(),
        };
        let chosen = items.iter().find(|i| sk(i) == k::CHOICE_SK).and_then(|i| {
            match i.get("workspace_id") {
                Some(AttributeValue::S(s)) => TenantId::parse(s),
                _ => None,
            }
        });
        Ok(chosen.filter(|ws| items.iter().any(|i| sk(i) == k::person_workspace_sk(ws))))
    }

    /// A page of `ws`'s members, by user id.
    #[tracing::instrument(skip_all, fields(op = "workspace_members"))]
    pub async fn workspace_members(
        &self,
        ws: &TenantId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(Member, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, k::workspace_pk(ws))
            .sk_begins_with(k::MEMBER_SK_PREFIX)
            .limit(Some(limit))
            .after(start);
        self.store
            .query_keyed(query, |m: MemberItem| Member {
                user_id: m.user_id,
                role: m.role,
            })
            .await
    }

    /// `ws`'s owners and admins: one range of the members ranked by role.
    #[tracing::instrument(skip_all, fields(op = "workspace_admins"))]
    pub async fn workspace_admins(&self, ws: &TenantId) -> Result<Vec<Member>, StoreError> {
        let query = Query::gsi1(&self.store.records, k::ranked_members_gsi1_pk(ws))
            .sk_between(k::RANKED_MEMBERS_START, &k::ranked_members_end(Role::Admin));
        // GSI1 projects a member's keys only: the role and user are in its sort key.
        Ok(self
            .store
            .query_all(query)
            .await?
            .iter()
            .filter_map(|i| i.get(crate::keys::GSI1_SK)?.as_s().ok())
            .filter_map(|sk| k::parse_ranked_member_gsi1_sk(sk))
            .map(|(role, user_id)| Member { user_id, role })
            .collect())
    }

    /// Gives `user` `role` in `ws`, adding them when they are not a member. `expected` is the
    /// role the caller's permission was decided on (`None`: not a member): the write holds
    /// only while the member still has it, so a role changed meanwhile is never overwritten
    /// by a decision made on the old one. Refused when it would unmake the last owner.
    #[tracing::instrument(skip_all, fields(op = "set_role"))]
    pub async fn set_role(
        &self,
        ws: &Workspace,
        user: &UserId,
        role: Role,
        expected: Option<Role>,
    ) -> Result<(), MembershipError> {
        if expected == Some(role) {
            return Ok(());
        }
        let (member, edge) = self.membership_items(ws, user, role)?;
        let mut items = vec![
            self.member_write(MemberWrite::Put(member), expected)?,
            self.tx_put(edge, None)?,
        ];
        match (expected == Some(Role::Owner), role == Role::Owner) {
            (true, false) => items.push(self.owners_update(&ws.id, -1)?),
            (false, true) => items.push(self.owners_update(&ws.id, 1)?),
            _ => {}
        }
        if self.store.transact(items).await? == Tx::Committed {
            return Ok(());
        }
        Err(self.refusal(&ws.id, user, expected).await?)
    }

    /// Removes `user` from `ws` (both edges), if their role is still `expected` (the one the
    /// caller's permission was decided on). Refused when they are the last owner.
    #[tracing::instrument(skip_all, fields(op = "remove_ws_member"))]
    pub async fn remove_from_workspace(
        &self,
        ws: &TenantId,
        user: &UserId,
        expected: Role,
    ) -> Result<(), MembershipError> {
        let mut items = vec![
            self.member_write(
                MemberWrite::Delete(key(k::workspace_pk(ws), &k::member_sk(user))),
                Some(expected),
            )?,
            self.tx_delete(key(k::person_pk(user), &k::person_workspace_sk(ws)), None)?,
        ];
        if expected == Role::Owner {
            items.push(self.owners_update(ws, -1)?);
        }
        if self.store.transact(items).await? == Tx::Committed {
            return Ok(());
        }
        Err(self.refusal(ws, user, Some(expected)).await?)
    }

    /// Why a membership change decided on `expected` was cancelled: the member's role moved
    /// on, or (it did not, and they are an owner) the owner count held them as the last.
    async fn refusal(
        &self,
        ws: &TenantId,
        user: &UserId,
        expected: Option<Role>,
    ) -> Result<MembershipError, StoreError> {
        Ok(match self.role_of(ws, user).await? {
            now if now != expected => MembershipError::Changed,
            Some(Role::Owner) => MembershipError::LastOwner,
            _ => MembershipError::Store(StoreError::Contention(1)),
        })
    }

    /// Records an invitation; `false` when one of the workspace for the same email is pending
    /// (nothing written).
    #[tracing::instrument(skip_all, fields(op = "create_invitation"))]
    pub async fn create_invitation(&self, inv: &Invitation) -> Result<bool, StoreError> {
        let [by_id, by_email, by_ws] = invitation_items(inv)?;
        let items = vec![
            self.tx_put(by_id, Some("attribute_not_exists(PK)"))?,
            self.tx_put(by_email, Some("attribute_not_exists(PK)"))?,
            self.tx_put(by_ws, None)?,
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The invitation `id`, whichever its workspace.
    #[tracing::instrument(skip_all, fields(op = "get_invitation"))]
    pub async fn invitation(&self, id: &InvitationId) -> Result<Option<Invitation>, StoreError> {
        let item: Option<InvitationItem> =
            self.get_as(k::invitation_pk(id), k::INVITATION_SK).await?;
        Ok(item.map(|i| i.invitation.into()))
    }

    /// A page of `ws`'s pending invitations, oldest first (ids are ULIDs).
    #[tracing::instrument(skip_all, fields(op = "workspace_invitations"))]
    pub async fn workspace_invitations(
        &self,
        ws: &TenantId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(Invitation, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, k::workspace_pk(ws))
            .sk_begins_with(k::INVITATION_SK_PREFIX)
            .limit(Some(limit))
            .after(start);
        self.store
            .query_keyed(query, |i: InvitationItem| i.invitation.into())
            .await
    }

    /// A page of the invitations pending for `email` (normalised), by workspace id.
    #[tracing::instrument(skip_all, fields(op = "invitations_for"))]
    pub async fn invitations_for(
        &self,
        email: &str,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(Invitation, Position)>, StoreError> {
        let query = Query::partition(&self.store.records, k::email_pk(email))
            .limit(Some(limit))
            .consistent(true)
            .after(start);
        self.store
            .query_keyed(query, |i: InvitationItem| i.invitation.into())
            .await
    }

    /// Deletes invitation `id` of `ws`; `false` when there is none.
    #[tracing::instrument(skip_all, fields(op = "revoke_invitation"))]
    pub async fn revoke_invitation(
        &self,
        ws: &TenantId,
        id: &InvitationId,
    ) -> Result<bool, StoreError> {
        let Some(inv) = self.invitation(id).await?.filter(|i| &i.workspace.id == ws) else {
            return Ok(false);
        };
        let items = self.invitation_deletes(&inv)?;
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The deletes of an invitation's three items, the first conditioned on it still pending.
    fn invitation_deletes(&self, inv: &Invitation) -> Result<Vec<TransactWriteItem>, StoreError> {
        Ok(vec![
            self.tx_delete(
                key(k::invitation_pk(&inv.id), k::INVITATION_SK),
                Some("attribute_exists(PK)"),
            )?,
            self.tx_delete(
                key(
                    k::email_pk(&inv.email),
                    &k::email_invitation_sk(&inv.workspace.id),
                ),
                None,
            )?,
            self.tx_delete(
                key(
                    k::workspace_pk(&inv.workspace.id),
                    &k::invitation_sk(&inv.id),
                ),
                None,
            )?,
        ])
    }

    /// Makes `user` a member of `inv`'s workspace with its role and deletes the invitation, in
    /// one transaction: an invitation is accepted once. The caller has checked the email.
    #[tracing::instrument(skip_all, fields(op = "accept_invitation"))]
    pub async fn accept_invitation(
        &self,
        inv: &Invitation,
        user: &UserId,
    ) -> Result<Accepted, StoreError> {
        if self.role_of(&inv.workspace.id, user).await?.is_some() {
            return Ok(Accepted::AlreadyMember);
        }
        let (member, edge) = self.membership_items(&inv.workspace, user, inv.role)?;
        let mut items = self.invitation_deletes(inv)?;
        items.push(self.tx_put(member, Some("attribute_not_exists(PK)"))?);
        items.push(self.tx_put(edge, None)?);
        if inv.role == Role::Owner {
            items.push(self.owners_update(&inv.workspace.id, 1)?);
        }
        if self.store.transact(items).await? == Tx::Committed {
            return Ok(Accepted::Joined(Membership {
                id: inv.workspace.id.clone(),
                name: inv.workspace.name.clone(),
                role: inv.role,
            }));
        }
        if self.role_of(&inv.workspace.id, user).await?.is_some() {
            return Ok(Accepted::AlreadyMember);
        }
        Ok(Accepted::NotFound)
    }
}

/// An invitation's three items: by id, under its email, under its workspace.
fn invitation_items(inv: &Invitation) -> Result<[Item; 3], StoreError> {
    let item = |pk: String, sk: String| {
        serde_dynamo::to_item(InvitationItem {
            pk,
            sk,
            entity: "invitation".into(),
            invitation: FlatInvitation {
                id: inv.id.clone(),
                email: inv.email.clone(),
                role: inv.role,
                created_at: inv.created_at.clone(),
                workspace_id: inv.workspace.id.clone(),
                workspace_name: inv.workspace.name.clone(),
            },
        })
    };
    Ok([
        item(k::invitation_pk(&inv.id), k::INVITATION_SK.into())?,
        item(
            k::email_pk(&inv.email),
            k::email_invitation_sk(&inv.workspace.id),
        )?,
        item(
            k::workspace_pk(&inv.workspace.id),
            k::invitation_sk(&inv.id),
        )?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invitation_reads_back_from_each_of_its_items() {
        let inv = Invitation {
            id: InvitationId::numbered(1),
            email: "ana@example.com".into(),
            role: Role::Viewer,
            created_at: "2026-11-27T00:00:00.000Z".into(),
            workspace: Workspace {
                id: TenantId::parse("w1").unwrap(),
                name: "Acme".into(),
            },
        };
        for item in invitation_items(&inv).unwrap() {
            let back: InvitationItem = serde_dynamo::from_item(item).unwrap();
            assert_eq!(Invitation::from(back.invitation), inv);
        }
    }
}
