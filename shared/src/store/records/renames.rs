//! Renames of what exists: a project (its item and its place in the by-name list) and a team
//! (its item and its directory entry, in one transaction, so every page shows the new name at
//! once: names are read from the directory when lists are read).

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::directory;
use super::items::key;
use crate::domain::ParticipantKind;
use crate::domain::ids::{ProjectId, TeamId, TenantId};
use crate::keys;
use crate::store::{Records, StoreError, Tx, build_err, condition_held};

impl Records<'_> {
    /// Renames a project and moves it in the tenant's by-name list (GSI1); `false` when
    /// there is no such project.
    #[tracing::instrument(skip_all, fields(op = "rename_project"))]
    pub async fn rename_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        name: &str,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client()
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::project_pk(tenant, project_id),
                keys::records::PROJECT_SK,
            )))
            .update_expression("SET #n = :name, GSI1SK = :by_name")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#n", "name")
            .expression_attribute_values(":name", AttributeValue::S(name.into()))
            .expression_attribute_values(
                ":by_name",
                AttributeValue::S(keys::records::project_gsi1_sk(name, project_id)),
            )
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Renames a team: its item and its directory entry together; `false` when there is no
    /// such team.
    #[tracing::instrument(skip_all, fields(op = "rename_team"))]
    pub async fn rename_team(
        &self,
        tenant: &TenantId,
        team_id: &TeamId,
        name: &str,
    ) -> Result<bool, StoreError> {
        let team = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::team_pk(tenant, team_id),
                keys::records::TEAM_SK,
            )))
            .update_expression("SET #n = :name")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#n", "name")
            .expression_attribute_values(":name", AttributeValue::S(name.into()))
            .build()
            .map_err(build_err)?;
        let entry = directory::entry(tenant, ParticipantKind::Team, team_id.as_str(), name);
        let items = vec![
            TransactWriteItem::builder().update(team).build(),
            TransactWriteItem::builder()
                .put(self.store.put_in_tx(entry, None)?)
                .build(),
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }
}
