//! Issues' history entries in the index table: one item per version, in the issue's watermark
//! partition (`H#{version}`), its entry's JSON as the contract renders it (see
//! [`crate::model::history`]). The indexer puts them from the stream (a put of the same
//! version's entry again writes the same item: idempotent) and deletes them with the issue.

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use serde_json::value::RawValue;

use crate::cursor::Position;
use crate::domain::ids::{IssueId, TenantId};
use crate::keys;
use crate::model::history::HistoryEntry;
use crate::model::watermark::DELETED;
use crate::store::IndexTable;
use crate::store::query::{Query, key_of};
use crate::store::records::items::{key, string};
use crate::store::{Item, StoreError, build_err};

/// The attribute holding an entry's JSON (or, on a part, its share of it).
const ENTRY: &str = "e";
/// On an entry too large for one item: how many parts hold its JSON.
const PARTS: &str = "parts";
/// The most bytes of JSON one item holds: an entry lists the old and new values of every
/// field a write changed, which for a patch of hundreds of long values passes DynamoDB's
/// 400 KB item; such an entry is kept in parts of this size, written before the entry's own
/// item, so a page never finds an entry without its parts.
pub const INLINE_BYTES: usize = 300_000;

/// `text` in pieces of at most `max` bytes, cut at character boundaries.
fn pieces(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out.push(rest);
    out
}

fn put_request(item: Item) -> Result<WriteRequest, StoreError> {
    let put = PutRequest::builder()
        .set_item(Some(item))
        .build()
        .map_err(build_err)?;
    Ok(WriteRequest::builder().put_request(put).build())
}
/// The attribute of the lost-versions item: a number set.
pub const LOST: &str = "lost";

/// What the first page's read says of the issue, from its watermark head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    /// The index reflects it.
    Yes,
    /// Deleted: its history is gone or going.
    Deleted,
    /// Not indexed (yet, or ever): only the records table can tell.
    Unknown,
}

/// A page of an issue's history, newest first: each entry's JSON with the position after it.
#[derive(Debug)]
pub struct HistoryPage {
    pub indexed: Indexed,
    pub entries: Vec<(Box<RawValue>, Position)>,
    pub next: Option<Position>,
}

fn indexed_of(head: Option<&Item>) -> Indexed {
    match head {
        None => Indexed::Unknown,
        Some(h) => {
            let version = h
                .get(crate::store::index::watermark_item::attr::VERSION)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<u64>().ok());
            if version == Some(DELETED) {
                Indexed::Deleted
            } else {
                Indexed::Yes
            }
        }
    }
}

fn is_head(item: &Item) -> bool {
    crate::store::records::items::sk_of(item) == Some(keys::index::WATERMARK_SK)
}

