//! The index table: attribute-index entries, the indexer's per-issue watermarks, and the reads
//! the grid makes (one Query of a column, one BatchGetItem of the issues).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use rand::Rng;

use super::items::{issue_from, key};
use super::{
    Item, Page, Store, StoreError, build_err, condition_held, position_of, sdk, start_key,
};
use crate::cursor::Position;
use crate::domain::Issue;
use crate::index::Entry;
use crate::keys;

/// BatchWriteItem takes at most 25 requests.
const WRITE_CHUNK: usize = 25;
/// Rounds of retrying unprocessed items (throttling) before giving up on a batch.
const MAX_ROUNDS: u32 = 8;

/// What the indexer last wrote for an issue: the version it reflects and its entries' keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watermark {
    pub version: u64,
    pub entries: BTreeSet<Entry>,
    /// Entries recorded as about to be written by a write that has not finished (or was cut
    /// short): they may or may not be in the index.
    pub pending: BTreeSet<Entry>,
}

/// A participation copy as an inbox reads it.
#[derive(Debug, Clone)]
pub struct InboxCopy {
    pub sk: String,
    pub issue_id: String,
    pub role: String,
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

/// A watermark write's condition: the stored version is older than `:v` (or equal, when
/// `allow_equal`), or there is none yet.
fn newer_watermark_condition(allow_equal: bool) -> &'static str {
    if allow_equal {
        "attribute_not_exists(version) OR version <= :v"
    } else {
        "attribute_not_exists(version) OR version < :v"
    }
}

