//! The watermark's storage format in the index table: the head item (sort key `W`) and the
//! field bucket items (`B{count}.{k}`), written from and read into the model's
//! [`Watermark`]. Every attribute name is declared once, in [`attr`].

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::{IssueState, ParticipantKind, Role};
use crate::keys;
use crate::keys::index::Shards;
use crate::model::entries::Entry;
use crate::model::summary::Summary;
use crate::model::watermark::{
    Basis, Buckets, DELETED, DIGEST, Legacy, Pending, Placement, Seat, Watermark, is_built_in,
};
use crate::store::Item;
use crate::store::records::items::key;

/// The head's and buckets' attribute names: short, as every watermark write carries them.
pub mod attr {
    /// The layout marker: [`super::FORMAT`] or [`super::FORMAT_ALL_SCOPE`]; absent in the
    /// previous format (every entry key in a string set).
    pub const FORMAT_ATTR: &str = "fmt";
    pub const VERSION: &str = "version";
    /// The committed placement: project, number, state and shard layout.
    pub const PROJECT: &str = "p";
    pub const NUM: &str = "n";
    pub const STATE: &str = "s";
    pub const SHARDS: &str = "ly";
    pub const UPDATED_AT: &str = "u";
    /// Column name → encoded value (`NULL`: no value); in a bucket, its fields.
    pub const COLUMNS: &str = "c";
    /// Committed field values that differ from their bucket item.
    pub const OVERLAY: &str = "o";
    /// The bucket count and one digest per bucket, concatenated.
    pub const BUCKETS: &str = "nb";
    pub const DIGESTS: &str = "d";
    /// Participants as `[kind, role, id]` lists.
    pub const SEATS: &str = "pp";
    /// Pending tokens (a string set intents add to).
    pub const PENDING: &str = "pend";
    /// The head's revision. Every write that puts the head whole (the indexer's commit,
    /// `gridctl repair`) is conditioned on the revision it read, so it never overwrites a head
    /// whose buckets or overlay changed since, even at the same version.
    pub const REVISION: &str = "rev";
    /// The project's field-definition revision (`fields_rev` on the project) that the
    /// committed basis was derived under. An indexer that finds a newer one than its
    /// definitions read them before a field change whose job has already indexed this issue:
    /// it reads them again instead of undoing the job's work.
    pub const FIELDS_REVISION: &str = "fr";
    /// The committed basis' summary digest (see [`crate::model::summary`]); absent in heads
    /// written before entries carried summaries.
    pub const SUMMARY_DIGEST: &str = "sd";
    /// The previous format's entry keys, certain and pending.
    pub const LEGACY_ENTRIES: &str = "entries";
    pub const LEGACY_PENDING: &str = "pending";
    /// Set on a head whose issue has a parked marker, so the next successful indexing knows
    /// to remove the marker without reading it.
    pub const PARKED: &str = "parked";
    /// A tombstone's expiry (DynamoDB TTL).
    pub const EXPIRES_AT: &str = "expires_at";
}

/// `head` records that its basis was derived under field-definition revision `fields_rev`.
pub fn set_fields_revision(head: &mut Item, fields_rev: u64) {
    head.insert(attr::FIELDS_REVISION.into(), n(fields_rev));
}

/// The layout marker of this format's head: its column entries are in their state's scope
/// only.
pub const FORMAT: &str = "3";

/// The marker of the format before, whose committed column entries are also in the `all`
/// scope (read as a placement with [`Placement::all_scope`]; `gridctl upgrade` rewrites it).
pub const FORMAT_ALL_SCOPE: &str = "2";

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn columns_attr<'a>(
    columns: impl IntoIterator<Item = (&'a String, &'a Option<String>)>,
) -> AttributeValue {
    AttributeValue::M(
        columns
            .into_iter()
            .map(|(c, v)| {
                let v = match v {
                    Some(v) => s(v.clone()),
                    None => AttributeValue::Null(true),
                };
                (c.clone(), v)
            })
            .collect(),
    )
}

