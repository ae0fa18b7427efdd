//! The indexer's watermark of an issue, compact: what its entries are derived from, never the
//! entry keys themselves, split so that an update reads and writes about 1 KB whatever the
//! project's field count.
//!
//! An issue's entries follow from a [`Basis`]: where its columns live (project, number, state),
//! each column's encoded value (or none), its participants and `updated_at`. The watermark
//! stores the basis the index last reflected (*committed*) and, while a write is in flight,
//! what that write may have changed (*pending*, recorded before the write as an intent, at
//! column granularity). Entries of a committed column that nothing pending touches are
//! *certain*; everything the committed basis and the pending one can derive *may* exist. The
//! indexer puts every desired entry that is not certain and deletes every possible entry that
//! is not desired, so a write cut short at any point, a duplicate or a replay still converges
//! to the recomputation (the protocol the chaos tests prove).
//!
//! Storage, in the issue's watermark partition:
//! - the head (sort key `W`): version, placement, `updated_at`, participants, the built-in
//!   columns, pending tokens, and the field layout: either the fields themselves (few or small)
//!   or a bucket count with one digest per bucket;
//! - field buckets (`B{count}.{k}`): a field lives in bucket `hash(id) mod count`; a bucket
//!   holds under ~1.5 KB. An update reads and rewrites only the buckets whose digest the new
//!   basis changes (or that hold a pending column); a state change, a deletion or a new
//!   summary (every update of an issue whose entries carry one) reads them all.
//!
//! Watermarks of the previous layout (every entry key in a string set, `entries`/`pending`)
//! are read as they are and rewritten in this layout by the issue's next indexing.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use sha2::{Digest, Sha256};

use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::domain::{Issue, IssueState, ParticipantKind, Role};
use crate::encoding;
use crate::model::entries::{ALL_STATES, Entry, EntryList, encode_value};
use crate::model::record::IssueRecord;
use crate::model::summary::Summary;

/// What the watermark derives entries from when only their keys matter (what is certain or
/// possible in the index).
static NO_SUMMARY: Summary = Summary {
    digest: 0,
    text: None,
};
use crate::keys;
use crate::keys::index::Shards;
use crate::store::Item;
use crate::store::records::items::key;

/// Two column maps walked together in column order: each column of either, once, with its
/// value in each (`None`: the map has no such column). No lookups: both maps are sorted.
pub fn zip_columns<'a>(
    a: &'a BTreeMap<String, Option<String>>,
    b: &'a BTreeMap<String, Option<String>>,
) -> impl Iterator<
    Item = (
        &'a String,
        Option<&'a Option<String>>,
        Option<&'a Option<String>>,
    ),
> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some((x, _)), Some((y, _))) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        Some(match order {
            std::cmp::Ordering::Less => {
                let (name, v) = a.next()?;
                (name, Some(v), None)
            }
            std::cmp::Ordering::Greater => {
                let (name, v) = b.next()?;
                (name, None, Some(v))
            }
            std::cmp::Ordering::Equal => {
                let (name, v) = a.next()?;
                (name, Some(v), b.next().map(|(_, w)| w))
            }
        })
    })
}

/// Where an issue's column entries live: their partitions name the project, the state scope
/// and the shard in each of the project's layouts; their sort keys end with the number.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Placement {
    pub project: ProjectId,
    pub num: u64,
    pub state: IssueState,
    pub shards: Shards,
    /// The entries are also in the `all` scope: the layout before scopes were halved, read
    /// from watermarks written then and never desired. A placement with it differs from the
    /// same one without, so the issue's next indexing deletes those entries.
    pub all_scope: bool,
}

impl Placement {
    /// The state scopes its column entries are in.
    pub fn scopes(&self) -> impl Iterator<Item = &'static str> + Clone {
        let all = self.all_scope.then_some(ALL_STATES);
        all.into_iter().chain([self.state.as_str()])
    }
}

/// A participant as the inboxes see it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seat {
    pub kind: ParticipantKind,
    pub role: Role,
    pub id: String,
}

/// What an issue's entries are derived from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Basis {
    pub placement: Placement,
    pub updated_at: String,
    /// Column name → encoded sort value; `None`: no value (a missing entry).
    pub columns: BTreeMap<String, Option<String>>,
    pub seats: BTreeSet<Seat>,
    /// The list summary every entry carries where it fits (compared by digest).
    pub summary: Summary,
}

/// The built-in columns' names: they live in the head whatever the layout.
pub const BUILT_IN_COLUMNS: [&str; 5] = ["num", "title", "state", "created_at", "updated_at"];

/// Whether a column is a built-in one (else a field, by id).
pub fn is_built_in(column: &str) -> bool {
    BUILT_IN_COLUMNS.contains(&column)
}

impl Basis {
    /// The basis of `issue` under its project's fields and shard layouts: every built-in
    /// column and every field the project defines (a value the field cannot hold counts as
    /// none).
    pub fn of(issue: &Issue, defs: &[FieldDef], shards: Shards) -> Self {
        Self::of_record(&IssueRecord::of(issue), defs, shards)
    }

