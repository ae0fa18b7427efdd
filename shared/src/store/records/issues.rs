//! Issues in the records table: the issue item, the description item, the per-project number
//! counter, and the reads the indexer and the grid make of issues (by id, by project).

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};

use super::items::{
    attr, description_item, issue_from, issue_item, issue_key, item_too_large, key, project_key,
    sk_of,
};
use crate::cursor::Position;
use crate::domain::ids::{IssueId, ProjectId, TenantId, UserId};
use crate::domain::{Issue, IssuePatch, MAX_ITEM_BYTES, MAX_PARTICIPANTS, NewIssue};
use crate::keys;
use crate::store::Records;
use crate::store::query::Query;
use crate::store::records::patch::{UpdateParts, patch_update};
use crate::store::records::relations::{Relation, relations_of_items};
use crate::store::records::tree::{TREE_ATTEMPTS, TreeChange, TreeRefusal, tree_retry_pause};
use crate::store::{Item, Page, StoreError, Tx, build_err, condition_held, stored_size};

/// An issue as `GET` shows it: with its relations, and whether it ever had sub-issues.
pub struct IssueWithGraph {
    pub issue: Issue,
    pub relations: Vec<Relation>,
    pub had_children: bool,
    /// Its comments, counted on its item by each comment's transaction.
    pub comment_count: u64,
}

/// The issue (and its relations) among the items of its partition.
fn issue_of_items(items: Vec<Item>) -> Result<Option<IssueWithGraph>, StoreError> {
    let relations = relations_of_items(&items);
    let mut summary = None;
    let mut description = None;
    for item in items {
        match sk_of(&item) {
            Some(keys::records::ISSUE_SK) => summary = Some(item),
            Some(keys::records::DESCRIPTION_SK) => description = Some(item),
            _ => {}
        }
    }
    summary
        .map(|s| {
            let had_children = s.contains_key(attr::HAS_CHILDREN);
            let comment_count = s
                .get(attr::COMMENT_COUNT)
                .and_then(|n| n.as_n().ok()?.parse().ok())
                .unwrap_or(0);
            Ok(IssueWithGraph {
                issue: issue_from(s, description.as_ref())?,
                relations,
                had_children,
                comment_count,
            })
        })
        .transpose()
}