fn columns_from(attr: Option<&AttributeValue>) -> Option<BTreeMap<String, Option<String>>> {
    let Some(attr) = attr else {
        return Some(BTreeMap::new());
    };
    let AttributeValue::M(m) = attr else {
        return None;
    };
    m.iter()
        .map(|(c, v)| {
            let v = match v {
                AttributeValue::S(v) => Some(v.clone()),
                AttributeValue::Null(_) => None,
                _ => return None,
            };
            Some((c.clone(), v))
        })
        .collect()
}

/// The head item of a watermark that reflects `basis` at `version` with nothing pending, its
/// fields in the head or (with `buckets.count > 0`) only their digests.
pub fn head_item(
    tenant: &TenantId,
    issue_id: &IssueId,
    version: u64,
    basis: Option<&Basis>,
    buckets: &Buckets,
    overlay: &BTreeMap<String, Option<String>>,
) -> Item {
    let mut item = key(
        keys::index::watermark_pk(tenant, issue_id),
        keys::index::WATERMARK_SK,
    );
    let all_scope = basis.is_some_and(|b| b.placement.all_scope);
    let format = if all_scope { FORMAT_ALL_SCOPE } else { FORMAT };
    item.insert(attr::FORMAT_ATTR.into(), n(format));
    item.insert(attr::VERSION.into(), n(version));
    if let Some(b) = basis {
        item.insert(attr::PROJECT.into(), s(b.placement.project.to_string()));
        item.insert(attr::NUM.into(), n(b.placement.num));
        item.insert(attr::STATE.into(), s(b.placement.state.as_str()));
        if b.placement.shards != Shards::ONE {
            item.insert(attr::SHARDS.into(), n(b.placement.shards.bits()));
        }
        item.insert(attr::UPDATED_AT.into(), s(b.updated_at.clone()));
        if b.summary.digest != 0 {
            item.insert(attr::SUMMARY_DIGEST.into(), n(b.summary.digest));
        }
        let head_columns = b
            .columns
            .iter()
            .filter(|(c, _)| buckets.count == 0 || is_built_in(c));
        item.insert(attr::COLUMNS.into(), columns_attr(head_columns));
        if !b.seats.is_empty() {
            item.insert(
                attr::SEATS.into(),
                AttributeValue::L(
                    b.seats
                        .iter()
                        .map(|st| {
                            AttributeValue::L(vec![
                                s(st.kind.as_str()),
                                s(st.role.as_str()),
                                s(st.id.clone()),
                            ])
                        })
                        .collect(),
                ),
            );
        }
    }
    if buckets.count > 0 && !overlay.is_empty() {
        item.insert(attr::OVERLAY.into(), columns_attr(overlay));
    }
    if buckets.count > 0 {
        item.insert(attr::BUCKETS.into(), n(buckets.count));
        item.insert(
            attr::DIGESTS.into(),
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                buckets.digests.concat(),
            )),
        );
    }
    if version == DELETED {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        item.insert(
            attr::EXPIRES_AT.into(),
            n(now + crate::store::index::TOMBSTONE_TTL_SECS),
        );
    }
    item
}

/// Bucket `k` of a layout of `buckets`, holding `fields`, as written at `version`.
pub fn bucket_item(
    tenant: &TenantId,
    issue_id: &IssueId,
    (buckets, k): (u16, u16),
    fields: &BTreeMap<String, Option<String>>,
    version: u64,
) -> Item {
    let mut item = key(
        keys::index::watermark_pk(tenant, issue_id),
        &keys::index::watermark_bucket_sk(buckets, k),
    );
    item.insert(attr::VERSION.into(), n(version));
    item.insert(attr::COLUMNS.into(), columns_attr(fields));
    item
}

/// The fields a bucket item holds.
pub fn bucket_fields(item: &Item) -> Option<BTreeMap<String, Option<String>>> {
    columns_from(item.get(attr::COLUMNS))
}