    /// [`Basis::of`] an issue as the indexer reads it (borrowed from its stream image).
    pub fn of_record(issue: &IssueRecord<'_>, defs: &[FieldDef], shards: Shards) -> Self {
        // Collected, then built at once (a map built from a list sorts it and fills its nodes
        // in one pass, cheaper than one search per insert: the indexer does this per record).
        let mut columns: Vec<(String, Option<String>)> = Vec::with_capacity(5 + defs.len());
        let mut num = String::with_capacity(20);
        keys::index::push_number(&mut num, issue.num);
        columns.push(("num".into(), Some(num)));
        columns.push(("title".into(), Some(encoding::text::encode(issue.title))));
        columns.push((
            "state".into(),
            Some(encoding::text::encode(issue.state.as_str())),
        ));
        columns.push(("created_at".into(), Some(encoding::date(issue.created_at))));
        columns.push(("updated_at".into(), Some(encoding::date(issue.updated_at))));
        for def in defs {
            let value = issue
                .fields
                .get(def.id.as_str())
                .and_then(|v| encode_value(def, v));
            columns.push((def.id.to_string(), value));
        }
        let columns: BTreeMap<String, Option<String>> = columns.into_iter().collect();
        let seats = issue
            .seats
            .iter()
            .map(|p| Seat {
                kind: p.kind,
                role: p.role,
                id: p.id.to_string(),
            })
            .collect();
        Self {
            placement: Placement {
                project: issue.project_id.clone(),
                num: issue.num,
                state: issue.state,
                shards,
                all_scope: false,
            },
            updated_at: issue.updated_at.to_string(),
            columns,
            seats,
            summary: Summary::of_record(issue, defs),
        }
    }

    /// Every entry the basis calls for.
    pub fn entries(&self, tenant: &TenantId, issue_id: &IssueId) -> BTreeSet<Entry> {
        let mut out = BTreeSet::new();
        let hash = keys::index::shard_hash(issue_id);
        for (column, value) in &self.columns {
            column_entries(
                tenant,
                (issue_id, hash),
                &self.placement,
                (column, value.as_deref()),
                &self.summary,
                &mut out,
            );
        }
        for seat in &self.seats {
            seat_entries(
                tenant,
                issue_id,
                (self.placement.state, &self.updated_at),
                seat,
                &self.summary,
                &mut out,
            );
        }
        out
    }

    /// How many entries the basis calls for: one per column, layout and scope, two per
    /// participant.
    pub fn entry_count(&self) -> usize {
        let layouts = self.placement.shards.counts().count();
        let scopes = self.placement.scopes().count();
        layouts * scopes * self.columns.len() + 2 * self.seats.len()
    }

    /// Keeps only the columns `keep` accepts (the ones whose watermark part was read).
    pub fn retain_columns(&mut self, keep: impl Fn(&str) -> bool) {
        self.columns.retain(|c, _| keep(c));
    }

    /// The field columns, with their values (the part that may live in buckets).
    fn fields(&self) -> impl Iterator<Item = (&String, &Option<String>)> {
        self.columns.iter().filter(|(c, _)| !is_built_in(c))
    }
}

/// A column's entry in its state's scope at `placement` (and in the `all` scope, for a
/// placement of the layout before), in each of its layouts (`hash`: the issue's
/// [`keys::index::shard_hash`]).
fn column_entries(
    tenant: &TenantId,
    (issue_id, hash): (&IssueId, u64),
    placement: &Placement,
    (column, value): (&str, Option<&str>),
    summary: &Summary,
    out: &mut BTreeSet<Entry>,
) {
    let sk = match value {
        Some(encoded) => keys::index::value_sk(encoded, placement.num),
        None => keys::index::missing_sk(placement.num),
    };
    for count in placement.shards.counts() {
        for scope in placement.scopes() {
            let mut pk = keys::index::column_pk(tenant, &placement.project, column, scope);
            keys::index::push_shard(&mut pk, count, keys::index::shard_of(hash, count));
            let summary = summary
                .for_entry(&pk, &sk, issue_id, None)
                .map(str::to_string);
            out.insert(Entry {
                pk,
                sk: sk.clone(),
                issue_id: issue_id.to_string(),
                role: None,
                summary,
            });
        }
    }
}

/// A participant's two copies: in their inbox for the state, and in the one for their role.
fn seat_entries(
    tenant: &TenantId,
    issue_id: &IssueId,
    (state, updated_at): (IssueState, &str),
    seat: &Seat,
    summary: &Summary,
    out: &mut BTreeSet<Entry>,
) {
    let sk = keys::index::inbox_sk(updated_at, issue_id);
    for role in [None, Some(seat.role)] {
        let pk = keys::index::inbox_pk(tenant, seat.kind, &seat.id, state, role);
        let summary = summary
            .for_entry(&pk, &sk, issue_id, Some(seat.role.as_str()))
            .map(str::to_string);
        out.insert(Entry {
            pk,
            sk: sk.clone(),
            issue_id: issue_id.to_string(),
            role: Some(seat.role.as_str().to_string()),
            summary,
        });
    }
}

/// What writes in flight (or cut short) may have changed, recorded before they start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Placements entries may have been written at: while any is recorded, no entry is certain.
    pub placements: BTreeSet<Placement>,
    /// `updated_at`s inbox copies may have been written at: no copy is certain.
    pub updated_at: BTreeSet<String>,
    /// Columns whose entries are uncertain, with the values they may have been written with.
    pub columns: BTreeMap<String, BTreeSet<Option<String>>>,
    /// Participants whose copies may have been written.
    pub seats: BTreeSet<Seat>,
}

