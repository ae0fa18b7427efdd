//! Issues: the summary item, the description item, and the per-project number counter.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use rand::Rng;

use super::items::{
    attr, description_item, fields_attr, issue_from, issue_item, key, sk_of, value_to_attr,
};
use super::{Store, StoreError, Tx, build_err, condition_held, sdk};
use crate::domain::{Issue, IssuePatch, NewIssue};
use crate::keys;

/// How many times a create retries when concurrent creates took the number it tried.
const MAX_CREATE_ATTEMPTS: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum CreateIssueError {
    #[error("project not found")]
    ProjectNotFound,
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
}

impl Store {
    /// Creates an issue with the project's next number. The counter update and the issue's
    /// items are one transaction conditioned on the counter's previous value, so numbers are
    /// unique and gap-free: a create that loses a race re-reads the counter and tries again.
    #[tracing::instrument(skip_all, fields(op = "create_issue"))]
    pub async fn create_issue(
        &self,
        tenant: &str,
        project_id: &str,
        mut last_num: u64,
        new: NewIssue,
        id: String,
        now: String,
    ) -> Result<Issue, CreateIssueError> {
        let project_key = key(keys::project_pk(tenant, project_id), keys::PROJECT_SK);
        for attempt in 0..MAX_CREATE_ATTEMPTS {
            let num = last_num + 1;
            let issue = Issue {
                id: id.clone(),
                project_id: project_id.to_string(),
                num,
                title: new.title.clone(),
                state: new.state,
                description: new.description.clone(),
                fields: new.fields.clone(),
                participants: new.participants.clone(),
                version: 1,
                created_at: now.clone(),
                updated_at: now.clone(),
            };
            let mut counter = Update::builder()
                .table_name(&self.records)
                .set_key(Some(project_key.clone()))
                .update_expression("SET #n = :num")
                .expression_attribute_names("#n", attr::NEXT_NUM)
                .expression_attribute_values(":num", AttributeValue::N(num.to_string()));
            counter = if last_num == 0 {
                counter.condition_expression("attribute_exists(PK) AND attribute_not_exists(#n)")
            } else {
                counter
                    .condition_expression("#n = :last")
                    .expression_attribute_values(":last", AttributeValue::N(last_num.to_string()))
            };
            let put = Put::builder()
                .table_name(&self.records)
                .set_item(Some(issue_item(tenant, &issue)?))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(build_err)?;
            let mut items = vec![
                TransactWriteItem::builder()
                    .update(counter.build().map_err(build_err)?)
                    .build(),
                TransactWriteItem::builder().put(put).build(),
            ];
            if let Some(text) = &issue.description {
                let put = Put::builder()
                    .table_name(&self.records)
                    .set_item(Some(description_item(tenant, &issue.id, text)))
                    .build()
                    .map_err(build_err)?;
                items.push(TransactWriteItem::builder().put(put).build());
            }
            if let Tx::Committed = self.transact(items).await? {
                return Ok(issue);
            }
            // Another create took this number (or conflicted): read the counter and go again.
            tracing::debug!(attempt, "issue number taken, retrying");
            let project = self
                .get_project(tenant, project_id)
                .await?
                .ok_or(CreateIssueError::ProjectNotFound)?;
            last_num = project.next_num.unwrap_or(0);
            let pause = rand::thread_rng().gen_range(1..=(5 + u64::from(attempt.min(20)) * 2));
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        Err(StoreError::Contention(MAX_CREATE_ATTEMPTS).into())
    }

    /// An issue with its description: one strongly consistent Query of its partition.
    #[tracing::instrument(skip_all, fields(op = "get_issue"))]
    pub async fn get_issue(
        &self,
        tenant: &str,
        issue_id: &str,
    ) -> Result<Option<Issue>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.records)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(keys::issue_pk(tenant, issue_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk("Query"))?;
        let mut summary = None;
        let mut description = None;
        for item in out.items.unwrap_or_default() {
            match sk_of(&item) {
                Some(keys::ISSUE_SK) => summary = Some(item),
                Some(keys::DESCRIPTION_SK) => description = Some(item),
                _ => {}
            }
        }
        summary
            .map(|s| issue_from(s, description.as_ref()))
            .transpose()
    }