/// The new head and the bucket items to put once `desired` is written at `version` (`None`:
/// deleted, a tombstone) in a layout of `buckets`; which buckets are rewritten, and what
/// goes to the overlay, is the model's [`Watermark::plan_commit`].
pub fn commit_items(
    tenant: &TenantId,
    issue_id: &IssueId,
    wm: &Watermark,
    desired: Option<&Basis>,
    version: u64,
    buckets: u16,
) -> (Item, Vec<Item>) {
    let none = BTreeMap::new();
    let Some(d) = desired else {
        let head = head_item(tenant, issue_id, version, None, &Buckets::default(), &none);
        return (head, Vec::new());
    };
    if buckets == 0 {
        let head = head_item(
            tenant,
            issue_id,
            version,
            Some(d),
            &Buckets::default(),
            &none,
        );
        return (head, Vec::new());
    }
    let plan = wm.plan_commit(d, buckets);
    let items = plan
        .rewrite
        .iter()
        .map(|(k, fields)| bucket_item(tenant, issue_id, (buckets, *k), fields, version))
        .collect();
    let head = head_item(
        tenant,
        issue_id,
        version,
        Some(d),
        &plan.buckets,
        &plan.overlay,
    );
    (head, items)
}

/// A head item as a watermark (its head part: buckets are read separately); `None` when it
/// cannot be read.
pub fn from_head(tenant: &TenantId, issue_id: &IssueId, item: &Item) -> Option<Watermark> {
    let version = match item.get(attr::VERSION) {
        Some(AttributeValue::N(v)) => v.parse().ok()?,
        None => 0,
        _ => return None,
    };
    let parked = item.contains_key(attr::PARKED);
    let rev = optional_number(item, attr::REVISION)?;
    let fields_rev = optional_number(item, attr::FIELDS_REVISION)?;
    if !item.contains_key(attr::FORMAT_ATTR) {
        return Some(Watermark {
            version,
            legacy: Some(legacy_of(tenant, issue_id, item)),
            pending_count: string_set(item, attr::LEGACY_PENDING).map_or(0, <[String]>::len),
            parked,
            rev,
            ..Watermark::default()
        });
    }
    let pending = Pending::from_tokens(
        string_set(item, attr::PENDING)
            .unwrap_or_default()
            .iter()
            .map(|t| t.as_str()),
    )?;
    let buckets: u16 = match item.get(attr::BUCKETS) {
        Some(AttributeValue::N(v)) => v.parse().ok()?,
        _ => 0,
    };
    let digests = digests_of(item)?;
    if digests.len() != usize::from(buckets) {
        return None;
    }
    let committed = match text(item, attr::PROJECT) {
        None => None,
        Some(project) => Some(committed_of(item, project)?),
    };
    Some(Watermark {
        version,
        committed,
        pending,
        buckets: Buckets {
            count: buckets,
            digests,
        },
        overlay: columns_from(item.get(attr::OVERLAY))?,
        parked,
        rev,
        fields_rev,
        pending_count: string_set(item, attr::PENDING).map_or(0, <[String]>::len),
        ..Watermark::default()
    })
}

/// A string set attribute, if the item has one.
fn string_set<'a>(item: &'a Item, name: &str) -> Option<&'a [String]> {
    match item.get(name) {
        Some(AttributeValue::Ss(v)) => Some(v.as_slice()),
        _ => None,
    }
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.as_str()),
        _ => None,
    }
}

/// A number the head may hold: `Some(None)` when absent, `None` when unreadable.
fn optional_number(item: &Item, name: &str) -> Option<Option<u64>> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => Some(Some(v.parse().ok()?)),
        _ => Some(None),
    }
}

/// The previous format: every entry key, as `entry_ref`s.
fn legacy_of(tenant: &TenantId, issue_id: &IssueId, item: &Item) -> Legacy {
    let refs = |name: &str| -> BTreeSet<Entry> {
        string_set(item, name)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| keys::index::parse_entry_ref(tenant, r))
            .map(|(pk, sk)| Entry {
                pk,
                sk,
                issue_id: issue_id.to_string(),
                role: None,
                summary: None,
            })
            .collect()
    };
    Legacy {
        entries: refs(attr::LEGACY_ENTRIES),
        pending: refs(attr::LEGACY_PENDING),
    }
}

