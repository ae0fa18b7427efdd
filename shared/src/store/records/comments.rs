//! Comments on an issue: an item collection under the issue (seed 004 keeps large details in
//! items of their own, away from the lists): items in the issue's partition after everything
//! else (`~C#{ulid}`), so the issue's own reads stop before them and a page of comments is one
//! Query in time order, either way.
//!
//! The issue item keeps `comment_count`, moved in the same transaction as each comment's put
//! or delete, so it is exact at once under concurrent posts and deletes; comment writes never
//! touch the issue's `version` (an `If-Match` never fails because of one). The comments never
//! reach the indexer (the stream's filter passes none of them); the issue item's change does,
//! and the indexer skips it (its version did not move) after reading its watermark head.
//!
//! An issue's delete leaves two marks at the ends of its comments when it has any
//! ([`keys::records::COMMENTS_GONE_SKS`]), in the delete's transaction: a page that meets one
//! is `404`, so the comments are gone from every route at once, while the indexer deletes
//! them (the marks last).

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, TransactWriteItem, Update};
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

/// A comment's item, kept small because a page of 50 is read strongly consistently (billed
/// per 4 KB read): its id is its key (the issue in the PK, its ULID in the SK), its
/// `created_at` its ULID's time, its `updated_at` stored only once it is edited, and its
/// attributes have one-letter names (as the directory's `n`).
#[derive(Serialize, Deserialize)]
struct CommentItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity: String,
    #[serde(rename = "a")]
    author: UserId,
    #[serde(rename = "b")]
    body: String,
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
}

/// The attribute names of [`CommentItem`] an expression names.
const AUTHOR: &str = "a";
const BODY: &str = "b";
const UPDATED_AT: &str = "u";

impl CommentItem {
    fn comment(self) -> Result<Comment, StoreError> {
        let id = keys::records::parse_issue_pk(&self.pk)
            .and_then(|(_, issue)| keys::records::parse_comment_sk(&issue, &self.sk))
            .ok_or_else(|| StoreError::Corrupt(format!("a comment's key: {}", self.sk)))?;
        let created_at = crate::domain::values::format_timestamp(id.created_at().into());
        Ok(Comment {
            issue_id: id.issue(),
            id,
            author: self.author,
            body: self.body,
            updated_at: self.updated_at.unwrap_or_else(|| created_at.clone()),
            created_at,
        })
    }
}

/// How a post ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Posted {
    Done(Comment),
    /// No such issue.
    NotFound,
    /// The issue's item is at DynamoDB's size limit: its count cannot grow.
    IssueTooLarge,
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

/// Whether a comment-range item is a deleted issue's mark.
fn is_gone_mark(item: &crate::store::Item) -> bool {
    super::items::sk_of(item).is_some_and(|sk| keys::records::COMMENTS_GONE_SKS.contains(&sk))
}

