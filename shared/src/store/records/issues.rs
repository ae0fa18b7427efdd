//! Issues in the records table: the issue item, the description item, the per-project number
//! counter, and the reads the indexer and the grid make of issues (by id, by project).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};

use super::items::{
    attr, description_item, fields_attr, issue_from, issue_item, issue_key, key, project_key,
    sk_of, value_to_attr,
};
use crate::cursor::Position;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::values::StoredValue;
use crate::domain::{Issue, IssuePatch, MAX_ITEM_BYTES, MAX_PARTICIPANTS, NewIssue};
use crate::keys;
use crate::store::Records;
use crate::store::query::Query;
use crate::store::records::relations::{Relation, relations_of_items};
use crate::store::retry::Backoff;
use crate::store::{Item, Page, StoreError, Tx, build_err, condition_held, stored_size};

/// The issue (and its relations) among the items of its partition.
fn issue_of_items(items: Vec<Item>) -> Result<Option<(Issue, Vec<Relation>)>, StoreError> {
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
        .map(|s| Ok((issue_from(s, description.as_ref())?, relations)))
        .transpose()
}

/// DynamoDB's limit on one expression string.
pub const MAX_EXPRESSION_BYTES: usize = 4096;
/// How many times a whole-map patch re-reads and re-merges when another write moved the issue.
const MAX_MERGE_ATTEMPTS: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum CreateIssueError {
    #[error("project not found")]
    ProjectNotFound,
    #[error("the issue would not fit in one item")]
    TooLarge,
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

/// An update's expression and substitutions, built apart from the SDK so its size is testable.
#[derive(Debug, Clone, Default)]
pub struct UpdateParts {
    pub update: String,
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

/// The update of a patch's issue item.
///
/// Small patches update only the members they name (`SET #f.#a0 = :a0`, `REMOVE #f.#r0`), so
/// concurrent patches to different members both survive without a read. With short
/// placeholders that covers some 250 fields; a patch whose expression would still pass
/// DynamoDB's 4 KB (up to 400 fields at once) writes the whole map instead: `base` merged with
/// the patch, conditioned on `base`'s version, and the caller re-reads, re-merges and retries
/// when another write got in first — so nothing is lost either way. `None` with `base` absent
/// means the patch needs a base.
pub fn patch_update(
    patch: &IssuePatch,
    expected_version: Option<u64>,
    now: &str,
    base: Option<&Issue>,
) -> Option<UpdateParts> {
    let mut expr = scalar_updates(patch, now);
    let condition = match expected_version {
        Some(v) => {
            expr.value(":expected", AttributeValue::N(v.to_string()));
            VERSION_CONDITION.to_string()
        }
        None => "attribute_exists(PK)".to_string(),
    };
    if patch.clear_fields {
        // The whole map is replaced; paths inside it cannot be set in the same expression.
        expr.set("#f = :f");
        expr.value(":f", fields_attr(&patch.set_fields));
        return Some(expr.finish(condition));
    }
    let keyed = keyed_fields(expr.clone(), patch);
    if keyed.len() <= MAX_EXPRESSION_BYTES {
        return Some(keyed.finish(condition));
    }
    // Too many keys for one expression: the whole map, merged from `base`.
    Some(whole_map(expr, patch, expected_version, condition, base?))
}

/// The condition of a write that must find the issue at an expected version.
const VERSION_CONDITION: &str = "attribute_exists(PK) AND #v = :expected";

/// An update expression being built: its SET and REMOVE clauses and their substitutions.
#[derive(Clone, Default)]
struct Expression {
    sets: Vec<String>,
    removes: Vec<String>,
    parts: UpdateParts,
}

impl Expression {
    fn name(&mut self, placeholder: &str, name: &str) {
        self.parts.names.insert(placeholder.into(), name.into());
    }

    fn value(&mut self, placeholder: &str, value: AttributeValue) {
        self.parts.values.insert(placeholder.into(), value);
    }

    fn set(&mut self, clause: impl Into<String>) {
        self.sets.push(clause.into());
    }

    /// The expression's length as `finish` writes it (counting a REMOVE clause either way).
    fn len(&self) -> usize {
        "SET ".len()
            + self.sets.iter().map(|x| x.len() + 2).sum::<usize>()
            + " REMOVE ".len()
            + self.removes.iter().map(|x| x.len() + 2).sum::<usize>()
            + " ADD #v :one".len()
    }

    fn finish(self, condition: String) -> UpdateParts {
        let mut update = format!("SET {}", self.sets.join(", "));
        if !self.removes.is_empty() {
            update.push_str(&format!(" REMOVE {}", self.removes.join(", ")));
        }
        update.push_str(" ADD #v :one");
        UpdateParts {
            update,
            condition,
            ..self.parts
        }
    }
}

/// What every patch sets (the time, the version) and its title and state.
fn scalar_updates(patch: &IssuePatch, now: &str) -> Expression {
    let mut expr = Expression::default();
    expr.name("#u", attr::UPDATED_AT);
    expr.name("#v", attr::VERSION);
    expr.value(":now", AttributeValue::S(now.into()));
    expr.value(":one", AttributeValue::N("1".into()));
    expr.set("#u = :now");
    if let Some(title) = &patch.title {
        expr.set("#t = :t");
        expr.name("#t", attr::TITLE);
        expr.value(":t", AttributeValue::S(title.clone()));
    }
    if let Some(state) = patch.state {
        expr.set("#s = :s");
        expr.name("#s", attr::STATE);
        expr.value(":s", AttributeValue::S(state.as_str().into()));
    }
    if patch.clear_fields || !patch.set_fields.is_empty() || !patch.remove_fields.is_empty() {
        expr.name("#f", attr::FIELDS);
    }
    expr
}

/// `expr` with each set and removed field value as its own path (`#f.#a0`, `#f.#r0`).
fn keyed_fields(mut expr: Expression, patch: &IssuePatch) -> Expression {
    for (i, (id, value)) in patch.set_fields.iter().enumerate() {
        expr.set(format!("#f.#a{i} = :a{i}"));
        expr.name(&format!("#a{i}"), id);
        expr.value(&format!(":a{i}"), value_to_attr(value));
    }
    for (i, id) in patch.remove_fields.iter().enumerate() {
        expr.removes.push(format!("#f.#r{i}"));
        expr.name(&format!("#r{i}"), id);
    }
    expr
}

/// `expr` writing the whole values map, `base`'s merged with the patch, conditioned on
/// `base`'s version when the caller gave none.
fn whole_map(
    mut expr: Expression,
    patch: &IssuePatch,
    expected_version: Option<u64>,
    mut condition: String,
    base: &Issue,
) -> UpdateParts {
    let mut fields: BTreeMap<FieldId, StoredValue> = base.fields.clone();
    fields.retain(|k, _| {
        !patch.remove_fields.contains(k)
            && patch
                .project_fields
                .as_ref()
                .is_none_or(|known| known.contains(k))
    });
    fields.extend(patch.set_fields.clone());
    expr.set("#f = :f");
    expr.value(":f", fields_attr(&fields));
    if expected_version.is_none() {
        expr.value(":expected", AttributeValue::N(base.version.to_string()));
        condition = VERSION_CONDITION.into();
    }
    expr.finish(condition)
}

/// Whether DynamoDB refused a write because the item would pass 400 KB.
fn item_too_large(e: &StoreError) -> bool {
    let StoreError::Dynamo { source, .. } = e else {
        return false;
    };
    match source.as_ref() {
        aws_sdk_dynamodb::Error::TransactionCanceledException(c) => {
            c.cancellation_reasons().iter().any(|r| {
                r.code() == Some("ValidationError")
                    && r.message().is_some_and(|m| m.contains("size"))
            })
        }
        other => {
            use aws_sdk_dynamodb::error::ProvideErrorMetadata;
            other.code() == Some("ValidationException")
                && other.message().is_some_and(|m| m.contains("Item size"))
        }
    }
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
        now: String,
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
        };
        if stored_size(&issue_item(tenant, &issue)?) > MAX_ITEM_BYTES {
            return Err(CreateIssueError::TooLarge);
        }
        issue.num = self.take_number(tenant, project_id).await?;
        let item = issue_item(tenant, &issue)?;
        // With its number: accepted right up to DynamoDB's limit.
        if stored_size(&item) > MAX_ITEM_BYTES {
            return Err(CreateIssueError::TooLarge);
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
    fn update_issue(
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
        Ok(issue_of_items(self.store.query_page(query).await?.items)?.map(|(i, _)| i))
    }

    /// An issue with its description and its relations: one strongly consistent Query of its
    /// whole partition (at most 100 edges of ~80 bytes after the two items).
    #[tracing::instrument(skip_all, fields(op = "get_issue_with_relations"))]
    pub async fn get_issue_with_relations(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<(Issue, Vec<Relation>)>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
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
        now: &str,
    ) -> Result<PatchOutcome, StoreError> {
        let issue_id = &current.id;
        let mut base = current.clone();
        for attempt in 0..MAX_MERGE_ATTEMPTS {
            let parts = patch_update(patch, expected_version, now, Some(&base))
                .ok_or_else(|| StoreError::Build("a patch without its base".into()))?;
            let whole_map = parts.values.contains_key(":expected") && expected_version.is_none();
            let written = match &patch.description {
                None => self.update_summary(tenant, issue_id, parts).await,
                Some(text) => {
                    self.update_with_description(tenant, issue_id, parts, text.as_deref())
                        .await
                }
            };
            let held = match written {
                Ok(held) => held,
                Err(e) if item_too_large(&e) => return Ok(PatchOutcome::TooLarge),
                Err(e) => return Err(e),
            };
            if held {
                return Ok(PatchOutcome::Updated);
            }
            // Only the issue's update has a condition: it is gone, or its version moved on.
            match self.get_issue(tenant, issue_id).await? {
                None => return Ok(PatchOutcome::NotFound),
                Some(fresh) if whole_map => {
                    tracing::debug!(attempt, "issue moved on, merging again");
                    base = fresh;
                }
                Some(_) => return Ok(PatchOutcome::VersionMismatch),
            }
        }
        Err(StoreError::Contention(MAX_MERGE_ATTEMPTS))
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
        const ATTEMPTS: u32 = 8;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .update_issue(tenant, issue_id)
                .update_expression(&parts.update)
                .condition_expression(&parts.condition)
                .set_expression_attribute_names(Some(parts.names.clone()))
                .set_expression_attribute_values(Some(parts.values.clone()))
                .send()
                .await;
            let conflict = result.as_ref().err().and_then(|e| e.as_service_error()).is_some_and(
                aws_sdk_dynamodb::operation::update_item::UpdateItemError::is_transaction_conflict_exception,
            );
            if !conflict {
                return condition_held("UpdateItem", result);
            }
            if attempt >= ATTEMPTS {
                return Err(StoreError::Contention(ATTEMPTS));
            }
            Backoff::Contended.sleep(attempt).await;
        }
    }

    /// The issue item's update and the description's put (`Some`) or delete (`None`) in one
    /// transaction; `false` when the update's condition failed.
    async fn update_with_description(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        parts: UpdateParts,
        description: Option<&str>,
    ) -> Result<bool, StoreError> {
        let pk = keys::records::issue_pk(tenant, issue_id);
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(pk.clone(), keys::records::ISSUE_SK)))
            .update_expression(parts.update)
            .condition_expression(parts.condition)
            .set_expression_attribute_names(Some(parts.names))
            .set_expression_attribute_values(Some(parts.values))
            .build()
            .map_err(build_err)?;
        let second = match description {
            Some(text) => {
                let put = self
                    .store
                    .put_in_tx(description_item(tenant, issue_id, text), None)?;
                TransactWriteItem::builder().put(put).build()
            }
            None => {
                let delete = Delete::builder()
                    .table_name(&self.store.records)
                    .set_key(Some(key(pk, keys::records::DESCRIPTION_SK)))
                    .build()
                    .map_err(build_err)?;
                TransactWriteItem::builder().delete(delete).build()
            }
        };
        let items = vec![TransactWriteItem::builder().update(update).build(), second];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// Deletes an issue and its description; `false` if there was no issue.
    #[tracing::instrument(skip_all, fields(op = "delete_issue"))]
    pub async fn delete_issue(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<bool, StoreError> {
        let pk = keys::records::issue_pk(tenant, issue_id);
        let summary = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(pk.clone(), keys::records::ISSUE_SK)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let description = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(pk, keys::records::DESCRIPTION_SK)))
            .build()
            .map_err(build_err)?;
        let tx = self
            .store
            .transact(vec![
                TransactWriteItem::builder().delete(summary).build(),
                TransactWriteItem::builder().delete(description).build(),
            ])
            .await?;
        // Only the issue item's delete has a condition: cancelled means there was no issue.
        Ok(matches!(tx, Tx::Committed))
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
        now: &str,
    ) -> Result<ParticipantOutcome, StoreError> {
        let edge = keys::records::participant_edge(p.kind, &p.id);
        let result = self
            .update_issue(tenant, issue_id)
            .update_expression("ADD #p :edge, #v :one SET #r.#e = :role, #u = :now")
            .condition_expression(
                "attribute_exists(PK) AND (attribute_not_exists(#p) OR size(#p) < :max \
                 OR contains(#p, :e))",
            )
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
                Some(_) => ParticipantOutcome::Full,
            }),
            Err(e) if item_too_large(&e) => Ok(ParticipantOutcome::TooLarge),
            Err(e) => Err(e),
        }
    }

    /// Removes a participant: one UpdateItem, conditioned on them being one. `false` when the
    /// issue does not exist or they are not a participant.
    #[tracing::instrument(skip_all, fields(op = "delete_participant"))]
    pub async fn delete_participant(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        kind: crate::domain::ParticipantKind,
        id: &str,
        now: &str,
    ) -> Result<bool, StoreError> {
        let edge = keys::records::participant_edge(kind, id);
        let result = self
            .update_issue(tenant, issue_id)
            .update_expression("DELETE #p :edges REMOVE #r.#e SET #u = :now ADD #v :one")
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

    /// Removes a deleted field's value from an issue. It does not bump the version: the value
    /// was already hidden from every read, so the issue did not change for its readers.
    #[tracing::instrument(skip_all, fields(op = "remove_field_value"))]
    pub async fn remove_field_value(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        field_id: &FieldId,
    ) -> Result<(), StoreError> {
        let result = self
            .update_issue(tenant, issue_id)
            .update_expression("REMOVE #fields.#f")
            .condition_expression("attribute_exists(#fields.#f)")
            .expression_attribute_names("#fields", super::items::attr::FIELDS)
            .expression_attribute_names("#f", field_id)
            .send()
            .await;
        // Already gone: nothing to remove.
        condition_held("UpdateItem", result).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::IssueState;

    fn issue(fields: BTreeMap<FieldId, StoredValue>) -> Issue {
        Issue {
            id: IssueId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap(),
            project_id: ProjectId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAW").unwrap(),
            num: 1,
            title: "t".into(),
            state: IssueState::Open,
            description: None,
            fields,
            participants: Vec::new(),
            version: 7,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    fn ids(n: usize) -> Vec<FieldId> {
        (0..n)
            .filter_map(|i| FieldId::parse(&format!("01ARZ3NDEKTSV4RRFFQ69G{i:04}")))
            .collect()
    }

    #[test]
    fn a_patch_of_every_field_fits_in_one_expression() {
        let text = StoredValue::S("w".repeat(1024));
        for n in [1, 100, 250, 400] {
            let set = IssuePatch {
                title: Some("t".into()),
                state: Some(IssueState::Closed),
                set_fields: ids(n).into_iter().map(|k| (k, text.clone())).collect(),
                ..Default::default()
            };
            let remove = IssuePatch {
                remove_fields: ids(n).into_iter().collect(),
                ..Default::default()
            };
            let half = IssuePatch {
                set_fields: ids(n / 2).into_iter().map(|k| (k, text.clone())).collect(),
                remove_fields: ids(n).into_iter().skip(n / 2).collect(),
                ..Default::default()
            };
            let base = issue(ids(n).into_iter().map(|k| (k, text.clone())).collect());
            for (patch, expected) in [(&set, None), (&remove, None), (&half, Some(7))] {
                let parts = patch_update(patch, expected, "now", Some(&base)).unwrap();
                assert!(
                    parts.update.len() <= MAX_EXPRESSION_BYTES,
                    "{n}: {} bytes",
                    parts.update.len()
                );
                assert!(parts.condition.len() <= MAX_EXPRESSION_BYTES);
                // Every placeholder the expressions use is defined, and none is left over.
                let text = format!("{} {}", parts.update, parts.condition);
                for k in parts.names.keys().chain(parts.values.keys()) {
                    assert!(
                        text.split(|c: char| !(c.is_alphanumeric() || c == '#' || c == ':'))
                            .any(|w| w == k),
                        "{k} unused"
                    );
                }
            }
        }
    }

    #[test]
    fn small_patches_touch_only_their_keys_and_large_ones_merge_on_the_version() {
        let base = issue(
            ids(3)
                .into_iter()
                .map(|k| (k, StoredValue::S("x".into())))
                .collect(),
        );
        let small = IssuePatch {
            set_fields: [(ids(1)[0].clone(), StoredValue::S("y".into()))].into(),
            ..Default::default()
        };
        let parts = patch_update(&small, None, "now", None).unwrap();
        assert_eq!(parts.condition, "attribute_exists(PK)");
        assert!(parts.update.contains("#f.#a0 = :a0"));

        let large = IssuePatch {
            set_fields: ids(400)
                .into_iter()
                .map(|k| (k, StoredValue::S("y".into())))
                .collect(),
            ..Default::default()
        };
        assert!(patch_update(&large, None, "now", None).is_none());
        let parts = patch_update(&large, None, "now", Some(&base)).unwrap();
        assert!(parts.condition.contains("#v = :expected"));
        assert_eq!(parts.values[":expected"], AttributeValue::N("7".into()));
        let AttributeValue::M(m) = &parts.values[":f"] else {
            panic!("a map")
        };
        assert_eq!(m.len(), 400);
    }

    #[test]
    fn a_whole_map_write_drops_values_of_fields_the_project_no_longer_has() {
        // `gone` was deleted after the issue was read; the indexer may already have swept it.
        let gone = FieldId::parse("01ARZ3NDEKTSV4RRFFQ69GG0NE").unwrap();
        let mut fields: BTreeMap<FieldId, StoredValue> = ids(3)
            .into_iter()
            .map(|k| (k, StoredValue::S("x".into())))
            .collect();
        fields.insert(gone.clone(), StoredValue::S("stale".into()));
        let base = issue(fields);
        let large = IssuePatch {
            set_fields: ids(400)
                .into_iter()
                .map(|k| (k, StoredValue::S("y".into())))
                .collect(),
            project_fields: Some(ids(400).into_iter().collect()),
            ..Default::default()
        };
        let parts = patch_update(&large, None, "now", Some(&base)).unwrap();
        let AttributeValue::M(m) = &parts.values[":f"] else {
            panic!("a map")
        };
        assert_eq!(m.len(), 400);
        assert!(!m.contains_key(gone.as_str()));
    }
}