/// Separates a token's parts: no key part, id or encoded value contains U+0002 (values hold no
/// C0 control; encodings use U+0001).
const SEP: char = '\u{2}';

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.placements.is_empty()
            && self.updated_at.is_empty()
            && self.columns.is_empty()
            && self.seats.is_empty()
    }

    /// Whether any inbox copy is uncertain.
    fn touches_seats(&self) -> bool {
        !(self.placements.is_empty() && self.updated_at.is_empty() && self.seats.is_empty())
    }

    /// The pending parts as a string set, so that recording an intent is an `ADD` (two intents
    /// recorded at once both land).
    pub fn tokens(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for p in &self.placements {
            // `P`: a placement with the `all` scope (the tokens written before scopes were
            // halved); `Q`: without.
            let kind = if p.all_scope { 'P' } else { 'Q' };
            let mut token = format!(
                "{kind}{SEP}{}{SEP}{}{SEP}{}",
                p.num,
                p.state.as_str(),
                p.project
            );
            // One shard, as before shards: the token a watermark of either version reads.
            if p.shards != Shards::ONE {
                token.push(SEP);
                token.push_str(&p.shards.bits().to_string());
            }
            out.insert(token);
        }
        for u in &self.updated_at {
            out.insert(format!("U{SEP}{u}"));
        }
        for (column, values) in &self.columns {
            out.insert(format!("C{SEP}{column}"));
            for v in values {
                out.insert(match v {
                    Some(v) => format!("C{SEP}{column}{SEP}V{v}"),
                    None => format!("C{SEP}{column}{SEP}M"),
                });
            }
        }
        for s in &self.seats {
            out.insert(format!(
                "S{SEP}{}{SEP}{}{SEP}{}",
                s.kind.as_str(),
                s.role.as_str(),
                s.id
            ));
        }
        out
    }

    /// The pending parts of a string set ([`Pending::tokens`]); `None` if one is malformed.
    pub fn from_tokens<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let mut p = Self::default();
        for t in tokens {
            let (kind, rest) = t.split_once(SEP)?;
            match kind {
                "P" | "Q" => {
                    let mut parts = rest.splitn(4, SEP);
                    let num = parts.next()?.parse().ok()?;
                    let state = IssueState::parse(parts.next()?)?;
                    let project = ProjectId::parse(parts.next()?)?;
                    let shards = match parts.next() {
                        None => Shards::ONE,
                        Some(bits) => Shards::from_bits(bits.parse().ok()?)?,
                    };
                    p.placements.insert(Placement {
                        project,
                        num,
                        state,
                        shards,
                        all_scope: kind == "P",
                    });
                }
                "U" => {
                    p.updated_at.insert(rest.to_string());
                }
                "C" => match rest.split_once(SEP) {
                    None => {
                        p.columns.entry(rest.to_string()).or_default();
                    }
                    Some((column, v)) => {
                        let value = match v.split_at_checked(1)? {
                            ("V", v) => Some(v.to_string()),
                            ("M", "") => None,
                            _ => return None,
                        };
                        p.columns
                            .entry(column.to_string())
                            .or_default()
                            .insert(value);
                    }
                },
                "S" => {
                    let mut parts = rest.splitn(3, SEP);
                    let kind = ParticipantKind::parse(parts.next()?)?;
                    let role = Role::parse(parts.next()?)?;
                    let id = parts.next()?.to_string();
                    p.seats.insert(Seat { kind, role, id });
                }
                _ => return None,
            }
        }
        Some(p)
    }

    /// Everything `basis` derives entries from, as pending (entries a write of it may have left).
    pub fn all_of(basis: &Basis) -> Self {
        Self {
            placements: BTreeSet::from([basis.placement.clone()]),
            updated_at: BTreeSet::from([basis.updated_at.clone()]),
            columns: basis
                .columns
                .iter()
                .map(|(c, v)| (c.clone(), BTreeSet::from([v.clone()])))
                .collect(),
            seats: basis.seats.clone(),
        }
    }

    pub fn merge(&mut self, other: Pending) {
        self.placements.extend(other.placements);
        self.updated_at.extend(other.updated_at);
        for (c, vs) in other.columns {
            self.columns.entry(c).or_default().extend(vs);
        }
        self.seats.extend(other.seats);
    }
}

/// How an issue's field values are stored: in the head (`buckets == 0`), or in `buckets`
/// bucket items, each with its digest in the head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub buckets: u16,
    pub digests: Vec<[u8; DIGEST]>,
}

/// Bytes of a bucket's digest: collisions must be out of reach (a collision would hide a
/// change), space in the head is not.
pub const DIGEST: usize = 8;
/// Fields stay in the head while their values take at most this many bytes.
const HEAD_FIELD_BYTES: usize = 384;
/// The bucket size a new layout aims for, and the largest a layout keeps before it is redone.
const BUCKET_TARGET: usize = 768;
const BUCKET_MAX: usize = 1536;
/// The overlay is folded into its buckets once its fields take more than this many bytes
/// (so the head stays about 1 KB during an intent, whatever the field count).
const OVERLAY_MAX: usize = 192;
/// Buckets are dropped for fewer when they average under this.
const BUCKET_MIN_AVG: usize = 160;
/// 400 fields of the longest encodings average under [`BUCKET_MAX`] a bucket, and a head with
/// every bucket fits one transaction (`gridctl repair` writes them together).
const MAX_BUCKETS: u16 = 64;

