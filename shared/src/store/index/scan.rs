//! What the operator's tools need beyond the request paths: whole-table scans in parallel
//! segments, reads of index entries by key, and a watermark write conditioned on the exact
//! version it replaces.

use aws_sdk_dynamodb::types::AttributeValue;

use aws_sdk_dynamodb::types::builders::PutBuilder;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use crate::domain::ids::{IssueId, TenantId};
use crate::keys;
use crate::model::Entry;
use crate::model::watermark::{Basis, Buckets, Watermark};
use crate::store::IndexTable;
use crate::store::index::table::{new_revision, revision_condition};
use crate::store::index::watermark_item;
use crate::store::records::items::key;
use crate::store::{Item, Store, StoreError, build_err, sdk};

/// One of the two tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Records,
    Index,
}

/// An index item as an [`Entry`] (`None` for watermarks, parked markers, field jobs and
/// foreign items).
pub fn entry_from_item(item: &Item) -> Option<Entry> {
    let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let pk = s(keys::PK)?;
    if keys::index::is_watermark_pk(&pk)
        || keys::index::is_parked_pk(&pk)
        || keys::index::is_jobs_pk(&pk)
        || keys::index::is_view_counts_pk(&pk)
    {
        return None;
    }
    Some(Entry {
        pk,
        sk: s(keys::SK)?,
        issue_id: s("issue_id")?,
        role: s("role"),
        summary: s(crate::model::summary::ATTR),
    })
}

impl Store {
    fn table_name(&self, table: Table) -> &str {
        match table {
            Table::Records => &self.records,
            Table::Index => &self.index,
        }
    }

    /// Every item of `table`, read as `segments` parallel scans; `on_page` hears each page's
    /// item count (for progress bars).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn scan_table(
        &self,
        table: Table,
        segments: u32,
        on_page: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Item>, StoreError> {
        let segments = segments.max(1);
        let name = self.table_name(table).to_string();
        let scans = (0..segments).map(|segment| {
            let name = name.clone();
            async move {
                let mut items = Vec::new();
                let mut start = None;
                loop {
                    let out = self
                        .client
                        .scan()
                        .table_name(&name)
                        .segment(segment as i32)
                        .total_segments(segments as i32)
                        .set_exclusive_start_key(start)
                        .send()
                        .await
                        .map_err(sdk("Scan"))?;
                    on_page(out.items().len());
                    items.extend(out.items.unwrap_or_default());
                    start = out.last_evaluated_key;
                    if start.is_none() {
                        return Ok::<_, StoreError>(items);
                    }
                }
            }
        });
        let mut all = Vec::new();
        for part in futures::future::join_all(scans).await {
            all.extend(part?);
        }
        Ok(all)
    }
}

impl IndexTable<'_> {
    /// The index entries that exist now at these keys (fresh reads, not a scan's snapshot).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn entries_at(&self, at: &[(String, String)]) -> Result<Vec<Entry>, StoreError> {
        let keys = at.iter().map(|(pk, sk)| key(pk.clone(), sk)).collect();
        let items = self.store.batch_get(&self.store.index, keys, false).await?;
        Ok(items.iter().filter_map(entry_from_item).collect())
    }

    /// The issue's whole watermark: its head and every bucket of its layout.
    pub async fn get_full_watermark(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<Watermark>, StoreError> {
        let Some(mut wm) = self.get_watermark(tenant, issue_id).await? else {
            return Ok(None);
        };
        let all = (0..wm.buckets.count).collect();
        self.read_buckets(tenant, issue_id, &mut wm, &all).await?;
        Ok(Some(wm))
    }

    /// Replaces the issue's watermark with one that reflects `desired` at `version` (`None`:
    /// a tombstone), only if it is still the one read (`read`'s version, or none): its head
    /// and every bucket in one transaction, so a concurrent indexer write is never half
    /// overwritten; `false` when the indexer recorded another meanwhile. Buckets of a layout
    /// it replaces are deleted after. `fields_rev`: the field-definition revision `desired`
    /// was derived under.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn replace_watermark(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        read: Option<&Watermark>,
        desired: Option<&Basis>,
        (version, fields_rev): (u64, u64),
    ) -> Result<bool, StoreError> {
        let old = read.map_or(0, |w| w.buckets.count);
        let buckets = desired.map_or(0, |d| Buckets::choose(old, d));
        // Every bucket rewritten: a fresh watermark, read as if nothing were known.
        let fresh = Watermark::default();
        let (mut head, bucket_items) =
            watermark_item::commit_items(tenant, issue_id, &fresh, desired, version, buckets);
        head.insert(watermark_item::attr::REVISION.into(), new_revision());
        if desired.is_some() {
            watermark_item::set_fields_revision(&mut head, fields_rev);
        }
        let head_put = replacing(
            Put::builder()
                .table_name(&self.store.index)
                .set_item(Some(head)),
            read,
        );
        let mut items = vec![
            TransactWriteItem::builder()
                .put(head_put.build().map_err(build_err)?)
                .build(),
        ];
        for item in bucket_items {
            let put = Put::builder()
                .table_name(&self.store.index)
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let result = self
            .store
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        if let Err(e) = result {
            let e = aws_sdk_dynamodb::Error::from(e);
            if matches!(e, aws_sdk_dynamodb::Error::TransactionCanceledException(_)) {
                return Ok(false);
            }
            return Err(StoreError::Dynamo {
                op: "TransactWriteItems",
                source: Box::new(e),
            });
        }
        if old > 0 && old != buckets {
            let pk = keys::index::watermark_pk(tenant, issue_id);
            let stale = (0..old)
                .map(|k| (pk.clone(), keys::index::watermark_bucket_sk(old, k)))
                .collect();
            self.delete_index_keys(stale).await?;
        }
        Ok(true)
    }
}

/// A head put conditioned on still replacing the head read: its version and revision, and no
/// intent recorded since (the pending set only ever grows until a head put replaces it); or,
/// with none read, on there being none.
fn replacing(head_put: PutBuilder, read: Option<&Watermark>) -> PutBuilder {
    let Some(w) = read else {
        return head_put.condition_expression("attribute_not_exists(version)");
    };
    let pending = if w.legacy.is_some() {
        watermark_item::attr::LEGACY_PENDING
    } else {
        watermark_item::attr::PENDING
    };
    let put = head_put
        .condition_expression(format!(
            "version = :v AND {} AND (attribute_not_exists(#p) OR size(#p) = :n)",
            revision_condition(w.rev)
        ))
        .expression_attribute_names("#rev", watermark_item::attr::REVISION)
        .expression_attribute_names("#p", pending)
        .expression_attribute_values(":v", AttributeValue::N(w.version.to_string()))
        .expression_attribute_values(":n", AttributeValue::N(w.pending_count.to_string()));
    match w.rev {
        Some(rev) => put.expression_attribute_values(":rev", AttributeValue::N(rev.to_string())),
        None => put,
    }
}
