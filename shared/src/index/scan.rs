//! What the operator's tools need beyond the request paths: whole-table scans in parallel
//! segments, reads of index entries by key, and a watermark write conditioned on the exact
//! version it replaces.

use aws_sdk_dynamodb::types::AttributeValue;

use super::table::{Watermark, watermark_item};
use crate::domain::ids::{IssueId, TenantId};
use crate::index::Entry;
use crate::keys;
use crate::store::items::key;
use crate::store::{Item, Store, StoreError, condition_held, sdk};

/// One of the two tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Records,
    Index,
}

/// An index item as an [`Entry`] (`None` for watermarks, parked markers and foreign items).
pub fn entry_from_item(item: &Item) -> Option<Entry> {
    let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let pk = s(keys::PK)?;
    if keys::index::is_watermark_pk(&pk) || keys::index::is_parked_pk(&pk) {
        return None;
    }
    Some(Entry {
        pk,
        sk: s(keys::SK)?,
        issue_id: s("issue_id")?,
        role: s("role"),
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

    /// The index entries that exist now at these keys (fresh reads, not a scan's snapshot).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn entries_at(&self, at: &[(String, String)]) -> Result<Vec<Entry>, StoreError> {
        let keys = at.iter().map(|(pk, sk)| key(pk.clone(), sk)).collect();
        let items = self.batch_get(&self.index, keys).await?;
        Ok(items.iter().filter_map(entry_from_item).collect())
    }

    /// Replaces the issue's watermark only if it is still the one read (`expected` version, or
    /// none); `false` when the indexer recorded another meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn replace_watermark(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        wm: &Watermark,
        expected: Option<u64>,
    ) -> Result<bool, StoreError> {
        let item = watermark_item(tenant, issue_id, wm);
        let request = self
            .client
            .put_item()
            .table_name(&self.index)
            .set_item(Some(item));
        let request = match expected {
            Some(v) => request
                .condition_expression("version = :v")
                .expression_attribute_values(":v", AttributeValue::N(v.to_string())),
            None => request.condition_expression("attribute_not_exists(version)"),
        };
        condition_held("PutItem", request.send().await)
    }
}
