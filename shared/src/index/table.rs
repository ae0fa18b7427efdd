//! Index-table I/O: attribute-index entries, the indexer's per-issue watermarks and parked
//! markers, and the two reads of the request paths (a page of a column, a page of an inbox).

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};

use crate::cursor::Position;
use crate::domain::ids::{IssueId, TenantId};
use crate::index::Entry;
use crate::keys;
use crate::store::items::{key, string};
use crate::store::query::Query;
use crate::store::retry::Backoff;
use crate::store::{Item, Page, Store, StoreError, build_err, condition_held, sdk};

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
    /// The issue has a parked marker (see [`Store::park`]).
    pub parked: bool,
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

/// Version of a deleted issue's watermark (its tombstone): above every real version.
const TOMBSTONE: u64 = u64::MAX;

/// How long a tombstone watermark outlives its issue before DynamoDB's TTL removes it
/// (attribute `expires_at`). A tombstone only has to outlast every delivery of the issue's
/// older records: the stream keeps records 24 hours, so no retry, bisected batch or second
/// mapping can deliver one older than that, and `gridctl replay` reads the stream too (and
/// re-indexes from the current record, where a deleted issue is simply absent). A week is
/// far past both; TTL deletes within days of expiry, which only makes it later.
pub const TOMBSTONE_TTL_SECS: i64 = 7 * 24 * 3600;

/// The watermark as an item: its version and its entries' keys as a string set (pending ones
/// too, when there are any); a tombstone also gets its expiry.
pub fn watermark_item(tenant: &TenantId, issue_id: &IssueId, wm: &Watermark) -> Item {
    let mut item = key(
        keys::index::watermark_pk(tenant, issue_id),
        keys::index::WATERMARK_SK,
    );
    item.insert("version".into(), AttributeValue::N(wm.version.to_string()));
    let refs = |set: &BTreeSet<Entry>| {
        AttributeValue::Ss(
            set.iter()
                .map(|e| keys::index::entry_ref(tenant, &e.pk, &e.sk))
                .collect(),
        )
    };
    if !wm.entries.is_empty() {
        item.insert("entries".into(), refs(&wm.entries));
    }
    if !wm.pending.is_empty() {
        item.insert("pending".into(), refs(&wm.pending));
    }
    if wm.version == TOMBSTONE {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        item.insert(
            "expires_at".into(),
            AttributeValue::N((now + TOMBSTONE_TTL_SECS).to_string()),
        );
    }
    item
}

