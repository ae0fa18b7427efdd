//! Projects and their field definitions: one item collection per project.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};

use super::items::{FieldItem, ProjectItem, attr, key, project_key, sk_of};
use super::views::ViewItem;
use crate::cursor::Position;
use crate::domain::ids::{FieldId, ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::domain::{MAX_FIELD_DEF_BYTES, MAX_FIELDS_PER_PROJECT, Project};
use crate::keys;
use crate::store::Records;
use crate::store::query::Query;
use crate::store::{Item, Page, StoreError, Tx, build_err, condition_held};

/// A project with its field definitions and its saved views.
pub type ProjectDefinitions = (ProjectItem, Vec<FieldDef>, Vec<ViewItem>);

#[derive(Debug, thiserror::Error)]
pub enum CreateFieldError {
    #[error("project not found")]
    ProjectNotFound,
    #[error("the project already has the maximum number of fields")]
    TooManyFields,
    #[error("the project's field definitions would pass their byte limit")]
    DefinitionsTooLarge,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Records<'_> {
    #[tracing::instrument(skip_all, fields(op = "create_project"))]
    pub async fn create_project(
        &self,
        tenant: &TenantId,
        project: &Project,
    ) -> Result<(), StoreError> {
        self.store
            .put_new(serde_dynamo::to_item(ProjectItem::new(tenant, project))?)
            .await
    }

    /// A tenant's projects, by name (case-insensitive), a page at a time; each with the
    /// position that resumes after it.
    #[tracing::instrument(skip_all, fields(op = "list_projects"))]
    pub async fn list_projects(
        &self,
        tenant: &TenantId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(Project, Position)>, StoreError> {
        let query = Query::gsi1(&self.store.records, keys::records::projects_gsi1_pk(tenant))
            .limit(Some(limit))
            .after(start);
        self.store
            .query_keyed(query, |p: ProjectItem| p.project())
            .await
    }

    /// The project item alone (strongly consistent).
    #[tracing::instrument(skip_all, fields(op = "get_project"))]
    pub async fn get_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Option<ProjectItem>, StoreError> {
        self.store
            .get_item(&self.store.records, project_key(tenant, project_id))
            .await?
            .map(serde_dynamo::from_item)
            .transpose()
            .map_err(StoreError::from)
    }

    /// The project and all its field definitions, strongly consistent: one Query of the
    /// collection (at most 64 KB of definitions, so about 30 RCU at 400 fields).
    pub async fn project_with_fields(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Option<(ProjectItem, Vec<FieldDef>)>, StoreError> {
        self.project_with_fields_read(tenant, project_id, true)
            .await
    }

    /// The project and its field definitions; `consistent: false` costs half and may miss a
    /// change of the last second. Callers say where that is allowed (the grid, which is
    /// eventually fresh anyway; the first validation of a write, retried consistently before
    /// it refuses an unknown field).
    #[tracing::instrument(skip_all, fields(op = "project_with_fields", consistent))]
    pub async fn project_with_fields_read(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        consistent: bool,
    ) -> Result<Option<(ProjectItem, Vec<FieldDef>)>, StoreError> {
        // The project and its fields sort before its views (`#`, `F#` < `V#`): they are left
        // out of the key range, and so of the read units.
        let last_field = keys::records::fields_sk_end();
        let query = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .sk_between(keys::records::PROJECT_SK, &last_field)
        .consistent(consistent);
        let read = self.project_items(query).await?;
        Ok(read.map(|(p, fields, _)| (p, fields)))
    }

    /// The project, its fields and its views, strongly consistent, in one Query: what the
    /// indexer derives an issue's entries from.
    #[tracing::instrument(skip_all, fields(op = "project_definitions"))]
    pub async fn project_definitions(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Option<ProjectDefinitions>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .consistent(true);
        self.project_items(query).await
    }

    async fn project_items(
        &self,
        query: Query<'_>,
    ) -> Result<Option<ProjectDefinitions>, StoreError> {
        let mut project = None;
        let (mut fields, mut views) = (Vec::new(), Vec::new());
        for item in self.store.query_all(query).await? {
            if sk_of(&item) == Some(keys::records::PROJECT_SK) {
                project = Some(serde_dynamo::from_item::<_, ProjectItem>(item)?);
            } else if super::views::is_view_item(&item) {
                views.push(serde_dynamo::from_item::<_, ViewItem>(item)?);
            } else {
                fields.push(serde_dynamo::from_item::<_, FieldItem>(item)?.def());
            }
        }
        Ok(project.map(|p| (p, fields, views)))
    }

    /// Field definitions of a project, in creation order (ids are ULIDs), a page at a time;
    /// each with the position that resumes after it.
    #[tracing::instrument(skip_all, fields(op = "list_fields"))]
    pub async fn list_fields(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<Page<(FieldDef, Position)>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .sk_begins_with(keys::records::FIELD_SK_PREFIX)
        .limit(Some(limit))
        .after(start);
        self.store.query_keyed(query, FieldItem::def).await
    }

    /// Adds a field and counts it (and its definition's bytes) on the project in one
    /// transaction, so both caps hold under concurrent creates. Returns the definition as
    /// stored: `sortable` at once when the project has never had an issue (the transaction
    /// holds that condition, so every issue comes after the field and is indexed with it),
    /// otherwise `false` until the field job has indexed the project's issues.
    #[tracing::instrument(skip_all, fields(op = "create_field"))]
    pub async fn create_field(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        def: &FieldDef,
    ) -> Result<FieldDef, CreateFieldError> {
        let Some(project) = self.get_project(tenant, project_id).await? else {
            return Err(CreateFieldError::ProjectNotFound);
        };
        let mut def = FieldDef {
            sortable: project.next_num.is_none(),
            ..def.clone()
        };
        // At most twice: the second time only if the project's first issue came in between.
        for _ in 0..2 {
            let tx = self
                .store
                .transact(self.field_create_items(tenant, project_id, &def)?)
                .await?;
            if let Tx::Committed = tx {
                return Ok(def);
            }
            // The put's condition cannot fail (a new id), so the count's did: the project is
            // gone, has all its fields, has no room for these bytes, or has had its first
            // issue; one read tells which.
            match self.get_project(tenant, project_id).await? {
                None => return Err(CreateFieldError::ProjectNotFound),
                Some(p) if p.field_count.unwrap_or(0) >= MAX_FIELDS_PER_PROJECT as u64 => {
                    return Err(CreateFieldError::TooManyFields);
                }
                Some(p) if def.sortable && p.next_num.is_some() => def.sortable = false,
                Some(_) => return Err(CreateFieldError::DefinitionsTooLarge),
            }
        }
        Err(CreateFieldError::Store(StoreError::Contention(2)))
    }

    /// The transaction adding `def`: the project's count and bytes (conditioned on both caps,
    /// and on no issue yet when `def` is created sortable) and the definition.
    fn field_create_items(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        def: &FieldDef,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let bytes = def.definition_bytes();
        // Validation bounds a definition to 128 + 100 × 100 bytes, far under the cap.
        let room = MAX_FIELD_DEF_BYTES.saturating_sub(bytes);
        let mut condition = "attribute_exists(PK) AND (attribute_not_exists(#c) OR #c < :max) \
                             AND (attribute_not_exists(#b) OR #b <= :room)"
            .to_string();
        let mut count = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .update_expression(
                "SET #c = if_not_exists(#c, :zero) + :one, #b = if_not_exists(#b, :zero) + :bytes, \
                 #r = if_not_exists(#r, :zero) + :one",
            )
            .expression_attribute_names("#c", attr::FIELD_COUNT)
            .expression_attribute_names("#r", attr::FIELDS_REV)
            .expression_attribute_names("#b", attr::FIELD_BYTES)
            .expression_attribute_values(":bytes", AttributeValue::N(bytes.to_string()))
            .expression_attribute_values(":room", AttributeValue::N(room.to_string()))
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(
                ":max",
                AttributeValue::N(MAX_FIELDS_PER_PROJECT.to_string()),
            );
        if def.sortable {
            condition.push_str(" AND attribute_not_exists(#n)");
            count = count.expression_attribute_names("#n", attr::NEXT_NUM);
        }
        let count = count
            .condition_expression(condition)
            .build()
            .map_err(build_err)?;
        let item: Item = serde_dynamo::to_item(FieldItem::new(tenant, project_id, def))?;
        let put = self
            .store
            .put_in_tx(item, Some("attribute_not_exists(PK)"))?;
        Ok(vec![
            TransactWriteItem::builder().update(count).build(),
            TransactWriteItem::builder().put(put).build(),
        ])
    }

    /// Marks a field sortable (its column is complete); `false` if the field is gone, or is
    /// held by a pending options edit.
    #[tracing::instrument(skip_all, fields(op = "mark_sortable"))]
    pub async fn mark_sortable(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        field_id: &FieldId,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::project_pk(tenant, project_id),
                &keys::records::field_sk(field_id),
            )))
            .update_expression("SET #s = :yes")
            // A field whose options are being edited is its own job's to mark.
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(#er)")
            .expression_attribute_names("#s", attr::SORTABLE)
            .expression_attribute_names("#er", super::field_edit::EDIT_REV)
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Makes a column hot (see `attr::HOT`) and advances `fields_rev`, so an indexer holding
    /// the project's record from before reads it again where the fill job has indexed an
    /// issue since (as after a field change). `false` when it already was (or the project is
    /// gone): at most one write per column, whoever sorts by it.
    #[tracing::instrument(skip_all, fields(op = "mark_hot"))]
    pub async fn mark_hot(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        column: &str,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .update_expression("ADD #hot :column, #rev :one SET #fill = :name")
            .condition_expression("attribute_exists(PK) AND NOT contains(#hot, :name)")
            .expression_attribute_names("#hot", attr::HOT)
            .expression_attribute_names("#fill", attr::HOT_FILL)
            .expression_attribute_names("#rev", attr::FIELDS_REV)
            .expression_attribute_values(":column", AttributeValue::Ss(vec![column.into()]))
            .expression_attribute_values(":name", AttributeValue::S(column.into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Clears the column waiting for its fill (its job has begun), so the project's later
    /// records no longer pass the stream filter.
    #[tracing::instrument(skip_all, fields(op = "clear_hot_fill"))]
    pub async fn clear_hot_fill(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .update_expression("REMOVE #fill")
            .condition_expression("attribute_exists(#fill)")
            .expression_attribute_names("#fill", attr::HOT_FILL)
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Moves a project's shard layouts from `from` to `to`, each `(read, also)` (see
    /// `attr::SHARDS` and `attr::SHARDS_ALSO`; a read count of 1 also matches an absent
    /// one), and advances `fields_rev`: an indexer holding the layouts it read before reads
    /// them again where an issue was indexed since (as after a field change). `run` names the
    /// reshard (`attr::RESHARD_RUN`): the first move records it, every later one requires
    /// it, the last removes it. `false` when the project is not at `from` under `run` (another
    /// reshard moved it, or it is gone).
    #[tracing::instrument(skip_all, fields(op = "move_shards"))]
    pub async fn move_shards(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        from: (u16, Option<u16>),
        to: (u16, Option<u16>),
        run: &str,
    ) -> Result<bool, StoreError> {
        let n = |v: u16| AttributeValue::N(v.to_string());
        let mut condition = String::from("attribute_exists(PK) AND ");
        condition.push_str(if from.0 == 1 {
            "(attribute_not_exists(#r) OR #r = :from_r)"
        } else {
            "#r = :from_r"
        });
        condition.push_str(match from.1 {
            Some(_) => " AND #a = :from_a AND #run = :run",
            None => " AND attribute_not_exists(#a)",
        });
        let update = match to.1 {
            Some(_) => "SET #r = :to_r, #a = :to_a, #run = :run ADD #rev :one",
            None => "SET #r = :to_r REMOVE #a, #run ADD #rev :one",
        };
        // `:run` is named only where the expressions use it (DynamoDB refuses unused values).
        let names_run = from.1.is_some() || to.1.is_some();
        let mut request = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names("#r", attr::SHARDS)
            .expression_attribute_names("#a", attr::SHARDS_ALSO)
            .expression_attribute_names("#rev", attr::FIELDS_REV)
            .expression_attribute_names("#run", attr::RESHARD_RUN)
            .expression_attribute_values(":from_r", n(from.0))
            .expression_attribute_values(":to_r", n(to.0))
            .expression_attribute_values(":one", n(1));
        if let Some(a) = from.1 {
            request = request.expression_attribute_values(":from_a", n(a));
        }
        if let Some(a) = to.1 {
            request = request.expression_attribute_values(":to_a", n(a));
        }
        if names_run {
            request = request.expression_attribute_values(":run", AttributeValue::S(run.into()));
        }
        condition_held("UpdateItem", request.send().await)
    }

    /// Deletes a field definition and gives its bytes back; `false` if there was none. A
    /// definition never changes, so its size is read first; of two concurrent deletes only one
    /// finds the field in its transaction. Values left on issues are hidden from every read at
    /// once (reads keep only values of defined fields).
    #[tracing::instrument(skip_all, fields(op = "delete_field"))]
    pub async fn delete_field(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        field_id: &FieldId,
    ) -> Result<bool, StoreError> {
        let pk = keys::records::project_pk(tenant, project_id);
        let Some(field) = self
            .store
            .get_item(
                &self.store.records,
                key(pk.clone(), &keys::records::field_sk(field_id)),
            )
            .await?
        else {
            return Ok(false);
        };
        let bytes = serde_dynamo::from_item::<_, FieldItem>(field)?
            .def()
            .definition_bytes();
        // The byte count is moved from the value read, conditioned on it: a project from
        // before the count has none and keeps none (its fields were never counted, so taking
        // them off would drive the count below zero).
        for _ in 0..5 {
            let Some(project) = self.get_project(tenant, project_id).await? else {
                return Ok(false);
            };
            let items = self.field_delete_items(&pk, field_id, project.field_bytes, bytes)?;
            let tx = self.store.transact(items).await?;
            if tx == Tx::Committed {
                return Ok(true);
            }
            // Cancelled: the field is gone, or the count moved under us (read it again).
            if self
                .store
                .get_item(
                    &self.store.records,
                    key(pk.clone(), &keys::records::field_sk(field_id)),
                )
                .await?
                .is_none()
            {
                return Ok(false);
            }
        }
        Err(StoreError::Contention(5))
    }

    /// The transaction deleting a field of `bytes` bytes: the definition (if it is still
    /// there) and the project's count and bytes, conditioned on the bytes read
    /// (`field_bytes`).
    fn field_delete_items(
        &self,
        pk: &str,
        field_id: &FieldId,
        field_bytes: Option<u64>,
        bytes: usize,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                pk.to_string(),
                &keys::records::field_sk(field_id),
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let count = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(pk.to_string(), keys::records::PROJECT_SK)))
            .expression_attribute_names("#c", attr::FIELD_COUNT)
            .expression_attribute_names("#b", attr::FIELD_BYTES)
            .expression_attribute_names("#r", attr::FIELDS_REV)
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":zero", AttributeValue::N("0".into()));
        // The revision moves on a delete too: definitions read before it are stale.
        let count = match field_bytes {
            Some(old) => count
                .update_expression(
                    "SET #c = #c - :one, #b = :new, #r = if_not_exists(#r, :zero) + :one",
                )
                .condition_expression("attribute_exists(#c) AND #b = :old")
                .expression_attribute_values(":old", AttributeValue::N(old.to_string()))
                .expression_attribute_values(
                    ":new",
                    AttributeValue::N(old.saturating_sub(bytes as u64).to_string()),
                ),
            None => count
                .update_expression("SET #c = #c - :one, #r = if_not_exists(#r, :zero) + :one")
                .condition_expression("attribute_exists(#c) AND attribute_not_exists(#b)"),
        };
        Ok(vec![
            TransactWriteItem::builder().delete(delete).build(),
            TransactWriteItem::builder()
                .update(count.build().map_err(build_err)?)
                .build(),
        ])
    }
}
