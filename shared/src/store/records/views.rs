//! Saved views' definitions: one item each in its project's collection (sort key `V#{own}`),
//! counted on the project for the bound of 50. Every write that changes what the index
//! derives from a view (a new view, a change of shape, a delete) advances the project's
//! `fields_rev`, as a field change does, so an indexer holding older definitions reads them
//! again before it undoes what the view's job wrote.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::items::{attr, key, project_key};
use crate::domain::IssueState;
use crate::domain::ids::{ProjectId, TenantId, ViewId};
use crate::domain::values::FieldDef;
use crate::keys::{self, records::entity};
use crate::model::view::{IndexedView, MAX_VIEWS_PER_PROJECT, ViewSpec};
use crate::store::query::Query;
use crate::store::{Item, Records, StoreError, Tx, build_err, condition_held};

/// A view as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    pub entity: String,
    pub id: ViewId,
    pub project_id: ProjectId,
    pub name: String,
    /// The `where` array as given.
    #[serde(rename = "where")]
    pub filter: String,
    pub sort: String,
    pub descending: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<IssueState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_by: Option<String>,
    /// The shape's revision: a change of shape advances it (the index builds a list per
    /// shape, and the view's cursors are bound to it).
    pub rev: u64,
    /// Whether the index holds the list of this shape whole.
    pub ready: bool,
    /// Advanced by every write of the item: a patch is conditioned on the one it read.
    pub ver: u64,
    pub created_at: String,
}

impl ViewItem {
    pub fn spec(&self) -> ViewSpec {
        ViewSpec {
            name: self.name.clone(),
            filter: self.filter.clone(),
            sort: self.sort.clone(),
            descending: self.descending,
            state: self.state,
            group_by: self.group_by.clone(),
        }
    }