/// The watermark item as it stands between an intent and the write it announces (see
/// [`Store::record_intent`]): the deletes have left `entries`, puts and deletes are pending.
/// Its size is the watermark's largest.
pub fn intent_item(
    tenant: &TenantId,
    issue_id: &IssueId,
    wm: &Watermark,
    (puts, deletes): (&[&Entry], &[&Entry]),
) -> Item {
    let key_of = |e: &Entry| (e.pk.clone(), e.sk.clone());
    let gone: BTreeSet<_> = deletes.iter().map(|e| key_of(e)).collect();
    let during = Watermark {
        version: wm.version,
        entries: wm
            .entries
            .iter()
            .filter(|e| !gone.contains(&key_of(e)))
            .cloned()
            .collect(),
        pending: wm
            .pending
            .iter()
            .chain(puts.iter().copied())
            .chain(deletes.iter().copied())
            .cloned()
            .collect(),
        parked: wm.parked,
    };
    watermark_item(tenant, issue_id, &during)
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

/// Attribute on a watermark whose issue has a parked marker, so the next successful indexing
/// knows to remove the marker without reading it.
const PARKED_FLAG: &str = "parked";

impl Store {
    /// The issue's watermark (strongly consistent). Issues never indexed have none.
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
                    .filter_map(|r| keys::index::parse_entry_ref(tenant, r))
                    .map(|(pk, sk)| Entry {
                        pk,
                        sk,
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
            parked: item.contains_key(PARKED_FLAG),
        }))
    }

    /// Records that the index reflects `version` of the issue. Conditioned on the stored
    /// version being older (or equal, when `allow_equal`), so an older delivery never overwrites
    /// a newer one; `false` when the condition failed.
    #[tracing::instrument(skip_all, fields(op = "put_watermark"))]
    pub async fn put_watermark(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
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
        tenant: &TenantId,
        issue_id: &IssueId,
        (puts, deletes): (&[&Entry], &[&Entry]),
        version: u64,
        allow_equal: bool,
    ) -> Result<bool, StoreError> {
        let refs = |es: &[&Entry]| -> Vec<String> {
            es.iter()
                .map(|e| keys::index::entry_ref(tenant, &e.pk, &e.sk))
                .collect()
        };
        let mut actions = Vec::new();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.index)
            .set_key(Some(key(
                keys::index::watermark_pk(tenant, issue_id),
                keys::index::WATERMARK_SK,
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
        self.put(&self.index, item).await?;
        if let (true, Some(issue_id)) = (issue, IssueId::parse(&parked.subject)) {
            let flagged = self
                .client
                .update_item()
                .table_name(&self.index)
                .set_key(Some(key(
                    keys::index::watermark_pk(&parked.tenant, &issue_id),
                    keys::index::WATERMARK_SK,
                )))
                .update_expression("SET #p = :t")
                .expression_attribute_names("#p", PARKED_FLAG)
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
        let req = DeleteRequest::builder()
            .set_key(Some(key(keys::index::parked_pk(tenant), subject)))
            .build()
            .map_err(build_err)?;
        self.batch_write(vec![WriteRequest::builder().delete_request(req).build()])
            .await
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
            item.insert("issue_id".into(), string(&e.issue_id));
            if let Some(role) = &e.role {
                item.insert("role".into(), string(role));
            }
            let req = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(build_err)?;
            requests.push(WriteRequest::builder().put_request(req).build());
        }
        let count = requests.len();
        for chunk in requests.chunks(WRITE_CHUNK) {
            self.batch_write(chunk.to_vec()).await?;
        }
        Ok(count)
    }

    /// One BatchWriteItem of at most 25 requests on the index table, its unprocessed items
    /// (throttling) retried with jittered exponential backoff.
    async fn batch_write(&self, mut pending: Vec<WriteRequest>) -> Result<(), StoreError> {
        for round in 0..MAX_ROUNDS {
            if round > 0 {
                Backoff::Throttled.sleep(round).await;
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
            if pending.is_empty() {
                return Ok(());
            }
        }
        Err(StoreError::Contention(MAX_ROUNDS))
    }

    /// One page of a column partition: the issue ids in order with their entries' sort keys
    /// (so a page can end at any entry), and where the next page starts.
    #[tracing::instrument(skip_all, fields(op = "query_column"))]
    pub async fn query_column(
        &self,
        column: &ColumnQuery,
        start: Option<&Position>,
    ) -> Result<Page<(String, String)>, StoreError> {
        let query = Query::partition(&self.index, column.pk.clone())
            .sk_between(&column.from, &column.to)
            .forward(column.forward)
            .limit(Some(column.limit))
            .after(start);
        let Page { items, next } = self.query_page(query).await?;
        let items = items
            .iter()
            .filter_map(|i| match (i.get("issue_id"), i.get(keys::SK)) {
                (Some(AttributeValue::S(id)), Some(AttributeValue::S(sk))) => {
                    Some((id.clone(), sk.clone()))
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
        let query = Query::partition(&self.index, pk.to_string())
            .forward(false)
            .limit(Some(limit))
            .start_at(start);
        let text = |i: &Item, k: &str| match i.get(k) {
            Some(AttributeValue::S(v)) => v.clone(),
            _ => String::new(),
        };
        self.query_page(query).await?.try_map(|i| {
            Ok(InboxCopy {
                sk: text(&i, keys::SK),
                issue_id: text(&i, "issue_id"),
                role: text(&i, "role"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{FieldId, ProjectId};
    use crate::domain::values::{FieldDef, FieldType, StoredValue};
    use crate::domain::{Issue, IssueState, Participant, ParticipantKind, Role};
    use crate::index::entries;
    use std::collections::BTreeMap;

    /// DynamoDB's item limit.
    const LIMIT: usize = 400 * 1024;

    /// The largest issue the contract allows, at its most expensive for keys: a 128-character
    /// tenant, 400 text fields holding 1,024 four-byte characters each, a title of 256, and 100
    /// participants with 128-character user ids, each with a role.
    fn largest(
        tenant_fill: char,
        value: char,
        state: IssueState,
        at: &str,
    ) -> (Issue, Vec<FieldDef>) {
        let defs: Vec<FieldDef> = (0..400)
            .map(|i| FieldDef {
                id: FieldId::parse(&format!("01JF{i:022}")).unwrap(),
                name: format!("f{i}"),
                field_type: FieldType::Text,
                options: None,
            })
            .collect();
        let long = |n: usize| value.to_string().repeat(n);
        let fields: BTreeMap<String, StoredValue> = defs
            .iter()
            .map(|d| (d.id.to_string(), StoredValue::S(long(1024))))
            .collect();
        let participants = (0..100)
            .map(|i| Participant {
                kind: ParticipantKind::User,
                id: format!("{i:03}{}", tenant_fill.to_string().repeat(125)),
                role: Role::Assignee,
            })
            .collect();
        let issue = Issue {
            id: IssueId::numbered(1),
            project_id: ProjectId::numbered(2),
            num: u64::from(u32::MAX),
            title: long(256),
            state,
            description: None,
            fields,
            participants,
            version: 7,
            created_at: "2026-11-21T20:42:03.123Z".into(),
            updated_at: at.into(),
        };
        (issue, defs)
    }

    /// Sizes of the largest issue's watermark, and of its watermark at its largest: between
    /// the intent and the write of a change that moves every entry (closing the issue and
    /// changing every value and participant copy).
    fn sizes() -> (usize, usize, usize) {
        let tenant = TenantId::parse(&"t".repeat(128)).unwrap();
        let (a, defs) = largest(
            'u',
            '\u{10FFFF}',
            IssueState::Open,
            "2026-11-21T20:42:03.123Z",
        );
        let (b, _) = largest(
            'u',
            '\u{10FFFE}',
            IssueState::Closed,
            "2026-11-22T20:42:03.123Z",
        );
        let (ea, eb) = (entries(&tenant, &a, &defs), entries(&tenant, &b, &defs));
        let wm = Watermark {
            version: 7,
            entries: ea.clone(),
            ..Watermark::default()
        };
        let stored = crate::store::stored_size(&watermark_item(&tenant, &a.id, &wm));
        let puts: Vec<&Entry> = eb.difference(&ea).collect();
        let deletes: Vec<&Entry> = ea.difference(&eb).collect();
        assert!(
            puts.len() > 1000 && deletes.len() > 1000,
            "every entry moves"
        );
        let during =
            crate::store::stored_size(&intent_item(&tenant, &a.id, &wm, (&puts, &deletes)));
        (ea.len(), stored, during)
    }

    #[test]
    fn the_largest_issue_s_watermark_stays_far_below_the_item_limit() {
        let (n, stored, during) = sizes();
        println!(
            "largest issue: {n} entries; watermark {stored} bytes, {during} bytes at its largest (intent of a change moving every entry); limit {LIMIT}"
        );
        assert_eq!(n, (5 + 400) * 2 + 100 * 2);
        // A margin of over 15% of the limit, for what this cannot foresee.
        assert!(during < LIMIT * 85 / 100, "{during} bytes");
        assert!(stored < LIMIT / 2, "{stored} bytes");
    }

    #[test]
    fn tombstones_expire_a_week_after_they_are_written() {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let wm = Watermark {
            version: u64::MAX,
            ..Watermark::default()
        };
        let (t, i) = (TenantId::parse("t").unwrap(), IssueId::numbered(1));
        let item = watermark_item(&t, &i, &wm);
        let Some(AttributeValue::N(at)) = item.get("expires_at") else {
            panic!("a tombstone has expires_at")
        };
        let at: i64 = at.parse().unwrap();
        assert!((now + TOMBSTONE_TTL_SECS..now + TOMBSTONE_TTL_SECS + 60).contains(&at));
        // Live issues' watermarks never expire.
        let live = Watermark {
            version: 3,
            ..Watermark::default()
        };
        assert!(!watermark_item(&t, &i, &live).contains_key("expires_at"));
    }
}
