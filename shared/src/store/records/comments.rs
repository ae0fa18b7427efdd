//! Comments on an issue: an item collection under the issue (seed 004 keeps large details in
//! items of their own, away from the lists): items in the issue's partition after everything
//! else (`~C#{ulid}`), so the issue's own reads stop before them and a page of comments is one
//! Query in time order, either way.
//!
//! The issue item keeps `comment_count`, moved in the same transaction as each comment's put
//! or delete, so it is exact at once under concurrent posts and deletes; comment writes never
//! touch the issue's `version` (an `If-Match` never fails because of one). The stream's filter
//! passes none of these items, so they cost the indexer nothing.

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, TransactWriteItem, Update, WriteRequest,
};
use serde::{Deserialize, Serialize};

use super::items::{attr, issue_key, key};
use crate::cursor::Position;
use crate::domain::ids::{CommentId, IssueId, TenantId, UserId};
use crate::keys::{self, records::entity};
use crate::store::query::Query;
use crate::store::{Page, Records, StoreError, Tx, build_err};

/// A comment as the API shows it (without the author's name, looked up when read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: CommentId,
    pub issue_id: IssueId,
    pub author: UserId,
    pub body: String,
    pub created_at: String,
    pub updated_at: String,
}

/// A comment's item.
#[derive(Serialize, Deserialize)]
struct CommentItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    id: CommentId,
    author: UserId,
    body: String,
    created_at: String,
    updated_at: String,
}

impl CommentItem {
    fn comment(self) -> Comment {
        Comment {
            issue_id: self.id.issue(),
            id: self.id,
            author: self.author,
            body: self.body,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// How a change of a comment ended.
#[derive(Debug, PartialEq, Eq)]
pub enum CommentChange<T> {
    Done(T),
    /// No such comment (or its issue is gone).
    NotFound,
    /// The comment is someone else's.
    NotAuthor,
}

fn comment_key(tenant: &TenantId, id: &CommentId) -> crate::store::Item {
    key(
        keys::records::issue_pk(tenant, &id.issue()),
        &keys::records::comment_sk(id),
    )
}

impl Records<'_> {
    /// Puts a new comment (`id` names its issue) and counts it on its issue, in one
    /// transaction conditioned on the issue existing; `None` when it does not.
    #[tracing::instrument(skip_all, fields(op = "create_comment"))]
    pub async fn create_comment(
        &self,
        tenant: &TenantId,
        id: CommentId,
        author: &UserId,
        (body, now): (&str, &str),
    ) -> Result<Option<Comment>, StoreError> {
        let issue_id = &id.issue();
        let item = CommentItem {
            pk: keys::records::issue_pk(tenant, issue_id),
            sk: keys::records::comment_sk(&id),
            entity: entity::COMMENT.into(),
            id: id.clone(),
            author: author.clone(),
            body: body.to_string(),
            created_at: now.to_string(),
            updated_at: now.to_string(),
        };
        let put = self.store.put_in_tx(
            serde_dynamo::to_item(&item)?,
            Some("attribute_not_exists(PK)"),
        )?;
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            self.count_comment(tenant, issue_id, 1)?,
        ];
        Ok(match self.store.transact(items).await? {
            Tx::Committed => Some(item.comment()),
            Tx::ConditionFailed => None,
        })
    }

    /// The issue item's comment count moved by `by`, on the condition that the issue exists.
    fn count_comment(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        by: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
            .update_expression("ADD #c :by")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#c", attr::COMMENT_COUNT)
            .expression_attribute_values(":by", AttributeValue::N(by.to_string()))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// One page of an issue's comments in time order (`forward`: oldest first), each with the
    /// position that resumes after it: one strongly consistent Query, so a comment just
    /// posted is listed at once.
    #[tracing::instrument(skip_all, fields(op = "comments_page"))]
    pub async fn comments_page(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        (forward, limit): (bool, i32),
        start: Option<&Position>,
    ) -> Result<Page<(Comment, Position)>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_begins_with(keys::records::COMMENT_SK_PREFIX)
        .forward(forward)
        .limit(Some(limit))
        .consistent(true)
        .after(start);
        self.store.query_keyed(query, CommentItem::comment).await
    }

    /// A comment, strongly consistent.
    #[tracing::instrument(skip_all, fields(op = "get_comment"))]
    pub async fn get_comment(
        &self,
        tenant: &TenantId,
        id: &CommentId,
    ) -> Result<Option<Comment>, StoreError> {
        let item = self
            .store
            .get_item(&self.store.records, comment_key(tenant, id))
            .await?;
        Ok(match item {
            Some(item) => Some(serde_dynamo::from_item::<_, CommentItem>(item)?.comment()),
            None => None,
        })
    }

    /// Replaces a comment's body, by its author only: a read (to tell `403` from `404` and to
    /// answer the whole comment), then one transaction conditioned on the author and on the
    /// issue still existing (a deleted issue's comments are gone at once for edits).
    #[tracing::instrument(skip_all, fields(op = "edit_comment"))]
    pub async fn edit_comment(
        &self,
        tenant: &TenantId,
        id: &CommentId,
        author: &UserId,
        (body, now): (&str, &str),
    ) -> Result<CommentChange<Comment>, StoreError> {
        let Some(comment) = self.get_comment(tenant, id).await? else {
            return Ok(CommentChange::NotFound);
        };
        if &comment.author != author {
            return Ok(CommentChange::NotAuthor);
        }
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(comment_key(tenant, id)))
            .update_expression("SET #b = :body, #u = :now")
            .condition_expression("#a = :author")
            .expression_attribute_names("#a", "author")
            .expression_attribute_names("#b", "body")
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_values(":author", AttributeValue::S(author.to_string()))
            .expression_attribute_values(":body", AttributeValue::S(body.into()))
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .build()
            .map_err(build_err)?;
        let items = vec![
            TransactWriteItem::builder().update(update).build(),
            self.issue_exists_check(tenant, &comment.issue_id)?,
        ];
        Ok(match self.store.transact(items).await? {
            Tx::Committed => CommentChange::Done(Comment {
                body: body.into(),
                updated_at: now.into(),
                ..comment
            }),
            // Deleted meanwhile (the comment, or its issue): an author never changes.
            Tx::ConditionFailed => CommentChange::NotFound,
        })
    }

