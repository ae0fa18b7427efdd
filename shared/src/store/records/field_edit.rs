//! Editing a field's definition: its name, and a select field's options.
//!
//! A change that moves, renames or removes labels marks the field not `sortable` and leaves
//! on its item what the issues' values become (`edit`) with the project's new `fields_rev`
//! (`edit_rev`). The stream turns that record into one field job (`JobKind::Edit`, named by
//! the revision), which rewrites the values on every issue, re-indexes them, and then marks
//! the field sortable and clears the edit ([`Records::finish_edit`]). Until then a second
//! such change is refused (`Rebuilding`), so at most one rewrite of a field runs at a time.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::items::{FieldItem, attr, key, project_key};
use crate::domain::MAX_FIELD_DEF_BYTES;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::options_edit::{OptionEntry, OptionsPlan, ValueChanges, plan};
use crate::domain::values::FieldDef;
use crate::keys;
use crate::store::query::Query;
use crate::store::{Item, Records, StoreError, Tx, build_err, condition_held};

/// The field item's attribute holding a pending edit's value changes (JSON).
pub const EDIT: &str = "edit";
/// The field item's attribute holding the `fields_rev` of a pending edit: its job's name.
pub const EDIT_REV: &str = "edit_rev";

/// What a `PATCH` of a field asks: the new list as given, planned against the options of
/// the very definition the write is conditioned on.
#[derive(Clone, Debug, Default)]
pub struct FieldPatch {
    pub name: Option<String>,
    pub options: Option<Vec<OptionEntry>>,
}

