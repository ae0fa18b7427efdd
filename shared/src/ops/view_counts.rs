//! Saved views' counts checked, as `gridctl verify` reports them and `repair` mends them.
//!
//! A view's counts are the sum of the memberships the issues' watermark heads record: the
//! commit that records a membership adds it to the count in the same transaction, so the two
//! agree at every instant, and a count is off only after a fault outside the product (a hand
//! edit, a restore of some items). The check compares each count item with the heads' sum
//! for its shard, for the shape each view has now; count items of a deleted view, or of a
//! shape it no longer has, are strays. (Whether the heads' memberships are the ones the
//! records call for is the entries' check: a view's entries derive from the same columns.)
//! Under traffic a scan reads heads and counts at different instants, so a reported shard may
//! be in step again by the repair: it rewrites a shard only if it still holds what the scan
//! read, and the next round checks again.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::domain::ids::TenantId;
use crate::keys;
use crate::store::index::watermark_item::from_head;
use crate::store::records::items::{key, pk_of, sk_of};
use crate::store::{Item, Store, StoreError, condition_held};

/// A count item: a view's shape's shard.
pub type CountKey = (TenantId, String, u64, u64);

/// A count: the view's total and its groups' (zero groups left out).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub total: i64,
    pub groups: BTreeMap<String, i64>,
}

impl Tally {
    fn normalized(mut self) -> Self {
        self.groups.retain(|_, n| *n != 0);
        self
    }
}

/// What a scan of the index saw of views' counts.
#[derive(Debug, Default)]
pub struct ViewCountScan {
    /// The memberships the watermark heads record, summed by count item.
    pub recorded: BTreeMap<CountKey, Tally>,
    /// The count items as stored.
    pub stored: BTreeMap<CountKey, Tally>,
}

impl ViewCountScan {
    /// Takes in one scanned index item: a watermark head, or a count item.
    pub fn absorb(&mut self, item: &Item) {
        let Some(pk) = pk_of(item) else { return };
        if keys::index::is_view_counts_pk(pk) {
            self.absorb_count(pk, item);
            return;
        }
        if sk_of(item) != Some(keys::index::WATERMARK_SK) {
            return;
        }
        let Some((tenant, issue)) = keys::index::parse_watermark_pk(pk) else {
            return;
        };
        let Some(committed) = from_head(&tenant, &issue, item).and_then(|w| w.committed) else {
            return;
        };
        let shard = keys::index::shard_hash(&issue) % keys::index::VIEW_COUNT_SHARDS;
        for column in committed.columns.keys() {
            let Some((view, rev, group)) = keys::index::parse_view_column(column) else {
                continue;
            };
            let tally = self
                .recorded
                .entry((tenant.clone(), view.to_string(), rev, shard))
                .or_default();
            match group {
                None => tally.total += 1,
                Some(g) => *tally.groups.entry(g.to_string()).or_default() += 1,
            }
        }
    }

    fn absorb_count(&mut self, pk: &str, item: &Item) {
        let Some(tenant) = keys::tenant_of(pk).and_then(TenantId::parse) else {
            return;
        };
        let Some((view, rev, shard)) = sk_of(item).and_then(keys::index::parse_view_counts_sk)
        else {
            return;
        };
        let mut tally = Tally::default();
        for (name, value) in item {
            let Some(n) = value.as_n().ok().and_then(|n| n.parse::<i64>().ok()) else {
                continue;
            };
            if name == "n" {
                tally.total = n;
            } else if let Some(group) = name.strip_prefix('g') {
                tally.groups.insert(group.to_string(), n);
            }
        }
        self.stored
            .insert((tenant, view.to_string(), rev, shard), tally.normalized());
    }
}

/// What is wrong with a view's count item.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum ViewCountDrift {
    /// A shard of a live view's shape that differs from the memberships recorded.
    Wrong {
        tenant: TenantId,
        view: String,
        rev: u64,
        shard: u64,
        expected: Tally,
        /// `None`: no item.
        actual: Option<Tally>,
    },
    /// An item of a view that is gone, or of a shape it no longer has.
    Stray {
        tenant: TenantId,
        view: String,
        rev: u64,
        shard: u64,
    },
}

