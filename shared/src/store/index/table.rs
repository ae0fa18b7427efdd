//! Index-table I/O: attribute-index entries, the indexer's per-issue watermarks and parked
//! markers, and the two reads of the request paths (a page of a column, a page of an inbox).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};

use crate::cursor::Position;
use crate::domain::ids::{IssueId, TenantId};
use crate::keys;
use crate::model::EntryRef;
use crate::model::watermark::{Basis, CommitAt, Pending, Replaces, Step, Watermark};
use crate::store::IndexTable;
use crate::store::index::view_counts::{ConditionalPut, ViewCounts};
use crate::store::index::watermark_item::{self, attr, head_item};
use crate::store::query::Query;
use crate::store::records::items::{key, string};
use crate::store::{Item, Page, StoreError, build_err, condition_held};

/// A participation copy as an inbox reads it.
#[derive(Debug, Clone)]
pub struct InboxCopy {
    pub sk: String,
    pub issue_id: String,
    pub role: String,
    /// The issue's list summary, when the copy carries one.
    pub summary: Option<String>,
}

/// A column entry as a page of its partition returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnHit {
    pub issue_id: String,
    pub sk: String,
    /// The issue's list summary, when the entry carries one.
    pub summary: Option<String>,
}

/// A read of one column partition.
#[derive(Debug, Clone)]
pub struct ColumnQuery {
    pub pk: String,
    /// Inclusive sort-key bounds.
    pub from: String,
    pub to: String,
    pub forward: bool,
    pub limit: i32,
}

/// A watermark write's condition: there is none yet, or the stored version is one the write
/// may replace (than `:v`).
fn newer_watermark_condition(replaces: Replaces) -> &'static str {
    match replaces {
        Replaces::OlderOrSame => "attribute_not_exists(version) OR version <= :v",
        Replaces::Older => "attribute_not_exists(version) OR version < :v",
    }
}

/// The head put of a commit, on its condition: its stored version is one the commit
/// `replaces`, its revision is the one read, and no other attempt recorded an intent since
/// (an intent adds to the pending set and leaves the revision): replacing the head would lose
/// what that attempt may write, entries whose summary is not the one committed here.
fn head_put(
    item: Item,
    read_rev: Option<u64>,
    (replaces, pending, version): (Replaces, usize, u64),
) -> ConditionalPut {
    let condition = format!(
        "({}) AND {} AND (attribute_not_exists(#pend) OR size(#pend) = :pending)",
        newer_watermark_condition(replaces),
        revision_condition(read_rev)
    );
    let names = HashMap::from([
        (
            "#rev".to_string(),
            watermark_item::attr::REVISION.to_string(),
        ),
        ("#pend".to_string(), attr::PENDING.to_string()),
    ]);
    let mut values = HashMap::from([
        (
            ":pending".to_string(),
            AttributeValue::N(pending.to_string()),
        ),
        (":v".to_string(), AttributeValue::N(version.to_string())),
    ]);
    if let Some(rev) = read_rev {
        values.insert(":rev".into(), AttributeValue::N(rev.to_string()));
    }
    ConditionalPut {
        item,
        condition,
        names,
        values,
    }
}