impl IndexTable<'_> {
    /// Puts history entries (25 a BatchWriteItem); how many.
    #[tracing::instrument(skip_all, fields(op = "put_history", n = entries.len()))]
    pub async fn put_history(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        entries: &[HistoryEntry],
    ) -> Result<usize, StoreError> {
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let (mut parts, mut requests) = (Vec::new(), Vec::new());
        for e in entries {
            let mut item = key(pk.clone(), &keys::index::history_sk(e.version));
            if e.json.len() <= INLINE_BYTES {
                item.insert(ENTRY.into(), string(&e.json));
            } else {
                let pieces = pieces(&e.json, INLINE_BYTES);
                for (k, piece) in pieces.iter().enumerate() {
                    let mut part = key(pk.clone(), &keys::index::history_part_sk(e.version, k));
                    part.insert(ENTRY.into(), string(*piece));
                    parts.push(put_request(part)?);
                }
                item.insert(PARTS.into(), AttributeValue::N(pieces.len().to_string()));
            }
            requests.push(put_request(item)?);
        }
        // Parts first: an entry's item is only ever seen with its parts in place.
        self.batch_write_all(parts).await?;
        self.batch_write_all(requests).await
    }

    /// The JSON of an entry kept in `parts` parts (strongly consistent: they were written
    /// before the entry's item that named them).
    async fn entry_from_parts(
        &self,
        pk: &str,
        version: u64,
        parts: usize,
    ) -> Result<String, StoreError> {
        let query = Query::partition(&self.store.index, pk.to_string())
            .sk_begins_with(&keys::index::history_parts_prefix(version))
            .consistent(true);
        let items = self.store.query_all(query).await?;
        if items.len() != parts {
            return Err(StoreError::Corrupt(format!(
                "history entry {version}: {} of its {parts} parts",
                items.len()
            )));
        }
        items
            .iter()
            .map(|i| {
                i.get(ENTRY)
                    .and_then(|v| v.as_s().ok())
                    .map(String::as_str)
                    .ok_or_else(|| StoreError::Corrupt("history entry part".into()))
            })
            .collect()
    }

    /// One page of an issue's history, newest first. The first page is one Query from the
    /// watermark head down (the head, then `limit` entries); a later page reads its entries
    /// and the head side by side (a deleted issue's history is `404` on every page).
    /// Eventually consistent: the list catches up within seconds anyway.
    #[tracing::instrument(skip_all, fields(op = "history_page"))]
    pub async fn history_page(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        limit: i32,
        start: Option<&Position>,
    ) -> Result<HistoryPage, StoreError> {
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let range = Query::partition(&self.store.index, pk.clone())
            .sk_between(keys::index::HISTORY_SK_PREFIX, keys::index::WATERMARK_SK)
            .forward(false);
        let (page, head) = match start {
            None => {
                let mut page = self
                    .store
                    .query_page(range.limit(Some(limit.saturating_add(1))))
                    .await?;
                let head = page.items.first().filter(|i| is_head(i)).cloned();
                if head.is_some() {
                    page.items.remove(0);
                } else if page.items.len() > limit.max(0) as usize {
                    // No head took its place: one entry too many, the next page's first.
                    page.items.truncate(limit.max(0) as usize);
                    page.next = match page.items.last() {
                        Some(last) => Some(key_of(last, &[keys::PK, keys::SK])?),
                        None => None,
                    };
                }
                (page, head)
            }
            Some(start) => {
                let head = Query::partition(&self.store.index, pk)
                    .sk_between(keys::index::WATERMARK_SK, keys::index::WATERMARK_SK);
                let (page, head) = futures::try_join!(
                    self.store
                        .query_page(range.limit(Some(limit)).after(Some(start))),
                    self.store.query_page(head)
                )?;
                (page, head.items.into_iter().next())
            }
        };
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let reads = page.items.iter().map(|item| {
            let pk = &pk;
            async move {
                let json = match (item.get(ENTRY), item.get(PARTS)) {
                    (Some(e), _) => e.as_s().ok().cloned(),
                    (None, Some(n)) => {
                        let parts = n.as_n().ok().and_then(|n| n.parse().ok());
                        let version = crate::store::records::items::sk_of(item)
                            .and_then(keys::index::parse_history_sk);
                        match (parts, version) {
                            (Some(parts), Some(version)) => {
                                Some(self.entry_from_parts(pk, version, parts).await?)
                            }
                            _ => None,
                        }
                    }
                    (None, None) => None,
                };
                let json = json.ok_or_else(|| StoreError::Corrupt("history entry".into()))?;
                let raw = RawValue::from_string(json)
                    .map_err(|_| StoreError::Corrupt("history entry".into()))?;
                Ok::<_, StoreError>((raw, key_of(item, &[keys::PK, keys::SK])?))
            }
        });
        // Only an entry kept in parts reads more (its parts, one Query each, side by side).
        let entries = futures::future::try_join_all(reads).await?;
        Ok(HistoryPage {
            indexed: indexed_of(head.as_ref()),
            entries,
            next: page.next,
        })
    }

    /// The versions an issue's history has entries for, oldest first (strongly consistent;
    /// `gridctl verify`).
    pub async fn history_versions(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Vec<u64>, StoreError> {
        let query = Query::partition(
            &self.store.index,
            keys::index::watermark_pk(tenant, issue_id),
        )
        .sk_begins_with(keys::index::HISTORY_SK_PREFIX)
        .consistent(true);
        Ok(self
            .store
            .query_all(query)
            .await?
            .iter()
            .filter_map(|i| keys::index::parse_history_sk(crate::store::records::items::sk_of(i)?))
            .collect())
    }

    /// Deletes a deleted issue's history, a page at a time, until about `budget` bytes of it
    /// are deleted (`None`: all). `(items deleted, true when none is left)`; idempotent.
    #[tracing::instrument(skip_all, fields(op = "purge_history"))]
    pub async fn purge_history(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        budget: Option<usize>,
    ) -> Result<(usize, bool), StoreError> {
        const PAGE: i32 = 500;
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let (mut deleted, mut bytes) = (0, 0);
        // Entries first, then the parts of large ones, then the lost versions' item.
        let mut prefixes = [
            keys::index::HISTORY_SK_PREFIX,
            keys::index::HISTORY_PART_PREFIX,
        ]
        .into_iter()
        .peekable();
        loop {
            if budget.is_some_and(|b| bytes >= b) {
                return Ok((deleted, false));
            }
            let Some(&prefix) = prefixes.peek() else {
                let lost = (pk.clone(), keys::index::HISTORY_LOST_SK.to_string());
                self.delete_index_keys(vec![lost]).await?;
                return Ok((deleted, true));
            };
            let query = Query::partition(&self.store.index, pk.clone())
                .sk_begins_with(prefix)
                .limit(Some(PAGE))
                .consistent(true);
            let page = self.store.query_page(query).await?;
            if page.items.is_empty() {
                prefixes.next();
                continue;
            }
            bytes += page
                .items
                .iter()
                .map(crate::store::stored_size)
                .sum::<usize>();
            let keys = page
                .items
                .iter()
                .filter_map(|i| {
                    let sk = crate::store::records::items::sk_of(i)?;
                    Some((pk.clone(), sk.to_string()))
                })
                .collect();
            deleted += self.delete_index_keys(keys).await?;
        }
    }

    /// Records versions of an issue's history as lost for good (their entries cannot be made
    /// any more): a number-set ADD, so recording one twice changes nothing.
    pub async fn accept_lost_history(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        versions: &[u64],
    ) -> Result<(), StoreError> {
        // A set of at most 10,000 numbers per update keeps each request far below its limits.
        for chunk in versions.chunks(10_000) {
            let key = key(
                keys::index::watermark_pk(tenant, issue_id),
                keys::index::HISTORY_LOST_SK,
            );
            self.store
                .client
                .update_item()
                .table_name(&self.store.index)
                .set_key(Some(key))
                .update_expression("ADD #l :v")
                .expression_attribute_names("#l", LOST)
                .expression_attribute_values(
                    ":v",
                    AttributeValue::Ns(chunk.iter().map(u64::to_string).collect()),
                )
                .send()
                .await
                .map_err(crate::store::sdk("UpdateItem"))?;
        }
        Ok(())
    }
}

impl IndexTable<'_> {
    /// Deletes the entries of these versions of an issue's history; how many.
    pub async fn delete_history(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        versions: &[u64],
    ) -> Result<usize, StoreError> {
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let keys = versions
            .iter()
            .map(|v| (pk.clone(), keys::index::history_sk(*v)))
            .collect();
        self.delete_index_keys(keys).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pieces put back together are the text, each within its bound, cut only between
        /// characters.
        #[test]
        fn pieces_rejoin_to_the_text(text in "[a-zé€😀\"\\\\]{0,200}", max in 4usize..40) {
            let parts = pieces(&text, max);
            prop_assert_eq!(parts.concat(), text.clone());
            for p in &parts {
                prop_assert!(p.len() <= max);
            }
            prop_assert!(parts.iter().take(parts.len() - 1).all(|p| !p.is_empty()));
        }
    }
}