/// How many times a whole-map patch re-reads and re-merges when another write moved the issue.
const MAX_MERGE_ATTEMPTS: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum CreateIssueError {
    #[error("project not found")]
    ProjectNotFound,
    #[error("the issue would not fit in one item")]
    TooLarge,
    #[error("the parent cannot be set: {0:?}")]
    Parent(TreeRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a patch did.
#[derive(Debug)]
pub enum PatchOutcome {
    Updated,
    NotFound,
    /// `If-Match` named another version; nothing was written.
    VersionMismatch,
    /// The issue would pass DynamoDB's item limit (a concurrent write grew it); nothing was
    /// written.
    TooLarge,
    /// The parent cannot be set; nothing was written.
    Parent(TreeRefusal),
}

/// What a participant PUT did.
#[derive(Debug, PartialEq, Eq)]
pub enum ParticipantOutcome {
    Saved,
    NotFound,
    /// The issue has its 100 participants and this is not one of them.
    Full,
    /// The issue would pass DynamoDB's item limit.
    TooLarge,
}

impl Records<'_> {
    /// Creates an issue with the project's next number.
    ///
    /// The number comes from an atomic `ADD` on the project's counter that returns the new
    /// value: concurrent creates never conflict on it (DynamoDB applies the increments one
    /// after another), so a create is one counter update and one put whatever the load. The
    /// put cannot lose a race (a new id); should it fail, its number stays unused — the
    /// contract promises unique, increasing numbers, not gap-free ones.
    #[tracing::instrument(skip_all, fields(op = "create_issue"))]
    pub async fn create_issue(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        new: NewIssue,
        id: IssueId,
        (now, actor): (String, &UserId),
    ) -> Result<Issue, CreateIssueError> {
        let mut issue = Issue {
            id,
            project_id: project_id.clone(),
            // Measured first with the narrowest number: an issue too large even then is a 413
            // that takes no number; only one within a few bytes of the limit is measured again.
            num: 1,
            title: new.title,
            state: new.state,
            description: new.description,
            fields: new.fields,
            participants: new.participants,
            version: 1,
            created_at: now.clone(),
            updated_at: now,
            parent_id: new.parent_id,
        };
        if stored_size(&issue_item(tenant, &issue)?) > MAX_ITEM_BYTES {
            return Err(CreateIssueError::TooLarge);
        }
        // A parent refused before the number is taken takes none.
        let tree = self.plan_new_child(tenant, project_id, &issue).await?;
        issue.num = self.take_number(tenant, project_id).await?;
        let mut item = issue_item(tenant, &issue)?;
        let by = super::items::string(actor.as_str());
        item.insert(attr::UPDATED_BY.into(), by);
        // With its number: accepted right up to DynamoDB's limit.
        if stored_size(&item) > MAX_ITEM_BYTES {
            return Err(CreateIssueError::TooLarge);
        }
        if let Some(tree) = tree {
            return self.create_child(tenant, issue, item, tree).await;
        }
        let written = match &issue.description {
            None => self.store.put_new(item).await.map(|()| Tx::Committed),
            Some(text) => {
                let description = description_item(tenant, &issue.id, text);
                self.store.put_new_with(item, description).await
            }
        };
        match written {
            Ok(Tx::Committed) => Ok(issue),
            // A new id's put cannot find its key taken; if it ever did, nothing was written.
            Ok(Tx::ConditionFailed) => Err(StoreError::Contention(1).into()),
            // The measure above follows DynamoDB's rules; should DynamoDB still refuse the
            // item for its size, that is the client's 413 too, never a 500.
            Err(e) if item_too_large(&e) => Err(CreateIssueError::TooLarge),
            Err(e) => Err(e.into()),
        }
    }

    /// The tree change that puts a new issue under its parent, if it has one.
    async fn plan_new_child(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        issue: &Issue,
    ) -> Result<Option<TreeChange>, CreateIssueError> {
        let Some(parent) = &issue.parent_id else {
            return Ok(None);
        };
        let at = (&issue.id, None, Some(parent));
        match self.plan_parent(tenant, project_id, at, false).await? {
            Ok(change) => Ok(Some(change)),
            Err(refusal) => Err(CreateIssueError::Parent(refusal)),
        }
    }

    /// Puts a new sub-issue (with its description) and its tree change in one transaction;
    /// when another parent change in the project got in first, checks the tree again (the
    /// number taken stays the issue's).
    async fn create_child(
        &self,
        tenant: &TenantId,
        issue: Issue,
        item: Item,
        mut tree: TreeChange,
    ) -> Result<Issue, CreateIssueError> {
        let started = std::time::Instant::now();
        for attempt in 1..=TREE_ATTEMPTS {
            let mut items = vec![
                TransactWriteItem::builder()
                    .put(
                        self.store
                            .put_in_tx(item.clone(), Some("attribute_not_exists(PK)"))?,
                    )
                    .build(),
            ];
            if let Some(text) = &issue.description {
                let description = description_item(tenant, &issue.id, text);
                items.push(
                    TransactWriteItem::builder()
                        .put(self.store.put_in_tx(description, None)?)
                        .build(),
                );
            }
            items.append(&mut tree.items);
            match self.store.transact(items).await {
                Ok(Tx::Committed) => return Ok(issue),
                Ok(Tx::ConditionFailed) | Err(StoreError::Contention(_)) => {
                    match tree_retry_pause(started, attempt) {
                        Some(pause) => tokio::time::sleep(pause).await,
                        None => break,
                    }
                }
                Err(e) if item_too_large(&e) => return Err(CreateIssueError::TooLarge),
                Err(e) => return Err(e.into()),
            }
            tree = match self
                .plan_new_child(tenant, &issue.project_id, &issue)
                .await?
            {
                Some(tree) => tree,
                None => return Err(StoreError::Contention(1).into()),
            };
        }
        Err(CreateIssueError::Parent(TreeRefusal::Busy))
    }

    /// The project's next issue number: its counter incremented by one, atomically, on the
    /// condition that the project exists.
    async fn take_number(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<u64, CreateIssueError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .update_expression("ADD #n :one")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#n", attr::NEXT_NUM)
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
            .send()
            .await;
        let new = match result.map_err(aws_sdk_dynamodb::Error::from) {
            Ok(out) => out.attributes,
            Err(aws_sdk_dynamodb::Error::ConditionalCheckFailedException(_)) => {
                return Err(CreateIssueError::ProjectNotFound);
            }
            Err(e) => {
                return Err(StoreError::Dynamo {
                    op: "UpdateItem",
                    source: Box::new(e),
                }
                .into());
            }
        };
        new.as_ref()
            .and_then(|a| a.get(attr::NEXT_NUM))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| StoreError::Build("the counter update returned no number".into()).into())
    }

    /// Starts an UpdateItem of the issue's item.
    pub(super) fn update_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
    }

    /// An issue with its description: one strongly consistent Query of its partition's
    /// first two items (its relation edges sort after them and are not read).
    #[tracing::instrument(skip_all, fields(op = "get_issue"))]
    pub async fn get_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<Issue>, StoreError> {
        // Two small items: one page always holds them.
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_between(keys::records::ISSUE_SK, keys::records::DESCRIPTION_SK)
        .consistent(true);
        Ok(issue_of_items(self.store.query_page(query).await?.items)?.map(|g| g.issue))
    }

    /// An issue with its description and its relations: one strongly consistent Query of its
    /// partition up to its last relation edge (at most 100 edges of ~80 bytes after the two
    /// items; its comments sort after them and are not read).
    #[tracing::instrument(skip_all, fields(op = "get_issue_with_relations"))]
    pub async fn get_issue_with_relations(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<IssueWithGraph>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_between(keys::records::ISSUE_SK, keys::records::RELATION_SK_END)
        .consistent(true);
        issue_of_items(self.store.query_all(query).await?)
    }

    /// Applies a validated patch as one atomic update (see [`patch_update`]): of only the
    /// members it names, or, past what one expression holds, of the whole map merged from
    /// `current` and conditioned on its version (re-read and re-merged when another write got
    /// in first). With `expected_version`, the update is conditioned on it and a stale version
    /// writes nothing. A patch that leaves the description alone is one conditional
    /// UpdateItem; one that changes it is a transaction with the description's put or delete
    /// (a transaction bills each item twice, so only what needs it pays for it).
    #[tracing::instrument(skip_all, fields(op = "patch_issue"))]
    pub async fn patch_issue(
        &self,
        tenant: &TenantId,
        current: &Issue,
        patch: &IssuePatch,
        expected_version: Option<u64>,
        (now, actor): (&str, &UserId),
    ) -> Result<PatchOutcome, StoreError> {
        let issue_id = &current.id;
        let mut base = current.clone();
        let started = std::time::Instant::now();
        for attempt in 0..MAX_MERGE_ATTEMPTS {
            let parts = patch_update(patch, expected_version, now, Some(&base))
                .ok_or_else(|| StoreError::Build("a patch without its base".into()))?;
            let parts = super::patch::with_actor(parts, actor.as_str());
            let whole_map = parts.values.contains_key(":expected") && expected_version.is_none();
            let tree = match self.plan_patch_tree(tenant, &base, patch).await? {
                Ok(tree) => tree,
                Err(refusal) => return Ok(PatchOutcome::Parent(refusal)),
            };
            let written = match (&patch.description, tree) {
                (None, None) => self.update_summary(tenant, issue_id, parts).await,
                (description, tree) => {
                    let mut extras = tree.map(|t| t.items).unwrap_or_default();
                    if let Some(text) = description {
                        extras.push(self.description_write(tenant, issue_id, text.as_deref())?);
                    }
                    self.update_with(tenant, issue_id, parts, extras).await
                }
            };
            let held = match written {
                Ok(held) => held,
                Err(e) if item_too_large(&e) => return Ok(PatchOutcome::TooLarge),
                // Concurrent tree changes kept cancelling this one: busy, as when they win.
                Err(StoreError::Contention(_)) if patch.parent.is_some() => false,
                Err(e) => return Err(e),
            };
            if held {
                return Ok(PatchOutcome::Updated);
            }
            // The issue is gone, its version moved on, or (a parent change) the tree did.
            match self.get_issue(tenant, issue_id).await? {
                None => return Ok(PatchOutcome::NotFound),
                Some(fresh)
                    if patch.parent.is_some()
                        && expected_version.is_none_or(|v| v == fresh.version) =>
                {
                    let Some(pause) = tree_retry_pause(started, attempt + 1) else {
                        break;
                    };
                    tracing::debug!(attempt, "the tree moved on, checking again");
                    tokio::time::sleep(pause).await;
                    base = fresh;
                }
                // Another write made the issue what the patch asks (the condition that it
                // changes something failed, or a merge changes nothing): no write, no version.
                Some(fresh)
                    if patch.parent.is_none()
                        && expected_version.is_none_or(|v| v == fresh.version)
                        && patch.clone().without_noops(&fresh).is_empty() =>
                {
                    return Ok(PatchOutcome::Updated);
                }
                // A base that moved on, or (no If-Match) values made and changed again meanwhile.
                Some(fresh) if whole_map || expected_version.is_none() => {
                    tracing::debug!(attempt, "issue moved on, writing again");
                    base = fresh;
                }
                Some(_) => return Ok(PatchOutcome::VersionMismatch),
            }
        }
        if patch.parent.is_some() {
            return Ok(PatchOutcome::Parent(TreeRefusal::Busy));
        }
        Err(StoreError::Contention(MAX_MERGE_ATTEMPTS))
    }

    /// The tree change a patch makes of `base`: none when it leaves the parent alone or names
    /// the one it has.
    async fn plan_patch_tree(
        &self,
        tenant: &TenantId,
        base: &Issue,
        patch: &IssuePatch,
    ) -> Result<Result<Option<TreeChange>, TreeRefusal>, StoreError> {
        match &patch.parent {
            Some(parent) if parent.as_ref() != base.parent_id.as_ref() => {
                let at = (&base.id, base.parent_id.as_ref(), parent.as_ref());
                let planned = self.plan_parent(tenant, &base.project_id, at, true).await?;
                Ok(planned.map(Some))
            }
            _ => Ok(Ok(None)),
        }
    }

    /// The issue item's conditional UpdateItem; `false` when its condition failed. A
    /// transaction in progress on the item (a description change, a delete) makes DynamoDB
    /// refuse it with `TransactionConflictException`, which the SDK does not retry: retried
    /// here with backoff, as [`Store::transact`] retries its own conflicts.
    async fn update_summary(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        parts: UpdateParts,
    ) -> Result<bool, StoreError> {
        let update = self
            .update_issue(tenant, issue_id)
            .update_expression(&parts.update)
            .condition_expression(&parts.condition)
            .set_expression_attribute_names(Some(parts.names))
            .set_expression_attribute_values(Some(parts.values));
        crate::store::condition_held_through_conflicts("UpdateItem", || update.clone().send()).await
    }

    /// The issue item's update with `extras` (the description's write, a parent change's
    /// edges and tree revision) in one transaction; `false` when a condition failed.
    async fn update_with(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        parts: UpdateParts,
        extras: Vec<TransactWriteItem>,
    ) -> Result<bool, StoreError> {
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
            .update_expression(parts.update)
            .condition_expression(parts.condition)
            .set_expression_attribute_names(Some(parts.names))
            .set_expression_attribute_values(Some(parts.values))
            .build()
            .map_err(build_err)?;
        let mut items = vec![TransactWriteItem::builder().update(update).build()];
        items.extend(extras);
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The description's put (`Some`) or delete (`None`), for a transaction.
    fn description_write(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        description: Option<&str>,
    ) -> Result<TransactWriteItem, StoreError> {
        Ok(match description {
            Some(text) => {
                let put = self
                    .store
                    .put_in_tx(description_item(tenant, issue_id, text), None)?;
                TransactWriteItem::builder().put(put).build()
            }
            None => {
                let pk = keys::records::issue_pk(tenant, issue_id);
                let delete = Delete::builder()
                    .table_name(&self.store.records)
                    .set_key(Some(key(pk, keys::records::DESCRIPTION_SK)))
                    .build()
                    .map_err(build_err)?;
                TransactWriteItem::builder().delete(delete).build()
            }
        })
    }

    /// Deletes an issue and its description; `false` if there was no issue. An issue with
    /// comments gets the marks that make them `404` at once
    /// ([`keys::records::COMMENTS_GONE_SKS`]); one without is deleted on the condition that
    /// it still has none (a comment posted meanwhile: read again).
    #[tracing::instrument(skip_all, fields(op = "delete_issue"))]
    pub async fn delete_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<bool, StoreError> {
        for _ in 0..TREE_ATTEMPTS {
            // Its parent, whose edge to it goes in the same transaction.
            let Some(item) = self
                .store
                .get_item(&self.store.records, issue_key(tenant, issue_id))
                .await?
            else {
                return Ok(false);
            };
            let has_comments = item
                .get(attr::COMMENT_COUNT)
                .and_then(|n| n.as_n().ok()?.parse::<u64>().ok())
                .is_some_and(|n| n > 0);
            let issue = issue_from(item, None)?;
            let pk = keys::records::issue_pk(tenant, issue_id);
            let mut summary = Delete::builder()
                .table_name(&self.store.records)
                .set_key(Some(key(pk.clone(), keys::records::ISSUE_SK)))
                .expression_attribute_names("#pa", attr::PARENT_ID);
            let mut condition = match &issue.parent_id {
                Some(p) => {
                    summary = summary
                        .expression_attribute_values(":pa", AttributeValue::S(p.to_string()));
                    "#pa = :pa".to_string()
                }
                None => "attribute_exists(PK) AND attribute_not_exists(#pa)".to_string(),
            };
            if !has_comments {
                condition.push_str(" AND (attribute_not_exists(#cc) OR #cc = :zero)");
                summary = summary
                    .expression_attribute_names("#cc", attr::COMMENT_COUNT)
                    .expression_attribute_values(":zero", AttributeValue::N("0".into()));
            }
            summary = summary.condition_expression(condition);
            let description = Delete::builder()
                .table_name(&self.store.records)
                .set_key(Some(key(pk, keys::records::DESCRIPTION_SK)))
                .build()
                .map_err(build_err)?;
            let mut items = vec![
                TransactWriteItem::builder()
                    .delete(summary.build().map_err(build_err)?)
                    .build(),
                TransactWriteItem::builder().delete(description).build(),
            ];
            if let Some(parent) = &issue.parent_id {
                items.push(self.delete_child_edge(tenant, parent, issue_id)?);
            }
            if has_comments {
                for sk in keys::records::COMMENTS_GONE_SKS {
                    let mut mark = key(keys::records::issue_pk(tenant, issue_id), sk);
                    mark.insert(
                        attr::ENTITY.into(),
                        AttributeValue::S(keys::records::entity::COMMENTS_GONE.into()),
                    );
                    let put = self.store.put_in_tx(mark, None)?;
                    items.push(TransactWriteItem::builder().put(put).build());
                }
            }
            // Only the issue item's delete has a condition: cancelled means it went, or its
            // parent changed (or a first comment came) meanwhile (then read again).
            if self.store.transact(items).await? == Tx::Committed {
                return Ok(true);
            }
        }
        Err(StoreError::Contention(TREE_ATTEMPTS))
    }

    /// Adds a participant or changes their role: one UpdateItem (`ADD` to the edge set, `SET`
    /// in the roles map), no read. It is an issue change: version and `updated_at` move. The
    /// condition keeps the cap: fewer than 100 edges, or this one already there (a re-role), so
    /// concurrent PUTs never make 101. A failed condition costs one read to tell a missing
    /// issue from a full one.
    #[tracing::instrument(skip_all, fields(op = "put_participant"))]
    pub async fn put_participant(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        p: &crate::domain::Participant,
        (now, actor): (&str, &UserId),
    ) -> Result<ParticipantOutcome, StoreError> {
        let edge = keys::records::participant_edge(p.kind, &p.id);
        let result = self
            .update_issue(tenant, issue_id)
            .update_expression("ADD #p :edge, #v :one SET #r.#e = :role, #u = :now, #by = :by")
            // The last term: a participant already in this role is no change, no version.
            .condition_expression(
                "attribute_exists(PK) AND (attribute_not_exists(#p) OR size(#p) < :max \
                 OR contains(#p, :e)) AND NOT (contains(#p, :e) AND #r.#e = :role)",
            )
            .expression_attribute_names("#by", attr::UPDATED_BY)
            .expression_attribute_values(":by", AttributeValue::S(actor.as_str().into()))
            .expression_attribute_values(":max", AttributeValue::N(MAX_PARTICIPANTS.to_string()))
            .expression_attribute_values(":e", AttributeValue::S(edge.clone()))
            .expression_attribute_names("#p", attr::PARTICIPANTS)
            .expression_attribute_names("#r", attr::ROLES)
            .expression_attribute_names("#e", &edge)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_values(":edge", AttributeValue::Ss(vec![edge.clone()]))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":role", AttributeValue::S(p.role.as_str().into()))
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .send()
            .await;
        match condition_held("UpdateItem", result) {
            Ok(true) => Ok(ParticipantOutcome::Saved),
            Ok(false) => Ok(match self.get_issue_item(tenant, issue_id).await? {
                None => ParticipantOutcome::NotFound,
                Some(issue) if issue.participants.contains(p) => ParticipantOutcome::Saved,
                Some(_) => ParticipantOutcome::Full,
            }),
            Err(e) if item_too_large(&e) => Ok(ParticipantOutcome::TooLarge),
            Err(e) => Err(e),
        }
    }

    /// Removes a participant: one UpdateItem, conditioned on them being one. `false` when the
    /// issue does not exist or they are not a participant. With no `actor`, a system change
    /// (a deleted team leaving): `updated_by` goes, so its history entry names none.
    #[tracing::instrument(skip_all, fields(op = "delete_participant"))]
    pub async fn delete_participant(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        kind: crate::domain::ParticipantKind,
        id: &str,
        (now, actor): (&str, Option<&UserId>),
    ) -> Result<bool, StoreError> {
        let edge = keys::records::participant_edge(kind, id);
        let update = self
            .update_issue(tenant, issue_id)
            .expression_attribute_names("#by", attr::UPDATED_BY);
        let update = match actor {
            Some(actor) => update
                .update_expression(
                    "DELETE #p :edges REMOVE #r.#e SET #u = :now, #by = :by ADD #v :one",
                )
                .expression_attribute_values(":by", AttributeValue::S(actor.as_str().into())),
            None => update
                .update_expression("DELETE #p :edges REMOVE #r.#e, #by SET #u = :now ADD #v :one"),
        };
        let result = update
            .condition_expression("contains(#p, :edge)")
            .expression_attribute_names("#p", attr::PARTICIPANTS)
            .expression_attribute_names("#r", attr::ROLES)
            .expression_attribute_names("#e", &edge)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_values(":edges", AttributeValue::Ss(vec![edge.clone()]))
            .expression_attribute_values(":edge", AttributeValue::S(edge))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }
}