/// Bytes a field takes in the watermark (its id, its value, and attribute overhead).
fn field_bytes(column: &str, value: &Option<String>) -> usize {
    column.len() + value.as_ref().map_or(0, String::len) + 4
}

fn overlay_bytes(overlay: &BTreeMap<String, Option<String>>) -> usize {
    overlay.iter().map(|(c, v)| field_bytes(c, v)).sum()
}

/// A field's bucket under `buckets` buckets (a stable hash of its id).
pub fn bucket_of(column: &str, buckets: u16) -> u16 {
    let h = Sha256::digest(column.as_bytes());
    let n = u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    (n % u64::from(buckets.max(1))) as u16
}

/// The digest of a bucket's content (its fields and values, in order).
pub fn digest<'a>(
    fields: impl IntoIterator<Item = (&'a String, &'a Option<String>)>,
) -> [u8; DIGEST] {
    let mut h = Sha256::new();
    for (c, v) in fields {
        h.update(c.as_bytes());
        match v {
            Some(v) => {
                h.update([2, b'V']);
                h.update(v.as_bytes());
            }
            None => h.update([2, b'M']),
        }
        h.update([3]);
    }
    let out = h.finalize();
    let mut d = [0; DIGEST];
    d.copy_from_slice(&out[..DIGEST]);
    d
}

/// The basis' fields by bucket under `buckets` buckets.
fn by_bucket(basis: &Basis, buckets: u16) -> BTreeMap<u16, BTreeMap<String, Option<String>>> {
    let mut out: BTreeMap<u16, BTreeMap<String, Option<String>>> =
        (0..buckets).map(|k| (k, BTreeMap::new())).collect();
    for (c, v) in basis.fields() {
        out.entry(bucket_of(c, buckets))
            .or_default()
            .insert(c.clone(), v.clone());
    }
    out
}

impl Layout {
    /// The bucket count for `basis`' fields: the current one while it still fits, else a new
    /// one (so a field count near a boundary does not rewrite every bucket each time).
    pub fn choose(current: u16, basis: &Basis) -> u16 {
        let total: usize = basis.fields().map(|(c, v)| field_bytes(c, v)).sum();
        let fits = |n: u16| {
            if n == 0 {
                return total <= HEAD_FIELD_BYTES;
            }
            let mut sizes = vec![0usize; usize::from(n)];
            for (c, v) in basis.fields() {
                sizes[usize::from(bucket_of(c, n))] += field_bytes(c, v);
            }
            let largest = sizes.iter().copied().max().unwrap_or(0);
            largest <= BUCKET_MAX && (n == 1 || total >= BUCKET_MIN_AVG * usize::from(n))
        };
        if fits(current) {
            return current;
        }
        if total <= HEAD_FIELD_BYTES {
            return 0;
        }
        let wanted = total.div_ceil(BUCKET_TARGET).next_power_of_two();
        u16::try_from(wanted)
            .unwrap_or(MAX_BUCKETS)
            .min(MAX_BUCKETS)
    }
}

/// A watermark of the previous layout: every entry key, certain and pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Legacy {
    pub entries: BTreeSet<Entry>,
    pub pending: BTreeSet<Entry>,
}

/// What the indexer last recorded for an issue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watermark {
    /// The version the index reflects (0: none committed yet; `u64::MAX`: deleted).
    pub version: u64,
    /// The basis committed, restricted to the parts read: the head's columns and the fields
    /// of the buckets in `loaded`.
    pub committed: Option<Basis>,
    pub pending: Pending,
    pub layout: Layout,
    /// Buckets read into `committed`.
    pub loaded: BTreeSet<u16>,
    /// Committed values of fields that differ from what their bucket item holds (head
    /// attribute `o`): a change of a few values rewrites the head only, which the commit
    /// writes anyway, instead of a bucket too. Folded into the buckets when it grows.
    pub overlay: BTreeMap<String, Option<String>>,
    /// The bucket items read, as stored (before the overlay).
    pub stored: BTreeMap<u16, BTreeMap<String, Option<String>>>,
    /// The head's revision: a fresh random number each time the head is put whole (see
    /// [`REVISION`]); `None` for heads that never were (an intent's, the previous layout's).
    pub rev: Option<u64>,
    /// The field-definition revision of the committed basis (see [`FIELDS_REVISION`]);
    /// `None` for heads written before it was recorded.
    pub fields_rev: Option<u64>,
    /// Size of the pending string set as read (`pend`, or the previous layout's `pending`),
    /// which intents only ever add to: an unchanged size is an unchanged set.
    pub pending_count: usize,
    /// Set when the stored watermark has the previous layout.
    pub legacy: Option<Legacy>,
    /// The issue has a parked marker.
    pub parked: bool,
}

/// What a change of an issue's entries needs, planned from its watermark.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    pub puts: EntryList,
    pub deletes: EntryList,
    /// What the intent adds to `pending` (new layout), before any entry is written.
    pub intent: Pending,
}