/// One digest per bucket, concatenated in the head.
fn digests_of(item: &Item) -> Option<Vec<[u8; DIGEST]>> {
    match item.get(attr::DIGESTS) {
        Some(AttributeValue::B(b)) => b
            .as_ref()
            .chunks(DIGEST)
            .map(|c| <[u8; DIGEST]>::try_from(c).ok())
            .collect::<Option<Vec<_>>>(),
        _ => Some(Vec::new()),
    }
}

/// The committed basis a head of this format records (its head part).
fn committed_of(item: &Item, project: &str) -> Option<Basis> {
    let num = match item.get(attr::NUM) {
        Some(AttributeValue::N(v)) => v.parse().ok()?,
        _ => return None,
    };
    let shards = match item.get(attr::SHARDS) {
        None => Shards::ONE,
        Some(AttributeValue::N(v)) => Shards::from_bits(v.parse().ok()?)?,
        Some(_) => return None,
    };
    let seats = match item.get(attr::SEATS) {
        Some(AttributeValue::L(l)) => l.iter().map(seat_of).collect::<Option<BTreeSet<_>>>()?,
        _ => BTreeSet::new(),
    };
    Some(Basis {
        placement: Placement {
            project: ProjectId::parse(project)?,
            num,
            state: IssueState::parse(text(item, attr::STATE)?)?,
            shards,
            all_scope: all_scope_head(item),
        },
        updated_at: text(item, attr::UPDATED_AT)?.to_string(),
        columns: columns_from(item.get(attr::COLUMNS))?,
        seats,
        summary: match item.get(attr::SUMMARY_DIGEST) {
            Some(AttributeValue::N(d)) => Summary::recorded(d.parse().ok()?),
            None => Summary::recorded(0),
            Some(_) => return None,
        },
        // Not recorded: the digest covers it, and a step reads only the desired basis' set.
        hot: crate::model::basis::Hot::All,
    })
}

/// A participant as the head lists it: `[kind, role, id]`.
fn seat_of(attr: &AttributeValue) -> Option<Seat> {
    let AttributeValue::L(parts) = attr else {
        return None;
    };
    match parts.as_slice() {
        [
            AttributeValue::S(k),
            AttributeValue::S(r),
            AttributeValue::S(id),
        ] => Some(Seat {
            kind: ParticipantKind::parse(k)?,
            role: Role::parse(r)?,
            id: id.clone(),
        }),
        _ => None,
    }
}

/// The issue of a watermark head of a previous format, unless it is a tombstone (those expire
/// on their own): what `gridctl upgrade` rewrites. Every entry key in a string set; a compact
/// head whose entries are also in the `all` scope ([`FORMAT_ALL_SCOPE`]); or one whose
/// entries carry no summary (no [`attr::SUMMARY_DIGEST`]).
pub fn previous_format_head(item: &Item) -> Option<(TenantId, IssueId)> {
    if text(item, keys::SK)? != keys::index::WATERMARK_SK {
        return None;
    }
    let marks = match item.get(attr::FORMAT_ATTR) {
        None => [attr::VERSION, attr::LEGACY_ENTRIES, attr::LEGACY_PENDING],
        Some(AttributeValue::N(f)) if f == FORMAT_ALL_SCOPE => {
            [attr::VERSION, attr::PROJECT, attr::PENDING]
        }
        // A committed basis without a summary digest: its entries carry no summary.
        Some(_) if item.contains_key(attr::PROJECT) && !item.contains_key(attr::SUMMARY_DIGEST) => {
            [attr::PROJECT; 3]
        }
        Some(_) => return None,
    };
    // A head holding only a parked flag (the issue was parked before it was ever indexed) has
    // no layout to upgrade.
    if !marks.iter().any(|a| item.contains_key(*a)) {
        return None;
    }
    if matches!(item.get(attr::VERSION), Some(AttributeValue::N(v)) if v == &DELETED.to_string()) {
        return None;
    }
    keys::index::parse_watermark_pk(text(item, keys::PK)?)
}

/// Whether a head is of the layout whose column entries are also in the `all` scope.
pub fn all_scope_head(item: &Item) -> bool {
    matches!(item.get(attr::FORMAT_ATTR), Some(AttributeValue::N(f)) if f == FORMAT_ALL_SCOPE)
}