/// How long a tombstone watermark outlives its issue before DynamoDB's TTL removes it
/// (attribute `expires_at`). A tombstone only has to outlast every delivery of the issue's
/// older records: the stream keeps records 24 hours, so no retry, bisected batch or second
/// mapping can deliver one older than that, and `gridctl replay` reads the stream too (and
/// re-indexes from the current record, where a deleted issue is simply absent). A week is
/// far past both; TTL deletes within days of expiry, which only makes it later.
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// The watermark's head during an intent: `wm`'s head with `intent`'s tokens added to its
/// pending ones (the largest the head gets).
pub fn intent_head_item(
    tenant: &TenantId,
    issue_id: &IssueId,
    wm: &Watermark,
    intent: &Pending,
) -> Item {
    let layout = wm.buckets.clone();
    let mut item = head_item(
        tenant,
        issue_id,
        wm.version,
        wm.committed.as_ref(),
        &layout,
        &wm.overlay,
    );
    if let Some(rev) = wm.rev {
        item.insert(
            watermark_item::attr::REVISION.into(),
            AttributeValue::N(rev.to_string()),
        );
    }
    if let Some(fields_rev) = wm.fields_rev {
        watermark_item::set_fields_revision(&mut item, fields_rev);
    }
    let mut tokens = wm.pending.tokens();
    tokens.extend(intent.tokens());
    if !tokens.is_empty() {
        item.insert(
            attr::PENDING.into(),
            AttributeValue::Ss(tokens.into_iter().collect()),
        );
    }
    item
}

/// A BatchWriteItem request deleting the index item at `(pk, sk)`.
fn delete_request(pk: String, sk: &str) -> Result<WriteRequest, StoreError> {
    let req = DeleteRequest::builder()
        .set_key(Some(key(pk, sk)))
        .build()
        .map_err(build_err)?;
    Ok(WriteRequest::builder().delete_request(req).build())
}

/// A fresh head revision (see [`watermark_item::attr::REVISION`]).
pub(crate) fn new_revision() -> AttributeValue {
    AttributeValue::N(rand::random::<u64>().to_string())
}

/// The condition that the head's revision (named `#rev`; `:rev` its value) is still `read`'s.
pub(crate) fn revision_condition(read: Option<u64>) -> &'static str {
    match read {
        Some(_) => "#rev = :rev",
        None => "attribute_not_exists(#rev)",
    }
}

/// A unit the indexer parked: a reason no retry fixes stopped it, and the batch went on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Parked {
    pub tenant: TenantId,
    /// The issue id, or `#project#{id}` / `#record#{sequence number}`.
    pub subject: String,
    pub reason: String,
    pub sequence_number: String,
    pub parked_at: String,
}

/// A parked marker item as a [`Parked`] (`None` for any other item).
pub fn parked_from_item(item: &Item) -> Option<Parked> {
    let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let pk = text(keys::PK)?;
    if !keys::index::is_parked_pk(&pk) {
        return None;
    }
    Some(Parked {
        tenant: TenantId::parse(keys::tenant_of(&pk)?)?,
        subject: text(keys::SK)?,
        reason: text("reason").unwrap_or_default(),
        sequence_number: text("sequence_number").unwrap_or_default(),
        parked_at: text("parked_at").unwrap_or_default(),
    })
}