    /// Deletes a comment, by its author only, and uncounts it on its issue, in one
    /// transaction conditioned on the author and the issue; a failed condition costs one read
    /// to tell `403` from `404`.
    #[tracing::instrument(skip_all, fields(op = "delete_comment"))]
    pub async fn delete_comment(
        &self,
        tenant: &TenantId,
        id: &CommentId,
        author: &UserId,
    ) -> Result<CommentChange<()>, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(comment_key(tenant, id)))
            .condition_expression("#a = :author")
            .expression_attribute_names("#a", "author")
            .expression_attribute_values(":author", AttributeValue::S(author.to_string()))
            .build()
            .map_err(build_err)?;
        let items = vec![
            TransactWriteItem::builder().delete(delete).build(),
            self.count_comment(tenant, &id.issue(), -1)?,
        ];
        if self.store.transact(items).await? == Tx::Committed {
            return Ok(CommentChange::Done(()));
        }
        Ok(match self.get_comment(tenant, id).await? {
            Some(c) if &c.author != author => CommentChange::NotAuthor,
            // Gone, or its issue is (its comments go with it).
            _ => CommentChange::NotFound,
        })
    }

    fn issue_exists_check(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<TransactWriteItem, StoreError> {
        let check = ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Deletes the comments of a deleted issue, up to `max` of them (a page of keys at a time,
    /// 25 a BatchWriteItem); `true` when none is left. Idempotent: a replay finds fewer or
    /// none. Only for an issue that is gone (its comments can no longer be posted).
    #[tracing::instrument(skip_all, fields(op = "purge_comments"))]
    pub async fn purge_comments(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        max: usize,
    ) -> Result<(usize, bool), StoreError> {
        const PAGE: i32 = 100;
        let mut deleted = 0;
        while deleted < max {
            let query = Query::partition(
                &self.store.records,
                keys::records::issue_pk(tenant, issue_id),
            )
            .sk_begins_with(keys::records::COMMENT_SK_PREFIX)
            .limit(Some(PAGE));
            let page = self.store.query_page(query).await?;
            let mut requests = Vec::with_capacity(page.items.len());
            for item in &page.items {
                let keys_only = [keys::PK, keys::SK]
                    .iter()
                    .filter_map(|k| Some((k.to_string(), item.get(*k)?.clone())))
                    .collect();
                let delete = DeleteRequest::builder()
                    .set_key(Some(keys_only))
                    .build()
                    .map_err(build_err)?;
                requests.push(WriteRequest::builder().delete_request(delete).build());
            }
            deleted += self
                .store
                .batch_write_all(&self.store.records, requests)
                .await?;
            if page.next.is_none() {
                return Ok((deleted, true));
            }
        }
        Ok((deleted, false))
    }
}

/// What `gridctl repair` reads and writes to mend an issue's comment count.
impl Records<'_> {
    /// The issue's stored comment count (`None`: no such issue), strongly consistent.
    pub async fn stored_comment_count(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<u64>, StoreError> {
        let item = self
            .store
            .get_item(&self.store.records, issue_key(tenant, issue_id))
            .await?;
        Ok(item.map(|i| {
            i.get(attr::COMMENT_COUNT)
                .and_then(|n| n.as_n().ok()?.parse().ok())
                .unwrap_or(0)
        }))
    }

    /// How many comments the issue has, counted (strongly consistent, `Select: COUNT`).
    pub async fn count_comments(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<u64, StoreError> {
        let mut count = 0u64;
        let mut start = None;
        loop {
            let out = self
                .store
                .client
                .query()
                .table_name(&self.store.records)
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(
                    ":pk",
                    AttributeValue::S(keys::records::issue_pk(tenant, issue_id)),
                )
                .expression_attribute_values(
                    ":prefix",
                    AttributeValue::S(keys::records::COMMENT_SK_PREFIX.into()),
                )
                .select(aws_sdk_dynamodb::types::Select::Count)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(crate::store::sdk("Query"))?;
            count += u64::try_from(out.count).unwrap_or(0);
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(count);
            }
        }
    }

    /// Sets the issue's comment count to `count`, on the condition that it is still
    /// `stored` (a post or delete since moved it, and kept it right itself); `false` when it
    /// was not.
    pub async fn set_comment_count(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        (stored, count): (u64, u64),
    ) -> Result<bool, StoreError> {
        // An absent count is 0: the condition accepts either.
        let condition = if stored == 0 {
            "attribute_exists(PK) AND (attribute_not_exists(#c) OR #c = :stored)"
        } else {
            "attribute_exists(PK) AND #c = :stored"
        };
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
            .update_expression("SET #c = :count")
            .condition_expression(condition)
            .expression_attribute_names("#c", attr::COMMENT_COUNT)
            .expression_attribute_values(":stored", AttributeValue::N(stored.to_string()))
            .expression_attribute_values(":count", AttributeValue::N(count.to_string()))
            .send()
            .await;
        crate::store::condition_held("UpdateItem", result)
    }
}
