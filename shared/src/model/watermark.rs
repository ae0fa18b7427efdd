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
//! Watermarks of the previous format (every entry key in a string set, `entries`/`pending`)
//! are read as they are and rewritten in this layout by the issue's next indexing.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::{IssueState, ParticipantKind, Role};
use crate::model::entries::{Entry, EntryList, keys_of};
use crate::model::summary::Summary;

use crate::keys;
use crate::keys::index::Shards;
pub use crate::model::basis::{
    BUILT_IN_COLUMNS, Basis, Hot, Placement, Seat, is_built_in, zip_columns,
};
use crate::model::basis::{column_entries, seat_entries};

/// What the watermark derives entries from when only their keys matter (what is certain or
/// possible in the index).
static NO_SUMMARY: Summary = Summary {
    digest: 0,
    text: None,
    compact: None,
};

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

/// How an issue's field values are stored: in the head (`count == 0`), or in `count` bucket
/// items, each with its digest in the head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buckets {
    pub count: u16,
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

impl Buckets {
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

/// A watermark of the previous format: every entry key, certain and pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Legacy {
    pub entries: BTreeSet<Entry>,
    pub pending: BTreeSet<Entry>,
}

/// Version recorded for a deleted issue: above every real version, so nothing older is
/// ever applied again.
pub const DELETED: u64 = u64::MAX;

/// Which stored watermark versions a write may replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaces {
    /// Only older ones: a stream record's change, of which a duplicate or an older delivery
    /// writes nothing.
    Older,
    /// Older ones and the same: a re-index, which rewrites an issue at its own version (after
    /// a field change, or from a catch-up).
    OlderOrSame,
}

impl Replaces {
    /// Whether a write at `version` may replace a watermark stored at `stored`.
    pub fn admits(self, stored: u64, version: u64) -> bool {
        match self {
            Replaces::Older => stored < version,
            Replaces::OlderOrSame => stored <= version,
        }
    }
}

/// What a commit records besides the basis: the version, the bucket count, the field
/// definitions' revision the basis was derived under, and how many pending tokens the head
/// must hold (what was read and this attempt's own intent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitAt {
    pub version: u64,
    pub buckets: u16,
    pub fields_rev: u64,
    pub pending_count: usize,
}