impl ViewCountDrift {
    /// Whether this is an item of a view or shape gone: inert garbage, not a wrong count (a
    /// commit holding definitions from before a view's delete can leave one after the fill
    /// job removed the others).
    pub fn is_stray(&self) -> bool {
        matches!(self, Self::Stray { .. })
    }
}

/// The drift of views' counts; `live`: each view's current shape, by tenant and id.
pub fn check(
    scan: &ViewCountScan,
    live: &BTreeSet<(TenantId, String, u64)>,
) -> Vec<ViewCountDrift> {
    let mut out = Vec::new();
    let keys: BTreeSet<&CountKey> = scan.recorded.keys().chain(scan.stored.keys()).collect();
    for k @ (tenant, view, rev, shard) in keys {
        let is_live = live.contains(&(tenant.clone(), view.clone(), *rev));
        let actual = scan.stored.get(k);
        if !is_live {
            if actual.is_some() {
                out.push(ViewCountDrift::Stray {
                    tenant: tenant.clone(),
                    view: view.clone(),
                    rev: *rev,
                    shard: *shard,
                });
            }
            continue;
        }
        let expected = scan
            .recorded
            .get(k)
            .cloned()
            .unwrap_or_default()
            .normalized();
        let agrees = match actual {
            Some(a) => *a == expected,
            None => expected == Tally::default(),
        };
        if !agrees {
            out.push(ViewCountDrift::Wrong {
                tenant: tenant.clone(),
                view: view.clone(),
                rev: *rev,
                shard: *shard,
                expected,
                actual: actual.cloned(),
            });
        }
    }
    out
}

/// Mends what [`check`] found: a wrong shard is written as the heads say, if it still holds
/// what the scan read; a stray item is deleted. Returns the problems acted on.
pub async fn repair(store: &Store, found: &[ViewCountDrift]) -> Result<usize, StoreError> {
    let mut acted = 0;
    for drift in found {
        match drift {
            ViewCountDrift::Wrong {
                tenant,
                view,
                rev,
                shard,
                expected,
                actual,
            } => {
                let at = (
                    keys::index::view_counts_pk(tenant, view),
                    keys::index::view_counts_sk(view, *rev, *shard),
                );
                if rewrite(store, at, expected, actual.as_ref()).await? {
                    acted += 1;
                }
            }
            ViewCountDrift::Stray {
                tenant,
                view,
                rev,
                shard,
            } => {
                let at = (
                    keys::index::view_counts_pk(tenant, view),
                    keys::index::view_counts_sk(view, *rev, *shard),
                );
                store.index().delete_index_keys(vec![at]).await?;
                acted += 1;
            }
        }
    }
    Ok(acted)
}

/// Puts a count item with `expected`, conditioned on it holding `read` (absent: no item).
async fn rewrite(
    store: &Store,
    (pk, sk): (String, String),
    expected: &Tally,
    read: Option<&Tally>,
) -> Result<bool, StoreError> {
    let mut item = key(pk, &sk);
    item.insert("n".into(), AttributeValue::N(expected.total.to_string()));
    for (g, n) in &expected.groups {
        item.insert(format!("g{g}"), AttributeValue::N(n.to_string()));
    }
    let mut put = store
        .client
        .put_item()
        .table_name(&store.index)
        .set_item(Some(item));
    put = match read {
        None => put.condition_expression("attribute_not_exists(PK)"),
        Some(read) => {
            let mut parts = vec!["#n = :n".to_string()];
            put = put
                .expression_attribute_names("#n", "n")
                .expression_attribute_values(":n", AttributeValue::N(read.total.to_string()));
            for (i, (g, n)) in read.groups.iter().enumerate() {
                parts.push(format!("#g{i} = :g{i}"));
                put = put
                    .expression_attribute_names(format!("#g{i}"), format!("g{g}"))
                    .expression_attribute_values(
                        format!(":g{i}"),
                        AttributeValue::N(n.to_string()),
                    );
            }
            put.condition_expression(parts.join(" AND "))
        }
    };
    condition_held("PutItem", put.send().await)
}