impl Watermark {
    /// Whether a column's watermark part was read: head columns always, fields when their
    /// bucket was.
    pub fn has_read(&self, column: &str) -> bool {
        self.layout.buckets == 0
            || is_built_in(column)
            || self
                .loaded
                .contains(&bucket_of(column, self.layout.buckets))
    }

    /// The buckets to read before planning a change to `desired` (its fields under the layout
    /// it will have: `next_buckets`): all of them when entries may move partition (a state
    /// change, a deletion, anything pending at a placement), the summary changes (every entry
    /// is written again) or the layout changes; otherwise
    /// those whose digest the change alters and those holding a pending column (or one of
    /// `extra`'s: what an earlier attempt may have written).
    pub fn buckets_to_read(
        &self,
        desired: Option<&Basis>,
        next_buckets: u16,
        extra: &Pending,
    ) -> BTreeSet<u16> {
        let n = self.layout.buckets;
        if n == 0 || self.legacy.is_some() {
            return BTreeSet::new();
        }
        let everything = (0..n).collect();
        let Some(desired) = desired else {
            return everything;
        };
        let moved = self
            .committed
            .as_ref()
            .is_none_or(|c| c.placement != desired.placement);
        let placed = !self.pending.placements.is_empty() || !extra.placements.is_empty();
        // A new summary goes into every entry: every column is compared.
        let resummarized = step::refreshes(self.committed.as_ref(), Some(desired));
        if moved || placed || resummarized || next_buckets != n {
            return everything;
        }
        let mut read: BTreeSet<u16> = self
            .pending
            .columns
            .keys()
            .chain(extra.columns.keys())
            .filter(|c| !is_built_in(c))
            .map(|c| bucket_of(c, n))
            .collect();
        for (k, fields) in by_bucket(desired, n) {
            if self.layout.digests.get(usize::from(k)) != Some(&digest(&fields)) {
                read.insert(k);
            }
        }
        // An overlay over its bound is folded into its buckets now, so they are read.
        if overlay_bytes(&self.overlay) > OVERLAY_MAX {
            read.extend(self.overlay.keys().map(|c| bucket_of(c, n)));
        }
        read
    }

    /// Entries certainly in the index (over the parts read).
    pub fn certain(&self, tenant: &TenantId, issue_id: &IssueId) -> BTreeSet<Entry> {
        let mut out = BTreeSet::new();
        if let Some(legacy) = &self.legacy {
            return legacy.entries.clone();
        }
        let Some(c) = &self.committed else {
            return out;
        };
        if !self.pending.placements.is_empty() {
            return out;
        }
        let hash = keys::index::shard_hash(issue_id);
        for (column, value) in &c.columns {
            if !self.pending.columns.contains_key(column) {
                column_entries(
                    tenant,
                    (issue_id, hash),
                    &c.placement,
                    (column, value.as_deref()),
                    &NO_SUMMARY,
                    &mut out,
                );
            }
        }
        if !self.pending.touches_seats() {
            for seat in &c.seats {
                seat_entries(
                    tenant,
                    issue_id,
                    (c.placement.state, &c.updated_at),
                    seat,
                    &NO_SUMMARY,
                    &mut out,
                );
            }
        }
        out
    }

    /// Every entry that may be in the index (over the parts read): the certain ones and
    /// whatever the pending parts and `extra` (what an attempt wrote) can derive.
    pub fn possible(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        extra: &Pending,
    ) -> BTreeSet<Entry> {
        let mut pending = self.pending.clone();
        pending.merge(extra.clone());
        let mut out = BTreeSet::new();
        if let Some(legacy) = &self.legacy {
            out.extend(legacy.entries.iter().cloned());
            out.extend(legacy.pending.iter().cloned());
        }
        let committed = self.committed.as_ref();
        let mut placements = pending.placements.clone();
        let mut updated_at = pending.updated_at.clone();
        let mut seats = pending.seats.clone();
        let mut columns = pending.columns.clone();
        if let Some(c) = committed {
            placements.insert(c.placement.clone());
            updated_at.insert(c.updated_at.clone());
            seats.extend(c.seats.iter().cloned());
            for (column, value) in &c.columns {
                columns
                    .entry(column.clone())
                    .or_default()
                    .insert(value.clone());
            }
        }
        let hash = keys::index::shard_hash(issue_id);
        for p in &placements {
            for (column, values) in &columns {
                for v in values {
                    let cv = (column.as_str(), v.as_deref());
                    column_entries(tenant, (issue_id, hash), p, cv, &NO_SUMMARY, &mut out);
                }
            }
        }
        let states: BTreeSet<IssueState> = placements.iter().map(|p| p.state).collect();
        for state in states {
            for u in &updated_at {
                for seat in &seats {
                    let at = (state, u.as_str());
                    seat_entries(tenant, issue_id, at, seat, &NO_SUMMARY, &mut out);
                }
            }
        }
        out
    }