/// Records-table reads the indexer and the grid make of issues.
impl Records<'_> {
    /// The issues of a page's entries, in no order: each from the summary its entry carries,
    /// and those whose entries are thin (or whose summary does not read) with one
    /// `BatchGetItem` (no call when every entry carried one).
    pub async fn issues_of_entries<'a>(
        &self,
        tenant: &TenantId,
        entries: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
        reading: crate::model::summary::Reading<'_>,
    ) -> Result<HashMap<String, Issue>, StoreError> {
        let mut found: HashMap<String, Issue> = HashMap::new();
        let mut thin = Vec::new();
        for (id, summary) in entries {
            // Two entries of one issue (its entries in both scopes while the indexer moves
            // it): the newer summary.
            match summary.and_then(|text| reading.issue(id, text)) {
                Some(issue) => match found.entry(id.to_string()) {
                    std::collections::hash_map::Entry::Occupied(mut held) => {
                        if held.get().version < issue.version {
                            held.insert(issue);
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(issue);
                    }
                },
                None => thin.push(id.to_string()),
            }
        }
        thin.retain(|id| !found.contains_key(id));
        found.extend(self.batch_get_issues(tenant, &thin).await?);
        Ok(found)
    }

    /// Issue summaries by id, in one BatchGetItem per 100 (unprocessed keys retried). Ids with
    /// no issue (deleted since they were indexed) are simply absent from the result.
    #[tracing::instrument(skip_all, fields(op = "batch_get_issues", n = ids.len()))]
    pub async fn batch_get_issues(
        &self,
        tenant: &TenantId,
        ids: &[String],
    ) -> Result<HashMap<String, Issue>, StoreError> {
        // Ids come from index entries; one that is no issue id names no issue.
        let unique: BTreeSet<IssueId> = ids.iter().filter_map(|id| IssueId::parse(id)).collect();
        let keys = unique.iter().map(|id| issue_key(tenant, id)).collect();
        let mut found = HashMap::new();
        for item in self.store.batch_get_records(keys).await? {
            let issue = issue_from(item, None)?;
            found.insert(issue.id.to_string(), issue);
        }
        Ok(found)
    }

    /// A page of at most `limit` of a project's issues by number (GSI1), for re-indexing a
    /// whole project.
    #[tracing::instrument(skip_all, fields(op = "issues_of_project"))]
    pub async fn issues_of_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        start: Option<&Position>,
        limit: i32,
    ) -> Result<Page<Issue>, StoreError> {
        let query = Query::gsi1(
            &self.store.records,
            keys::records::issues_by_num_gsi1_pk(tenant, project_id),
        )
        .limit(Some(limit))
        .after(start);
        let Page { items, next } = self.store.query_page(query).await?;
        // GSI1 holds an issue's keys, not the issue (its projection in template.yaml), so the
        // issues come from the table: one BatchGetItem per 100.
        let wanted: Vec<Item> = items
            .into_iter()
            .filter_map(|mut i| {
                Some(Item::from([
                    (keys::PK.to_string(), i.remove(keys::PK)?),
                    (keys::SK.to_string(), i.remove(keys::SK)?),
                ]))
            })
            .collect();
        let mut items = self
            .store
            .batch_get_records(wanted)
            .await?
            .into_iter()
            .map(|i| issue_from(i, None))
            .collect::<Result<Vec<_>, _>>()?;
        items.sort_by_key(|i| i.num);
        Ok(Page { items, next })
    }

    /// The issue's item alone (strongly consistent), for re-indexing one issue.
    #[tracing::instrument(skip_all, fields(op = "get_issue_item"))]
    pub async fn get_issue_item(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<Issue>, StoreError> {
        self.store
            .get_item(&self.store.records, issue_key(tenant, issue_id))
            .await?
            .map(|i| issue_from(i, None))
            .transpose()
    }
}
