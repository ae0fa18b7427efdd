//! Views' counts in the index table ([`crate::model::view::counts`]): the head put of a commit
//! that moves an issue in or out of views, in one transaction with the additions to their
//! count items, and the read that sums a view's count items.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};

use crate::domain::ids::{IssueId, TenantId};
use crate::keys;
use crate::model::view::counts::CountDelta;
use crate::store::query::Query;
use crate::store::records::items::key;
use crate::store::{IndexTable, Item, StoreError, Tx, build_err};

/// The count changes of one commit, by view and shape.
pub type ViewCounts = BTreeMap<(String, u64), CountDelta>;

/// A watermark head to put, with the condition it is put on.
pub(crate) struct ConditionalPut {
    pub(crate) item: Item,
    pub(crate) condition: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

/// The attribute holding a view's total in a count item.
const TOTAL: &str = "n";

/// The attribute holding group `group`'s count in a count item (group keys are option
/// positions, `-` or a state's name).
fn group_attr(group: &str) -> String {
    format!("g{group}")
}

/// A view's counts as read: its total and its groups' (by group key).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub total: i64,
    pub groups: BTreeMap<String, i64>,
}

impl IndexTable<'_> {
    /// Puts a commit's head on its condition, with the additions to the views' counts it
    /// decides; `false` when the head's condition failed (and nothing was written).
    pub(crate) async fn put_head(
        &self,
        issue: (&TenantId, &IssueId),
        head: ConditionalPut,
        counts: &ViewCounts,
    ) -> Result<bool, StoreError> {
        if !counts.is_empty() {
            return self.put_head_counting(issue, head, counts).await;
        }
        let put = self
            .store
            .client
            .put_item()
            .table_name(&self.store.index)
            .set_item(Some(head.item))
            .condition_expression(head.condition)
            .set_expression_attribute_names(Some(head.names))
            .set_expression_attribute_values(Some(head.values));
        // Another attempt's commit counting views may hold the head in a transaction.
        crate::store::condition_held_through_conflicts("PutItem", || put.clone().send()).await
    }

    /// Puts the head on its condition and adds `counts` to the views' count items (the
    /// issue's shard of each), all or nothing; `false` when the head's condition failed.
    async fn put_head_counting(
        &self,
        (tenant, issue_id): (&TenantId, &IssueId),
        head: ConditionalPut,
        counts: &ViewCounts,
    ) -> Result<bool, StoreError> {
        let put = Put::builder()
            .table_name(&self.store.index)
            .set_item(Some(head.item))
            .condition_expression(head.condition)
            .set_expression_attribute_names(Some(head.names))
            .set_expression_attribute_values(Some(head.values))
            .build()
            .map_err(build_err)?;
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        let shard = keys::index::shard_hash(issue_id) % keys::index::VIEW_COUNT_SHARDS;
        for ((view, rev), delta) in counts {
            let at = key(
                keys::index::view_counts_pk(tenant, view),
                &keys::index::view_counts_sk(view, *rev, shard),
            );
            items.push(
                TransactWriteItem::builder()
                    .update(add(at, delta, &self.store.index)?)
                    .build(),
            );
        }
        Ok(matches!(self.store.transact(items).await?, Tx::Committed))
    }

    /// A view's counts at shape `rev`: the sum of its count items (one Query).
    pub async fn view_counts(
        &self,
        tenant: &TenantId,
        view: &str,
        rev: u64,
    ) -> Result<Counts, StoreError> {
        let query = Query::partition(&self.store.index, keys::index::view_counts_pk(tenant, view))
            .sk_begins_with(&keys::index::view_counts_prefix(view, rev));
        let mut out = Counts::default();
        for item in self.store.query_all(query).await? {
            for (name, value) in &item {
                let AttributeValue::N(n) = value else {
                    continue;
                };
                let Ok(n) = n.parse::<i64>() else { continue };
                if name == TOTAL {
                    out.total += n;
                } else if let Some(group) = name.strip_prefix('g') {
                    *out.groups.entry(group.to_string()).or_default() += n;
                }
            }
        }
        Ok(out)
    }
}

impl IndexTable<'_> {
    /// Deletes the count items of a project's views that are not `live` at the shape named
    /// (a view deleted, or reshaped): the fill job that rebuilt the project's views does, when
    /// every issue's commit has stopped counting them. Returns the items deleted.
    pub async fn drop_dead_view_counts(
        &self,
        tenant: &TenantId,
        project: &crate::domain::ids::ProjectId,
    ) -> Result<usize, StoreError> {
        let pk = keys::index::view_counts_pk(tenant, project.as_str());
        let query = Query::partition(&self.store.index, pk.clone()).consistent(true);
        let items = self.store.query_all(query).await?;
        // The views are read after their count items: a view made (or reshaped) since has
        // items this read did not see, or a shape it reads as current. View ids are never
        // reused and shapes only grow, so an item of a view missing here, or of an older
        // shape, is dead for good.
        let live: std::collections::BTreeMap<String, u64> = match self
            .store
            .records()
            .project_definitions(tenant, project)
            .await?
        {
            Some((_, defs, views)) => crate::store::records::views::indexed_views(&views, &defs)
                .into_iter()
                .map(|v| (v.id, v.rev))
                .collect(),
            None => Default::default(),
        };
        let dead: Vec<(String, String)> = items
            .iter()
            .filter_map(|item| crate::store::records::items::sk_of(item))
            .filter(|sk| {
                keys::index::parse_view_counts_sk(sk)
                    .is_some_and(|(view, rev, _)| live.get(view).is_none_or(|now| rev < *now))
            })
            .map(|sk| (pk.clone(), sk.to_string()))
            .collect();
        let n = dead.len();
        if n > 0 {
            self.delete_index_keys(dead).await?;
        }
        Ok(n)
    }
}

/// `ADD` of a delta's total and groups to a count item (created by the first addition).
fn add(at: Item, delta: &CountDelta, table: &str) -> Result<Update, StoreError> {
    let mut parts = vec!["#n :n".to_string()];
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(at))
        .expression_attribute_names("#n", TOTAL)
        .expression_attribute_values(":n", AttributeValue::N(delta.total.to_string()));
    for (i, (group, n)) in delta.groups.iter().enumerate() {
        parts.push(format!("#g{i} :g{i}"));
        update = update
            .expression_attribute_names(format!("#g{i}"), group_attr(group))
            .expression_attribute_values(format!(":g{i}"), AttributeValue::N(n.to_string()));
    }
    update
        .update_expression(format!("ADD {}", parts.join(", ")))
        .build()
        .map_err(build_err)
}