    /// [`Watermark::step`] by its definition: every entry the desired basis calls for, the
    /// certain ones and the possible ones, compared as sets of keys. Used for watermarks of the
    /// previous layout (which hold keys, not a basis), and as the reference the column-by-column
    /// planner is tested against.
    pub fn step_by_sets(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        desired: Option<&Basis>,
        extra: &Pending,
    ) -> Step {
        let want = desired.map_or_else(BTreeSet::new, |d| d.entries(tenant, issue_id));
        // A watermark of the previous layout predates summaries: its entries carry none.
        let refresh = self.legacy.is_some() || step::refreshes(self.committed.as_ref(), desired);
        // What an earlier attempt wrote (`extra`) is as uncertain as what is pending: its keys
        // may be desired ones, written with another summary.
        let certain = if refresh {
            BTreeSet::new()
        } else if extra.is_empty() {
            self.certain(tenant, issue_id)
        } else {
            let mut with_extra = self.clone();
            with_extra.pending.merge(extra.clone());
            with_extra.certain(tenant, issue_id)
        };
        let possible = self.possible(tenant, issue_id, extra);
        let key = |e: &Entry| (e.pk.clone(), e.sk.clone());
        let certain_keys: BTreeSet<_> = certain.iter().map(key).collect();
        let want_keys: BTreeSet<_> = want.iter().map(key).collect();
        let puts: Vec<Entry> = want
            .iter()
            .filter(|e| !certain_keys.contains(&key(e)))
            .cloned()
            .collect();
        let mut deletes: Vec<Entry> = possible
            .into_iter()
            .filter(|e| !want_keys.contains(&key(e)))
            .collect();
        deletes.dedup_by(|a, b| a.pk == b.pk && a.sk == b.sk);
        let list = |entries: Vec<Entry>| {
            let mut list = EntryList::for_issue(issue_id, entries.len());
            entries.iter().for_each(|e| list.push_entry(e));
            list
        };
        let summary = desired.map(|d| d.summary.clone()).unwrap_or_default();
        let (puts, deletes) = (list(puts).with_summary(summary), list(deletes));
        let mut intent = extra.clone();
        if puts.is_empty() && deletes.is_empty() {
            return Step {
                puts,
                deletes,
                intent,
            };
        }
        intent.merge(self.intent_for(desired));
        Step {
            puts,
            deletes,
            intent,
        }
    }

    /// What becomes pending before writing toward `desired`: each part that differs from the
    /// committed basis (a column's new value, a new placement, `updated_at`, new participants);
    /// a part that only goes away is made uncertain by recording the committed one.
    fn intent_for(&self, desired: Option<&Basis>) -> Pending {
        let mut p = Pending::default();
        let committed = self.committed.as_ref();
        match (committed, desired) {
            (_, None) => {
                // Everything goes: nothing may stay certain.
                if let Some(c) = committed {
                    p.placements.insert(c.placement.clone());
                }
            }
            (None, Some(d)) => p = Pending::all_of(d),
            (Some(c), Some(d)) => {
                if c.placement != d.placement {
                    p.placements.insert(d.placement.clone());
                }
                for (name, was, now) in zip_columns(&c.columns, &d.columns) {
                    if was != now {
                        let values = p.columns.entry(name.clone()).or_default();
                        if let Some(v) = now {
                            values.insert(v.clone());
                        }
                    }
                }
                let new_seats: BTreeSet<Seat> = d.seats.difference(&c.seats).cloned().collect();
                if c.updated_at != d.updated_at
                    || !new_seats.is_empty()
                    || c.seats != d.seats
                    || c.placement.state != d.placement.state
                {
                    p.updated_at.insert(d.updated_at.clone());
                }
                p.seats = new_seats;
            }
        }
        p
    }
}

// --- Items ----------------------------------------------------------------------------------

/// Attribute of a head's revision. Every write that puts the head whole (the indexer's commit,
/// `gridctl repair`) is conditioned on the revision it read, so it never overwrites a head
/// whose buckets or overlay changed since, even at the same version.
pub const REVISION: &str = "rev";

/// Attribute of the project's field-definition revision (`fields_rev` on the project) that the
/// committed basis was derived under. An indexer that finds a newer one than its definitions
/// read them before a field change whose job has already indexed this issue: it reads them
/// again instead of undoing the job's work.
pub const FIELDS_REVISION: &str = "fr";

/// `head` records that its basis was derived under field-definition revision `fields_rev`.
pub fn set_fields_revision(head: &mut Item, fields_rev: u64) {
    head.insert(FIELDS_REVISION.into(), n(fields_rev));
}