    /// Applies a validated patch as one atomic update of only the members it names, so
    /// concurrent patches to different members both survive. With `expected_version`, the
    /// update is conditioned on it and a stale version writes nothing.
    #[tracing::instrument(skip_all, fields(op = "patch_issue"))]
    pub async fn patch_issue(
        &self,
        tenant: &str,
        issue_id: &str,
        patch: &IssuePatch,
        expected_version: Option<u64>,
        now: &str,
    ) -> Result<PatchOutcome, StoreError> {
        let pk = keys::issue_pk(tenant, issue_id);
        let mut update = Update::builder()
            .table_name(&self.records)
            .set_key(Some(key(pk.clone(), keys::ISSUE_SK)))
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()));
        let mut sets = vec!["#u = :now".to_string()];
        let mut removes = Vec::new();
        if let Some(title) = &patch.title {
            sets.push("#title = :title".into());
            update = update
                .expression_attribute_names("#title", attr::TITLE)
                .expression_attribute_values(":title", AttributeValue::S(title.clone()));
        }
        if let Some(state) = patch.state {
            sets.push("#state = :state".into());
            update = update
                .expression_attribute_names("#state", attr::STATE)
                .expression_attribute_values(":state", AttributeValue::S(state.as_str().into()));
        }
        if patch.clear_fields || !patch.set_fields.is_empty() || !patch.remove_fields.is_empty() {
            update = update.expression_attribute_names("#fields", attr::FIELDS);
        }
        if patch.clear_fields {
            // The whole map is replaced; paths inside it cannot be set in the same expression.
            sets.push("#fields = :fields".into());
            update = update.expression_attribute_values(":fields", fields_attr(&patch.set_fields));
        } else {
            for (i, (id, value)) in patch.set_fields.iter().enumerate() {
                sets.push(format!("#fields.#s{i} = :s{i}"));
                update = update
                    .expression_attribute_names(format!("#s{i}"), id)
                    .expression_attribute_values(format!(":s{i}"), value_to_attr(value));
            }
            for (i, id) in patch.remove_fields.iter().enumerate() {
                removes.push(format!("#fields.#r{i}"));
                update = update.expression_attribute_names(format!("#r{i}"), id);
            }
        }
        let mut expression = format!("SET {}", sets.join(", "));
        if !removes.is_empty() {
            expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
        }
        expression.push_str(" ADD #v :one");
        update = update.update_expression(expression);
        update = match expected_version {
            Some(v) => update
                .condition_expression("attribute_exists(PK) AND #v = :expected")
                .expression_attribute_values(":expected", AttributeValue::N(v.to_string())),
            None => update.condition_expression("attribute_exists(PK)"),
        };
        let update = update.build().map_err(build_err)?;

        let mut items = vec![TransactWriteItem::builder().update(update).build()];
        match &patch.description {
            Some(Some(text)) => {
                let put = Put::builder()
                    .table_name(&self.records)
                    .set_item(Some(description_item(tenant, issue_id, text)))
                    .build()
                    .map_err(build_err)?;
                items.push(TransactWriteItem::builder().put(put).build());
            }
            Some(None) => {
                let delete = Delete::builder()
                    .table_name(&self.records)
                    .set_key(Some(key(pk, keys::DESCRIPTION_SK)))
                    .build()
                    .map_err(build_err)?;
                items.push(TransactWriteItem::builder().delete(delete).build());
            }
            None => {}
        }
        match self.transact(items).await? {
            Tx::Committed => Ok(PatchOutcome::Updated),
            // Only the issue's update has a condition: it is gone, or its version moved on.
            Tx::ConditionFailed => Ok(match self.get_issue(tenant, issue_id).await? {
                None => PatchOutcome::NotFound,
                Some(_) => PatchOutcome::VersionMismatch,
            }),
        }
    }

    /// Deletes an issue and its description; `false` if there was no issue.
    #[tracing::instrument(skip_all, fields(op = "delete_issue"))]
    pub async fn delete_issue(&self, tenant: &str, issue_id: &str) -> Result<bool, StoreError> {
        let pk = keys::issue_pk(tenant, issue_id);
        let summary = Delete::builder()
            .table_name(&self.records)
            .set_key(Some(key(pk.clone(), keys::ISSUE_SK)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let description = Delete::builder()
            .table_name(&self.records)
            .set_key(Some(key(pk, keys::DESCRIPTION_SK)))
            .build()
            .map_err(build_err)?;
        let tx = self
            .transact(vec![
                TransactWriteItem::builder().delete(summary).build(),
                TransactWriteItem::builder().delete(description).build(),
            ])
            .await?;
        // Only the summary's delete has a condition: cancelled means there was no issue.
        Ok(matches!(tx, Tx::Committed))
    }

    /// Adds a participant or changes their role: one UpdateItem (`ADD` to the edge set, `SET`
    /// in the roles map), no read. It is an issue change: version and `updated_at` move.
    /// `false` when there is no such issue.
    #[tracing::instrument(skip_all, fields(op = "put_participant"))]
    pub async fn put_participant(
        &self,
        tenant: &str,
        issue_id: &str,
        p: &crate::domain::Participant,
        now: &str,
    ) -> Result<bool, StoreError> {
        let edge = keys::participant_edge(p.kind.as_str(), &p.id);
        let result = self
            .client
            .update_item()
            .table_name(&self.records)
            .set_key(Some(key(keys::issue_pk(tenant, issue_id), keys::ISSUE_SK)))
            .update_expression("ADD #p :edge, #v :one SET #r.#e = :role, #u = :now")
            .condition_expression("attribute_exists(PK)")
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
        condition_held("UpdateItem", result)
    }

    /// Removes a participant: one UpdateItem, conditioned on them being one. `false` when the
    /// issue does not exist or they are not a participant.
    #[tracing::instrument(skip_all, fields(op = "delete_participant"))]
    pub async fn delete_participant(
        &self,
        tenant: &str,
        issue_id: &str,
        kind: crate::domain::ParticipantKind,
        id: &str,
        now: &str,
    ) -> Result<bool, StoreError> {
        let edge = keys::participant_edge(kind.as_str(), id);
        let result = self
            .client
            .update_item()
            .table_name(&self.records)
            .set_key(Some(key(keys::issue_pk(tenant, issue_id), keys::ISSUE_SK)))
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