/// What the indexer last recorded for an issue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watermark {
    /// The version the index reflects (0: none committed yet; [`DELETED`]: deleted).
    pub version: u64,
    /// The basis committed, restricted to the parts read: the head's columns and the fields
    /// of the buckets in `loaded`.
    pub committed: Option<Basis>,
    pub pending: Pending,
    pub buckets: Buckets,
    /// Buckets read into `committed`.
    pub loaded: BTreeSet<u16>,
    /// Committed values of fields that differ from what their bucket item holds (head
    /// attribute `o`): a change of a few values rewrites the head only, which the commit
    /// writes anyway, instead of a bucket too. Folded into the buckets when it grows.
    pub overlay: BTreeMap<String, Option<String>>,
    /// The bucket items read, as stored (before the overlay).
    pub stored: BTreeMap<u16, BTreeMap<String, Option<String>>>,
    /// The head's revision: a fresh random number each time the head is put whole (see
    /// `rev` in the head); `None` for heads that never were (an intent's, the previous format's).
    pub rev: Option<u64>,
    /// The field-definition revision of the committed basis (see `fr` in the head);
    /// `None` for heads written before it was recorded.
    pub fields_rev: Option<u64>,
    /// Size of the pending string set as read (`pend`, or the previous format's `pending`),
    /// which intents only ever add to: an unchanged size is an unchanged set.
    pub pending_count: usize,
    /// Set when the stored watermark has the previous format.
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
        self.buckets.count == 0
            || is_built_in(column)
            || self.loaded.contains(&bucket_of(column, self.buckets.count))
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
        let n = self.buckets.count;
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
        if moved || placed || next_buckets != n {
            return everything;
        }
        // A new summary goes into every hot column's entries: those columns are compared.
        let resummarized = step::refreshes(self.committed.as_ref(), Some(desired));
        if resummarized && desired.hot == Hot::All {
            return everything;
        }
        let hot = desired
            .fields()
            .map(|(c, _)| c)
            .filter(|c| resummarized && desired.hot.contains(c));
        let mut read: BTreeSet<u16> = self
            .pending
            .columns
            .keys()
            .chain(extra.columns.keys())
            .chain(hot)
            .filter(|c| !is_built_in(c))
            .map(|c| bucket_of(c, n))
            .collect();
        for (k, fields) in by_bucket(desired, n) {
            if self.buckets.digests.get(usize::from(k)) != Some(&digest(&fields)) {
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
    /// previous format (which hold keys, not a basis), and as the reference the column-by-column
    /// planner is tested against.
    pub fn step_by_sets(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        desired: Option<&Basis>,
        extra: &Pending,
    ) -> Step {
        let want = desired.map_or_else(BTreeSet::new, |d| d.entries(tenant, issue_id));
        // A watermark of the previous format predates summaries: its entries carry none.
        let refresh = self.legacy.is_some() || step::refreshes(self.committed.as_ref(), desired);
        // What an earlier attempt wrote (`extra`) is as uncertain as what is pending: its keys
        // may be desired ones, written with another summary.
        let mut certain = if self.legacy.is_some() {
            BTreeSet::new()
        } else if extra.is_empty() {
            self.certain(tenant, issue_id)
        } else {
            let mut with_extra = self.clone();
            with_extra.pending.merge(extra.clone());
            with_extra.certain(tenant, issue_id)
        };
        // A new summary: what carries it is put again (cold columns' entries stay certain).
        if refresh && let Some(d) = desired {
            let summarized = keys_of(&d.summarized_entries(tenant, issue_id));
            certain.retain(|e| !summarized.contains(&e.key()));
        }
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

/// What a commit writes besides the head: the new bucket layout, the overlay, and the bucket
/// items rewritten with their fields.
#[derive(Debug)]
pub struct CommitPlan {
    pub buckets: Buckets,
    pub overlay: BTreeMap<String, Option<String>>,
    pub rewrite: Vec<(u16, BTreeMap<String, Option<String>>)>,
}

impl Watermark {
    /// The buckets once `d` is committed in `buckets` buckets (at least one).
    /// Buckets not read keep their digest and overlay (they were not read because their
    /// content does not change). A bucket read whose fields only changed value keeps its
    /// item: the new values go to the overlay, until the overlay outgrows `OVERLAY_MAX` and
    /// is folded into the buckets read. Digests are of the committed content (item and
    /// overlay together).
    pub fn plan_commit(&self, d: &Basis, buckets: u16) -> CommitPlan {
        let same = buckets == self.buckets.count && self.legacy.is_none();
        let mut layout = Buckets {
            count: buckets,
            digests: Vec::with_capacity(usize::from(buckets)),
        };
        let desired_buckets = by_bucket(d, buckets);
        let mut overlay = BTreeMap::new();
        let mut rewrite = BTreeSet::new();
        // Buckets read whose changes sit in the overlay: folded first when it outgrows its bound.
        let mut overlaid = BTreeSet::new();
        for (&k, fields) in &desired_buckets {
            let old_digest = self.buckets.digests.get(usize::from(k));
            if same
                && !self.loaded.contains(&k)
                && let Some(old) = old_digest
            {
                layout.digests.push(*old);
                let kept = self
                    .overlay
                    .iter()
                    .filter(|(c, _)| bucket_of(c, buckets) == k);
                overlay.extend(kept.map(|(c, v)| (c.clone(), v.clone())));
                continue;
            }
            layout.digests.push(digest(fields));
            match self.stored.get(&k).filter(|_| same) {
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
        // The buckets holding most of the overlay first: the fewest bucket writes bring it
        // back under its bound.
        let share = |k: u16| -> usize {
            let of_k = overlay.iter().filter(|(c, _)| bucket_of(c, buckets) == k);
            of_k.map(|(c, v)| field_bytes(c, v)).sum()
        };
        let mut overlaid: Vec<(usize, u16)> = overlaid.into_iter().map(|k| (share(k), k)).collect();
        overlaid.sort_by(|a, b| b.cmp(a));
        for (_, k) in overlaid {
            if overlay_bytes(&overlay) <= OVERLAY_MAX {
                break;
            }
            overlay.retain(|c, _| bucket_of(c, buckets) != k);
            rewrite.insert(k);
        }
        let mut desired_buckets = desired_buckets;
        let rewrite = rewrite
            .into_iter()
            .map(|k| (k, desired_buckets.remove(&k).unwrap_or_default()))
            .collect();
        CommitPlan {
            buckets: layout,
            overlay,
            rewrite,
        }
    }
}

impl Watermark {
    /// How many pending tokens the head holds once `step`'s intent is recorded: as read, and
    /// the intent's new ones (a compact head's; a previous format's intent goes elsewhere).
    pub fn pending_after(&self, step: &Step) -> usize {
        if self.legacy.is_some() {
            return 0;
        }
        if step.puts.is_empty() && step.deletes.is_empty() {
            return self.pending_count;
        }
        let had = self.pending.tokens();
        self.pending_count + step.intent.tokens().difference(&had).count()
    }

    /// Adds a bucket's fields (as read; a bucket that is not there holds none) to the
    /// committed basis.
    pub fn absorb_bucket(&mut self, k: u16, fields: Option<BTreeMap<String, Option<String>>>) {
        self.loaded.insert(k);
        let fields = fields.unwrap_or_default();
        let n = self.buckets.count;
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