/// Attribute of the head holding the committed basis' summary digest (see
/// [`crate::model::summary`]); absent in heads written before entries carried summaries.
pub const SUMMARY_DIGEST: &str = "sd";

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
/// fields in the head or (with `layout.buckets > 0`) only their digests.
pub fn head_item(
    tenant: &TenantId,
    issue_id: &IssueId,
    version: u64,
    basis: Option<&Basis>,
    layout: &Layout,
    overlay: &BTreeMap<String, Option<String>>,
) -> Item {
    let mut item = key(
        keys::index::watermark_pk(tenant, issue_id),
        keys::index::WATERMARK_SK,
    );
    let all_scope = basis.is_some_and(|b| b.placement.all_scope);
    let format = if all_scope { FORMAT_ALL_SCOPE } else { FORMAT };
    item.insert("fmt".into(), n(format));
    item.insert("version".into(), n(version));
    if let Some(b) = basis {
        item.insert("p".into(), s(b.placement.project.to_string()));
        item.insert("n".into(), n(b.placement.num));
        item.insert("s".into(), s(b.placement.state.as_str()));
        if b.placement.shards != Shards::ONE {
            item.insert("ly".into(), n(b.placement.shards.bits()));
        }
        item.insert("u".into(), s(b.updated_at.clone()));
        if b.summary.digest != 0 {
            item.insert(SUMMARY_DIGEST.into(), n(b.summary.digest));
        }
        let head_columns = b
            .columns
            .iter()
            .filter(|(c, _)| layout.buckets == 0 || is_built_in(c));
        item.insert("c".into(), columns_attr(head_columns));
        if !b.seats.is_empty() {
            item.insert(
                "pp".into(),
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
    if layout.buckets > 0 && !overlay.is_empty() {
        item.insert("o".into(), columns_attr(overlay));
    }
    if layout.buckets > 0 {
        item.insert("nb".into(), n(layout.buckets));
        item.insert(
            "d".into(),
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                layout.digests.concat(),
            )),
        );
    }
    if version == u64::MAX {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        item.insert(
            "expires_at".into(),
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
    item.insert("version".into(), n(version));
    item.insert("c".into(), columns_attr(fields));
    item
}

/// The fields a bucket item holds.
pub fn bucket_fields(item: &Item) -> Option<BTreeMap<String, Option<String>>> {
    columns_from(item.get("c"))
}

/// The new head and buckets once `desired` is written at `version` (`None`: deleted, a
/// tombstone): the bucket items to put, in the layout `buckets`. Buckets not read keep their
/// digest and overlay (they were not read because their content does not change). A bucket
/// read whose fields only changed value keeps its item: the new values go to the overlay,
/// until the overlay outgrows [`OVERLAY_MAX`] and is folded into the buckets read. Digests
/// are of the committed content (item and overlay together).
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
        let head = head_item(tenant, issue_id, version, None, &Layout::default(), &none);
        return (head, Vec::new());
    };
    if buckets == 0 {
        let head = head_item(
            tenant,
            issue_id,
            version,
            Some(d),
            &Layout::default(),
            &none,
        );
        return (head, Vec::new());
    }
    let same = buckets == wm.layout.buckets && wm.legacy.is_none();
    let mut layout = Layout {
        buckets,
        digests: Vec::with_capacity(usize::from(buckets)),
    };
    let desired_buckets = by_bucket(d, buckets);
    let mut overlay = BTreeMap::new();
    let mut rewrite = BTreeSet::new();
    // Buckets read whose changes sit in the overlay: folded first when it outgrows its bound.
    let mut overlaid = BTreeSet::new();
    for (&k, fields) in &desired_buckets {
        let old_digest = wm.layout.digests.get(usize::from(k));
        if same
            && !wm.loaded.contains(&k)
            && let Some(old) = old_digest
        {
            layout.digests.push(*old);
            let kept = wm
                .overlay
                .iter()
                .filter(|(c, _)| bucket_of(c, buckets) == k);
            overlay.extend(kept.map(|(c, v)| (c.clone(), v.clone())));
            continue;
        }
        layout.digests.push(digest(fields));
        match wm.stored.get(&k).filter(|_| same) {
            Some(item) if item.keys().eq(fields.keys()) => {
                let changed = fields.iter().filter(|(c, v)| item.get(*c) != Some(*v));
                let before = overlay.len();
                overlay.extend(changed.map(|(c, v)| (c.clone(), v.clone())));
                if overlay.len() > before {
                    overlaid.insert(k);
                }
            }
            // A field added or removed (or a new layout): the item is rewritten.
            _ => {
                rewrite.insert(k);
            }
        }
    }
    for k in overlaid {
        if overlay_bytes(&overlay) <= OVERLAY_MAX {
            break;
        }
        overlay.retain(|c, _| bucket_of(c, buckets) != k);
        rewrite.insert(k);
    }
    let items = rewrite
        .into_iter()
        .map(|k| {
            let fields = desired_buckets.get(&k).unwrap_or(&none);
            bucket_item(tenant, issue_id, (buckets, k), fields, version)
        })
        .collect();
    let head = head_item(tenant, issue_id, version, Some(d), &layout, &overlay);
    (head, items)
}

/// A head item as a watermark (its head part: buckets are read separately); `None` when it
/// cannot be read.
pub fn from_head(tenant: &TenantId, issue_id: &IssueId, item: &Item) -> Option<Watermark> {
    let version = match item.get("version") {
        Some(AttributeValue::N(v)) => v.parse().ok()?,
        None => 0,
        _ => return None,
    };
    let parked = item.contains_key("parked");
    let string_set = |name: &str| match item.get(name) {
        Some(AttributeValue::Ss(v)) => Some(v.as_slice()),
        _ => None,
    };
    let rev = match item.get(REVISION) {
        Some(AttributeValue::N(v)) => Some(v.parse().ok()?),
        _ => None,
    };
    let fields_rev = match item.get(FIELDS_REVISION) {
        Some(AttributeValue::N(v)) => Some(v.parse().ok()?),
        _ => None,
    };
    if !item.contains_key("fmt") {
        // The previous layout: every entry key, as `entry_ref`s.
        let refs = |name: &str| -> BTreeSet<Entry> {
            string_set(name)
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
        return Some(Watermark {
            version,
            legacy: Some(Legacy {
                entries: refs("entries"),
                pending: refs("pending"),
            }),
            pending_count: string_set("pending").map_or(0, <[String]>::len),
            parked,
            rev,
            ..Watermark::default()
        });
    }
    let pending = Pending::from_tokens(
        string_set("pend")
            .unwrap_or_default()
            .iter()
            .map(|t| t.as_str()),
    )?;
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    };
    let buckets: u16 = match item.get("nb") {
        Some(AttributeValue::N(v)) => v.parse().ok()?,
        _ => 0,
    };
    let digests = match item.get("d") {
        Some(AttributeValue::B(b)) => b
            .as_ref()
            .chunks(DIGEST)
            .map(|c| <[u8; DIGEST]>::try_from(c).ok())
            .collect::<Option<Vec<_>>>()?,
        _ => Vec::new(),
    };
    if digests.len() != usize::from(buckets) {
        return None;
    }
    let all_scope = matches!(item.get("fmt"), Some(AttributeValue::N(f)) if f == FORMAT_ALL_SCOPE);
    let committed = match text("p") {
        None => None,
        Some(project) => {
            let num = match item.get("n") {
                Some(AttributeValue::N(v)) => v.parse().ok()?,
                _ => return None,
            };
            let shards = match item.get("ly") {
                None => Shards::ONE,
                Some(AttributeValue::N(v)) => Shards::from_bits(v.parse().ok()?)?,
                Some(_) => return None,
            };
            let seats = match item.get("pp") {
                Some(AttributeValue::L(l)) => l
                    .iter()
                    .map(|st| match st {
                        AttributeValue::L(parts) => match parts.as_slice() {
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
                        },
                        _ => None,
                    })
                    .collect::<Option<BTreeSet<_>>>()?,
                _ => BTreeSet::new(),
            };
            Some(Basis {
                placement: Placement {
                    project: ProjectId::parse(&project)?,
                    num,
                    state: IssueState::parse(&text("s")?)?,
                    shards,
                    all_scope,
                },
                updated_at: text("u")?,
                columns: columns_from(item.get("c"))?,
                seats,
                summary: match item.get(SUMMARY_DIGEST) {
                    Some(AttributeValue::N(d)) => Summary::recorded(d.parse().ok()?),
                    None => Summary::recorded(0),
                    Some(_) => return None,
                },
            })
        }
    };
    Some(Watermark {
        version,
        committed,
        pending,
        layout: Layout { buckets, digests },
        overlay: columns_from(item.get("o"))?,
        parked,
        rev,
        fields_rev,
        pending_count: string_set("pend").map_or(0, <[String]>::len),
        ..Watermark::default()
    })
}

/// The issue of a watermark head of a previous layout, unless it is a tombstone (those expire
/// on their own): what `gridctl upgrade` rewrites. Every entry key in a string set; a compact
/// head whose entries are also in the `all` scope ([`FORMAT_ALL_SCOPE`]); or one whose
/// entries carry no summary (no [`SUMMARY_DIGEST`]).
pub fn previous_layout_head(item: &Item) -> Option<(TenantId, IssueId)> {
    let text = |k: &str| match item.get(k) {
        Some(AttributeValue::S(v)) => Some(v.as_str()),
        _ => None,
    };
    if text(keys::SK)? != keys::index::WATERMARK_SK {
        return None;
    }
    let marks = match item.get("fmt") {
        None => ["version", "entries", "pending"],
        Some(AttributeValue::N(f)) if f == FORMAT_ALL_SCOPE => ["version", "p", "pend"],
        // A committed basis without a summary digest: its entries carry no summary.
        Some(_) if item.contains_key("p") && !item.contains_key(SUMMARY_DIGEST) => ["p"; 3],
        Some(_) => return None,
    };
    // A head holding only a parked flag (the issue was parked before it was ever indexed) has
    // no layout to upgrade.
    if !marks.iter().any(|a| item.contains_key(*a)) {
        return None;
    }
    if matches!(item.get("version"), Some(AttributeValue::N(v)) if v == &u64::MAX.to_string()) {
        return None;
    }
    keys::index::parse_watermark_pk(text(keys::PK)?)
}

/// Whether a head is of the layout whose column entries are also in the `all` scope.
pub fn all_scope_head(item: &Item) -> bool {
    matches!(item.get("fmt"), Some(AttributeValue::N(f)) if f == FORMAT_ALL_SCOPE)
}

impl Watermark {
    /// Adds a bucket's fields (as read; a bucket that is not there holds none) to the
    /// committed basis.
    pub fn absorb_bucket(&mut self, k: u16, fields: Option<BTreeMap<String, Option<String>>>) {
        self.loaded.insert(k);
        let fields = fields.unwrap_or_default();
        let n = self.layout.buckets;
        if let Some(c) = self.committed.as_mut() {
            c.columns.extend(fields.clone());
            let overlaid = self.overlay.iter().filter(|(f, _)| bucket_of(f, n) == k);
            c.columns
                .extend(overlaid.map(|(f, v)| (f.clone(), v.clone())));
        }
        self.stored.insert(k, fields);
    }
}

mod step;

#[cfg(test)]
mod tests;