/// The watermark as an item: its version and its entries' keys as a string set.
pub(super) fn watermark_item(tenant: &str, issue_id: &str, wm: &Watermark) -> Item {
    let mut item = key(keys::watermark_pk(tenant, issue_id), keys::WATERMARK_SK);
    item.insert("version".into(), AttributeValue::N(wm.version.to_string()));
    if !wm.entries.is_empty() {
        item.insert(
            "entries".into(),
            AttributeValue::Ss(
                wm.entries
                    .iter()
                    .map(|e| keys::entry_ref(&e.pk, &e.sk))
                    .collect(),
            ),
        );
    }
    item
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

async fn backoff(round: u32) {
    let ceiling = 10u64 << round.min(6);
    // The RNG handle is not Send: draw before awaiting.
    let pause = rand::thread_rng().gen_range(ceiling / 2..=ceiling);
    tokio::time::sleep(Duration::from_millis(pause)).await;
}

impl Store {
    /// The issue's watermark (strongly consistent). Issues never indexed have none.
    #[tracing::instrument(skip_all, fields(op = "get_watermark"))]
    pub async fn get_watermark(
        &self,
        tenant: &str,
        issue_id: &str,
    ) -> Result<Option<Watermark>, StoreError> {
        let key = key(keys::watermark_pk(tenant, issue_id), keys::WATERMARK_SK);
        let Some(item) = self.get_item(&self.index, key).await? else {
            return Ok(None);
        };
        // A watermark that only ever recorded pending entries has no version yet.
        let version = match item.get("version") {
            Some(AttributeValue::N(n)) => n
                .parse()
                .map_err(|_| StoreError::Corrupt("watermark version".into()))?,
            None => 0,
            _ => {
                return Err(StoreError::Corrupt(
                    "watermark version is not a number".into(),
                ));
            }
        };
        let set = |attr: &str| -> BTreeSet<Entry> {
            match item.get(attr) {
                Some(AttributeValue::Ss(refs)) => refs
                    .iter()
                    .filter_map(|r| keys::parse_entry_ref(r))
                    .map(|(pk, sk)| Entry {
                        pk: pk.into(),
                        sk: sk.into(),
                        issue_id: issue_id.into(),
                        role: None,
                    })
                    .collect(),
                _ => BTreeSet::new(),
            }
        };
        let (entries, pending) = (set("entries"), set("pending"));
        Ok(Some(Watermark {
            version,
            entries,
            pending,
        }))
    }

    /// Records that the index reflects `version` of the issue. Conditioned on the stored
    /// version being older (or equal, when `allow_equal`), so an older delivery never overwrites
    /// a newer one; `false` when the condition failed.
    #[tracing::instrument(skip_all, fields(op = "put_watermark"))]
    pub async fn put_watermark(
        &self,
        tenant: &str,
        issue_id: &str,
        wm: &Watermark,
        allow_equal: bool,
    ) -> Result<bool, StoreError> {
        let item = watermark_item(tenant, issue_id, wm);
        let condition = newer_watermark_condition(allow_equal);
        let result = self
            .client
            .put_item()
            .table_name(&self.index)
            .set_item(Some(item))
            .condition_expression(condition)
            .expression_attribute_values(":v", AttributeValue::N(wm.version.to_string()))
            .send()
            .await;
        condition_held("PutItem", result)
    }

    /// Records on the issue's watermark, before a write, what the write is about to change:
    /// every entry it will put or delete joins `pending` (it may or may not be in the index
    /// from now on), and the ones it will delete leave `entries` (they are no longer known to
    /// be there). Whatever happens to the write — cut short, its record then skipped to the
    /// on-failure queue — the watermark never claims an entry that may be missing nor forgets
    /// one that may exist, so the next diff is still exact. Conditioned like
    /// [`Store::put_watermark`]; `false` when a newer watermark exists.
    #[tracing::instrument(skip_all, fields(op = "record_intent"))]
    pub async fn record_intent(
        &self,
        tenant: &str,
        issue_id: &str,
        (puts, deletes): (&[&Entry], &[&Entry]),
        version: u64,
        allow_equal: bool,
    ) -> Result<bool, StoreError> {
        let refs = |es: &[&Entry]| -> Vec<String> {
            es.iter().map(|e| keys::entry_ref(&e.pk, &e.sk)).collect()
        };
        let mut actions = Vec::new();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.index)
            .set_key(Some(key(
                keys::watermark_pk(tenant, issue_id),
                keys::WATERMARK_SK,
            )));
        let touched: Vec<&Entry> = puts.iter().chain(deletes).copied().collect();
        if !touched.is_empty() {
            actions.push("ADD pending :touched");
            update =
                update.expression_attribute_values(":touched", AttributeValue::Ss(refs(&touched)));
        }
        if !deletes.is_empty() {
            actions.push("DELETE entries :deletes");
            update =
                update.expression_attribute_values(":deletes", AttributeValue::Ss(refs(deletes)));
        }
        if actions.is_empty() {
            return Ok(true);
        }
        let condition = newer_watermark_condition(allow_equal);
        let result = update
            .update_expression(actions.join(" "))
            .condition_expression(condition)
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Puts and deletes entries in batches of 25, retrying unprocessed items (throttling) with
    /// jittered exponential backoff. Both are idempotent, so a retried batch is harmless.
    /// Returns the number of write requests made.
    #[tracing::instrument(skip_all, fields(op = "write_entries", puts = puts.len(), deletes = deletes.len()))]
    pub async fn write_entries(
        &self,
        puts: &[&Entry],
        deletes: &[&Entry],
    ) -> Result<usize, StoreError> {
        let mut requests = Vec::with_capacity(puts.len() + deletes.len());
        for e in deletes {
            let req = DeleteRequest::builder()
                .set_key(Some(key(e.pk.clone(), &e.sk)))
                .build()
                .map_err(build_err)?;
            requests.push(WriteRequest::builder().delete_request(req).build());
        }
        for e in puts {
            let mut item = key(e.pk.clone(), &e.sk);
            item.insert("issue_id".into(), s(&e.issue_id));
            if let Some(role) = &e.role {
                item.insert("role".into(), s(role));
            }
            let req = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            requests.push(WriteRequest::builder().put_request(req).build());
        }
        let count = requests.len();
        for chunk in requests.chunks(WRITE_CHUNK) {
            let mut pending = chunk.to_vec();
            let mut round = 0;
            while !pending.is_empty() {
                if round == MAX_ROUNDS {
                    return Err(StoreError::Contention(MAX_ROUNDS));
                }
                if round > 0 {
                    backoff(round).await;
                }
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.index, pending)
                    .send()
                    .await
                    .map_err(sdk("BatchWriteItem"))?;
                pending = out
                    .unprocessed_items
                    .and_then(|mut m| m.remove(&self.index))
                    .unwrap_or_default();
                round += 1;
            }
        }
        Ok(count)
    }

    /// One page of a column partition: the issue ids in order, and where the next page starts.
    #[tracing::instrument(skip_all, fields(op = "query_column"))]
    pub async fn query_column(
        &self,
        q: &ColumnQuery,
        start: Option<&Position>,
    ) -> Result<Page<String>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.index)
            .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(&q.pk))
            .expression_attribute_values(":from", s(&q.from))
            .expression_attribute_values(":to", s(&q.to))
            .scan_index_forward(q.forward)
            .limit(q.limit)
            .set_exclusive_start_key(start_key(start))
            .send()
            .await
            .map_err(sdk("Query"))?;
        let next = position_of(out.last_evaluated_key())?;
        let items = out
            .items()
            .iter()
            .filter_map(|i| match i.get("issue_id") {
                Some(AttributeValue::S(id)) => Some(id.clone()),
                _ => None,
            })
            .collect();
        Ok(Page { items, next })
    }

    /// Issue summaries by id, in one BatchGetItem per 100 (unprocessed keys retried). Ids with
    /// no issue (deleted since they were indexed) are simply absent from the result.
    #[tracing::instrument(skip_all, fields(op = "batch_get_issues", n = ids.len()))]
    pub async fn batch_get_issues(
        &self,
        tenant: &str,
        ids: &[String],
    ) -> Result<HashMap<String, Issue>, StoreError> {
        let unique: BTreeSet<&String> = ids.iter().collect();
        let keys = unique
            .iter()
            .map(|id| key(keys::issue_pk(tenant, id), keys::ISSUE_SK))
            .collect();
        let mut found = HashMap::new();
        for item in self.batch_get_records(keys).await? {
            let issue = issue_from(item, None)?;
            found.insert(issue.id.clone(), issue);
        }
        Ok(found)
    }

    /// A page of a project's issues by number (GSI1), for re-indexing a whole project.
    #[tracing::instrument(skip_all, fields(op = "issues_of_project"))]
    pub async fn issues_of_project(
        &self,
        tenant: &str,
        project_id: &str,
        start: Option<&Position>,
    ) -> Result<Page<Issue>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.records)
            .index_name(keys::GSI1)
            .key_condition_expression("GSI1PK = :pk")
            .expression_attribute_values(":pk", s(keys::issues_by_num_gsi1_pk(tenant, project_id)))
            .set_exclusive_start_key(start_key(start))
            .send()
            .await
            .map_err(sdk("Query"))?;
        let next = position_of(out.last_evaluated_key())?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|i| issue_from(i, None))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page { items, next })
    }

    /// The issue summary alone (strongly consistent), for re-indexing one issue.
    #[tracing::instrument(skip_all, fields(op = "get_issue_summary"))]
    pub async fn get_issue_summary(
        &self,
        tenant: &str,
        issue_id: &str,
    ) -> Result<Option<Issue>, StoreError> {
        let key = key(keys::issue_pk(tenant, issue_id), keys::ISSUE_SK);
        self.get_item(&self.records, key)
            .await?
            .map(|i| issue_from(i, None))
            .transpose()
    }

    /// Removes a deleted field's value from an issue. It does not bump the version: the value
    /// was already hidden from every read, so the issue did not change for its readers.
    #[tracing::instrument(skip_all, fields(op = "remove_field_value"))]
    pub async fn remove_field_value(
        &self,
        tenant: &str,
        issue_id: &str,
        field_id: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.records)
            .set_key(Some(key(keys::issue_pk(tenant, issue_id), keys::ISSUE_SK)))
            .update_expression("REMOVE #fields.#f")
            .condition_expression("attribute_exists(#fields.#f)")
            .expression_attribute_names("#fields", super::items::attr::FIELDS)
            .expression_attribute_names("#f", field_id)
            .send()
            .await;
        // Already gone: nothing to remove.
        condition_held("UpdateItem", result).map(|_| ())
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
        let start = after
            .map(|sk| Item::from([(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(sk))]));
        let out = self
            .client
            .query()
            .table_name(&self.index)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(pk))
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(sdk("Query"))?;
        let next = position_of(out.last_evaluated_key())?;
        let text = |i: &Item, k: &str| match i.get(k) {
            Some(AttributeValue::S(v)) => v.clone(),
            _ => String::new(),
        };
        let items = out
            .items()
            .iter()
            .map(|i| InboxCopy {
                sk: text(i, keys::SK),
                issue_id: text(i, "issue_id"),
                role: text(i, "role"),
            })
            .collect();
        Ok(Page { items, next })
    }
}