#[derive(Debug, thiserror::Error)]
pub enum PatchFieldError {
    #[error("field not found")]
    NotFound,
    /// The field's column is being rebuilt after an earlier change of its options.
    #[error("the field's column is being rebuilt")]
    Rebuilding,
    #[error("the project's field definitions would pass their byte limit")]
    DefinitionsTooLarge,
    /// The new option list does not hold against the field's current options.
    #[error("the options do not hold")]
    Invalid(Vec<crate::domain::FieldError>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Attempts of a patch that lost a race to another change of the field or the project.
const ATTEMPTS: u32 = 4;

impl Records<'_> {
    /// Applies `patch` to the field; the definition as it is now.
    #[tracing::instrument(skip_all, fields(op = "patch_field"))]
    pub async fn patch_field(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        field_id: &FieldId,
        patch: &FieldPatch,
    ) -> Result<FieldDef, PatchFieldError> {
        let pk = keys::records::project_pk(tenant, project_id);
        let field_key = key(pk.clone(), &keys::records::field_sk(field_id));
        for _ in 0..ATTEMPTS {
            let Some(item) = self
                .store
                .get_item(&self.store.records, field_key.clone())
                .await?
            else {
                return Err(PatchFieldError::NotFound);
            };
            let pending = item.contains_key(EDIT_REV);
            let old: FieldDef = serde_dynamo::from_item::<_, FieldItem>(item)
                .map_err(StoreError::from)?
                .def();
            let plan = match (&patch.options, &old.options) {
                (Some(entries), Some(labels)) => {
                    Some(plan(labels, entries).map_err(PatchFieldError::Invalid)?)
                }
                (Some(_), None) => {
                    return Err(PatchFieldError::Invalid(vec![
                        crate::domain::FieldError::new(
                            "options",
                            "is only allowed for select fields",
                        ),
                    ]));
                }
                (None, _) => None,
            };
            let rebuild = plan.as_ref().is_some_and(OptionsPlan::needs_rebuild);
            // While an edit's job runs, no other change of the options: a label appended now
            // could be one the job is removing from issues.
            if (plan.is_some() && pending) || (rebuild && !old.sortable) {
                return Err(PatchFieldError::Rebuilding);
            }
            let mut new = old.clone();
            if let Some(name) = &patch.name {
                new.name = name.clone();
            }
            if let Some(plan) = &plan {
                new.options = Some(plan.options.clone());
                new.sortable = new.sortable && !rebuild;
            }
            let Some(project) = self.get_project(tenant, project_id).await? else {
                return Err(PatchFieldError::NotFound);
            };
            let bytes = project.field_bytes.map(|b| {
                (b + new.definition_bytes() as u64).saturating_sub(old.definition_bytes() as u64)
            });
            if bytes.is_some_and(|b| b > MAX_FIELD_DEF_BYTES as u64) {
                return Err(PatchFieldError::DefinitionsTooLarge);
            }
            let rev = project.fields_rev.unwrap_or(0) + 1;
            let changes = plan.as_ref().filter(|_| rebuild).map(|p| &p.changes);
            let items = vec![
                self.field_update(&field_key, &old, &new, changes.map(|c| (c, rev)))?,
                self.definitions_update(tenant, project_id, &project, bytes, rev)?,
            ];
            if self.store.transact(items).await? == Tx::Committed {
                return Ok(new);
            }
        }
        Err(StoreError::Contention(ATTEMPTS).into())
    }

    /// The field's update, conditioned on the definition read (`old`); with `edit`, the
    /// pending edit and its revision, and the field not sortable until its job finishes.
    fn field_update(
        &self,
        field_key: &Item,
        old: &FieldDef,
        new: &FieldDef,
        edit: Option<(&ValueChanges, u64)>,
    ) -> Result<TransactWriteItem, StoreError> {
        let labels = |o: &Option<Vec<String>>| {
            AttributeValue::L(
                o.iter()
                    .flatten()
                    .map(|l| AttributeValue::S(l.clone()))
                    .collect(),
            )
        };
        let mut set = "SET #n = :name, #o = :options".to_string();
        // The definition read; for an edit that starts a job, no edit pending either.
        let mut condition = "attribute_exists(PK) AND #n = :old_name AND \
                             (attribute_not_exists(#o) OR #o = :old_options)"
            .to_string();
        let mut update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(field_key.clone()))
            .expression_attribute_names("#n", "name")
            .expression_attribute_names("#o", "options")
            .expression_attribute_values(":name", AttributeValue::S(new.name.clone()))
            .expression_attribute_values(":old_name", AttributeValue::S(old.name.clone()))
            .expression_attribute_values(":old_options", labels(&old.options));
        if new.options.is_some() {
            update = update.expression_attribute_values(":options", labels(&new.options));
        } else {
            // Not a select field: no options to write (DynamoDB refuses an unused value).
            set = set.replace(", #o = :options", "");
        }
        if let Some((changes, rev)) = edit {
            let json = serde_json::to_string(changes).map_err(build_err)?;
            set.push_str(", #s = :no, #er = :rev, #e = :edit");
            condition.push_str(" AND attribute_not_exists(#er)");
            update = update
                .expression_attribute_names("#er", EDIT_REV)
                .expression_attribute_names("#s", attr::SORTABLE)
                .expression_attribute_names("#e", EDIT)
                .expression_attribute_values(":no", AttributeValue::Bool(false))
                .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()))
                .expression_attribute_values(":edit", AttributeValue::S(json));
        }
        let update = update
            .update_expression(set)
            .condition_expression(condition)
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The project's definition bytes (when it counts them) and `fields_rev`, moved from the
    /// values read: cached definitions read before are stale from here.
    fn definitions_update(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        project: &super::items::ProjectItem,
        bytes: Option<u64>,
        rev: u64,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .expression_attribute_names("#r", attr::FIELDS_REV)
            .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()));
        let mut condition = match project.fields_rev {
            Some(old) => {
                update = update
                    .expression_attribute_values(":old_rev", AttributeValue::N(old.to_string()));
                "#r = :old_rev".to_string()
            }
            None => "attribute_exists(PK) AND attribute_not_exists(#r)".to_string(),
        };
        let set = match (bytes, project.field_bytes) {
            (Some(new), Some(old)) => {
                condition.push_str(" AND #b = :old_bytes");
                update = update
                    .expression_attribute_names("#b", attr::FIELD_BYTES)
                    .expression_attribute_values(":bytes", AttributeValue::N(new.to_string()))
                    .expression_attribute_values(":old_bytes", AttributeValue::N(old.to_string()));
                "SET #r = :rev, #b = :bytes"
            }
            _ => "SET #r = :rev",
        };
        let update = update
            .update_expression(set)
            .condition_expression(condition)
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Every pending edit of the project's fields: the field, the edit's revision, its value
    /// changes.
    #[tracing::instrument(skip_all, fields(op = "pending_edits"))]
    pub async fn pending_edits(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Vec<(FieldId, u64, ValueChanges)>, StoreError> {
        let last_field = keys::records::fields_sk_end();
        let query = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .sk_between(keys::records::FIELD_SK_PREFIX, &last_field)
        .consistent(true);
        let mut out = Vec::new();
        for item in self.store.query_all(query).await? {
            let Some(rev) = item
                .get(EDIT_REV)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let changes = match item.get(EDIT) {
                Some(AttributeValue::S(json)) => serde_json::from_str(json).map_err(build_err)?,
                _ => ValueChanges::default(),
            };
            let field: FieldItem = serde_dynamo::from_item(item)?;
            out.push((field.id, rev, changes));
        }
        Ok(out)
    }

    /// The field whose pending edit is revision `rev`, with its value changes.
    pub async fn pending_edit(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        rev: u64,
    ) -> Result<Option<(FieldId, ValueChanges)>, StoreError> {
        Ok(self
            .pending_edits(tenant, project_id)
            .await?
            .into_iter()
            .find(|(_, at, _)| *at == rev)
            .map(|(field, _, changes)| (field, changes)))
    }

    /// Ends the edit `rev` of a field: sortable again, the edit cleared; `false` when the
    /// field is gone or holds no such edit.
    #[tracing::instrument(skip_all, fields(op = "finish_edit"))]
    pub async fn finish_edit(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        field_id: &FieldId,
        rev: u64,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client()
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::project_pk(tenant, project_id),
                &keys::records::field_sk(field_id),
            )))
            .update_expression("SET #s = :yes REMOVE #er, #e")
            .condition_expression("#er = :rev")
            .expression_attribute_names("#s", attr::SORTABLE)
            .expression_attribute_names("#er", EDIT_REV)
            .expression_attribute_names("#e", EDIT)
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }
}