impl Records<'_> {
    /// Puts a new comment (`id` names its issue and its time) and counts it on its issue, in
    /// one transaction conditioned on the issue existing.
    #[tracing::instrument(skip_all, fields(op = "create_comment"))]
    pub async fn create_comment(
        &self,
        tenant: &TenantId,
        id: CommentId,
        author: &UserId,
        body: &str,
    ) -> Result<Posted, StoreError> {
        let issue_id = &id.issue();
        let item = CommentItem {
            pk: keys::records::issue_pk(tenant, issue_id),
            sk: keys::records::comment_sk(&id),
            entity: entity::COMMENT.into(),
            author: author.clone(),
            body: body.to_string(),
            updated_at: None,
        };
        let put = self.store.put_in_tx(
            serde_dynamo::to_item(&item)?,
            Some("attribute_not_exists(PK)"),
        )?;
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            self.count_comment(tenant, issue_id, 1)?,
        ];
        Ok(match self.store.transact(items).await {
            Ok(Tx::Committed) => Posted::Done(item.comment()?),
            Ok(Tx::ConditionFailed) => Posted::NotFound,
            Err(e) if super::items::item_too_large(&e) => Posted::IssueTooLarge,
            Err(e) => return Err(e),
        })
    }

    /// The issue item's comment count moved by `by` (and its comment revision by one), on the
    /// condition that the issue exists.
    fn count_comment(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        by: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue_id)))
            .update_expression("ADD #c :by, #r :one")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#c", attr::COMMENT_COUNT)
            .expression_attribute_names("#r", attr::COMMENT_REV)
            .expression_attribute_values(":by", AttributeValue::N(by.to_string()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// One page of an issue's comments in time order (`forward`: oldest first), each with the
    /// position that resumes after it: one strongly consistent Query, so a comment just
    /// posted is listed at once. `None` when the page meets a deleted issue's mark.
    #[tracing::instrument(skip_all, fields(op = "comments_page"))]
    pub async fn comments_page(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        (forward, limit): (bool, i32),
        start: Option<&Position>,
    ) -> Result<Option<Page<(Comment, Position)>>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_begins_with(keys::records::COMMENT_SK_PREFIX)
        .forward(forward)
        .limit(Some(limit))
        .consistent(true)
        .after(start);
        let page = self.store.query_page(query).await?;
        if page.items.iter().any(is_gone_mark) {
            return Ok(None);
        }
        let items = page
            .items
            .into_iter()
            .map(|item| {
                let after = crate::store::query::key_of(&item, &[keys::PK, keys::SK])?;
                let comment = serde_dynamo::from_item::<_, CommentItem>(item)?.comment()?;
                Ok((comment, after))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Some(Page {
            items,
            next: page.next,
        }))
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
            Some(item) => Some(serde_dynamo::from_item::<_, CommentItem>(item)?.comment()?),
            None => None,
        })
    }

    /// A comment and whether its issue still exists, in one strongly consistent read: a
    /// deleted issue's comment is not found, whoever asks (`404`, never `403`).
    async fn comment_on_live_issue(
        &self,
        tenant: &TenantId,
        id: &CommentId,
    ) -> Result<Option<Comment>, StoreError> {
        let keys = vec![comment_key(tenant, id), issue_key(tenant, &id.issue())];
        let items = self
            .store
            .batch_get(&self.store.records, keys, true)
            .await?;
        let issue_sk = Some(keys::records::ISSUE_SK);
        if !items.iter().any(|i| super::items::sk_of(i) == issue_sk) {
            return Ok(None);
        }
        match items
            .into_iter()
            .find(|i| super::items::sk_of(i) != issue_sk)
        {
            Some(item) => Ok(Some(
                serde_dynamo::from_item::<_, CommentItem>(item)?.comment()?,
            )),
            None => Ok(None),
        }
    }

    /// Replaces a comment's body, by its author only: a read of the comment and its issue (to
    /// tell `403` from `404` and to answer the whole comment), then one transaction
    /// conditioned on the author and on the issue still existing.
    #[tracing::instrument(skip_all, fields(op = "edit_comment"))]
    pub async fn edit_comment(
        &self,
        tenant: &TenantId,
        id: &CommentId,
        author: &UserId,
        (body, now): (&str, &str),
    ) -> Result<CommentChange<Comment>, StoreError> {
        let Some(comment) = self.comment_on_live_issue(tenant, id).await? else {
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
            .expression_attribute_names("#a", AUTHOR)
            .expression_attribute_names("#b", BODY)
            .expression_attribute_names("#u", UPDATED_AT)
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
    /// (of the comment and its issue) to tell `403` from `404`.
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
            .expression_attribute_names("#a", AUTHOR)
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
        Ok(match self.comment_on_live_issue(tenant, id).await? {
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

    /// Deletes the comments of a deleted issue, a page at a time (25 a BatchWriteItem), until
    /// about `budget` bytes of them are deleted (`None`: all); the marks its delete left go
    /// last, when nothing else is left. `(items deleted, true when none is left)`. Idempotent:
    /// a replay finds fewer or none. Only for an issue that is gone (no comment can be posted
    /// on it any more).
    #[tracing::instrument(skip_all, fields(op = "purge_comments"))]
    pub async fn purge_comments(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        budget: Option<usize>,
    ) -> Result<(usize, bool), StoreError> {
        const PAGE: i32 = 100;
        let pk = keys::records::issue_pk(tenant, issue_id);
        let (mut deleted, mut bytes) = (0, 0);
        let mut start = None;
        loop {
            if budget.is_some_and(|b| bytes >= b) {
                return Ok((deleted, false));
            }
            // Strongly consistent: a comment committed just before the issue's delete is seen.
            let query = Query::partition(&self.store.records, pk.clone())
                .sk_begins_with(keys::records::COMMENT_SK_PREFIX)
                .limit(Some(PAGE))
                .consistent(true)
                .after(start.as_ref());
            let page = self.store.query_page(query).await?;
            let comments: Vec<&crate::store::Item> =
                page.items.iter().filter(|i| !is_gone_mark(i)).collect();
            bytes += comments
                .iter()
                .map(|i| crate::store::stored_size(i))
                .sum::<usize>();
            let keys = comments.iter().map(|i| key_only(i)).collect();
            deleted += self.delete_records(keys).await?;
            // The marks stay in the range, so a page that is all marks moves on past them.
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        let marks = keys::records::COMMENTS_GONE_SKS
            .iter()
            .map(|sk| key(pk.clone(), sk))
            .collect();
        self.delete_records(marks).await?;
        Ok((deleted, true))
    }

    /// Deletes records-table items by key, 25 a BatchWriteItem; how many.
    pub(super) async fn delete_records(
        &self,
        keys: Vec<crate::store::Item>,
    ) -> Result<usize, StoreError> {
        self.store.delete_all(&self.store.records, keys).await
    }
}

/// An item's key attributes.
pub(super) fn key_only(item: &crate::store::Item) -> crate::store::Item {
    [keys::PK, keys::SK]
        .iter()
        .filter_map(|k| Some((k.to_string(), item.get(*k)?.clone())))
        .collect()
}

/// What `gridctl repair` reads and writes to mend an issue's comment count.
impl Records<'_> {
    /// The issue's stored comment count and comment revision (`None`: no such issue),
    /// strongly consistent.
    pub async fn stored_comment_count(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let item = self
            .store
            .get_item(&self.store.records, issue_key(tenant, issue_id))
            .await?;
        let n = |i: &crate::store::Item, a: &str| -> u64 {
            i.get(a)
                .and_then(|n| n.as_n().ok()?.parse().ok())
                .unwrap_or(0)
        };
        Ok(item.map(|i| (n(&i, attr::COMMENT_COUNT), n(&i, attr::COMMENT_REV))))
    }

    /// How many comments the issue has, counted (strongly consistent, `Select: COUNT`).
    pub async fn count_comments(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<u64, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_begins_with(keys::records::COMMENT_SK_PREFIX)
        .consistent(true);
        self.store.count(query).await
    }

    /// Sets the issue's comment count to `count`, on the condition that its comment revision
    /// is still `rev` (read before counting: every post or delete since moved it, never back,
    /// and kept the count right itself); `false` when it was not.
    pub async fn set_comment_count(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        (rev, count): (u64, u64),
    ) -> Result<bool, StoreError> {
        // An absent revision is 0: the condition accepts either.
        let condition = if rev == 0 {
            "attribute_exists(PK) AND (attribute_not_exists(#r) OR #r = :rev)"
        } else {
            "attribute_exists(PK) AND #r = :rev"
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
            .expression_attribute_names("#r", attr::COMMENT_REV)
            .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()))
            .expression_attribute_values(":count", AttributeValue::N(count.to_string()))
            .send()
            .await;
        crate::store::condition_held("UpdateItem", result)
    }
}
