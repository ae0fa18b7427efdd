//! Deleting a project. The request deletes the project's item (the project is `404` at once
//! on its routes, and gone from the by-name list); its removal reaches the indexer through the
//! stream, which starts a purge job (`JobKind::Purge`): page after page it deletes the
//! project's issues as `DELETE /issues/{id}` does (the indexer then removes each one's entries,
//! comments and history, and its relations from other projects' issues as system changes),
//! then the rest of the project's records (fields, views, tree) and index items (view counts,
//! job checkpoints, its own last). Every step is idempotent, so a message delivered twice, or
//! a run cut short, converges on nothing left.

use super::comments::key_only;
use super::items::{key, project_key};
use crate::cursor::Position;
use crate::domain::ids::{ProjectId, TenantId};
use crate::keys;
use crate::store::query::Query;
use crate::store::{Page, Records, StoreError, condition_held};

impl Records<'_> {
    /// Deletes the project's item; `false` when there is no such project.
    #[tracing::instrument(skip_all, fields(op = "delete_project"))]
    pub async fn delete_project(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client()
            .delete_item()
            .table_name(&self.store.records)
            .set_key(Some(project_key(tenant, project_id)))
            .condition_expression("attribute_exists(PK)")
            .send()
            .await;
        condition_held("DeleteItem", result)
    }

    /// One page of a deleted project's issues deleted (as `DELETE /issues/{id}` does each):
    /// how many it read, and where the next page starts.
    #[tracing::instrument(skip_all, fields(op = "purge_issues"))]
    pub async fn purge_issues(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
        (start, limit): (Option<&Position>, i32),
    ) -> Result<Page<()>, StoreError> {
        use futures::StreamExt;
        let page = self
            .issues_of_project(tenant, project_id, start, limit)
            .await?;
        let deletes: Vec<_> = page
            .items
            .iter()
            .map(|issue| self.delete_issue(tenant, &issue.id))
            .collect();
        let outcomes: Vec<Result<bool, StoreError>> = futures::stream::iter(deletes)
            .buffer_unordered(8)
            .collect()
            .await;
        for outcome in outcomes {
            outcome?;
        }
        Ok(Page {
            items: vec![(); page.items.len()],
            next: page.next,
        })
    }

    /// What is left of a deleted project once its issues are gone: its partition's items
    /// (fields, views), its tree revision, its views' count items and its jobs' checkpoints
    /// in the index (the purge's own too). Returns how many items it deleted.
    #[tracing::instrument(skip_all, fields(op = "purge_project_rest"))]
    pub async fn purge_project_rest(
        &self,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<usize, StoreError> {
        let partition = Query::partition(
            &self.store.records,
            keys::records::project_pk(tenant, project_id),
        )
        .consistent(true);
        let mut doomed: Vec<_> = self
            .store
            .query_all(partition)
            .await?
            .iter()
            .map(key_only)
            .collect();
        doomed.push(key(
            keys::records::tree_pk(tenant, project_id),
            keys::records::TREE_SK,
        ));
        let mut deleted = self.delete_records(doomed).await?;
        // The views are gone: every count item of the project's views is dead.
        deleted += self
            .store
            .index()
            .drop_dead_view_counts(tenant, project_id)
            .await?;
        let jobs = Query::partition(&self.store.index, keys::index::jobs_pk(tenant))
            .sk_begins_with(&format!("{project_id}#"))
            .consistent(true);
        let checkpoints: Vec<_> = self
            .store
            .query_all(jobs)
            .await?
            .iter()
            .map(key_only)
            .collect();
        deleted += self
            .store
            .delete_all(&self.store.index, checkpoints)
            .await?;
        Ok(deleted)
    }
}