    fn of(tenant: &TenantId, id: &ViewId, spec: &ViewSpec, created_at: &str) -> Self {
        Self {
            pk: keys::records::project_pk(tenant, &id.project()),
            sk: keys::records::view_sk(id),
            entity: entity::VIEW.into(),
            id: id.clone(),
            project_id: id.project(),
            name: spec.name.clone(),
            filter: spec.filter.clone(),
            sort: spec.sort.clone(),
            descending: spec.descending,
            state: spec.state,
            group_by: spec.group_by.clone(),
            rev: 1,
            ready: false,
            ver: 1,
            created_at: created_at.to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ViewWriteError {
    #[error("not found")]
    NotFound,
    #[error("the project already has {MAX_VIEWS_PER_PROJECT} views")]
    TooManyViews,
    #[error("the view changed meanwhile")]
    Changed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a project's `hot_fill` holds when its views changed: the stream passes the project's
/// record, and the job it starts re-indexes the project for them (as for a column just made
/// hot), then marks ready the views it built.
pub const VIEWS_FILL: &str = "~views";

/// The project's count of views and `fields_rev` moved by `by` (±1, or 0 for `fields_rev`
/// alone), and its `hot_fill` set to [`VIEWS_FILL`]; conditioned on the project existing
/// (and, adding, on room for one more).
fn project_update(
    table: &str,
    tenant: &TenantId,
    project_id: &ProjectId,
    (by, empty): (i64, bool),
) -> Result<Update, StoreError> {
    let mut condition = "attribute_exists(PK)".to_string();
    if empty {
        // A view of a project that never had an issue is ready at once: so long as none
        // came in meanwhile.
        condition.push_str(" AND attribute_not_exists(next_num)");
    }
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(project_key(tenant, project_id)))
        .expression_attribute_names("#r", attr::FIELDS_REV)
        .expression_attribute_names("#c", attr::VIEW_COUNT)
        .expression_attribute_names("#fill", attr::HOT_FILL)
        .expression_attribute_values(":fill", AttributeValue::S(VIEWS_FILL.into()))
        .expression_attribute_values(":zero", AttributeValue::N("0".into()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":by", AttributeValue::N(by.to_string()));
    if by > 0 {
        condition.push_str(" AND (attribute_not_exists(#c) OR #c < :max)");
        update = update.expression_attribute_values(
            ":max",
            AttributeValue::N(MAX_VIEWS_PER_PROJECT.to_string()),
        );
    }
    update
        .update_expression(
            "SET #r = if_not_exists(#r, :zero) + :one, #c = if_not_exists(#c, :zero) + :by, \
             #fill = :fill",
        )
        .condition_expression(condition)
        .build()
        .map_err(build_err)
}

impl Records<'_> {
    /// Creates a view of `id`'s project, `ready` at once when the project never had an issue
    /// (else when its job has built the list); the project's count goes up in the same
    /// transaction, bounded to [`MAX_VIEWS_PER_PROJECT`].
    #[tracing::instrument(skip_all, fields(op = "create_view"))]
    pub async fn create_view(
        &self,
        tenant: &TenantId,
        id: &ViewId,
        spec: &ViewSpec,
        created_at: &str,
    ) -> Result<ViewItem, ViewWriteError> {
        let Some(project) = self.get_project(tenant, &id.project()).await? else {
            return Err(ViewWriteError::NotFound);
        };
        let mut empty = project.next_num.is_none();
        // At most twice: the second time only if the project's first issue came in between.
        for _ in 0..2 {
            let mut item = ViewItem::of(tenant, id, spec, created_at);
            item.ready = empty;
            let put = Put::builder()
                .table_name(&self.store.records)
                .set_item(Some(
                    serde_dynamo::to_item(&item).map_err(StoreError::from)?,
                ))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(build_err)?;
            let count = project_update(&self.store.records, tenant, &id.project(), (1, empty))?;
            let tx = self
                .store
                .transact(vec![
                    TransactWriteItem::builder().update(count).build(),
                    TransactWriteItem::builder().put(put).build(),
                ])
                .await?;
            if let Tx::Committed = tx {
                return Ok(item);
            }
            match self.get_project(tenant, &id.project()).await? {
                None => return Err(ViewWriteError::NotFound),
                Some(p) if p.view_count.unwrap_or(0) >= MAX_VIEWS_PER_PROJECT as u64 => {
                    return Err(ViewWriteError::TooManyViews);
                }
                Some(_) => empty = false,
            }
        }
        Err(ViewWriteError::Store(StoreError::Contention(2)))
    }

    /// A view, strongly consistent.
    pub async fn get_view(
        &self,
        tenant: &TenantId,
        id: &ViewId,
    ) -> Result<Option<ViewItem>, StoreError> {
        let at = key(
            keys::records::project_pk(tenant, &id.project()),
            &keys::records::view_sk(id),
        );
        self.store
            .get_item(&self.store.records, at)
            .await?
            .map(serde_dynamo::from_item)
            .transpose()
            .map_err(StoreError::from)
    }

    /// The project's views (at most 50: one Query), in id order.
    pub async fn list_views(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Vec<ViewItem>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .sk_begins_with(keys::records::VIEW_SK_PREFIX)
        .consistent(true);
        self.store
            .query_all(query)
            .await?
            .into_iter()
            .map(|item| serde_dynamo::from_item(item).map_err(StoreError::from))
            .collect()
    }

    /// Replaces a view's definition with `next` (read as `read`): a change of shape advances
    /// its revision, and it is not `ready` until its list is rebuilt. Conditioned on the item
    /// being the one read ([`ViewWriteError::Changed`] otherwise).
    #[tracing::instrument(skip_all, fields(op = "replace_view"))]
    pub async fn replace_view(
        &self,
        tenant: &TenantId,
        read: &ViewItem,
        (next, reshaped): (&ViewSpec, bool),
    ) -> Result<ViewItem, ViewWriteError> {
        let empty = match self.get_project(tenant, &read.project_id).await? {
            Some(p) => reshaped && p.next_num.is_none(),
            None => return Err(ViewWriteError::NotFound),
        };
        let mut item = ViewItem::of(tenant, &read.id, next, &read.created_at);
        item.ver = read.ver + 1;
        item.rev = read.rev + u64::from(reshaped);
        item.ready = (read.ready && !reshaped) || empty;
        let put = Put::builder()
            .table_name(&self.store.records)
            .set_item(Some(
                serde_dynamo::to_item(&item).map_err(StoreError::from)?,
            ))
            .condition_expression("attribute_exists(PK) AND ver = :ver")
            .expression_attribute_values(":ver", AttributeValue::N(read.ver.to_string()))
            .build()
            .map_err(build_err)?;
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        if reshaped {
            let rev = project_update(&self.store.records, tenant, &read.project_id, (0, empty))?;
            items.push(TransactWriteItem::builder().update(rev).build());
        }
        match self.store.transact(items).await? {
            Tx::Committed => Ok(item),
            Tx::ConditionFailed => match self.get_view(tenant, &read.id).await? {
                None => Err(ViewWriteError::NotFound),
                Some(_) => Err(ViewWriteError::Changed),
            },
        }
    }

    /// Deletes a view; the project's count goes down in the same transaction. `NotFound`
    /// when there is none.
    #[tracing::instrument(skip_all, fields(op = "delete_view"))]
    pub async fn delete_view(&self, tenant: &TenantId, id: &ViewId) -> Result<(), ViewWriteError> {
        let delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::project_pk(tenant, &id.project()),
                &keys::records::view_sk(id),
            )))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        let count = project_update(&self.store.records, tenant, &id.project(), (-1, false))?;
        let tx = self
            .store
            .transact(vec![
                TransactWriteItem::builder().delete(delete).build(),
                TransactWriteItem::builder().update(count).build(),
            ])
            .await?;
        match tx {
            Tx::Committed => Ok(()),
            Tx::ConditionFailed => Err(ViewWriteError::NotFound),
        }
    }

    /// Marks a view's list of shape `rev` complete; `false` when the view is gone or has
    /// another shape by now.
    pub async fn mark_view_ready(
        &self,
        tenant: &TenantId,
        id: &ViewId,
        rev: u64,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::project_pk(tenant, &id.project()),
                &keys::records::view_sk(id),
            )))
            .update_expression("SET ready = :yes, ver = ver + :one")
            .condition_expression("attribute_exists(PK) AND rev = :rev")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }
}

/// The views the index keeps lists of: every one whose definition holds under the project's
/// fields (one that names a field deleted a moment ago is being deleted with it).
pub fn indexed_views(items: &[ViewItem], defs: &[FieldDef]) -> Vec<IndexedView> {
    items
        .iter()
        .filter_map(|item| {
            let checked = item.spec().check(defs).ok()?;
            Some(IndexedView {
                id: item.id.to_string(),
                rev: item.rev,
                state: item.state,
                checked,
            })
        })
        .collect()
}

/// Whether an item of a project's collection is a view's.
pub(crate) fn is_view_item(item: &Item) -> bool {
    super::items::sk_of(item).is_some_and(|sk| sk.starts_with(keys::records::VIEW_SK_PREFIX))
}