/// Rewrites of issues' values that a field's deletion or an options edit makes.
impl Records<'_> {
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

    /// Replaces a select field's label `from` on an issue with `to` (or removes it when
    /// `None`), if the issue still holds `from`: an options edit's rewrite, a system change
    /// (a new version, no actor), so a write conditioned on the version read before it fails
    /// rather than bring the old label back. `false` when the issue holds another value.
    #[tracing::instrument(skip_all, fields(op = "replace_select_value"))]
    pub async fn replace_select_value(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        field_id: &FieldId,
        (from, to): (&str, Option<&str>),
        now: &str,
    ) -> Result<bool, StoreError> {
        let update = self
            .update_issue(tenant, issue_id)
            .condition_expression("#fields.#f = :from")
            .expression_attribute_names("#fields", super::items::attr::FIELDS)
            .expression_attribute_names("#f", field_id)
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_names("#by", attr::UPDATED_BY)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_values(":from", AttributeValue::S(from.into()))
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()));
        let update = match to {
            Some(to) => update
                .update_expression("SET #fields.#f = :to, #u = :now REMOVE #by ADD #v :one")
                .expression_attribute_values(":to", AttributeValue::S(to.into())),
            None => update.update_expression("SET #u = :now REMOVE #fields.#f, #by ADD #v :one"),
        };
        condition_held("UpdateItem", update.send().await)
    }
}