impl IndexTable<'_> {
    /// The head of the issue's watermark (strongly consistent): everything but the fields of
    /// a bucketed watermark (see [`IndexTable::read_buckets`]). Issues never indexed have none.
    #[tracing::instrument(skip_all, fields(op = "get_watermark"))]
    pub async fn get_watermark(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Option<Watermark>, StoreError> {
        let key = key(
            keys::index::watermark_pk(tenant, issue_id),
            keys::index::WATERMARK_SK,
        );
        let Some(item) = self.store.get_item(&self.store.index, key).await? else {
            return Ok(None);
        };
        watermark_item::from_head(tenant, issue_id, &item)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt("watermark head".into()))
    }

    /// The watermark heads of these issues, as [`IndexTable::get_watermark`] reads each, in
    /// strongly consistent BatchGetItems of 100: a stream batch's issues learn where they stand
    /// in one round trip rather than one each. An issue never indexed is absent.
    #[tracing::instrument(skip_all, fields(op = "get_watermarks", n = issues.len()))]
    pub async fn get_watermarks(
        &self,
        issues: &[(&TenantId, &IssueId)],
    ) -> Result<BTreeMap<(TenantId, IssueId), Watermark>, StoreError> {
        let mut named = BTreeMap::new();
        let keys = issues
            .iter()
            .map(|&(tenant, issue_id)| {
                let pk = keys::index::watermark_pk(tenant, issue_id);
                named.insert(pk.clone(), (tenant.clone(), issue_id.clone()));
                key(pk, keys::index::WATERMARK_SK)
            })
            .collect();
        let mut heads = BTreeMap::new();
        for item in self.store.batch_get(&self.store.index, keys, true).await? {
            let pk = crate::store::records::items::pk_of(&item).unwrap_or_default();
            let Some((tenant, issue_id)) = named.remove(pk) else {
                continue;
            };
            let wm = watermark_item::from_head(&tenant, &issue_id, &item)
                .ok_or_else(|| StoreError::Corrupt("watermark head".into()))?;
            heads.insert((tenant, issue_id), wm);
        }
        Ok(heads)
    }

    /// How many entries a partition holds (an issue's children in one state): Queries that
    /// count (`Select: COUNT`), eventually consistent, billed on the bytes they pass over.
    pub async fn count(&self, pk: String) -> Result<u64, StoreError> {
        self.store
            .count(Query::partition(&self.store.index, pk))
            .await
    }

    /// Reads buckets `which` of the watermark's layout into its committed basis (strongly
    /// consistent): one Query when it is all of them, else a GetItem each.
    #[tracing::instrument(skip_all, fields(op = "read_buckets", n = which.len()))]
    pub async fn read_buckets(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        wm: &mut Watermark,
        which: &BTreeSet<u16>,
    ) -> Result<(), StoreError> {
        let n = wm.buckets.count;
        if which.is_empty() || n == 0 {
            return Ok(());
        }
        let pk = keys::index::watermark_pk(tenant, issue_id);
        let fields_of = |item: &Item| {
            watermark_item::bucket_fields(item)
                .ok_or_else(|| StoreError::Corrupt("watermark bucket".into()))
        };
        if which.len() == usize::from(n) {
            let query = Query::partition(&self.store.index, pk)
                .sk_begins_with(&keys::index::watermark_buckets_prefix(n))
                .consistent(true);
            let mut found = BTreeMap::new();
            for item in self.store.query_all(query).await? {
                let sk = crate::store::records::items::sk_of(&item)
                    .unwrap_or_default()
                    .to_string();
                found.insert(sk, fields_of(&item)?);
            }
            for k in 0..n {
                wm.absorb_bucket(k, found.remove(&keys::index::watermark_bucket_sk(n, k)));
            }
            return Ok(());
        }
        let reads = which.iter().map(|&k| {
            let key = key(pk.clone(), &keys::index::watermark_bucket_sk(n, k));
            async move { (k, self.store.get_item(&self.store.index, key).await) }
        });
        for (k, item) in futures::future::join_all(reads).await {
            let fields = item?.as_ref().map(fields_of).transpose()?;
            wm.absorb_bucket(k, fields);
        }
        Ok(())
    }

    /// Records on the watermark, before a write, what the write may change (see
    /// [`Watermark::step`]): the intent's tokens join `pending` (an `ADD`, so two intents
    /// recorded at once both land). A watermark of the previous format gets that layout's
    /// intent: the touched keys join its `pending`, the deleted ones leave its `entries`.
    /// Conditioned like the commit; `false` when a newer watermark exists.
    #[tracing::instrument(skip_all, fields(op = "record_intent"))]
    pub async fn record_intent(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        wm: &Watermark,
        step: &Step,
        (version, replaces): (u64, Replaces),
    ) -> Result<bool, StoreError> {
        let mut update = self
            .store
            .client
            .update_item()
            .table_name(&self.store.index)
            .set_key(Some(key(
                keys::index::watermark_pk(tenant, issue_id),
                keys::index::WATERMARK_SK,
            )));
        let refs = |es: &mut dyn Iterator<Item = EntryRef<'_>>| -> Vec<String> {
            let set: BTreeSet<String> = es
                .map(|e| keys::index::entry_ref(tenant, e.pk, e.sk))
                .collect();
            set.into_iter().collect()
        };
        let expression = if wm.legacy.is_some() {
            let touched = refs(&mut step.puts.iter().chain(step.deletes.iter()));
            if touched.is_empty() {
                return Ok(true);
            }
            update = update.expression_attribute_values(":touched", AttributeValue::Ss(touched));
            if step.deletes.is_empty() {
                "ADD pending :touched".to_string()
            } else {
                let deletes = refs(&mut step.deletes.iter());
                update =
                    update.expression_attribute_values(":deletes", AttributeValue::Ss(deletes));
                "ADD pending :touched DELETE entries :deletes".to_string()
            }
        } else {
            let tokens: Vec<String> = step.intent.tokens().into_iter().collect();
            if tokens.is_empty() {
                return Ok(true);
            }
            update = update
                .expression_attribute_names("#p", attr::PENDING)
                .expression_attribute_values(":tokens", AttributeValue::Ss(tokens))
                .expression_attribute_values(
                    ":fmt",
                    AttributeValue::N(watermark_item::FORMAT.into()),
                );
            // A head's format is its committed basis' (an intent keeps it): only a first
            // intent, on no head yet, sets it.
            "ADD #p :tokens SET fmt = if_not_exists(fmt, :fmt)".to_string()
        };
        let update = update
            .update_expression(expression)
            .condition_expression(newer_watermark_condition(replaces))
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()));
        // A commit counting views puts the head in a transaction, which a write meeting it
        // waits out.
        crate::store::condition_held_through_conflicts("UpdateItem", || update.clone().send()).await
    }

    /// Records that the index reflects `desired` (`None`: the issue is gone) at `version`:
    /// the buckets whose content changes first, then the head, each conditioned on its stored
    /// version being one it `replaces`, so an older delivery never
    /// overwrites a newer one, and on the pending set holding `pending` tokens (what was read
    /// and this attempt's own intent); `false` when a condition failed. A deleted issue's buckets go
    /// before its tombstone (its entries are gone by then); a replaced layout's, after the
    /// head that stops naming them. `fields_rev`: the project's field-definition revision
    /// `desired` was derived under. Returns the writes made.
    #[tracing::instrument(skip_all, fields(op = "commit_watermark"))]
    pub async fn commit_watermark(
        &self,
        (tenant, issue_id): (&TenantId, &IssueId),
        wm: &Watermark,
        desired: Option<&Basis>,
        at: CommitAt,
        (replaces, counts): (Replaces, &ViewCounts),
    ) -> Result<(bool, usize), StoreError> {
        let CommitAt {
            version,
            buckets,
            fields_rev,
            pending_count: pending,
        } = at;
        let (mut head, bucket_items) =
            watermark_item::commit_items(tenant, issue_id, wm, desired, version, buckets);
        head.insert(watermark_item::attr::REVISION.into(), new_revision());
        if desired.is_some() {
            watermark_item::set_fields_revision(&mut head, fields_rev);
        }
        let mut writes = 0;
        for item in bucket_items {
            writes += 1;
            if !self.put_bucket(item, version).await? {
                return Ok((false, writes));
            }
        }
        let pk = keys::index::watermark_pk(tenant, issue_id);
        if desired.is_none() {
            // Every bucket item of the issue, of any layout (one a failed layout change left
            // behind too): its entries are gone by now.
            writes += self.delete_index_keys(self.bucket_keys(&pk).await?).await?;
        }
        writes += 1;
        let head = head_put(head, wm.rev, (replaces, pending, version));
        if !counts.is_empty() {
            writes += counts.len();
        }
        let held = self.put_head((tenant, issue_id), head, counts).await?;
        if !held {
            return Ok((false, writes));
        }
        // A replaced layout's buckets, once the head no longer names them.
        let old = wm.buckets.count;
        if old > 0 && old != buckets && desired.is_some() {
            let stale = (0..old)
                .map(|k| (pk.clone(), keys::index::watermark_bucket_sk(old, k)))
                .collect();
            writes += self.delete_index_keys(stale).await?;
        }
        Ok((true, writes))
    }

    /// The keys of every bucket item of a watermark partition (strongly consistent).
    async fn bucket_keys(&self, pk: &str) -> Result<Vec<(String, String)>, StoreError> {
        let query = Query::partition(&self.store.index, pk.to_string())
            .sk_begins_with(keys::index::WATERMARK_BUCKETS)
            .consistent(true);
        Ok(self
            .store
            .query_all(query)
            .await?
            .iter()
            .filter_map(|i| {
                crate::store::records::items::sk_of(i).map(|sk| (pk.to_string(), sk.to_string()))
            })
            .collect())
    }

    /// A PutItem of a watermark bucket, conditioned on its stored version being at most
    /// `version` (an equal one holds the same content: a retry of a write cut short).
    async fn put_bucket(&self, item: Item, version: u64) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .put_item()
            .table_name(&self.store.index)
            .set_item(Some(item))
            .condition_expression(newer_watermark_condition(Replaces::OlderOrSame))
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .send()
            .await;
        condition_held("PutItem", result)
    }

    /// Deletes index items by key, 25 a BatchWriteItem. Returns the requests made.
    pub(crate) async fn delete_index_keys(
        &self,
        at: Vec<(String, String)>,
    ) -> Result<usize, StoreError> {
        let requests = at
            .into_iter()
            .map(|(pk, sk)| delete_request(pk, &sk))
            .collect::<Result<Vec<_>, _>>()?;
        self.batch_write_all(requests).await
    }

    /// Parks a unit: a marker item in the tenant's parked partition (put, so parking twice is
    /// harmless) and, for an issue, a flag on its watermark so that its next successful
    /// indexing removes the marker. The flag is best effort: the watermark may be the item
    /// that is at DynamoDB's limit; the marker is what counts.
    #[tracing::instrument(skip_all, fields(op = "park"))]
    pub async fn park(&self, parked: &Parked, issue: bool) -> Result<(), StoreError> {
        let mut item = key(keys::index::parked_pk(&parked.tenant), &parked.subject);
        item.insert("reason".into(), string(&parked.reason));
        item.insert("sequence_number".into(), string(&parked.sequence_number));
        item.insert("parked_at".into(), string(&parked.parked_at));
        self.store.put(&self.store.index, item).await?;
        if let (true, Some(issue_id)) = (issue, IssueId::parse(&parked.subject)) {
            let flagged = self
                .store
                .client
                .update_item()
                .table_name(&self.store.index)
                .set_key(Some(key(
                    keys::index::watermark_pk(&parked.tenant, &issue_id),
                    keys::index::WATERMARK_SK,
                )))
                .update_expression("SET #p = :t")
                .expression_attribute_names("#p", attr::PARKED)
                .expression_attribute_values(":t", AttributeValue::Bool(true))
                .send()
                .await;
            if let Err(e) = flagged {
                tracing::warn!(error = %aws_sdk_dynamodb::Error::from(e), "could not flag the parked issue's watermark");
            }
        }
        Ok(())
    }

    /// Removes an issue's parked marker (idempotent: deleting no item is no error). A
    /// BatchWriteItem, which the indexer may already call, rather than another permission.
    #[tracing::instrument(skip_all, fields(op = "unpark"))]
    pub async fn unpark(&self, tenant: &TenantId, subject: &str) -> Result<(), StoreError> {
        let req = delete_request(keys::index::parked_pk(tenant), subject)?;
        self.batch_write(vec![req]).await
    }

    /// Puts and deletes entries in batches of 25, retrying unprocessed items (throttling) with
    /// jittered exponential backoff. Both are idempotent, so a retried batch is harmless.
    /// Returns the number of write requests made.
    #[tracing::instrument(
        skip_all,
        fields(op = "write_entries", puts = tracing::field::Empty, deletes = tracing::field::Empty)
    )]
    pub async fn write_entries<'a>(
        &self,
        puts: impl IntoIterator<Item = EntryRef<'a>>,
        deletes: impl IntoIterator<Item = EntryRef<'a>>,
    ) -> Result<usize, StoreError> {
        let mut requests = Vec::new();
        for e in deletes {
            requests.push(delete_request(e.pk.to_string(), e.sk)?);
        }
        let deleted = requests.len();
        for e in puts {
            let mut item = key(e.pk.to_string(), e.sk);
            item.insert("issue_id".into(), string(e.issue_id));
            if let Some(role) = e.role {
                item.insert("role".into(), string(role));
            }
            if let Some(summary) = e.summary {
                item.insert(crate::model::summary::ATTR.into(), string(summary));
            }
            let req = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            requests.push(WriteRequest::builder().put_request(req).build());
        }
        let span = tracing::Span::current();
        span.record("deletes", deleted);
        span.record("puts", requests.len() - deleted);
        self.batch_write_all(requests).await
    }

    /// Sends write requests to the index table, 25 a BatchWriteItem; returns how many.
    pub(super) async fn batch_write_all(
        &self,
        requests: Vec<WriteRequest>,
    ) -> Result<usize, StoreError> {
        self.store
            .batch_write_all(&self.store.index, requests)
            .await
    }

    async fn batch_write(&self, pending: Vec<WriteRequest>) -> Result<(), StoreError> {
        self.store.batch_write(&self.store.index, pending).await
    }

    /// One page of a column partition: the issue ids in order with their entries' sort keys
    /// (so a page can end at any entry), and where the next page starts.
    #[tracing::instrument(skip_all, fields(op = "query_column"))]
    pub async fn query_column(
        &self,
        column: &ColumnQuery,
        start: Option<&Position>,
    ) -> Result<Page<ColumnHit>, StoreError> {
        let query = Query::partition(&self.store.index, column.pk.clone())
            .sk_between(&column.from, &column.to)
            .forward(column.forward)
            .limit(Some(column.limit))
            .after(start);
        let Page { items, next } = self.store.query_page(query).await?;
        let items = items
            .iter()
            .filter_map(|i| match (i.get("issue_id"), i.get(keys::SK)) {
                (Some(AttributeValue::S(id)), Some(AttributeValue::S(sk))) => {
                    let summary = match i.get(crate::model::summary::ATTR) {
                        Some(AttributeValue::S(text)) => Some(text.clone()),
                        _ => None,
                    };
                    Some(ColumnHit {
                        issue_id: id.clone(),
                        sk: sk.clone(),
                        summary,
                    })
                }
                _ => None,
            })
            .collect();
        Ok(Page { items, next })
    }

    /// One participation partition, newest first, after `after` (a sort key already
    /// returned); `next` is set when more remain.
    #[tracing::instrument(skip_all, fields(op = "query_inbox"))]
    pub async fn query_inbox(
        &self,
        pk: &str,
        limit: i32,
        after: Option<&str>,
    ) -> Result<Page<InboxCopy>, StoreError> {
        let start = after.map(|sk| {
            Item::from([
                (keys::PK.to_string(), string(pk)),
                (keys::SK.to_string(), string(sk)),
            ])
        });
        let query = Query::partition(&self.store.index, pk.to_string())
            .forward(false)
            .limit(Some(limit))
            .start_at(start);
        let text = |i: &Item, k: &str| match i.get(k) {
            Some(AttributeValue::S(v)) => v.clone(),
            _ => String::new(),
        };
        self.store.query_page(query).await?.try_map(|i| {
            Ok(InboxCopy {
                sk: text(&i, keys::SK),
                issue_id: text(&i, "issue_id"),
                role: text(&i, "role"),
                summary: match i.get(crate::model::summary::ATTR) {
                    Some(AttributeValue::S(v)) => Some(v.clone()),
                    _ => None,
                },
            })
        })
    }
}
