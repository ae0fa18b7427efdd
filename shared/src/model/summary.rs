//! An issue's list summary in its index entries: what a grid or inbox item shows of it (all but
//! its description and its people's display names), so a page of typical issues is one Query.
//!
//! The rule: an entry carries the summary when the entry item, summary included, is at most one
//! write unit (1 KB: [`ENTRY_MAX_BYTES`]), so carrying it never makes a write dearer per item.
//! Entries of wider issues (long titles, many field values or participants) stay thin, and a
//! page fetches those issues with `BatchGetItem` as before. The fit is per entry, since keys
//! differ in length (a text value's key is longer than a number's), so one issue can have both.
//!
//! The summary changes with every new version of the issue (its version and `updated_at` are
//! in it) and when the project's fields change (only defined fields' values are in it), so the
//! watermark records its [digest](Summary::digest): a step toward a basis whose digest differs
//! from the committed one puts every entry again, and a stale summary is drift.
//!
//! Two texts, both built by hand from the borrowed record so the stream image and an issue read
//! from the table give the same bytes (participants as the issue item sorts them, numbers in
//! their canonical form):
//! - *keyed* ([`text_of`]), for participation copies: JSON with one-letter names and field
//!   values by id, readable without the project (an inbox page spans projects);
//! - *compact* ([`compact_of`]), for column entries, which a grid page reads knowing its
//!   project's fields: a JSON array with the values by position in the project's field list
//!   (its order is the definitions' sort key, the field id), so a 26-character id costs
//!   nothing per value and an issue with 55 typical values fits one write unit. The text
//!   names the [`layout`] it was written under; a reader holding another list (a field added
//!   or deleted since) treats the entry as thin, never guessing at positions.
//!
//! Only hot columns' entries carry the compact text ([`crate::model::basis::Hot`]): every
//! update rewrites every entry that carries a summary, so a column nobody sorts by stays thin.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::domain::decimal::DynNumber;
use crate::domain::ids::{FieldId, IssueId, ParticipantId, ProjectId};
use crate::domain::values::{FieldDef, StoredValue};
use crate::domain::{Issue, IssueState, Participant, ParticipantKind, Role};
use crate::model::basis::Hot;
use crate::model::record::{IssueRecord, ValueRef};

/// The entry attribute holding the summary.
pub const ATTR: &str = "sm";

/// Largest entry item, in DynamoDB's measure (attribute names and values), that carries a
/// summary: one write unit.
pub const ENTRY_MAX_BYTES: usize = 1024;

/// Bumped when the text's form changes: it is part of the digest, so each issue's next
/// indexing writes its entries again (a re-index of every issue, such as `gridctl repair`
/// after `verify` reports the old summaries stale, does it at once).
const FORMAT: u8 = 3;

/// The compact text's first element: a keyed text (format 1), or a compact one without the
/// parent (2), in a column entry is read as thin, since it may be stale.
const COMPACT: u8 = 3;

/// An issue's summary as the indexer knows it: always its digest, and its text when it was
/// built from the issue (a committed basis read from a watermark has only the digest).
/// Summaries compare by digest.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// FNV-1a of the format, both texts and the hot columns; 0 for none recorded (a watermark
    /// written before summaries, or one of an issue never indexed).
    pub digest: u64,
    /// The keyed text, for participation copies.
    pub text: Option<Arc<str>>,
    /// The compact text, for hot columns' entries.
    pub compact: Option<Arc<str>>,
}

impl PartialEq for Summary {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Summary {}

impl Summary {
    /// The summary of `issue` under its project's fields `defs` and hot columns `hot` (part
    /// of the digest: a column turning hot writes the summaries again); [`Summary::THIN`]
    /// when both texts are too long for any entry.
    pub fn of_record(issue: &IssueRecord<'_>, defs: &[FieldDef], hot: &Hot) -> Self {
        // No hot column, no compact text to build (the indexer builds summaries per record).
        Self::build(issue, defs, hot, !hot.is_none())
    }

    /// [`Summary::of_record`], with the compact text whatever the hot columns (an issue in a
    /// saved view: its view's entries carry it). The digest covers the compact text too, so
    /// a change of the field list (its layout) rewrites the entries that carry it.
    pub fn with_compact(issue: &IssueRecord<'_>, defs: &[FieldDef], hot: &Hot) -> Self {
        Self::build(issue, defs, hot, true)
    }

    fn build(issue: &IssueRecord<'_>, defs: &[FieldDef], hot: &Hot, compact: bool) -> Self {
        let fit = |t: String| (t.len() + MIN_ENTRY_OVERHEAD <= ENTRY_MAX_BYTES).then_some(t);
        let text = fit(text_of(issue, defs));
        let compact = compact.then(|| fit(compact_of(issue, defs))).flatten();
        if text.is_none() && compact.is_none() {
            return Self::THIN;
        }
        let (t, c) = (text.as_deref(), compact.as_deref());
        let mut bytes = String::with_capacity(t.map_or(0, str::len) + c.map_or(0, str::len) + 8);
        for part in [t, c] {
            bytes.push_str(part.unwrap_or("-"));
            bytes.push('\u{0}');
        }
        hot.push_digest_text(&mut bytes);
        Self {
            digest: digest(&bytes),
            text: text.map(Into::into),
            compact: compact.map(Into::into),
        }
    }

    /// The summary of an issue too wide for any of its entries to carry it: every entry is
    /// thin whatever the issue says, so an update of a wide issue writes only the entries that
    /// move, as before summaries.
    pub const THIN: Summary = Summary {
        digest: 1,
        text: None,
        compact: None,
    };

    /// A summary known only by the digest a watermark recorded.
    pub fn recorded(digest: u64) -> Self {
        Self {
            digest,
            text: None,
            compact: None,
        }
    }

    /// The text an entry with these key attributes carries: the keyed text for a
    /// participation copy (`role`) or a child's entry, the compact one for a column entry, if the entry item
    /// stays within one write unit with it, else none (a thin entry).
    pub fn for_entry(
        &self,
        pk: &str,
        sk: &str,
        issue_id: &str,
        role: Option<&str>,
    ) -> Option<&str> {
        // A children page, like an inbox, reads without the project's field list.
        let keyed = role.is_some() || crate::keys::index::is_children_pk(pk);
        let text = if keyed {
            self.text.as_deref()?
        } else {
            self.compact.as_deref()?
        };
        fits(pk, sk, issue_id, role, text).then_some(text)
    }
}

/// Whether an entry item with these attributes and `summary` is at most [`ENTRY_MAX_BYTES`]
/// (DynamoDB's item size: every attribute's name and value; the entry's attributes are
/// `PK`, `SK`, `issue_id`, `role` on a participation copy, and [`ATTR`]).
pub fn fits(pk: &str, sk: &str, issue_id: &str, role: Option<&str>, summary: &str) -> bool {
    let role = role.map_or(0, |r| "role".len() + r.len());
    let bytes = "PK".len()
        + pk.len()
        + "SK".len()
        + sk.len()
        + "issue_id".len()
        + issue_id.len()
        + role
        + ATTR.len()
        + summary.len();
    bytes <= ENTRY_MAX_BYTES
}

/// Fewer bytes than any entry item takes besides its summary: the attribute names (`PK`, `SK`,
/// `issue_id`, [`ATTR`]: 14) and an issue id (26), then the smaller of a column entry's keys
/// (`T#{t}#X#{project}#num#open` with a one-character tenant: 41, and a missing value's sort
/// key, `2` and 20 digits: 21) and a participation copy's (`T#{t}#IN#user#{id}#open`: 18, a
/// sort key of `updated_at` and the issue id: 51, and its `role`: at least 11). A summary
/// longer than the allowance this leaves fits no entry.
const MIN_ENTRY_OVERHEAD: usize = 14 + 26 + 41 + 21;

/// FNV-1a over the format, the length and the text in 8-byte words (a multiply per word, not
/// per byte: the indexer digests every record's summary): stable across builds (it is
/// stored), and a change of the text changes it but with odds of about 2^-64. Never 0 (none
/// recorded) or 1 ([`Summary::THIN`]).
fn digest(text: &str) -> u64 {
    let mix = |h: u64, word: u64| (h ^ word).wrapping_mul(0x0100_0000_01b3);
    let start = mix(0xcbf2_9ce4_8422_2325, u64::from(FORMAT));
    let mut h = mix(start, text.len() as u64);
    let mut words = text.as_bytes().chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = mix(h, u64::from_le_bytes(b));
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    mix(h, u64::from_le_bytes(tail)).max(2)
}

/// A JSON string literal of `s`, appended.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // Writing a `&str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The summary's text: `{"p","n","t","s","f","pp","v","c","u"}` (project, number, title, state,
/// field values by id, participants as `[kind, id, role]`, version, created and updated), and
/// `"pa"`, the parent, when the issue has one.
///
/// Only the values of fields the project defines (`defs`, as the indexer's columns): a deleted
/// field's value leaves the issue later, without a new version, and a re-index may read the
/// issue from before that; neither changes the summary. A value the field can no longer hold
/// (a select option since removed) shows as it is, as the issue does.
pub fn text_of(issue: &IssueRecord<'_>, defs: &[FieldDef]) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"p\":");
    push_json_str(&mut out, issue.project_id.as_str());
    let _ = write!(out, ",\"n\":{},\"t\":", issue.num);
    push_json_str(&mut out, issue.title);
    out.extend_from_slice(b",\"s\":");
    push_json_str(&mut out, issue.state.as_str());
    out.extend_from_slice(b",\"f\":{");
    let mut fields: Vec<(&str, ValueRef<'_>)> = defs
        .iter()
        .filter_map(|d| Some((d.id.as_str(), issue.fields.get(d.id.as_str())?)))
        .collect();
    fields.sort_unstable_by_key(|(id, _)| *id);
    for (at, (id, value)) in fields.into_iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        push_json_str(&mut out, id);
        out.push(b':');
        push_value(&mut out, value);
    }
    out.extend_from_slice(b"},\"pp\":[");
    push_seats(&mut out, issue, whole);
    let _ = write!(out, "],\"v\":{},\"c\":", issue.version);
    push_json_str(&mut out, issue.created_at);
    out.extend_from_slice(b",\"u\":");
    push_json_str(&mut out, issue.updated_at);
    if let Some(parent) = issue.parent_id {
        out.extend_from_slice(b",\"pa\":");
        push_json_str(&mut out, parent);
    }
    out.push(b'}');
    // Every piece is UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// A field value as JSON: a string, or a number printed canonically.
fn push_value(out: &mut Vec<u8>, value: ValueRef<'_>) {
    match value {
        ValueRef::S(s) => push_json_str(out, s),
        ValueRef::Number(n) => {
            let _ = write!(out, "{n}");
        }
        // Checked to parse when the record was read; printed canonically, as the issue
        // read from the table prints it.
        ValueRef::N(raw) => match DynNumber::parse(raw) {
            Ok(n) => {
                let _ = write!(out, "{n}");
            }
            Err(_) => out.extend_from_slice(b"null"),
        },
    }
}

/// The field list in a compact text's order: by id (the order the project's Query returns
/// it in, so sorting is a pass over a sorted list), whatever order the caller holds it in.
fn by_id(defs: &[FieldDef]) -> Vec<&FieldDef> {
    let mut sorted: Vec<&FieldDef> = defs.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    sorted
}

/// The project's field list as a compact text names it: 48 bits of FNV-1a over the count and
/// the ids in order, so a reader holding another list (a field added or deleted since the
/// text was written) knows.
pub fn layout(defs: &[FieldDef]) -> u64 {
    layout_of(&by_id(defs))
}

fn layout_of(defs: &[&FieldDef]) -> u64 {
    let mix = |h: u64, b: u8| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    let mut h = (defs.len() as u64)
        .to_le_bytes()
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325, mix);
    for d in defs {
        h = d.id.as_str().bytes().chain([0]).fold(h, mix);
    }
    h >> 16
}

/// The participants as `[kind, id, role]` arrays, sorted as the issue item sorts them, each
/// kind and role written as `word` gives it (whole, or one letter).
fn push_seats(out: &mut Vec<u8>, issue: &IssueRecord<'_>, word: fn(&str) -> &str) {
    let mut seats = issue.seats.clone();
    seats.sort_unstable_by(|a, b| (a.kind, a.id, a.role).cmp(&(b.kind, b.id, b.role)));
    for (at, seat) in seats.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        out.push(b'[');
        push_json_str(out, word(seat.kind.as_str()));
        out.push(b',');
        push_json_str(out, seat.id);
        out.push(b',');
        push_json_str(out, word(seat.role.as_str()));
        out.push(b']');
    }
}

/// A participant kind or role written whole, in a keyed text.
fn whole(word: &str) -> &str {
    word
}

/// A participant kind's or role's one letter in a compact text.
fn letter(word: &str) -> &str {
    word.get(..1).unwrap_or("")
}

/// The compact text: `[3, layout, num, title, state, [values by position], [[kind, id, role]],
/// version, created, updated, parent or null]`, kinds and roles by their first letter, a position with no
/// value `null` and trailing ones left out. The project is the one being read.
pub fn compact_of(issue: &IssueRecord<'_>, defs: &[FieldDef]) -> String {
    let defs = by_id(defs);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let _ = write!(out, "[{COMPACT},{},{},", layout_of(&defs), issue.num);
    push_json_str(&mut out, issue.title);
    out.push(b',');
    push_json_str(&mut out, issue.state.as_str());
    out.extend_from_slice(b",[");
    let values: Vec<Option<ValueRef<'_>>> = defs
        .iter()
        .map(|d| issue.fields.get(d.id.as_str()))
        .collect();
    let used = values
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |at| at + 1);
    for (at, value) in values.into_iter().take(used).enumerate() {
        if at > 0 {
            out.push(b',');
        }
        match value {
            Some(v) => push_value(&mut out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b"],[");
    push_seats(&mut out, issue, letter);
    let _ = write!(out, "],{},", issue.version);
    push_json_str(&mut out, issue.created_at);
    out.push(b',');
    push_json_str(&mut out, issue.updated_at);
    out.push(b',');
    match issue.parent_id {
        Some(parent) => push_json_str(&mut out, parent),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b']');
    String::from_utf8(out).unwrap_or_default()
}

/// The compact text as read back.
type CompactText = (
    u8,
    u64,
    u64,
    String,
    String,
    Vec<Option<Box<RawValue>>>,
    Vec<(String, String, String)>,
    u64,
    String,
    String,
    Option<String>,
);

/// A stored value from its JSON: a string, or a number.
fn value_of(raw: &RawValue) -> Option<StoredValue> {
    let raw = raw.get();
    Some(if raw.starts_with('"') {
        StoredValue::S(serde_json::from_str(raw).ok()?)
    } else {
        StoredValue::N(DynNumber::parse(raw).ok()?)
    })
}

/// The issue a column entry's compact text shows, read with the project's field list; `None`
/// if the text is not a compact summary or was written under another list (the reader treats
/// the entry as thin).
pub fn issue_of_compact(
    issue_id: &str,
    project_id: &ProjectId,
    defs: &[FieldDef],
    text: &str,
) -> Option<Issue> {
    let (format, at, num, title, state, values, seats, version, created, updated, parent): CompactText =
        serde_json::from_str(text).ok()?;
    let defs = by_id(defs);
    if format != COMPACT || at != layout_of(&defs) || values.len() > defs.len() {
        return None;
    }
    let fields = defs
        .into_iter()
        .zip(values)
        .filter_map(|(d, v)| v.map(|v| (d, v)))
        .map(|(d, raw)| Some((d.id.clone(), value_of(&raw)?)))
        .collect::<Option<_>>()?;
    let participants = seats
        .into_iter()
        .map(|(k, id, r)| {
            Some(Participant {
                kind: [ParticipantKind::User, ParticipantKind::Team]
                    .into_iter()
                    .find(|x| letter(x.as_str()) == k)?,
                id: ParticipantId::parse(&id)?,
                role: [Role::Assignee, Role::Reporter, Role::Watcher]
                    .into_iter()
                    .find(|x| letter(x.as_str()) == r)?,
            })
        })
        .collect::<Option<_>>()?;
    Some(Issue {
        id: IssueId::parse(issue_id)?,
        project_id: project_id.clone(),
        num,
        title,
        state: IssueState::parse(&state)?,
        description: None,
        fields,
        participants,
        version,
        created_at: created,
        updated_at: updated,
        parent_id: parent
            .map(|p| IssueId::parse(&p))
            .map_or(Some(None), |p| p.map(Some))?,
    })
}

/// Where summaries are read, which says which text an entry should carry.
#[derive(Clone, Copy, Debug)]
pub enum Reading<'a> {
    /// A project's column entries: compact texts, read with its field list.
    Columns {
        project_id: &'a ProjectId,
        defs: &'a [FieldDef],
    },
    /// Participation copies: keyed texts.
    Inbox,
}

impl Reading<'_> {
    /// The issue an entry's summary shows; `None` (read the issue) when it is not the text
    /// this reading expects.
    pub fn issue(&self, issue_id: &str, text: &str) -> Option<Issue> {
        match self {
            Self::Columns { project_id, defs } => {
                issue_of_compact(issue_id, project_id, defs, text)
            }
            Self::Inbox => issue_of(issue_id, text),
        }
    }
}

/// The summary's text as read back.
#[derive(Deserialize)]
struct Text {
    p: String,
    n: u64,
    t: String,
    s: String,
    f: BTreeMap<String, Box<RawValue>>,
    pp: Vec<(String, String, String)>,
    v: u64,
    c: String,
    u: String,
    #[serde(default)]
    pa: Option<String>,
}

/// The issue a summary shows (no description: lists omit it); `None` if the text is not a
/// summary, which a reader treats as a thin entry.
pub fn issue_of(issue_id: &str, text: &str) -> Option<Issue> {
    let t: Text = serde_json::from_str(text).ok()?;
    let fields =
        t.f.into_iter()
            .map(|(id, raw)| Some((FieldId::parse(&id)?, value_of(&raw)?)))
            .collect::<Option<_>>()?;
    let participants =
        t.pp.into_iter()
            .map(|(kind, id, role)| {
                Some(Participant {
                    kind: ParticipantKind::parse(&kind)?,
                    id: ParticipantId::parse(&id)?,
                    role: Role::parse(&role)?,
                })
            })
            .collect::<Option<_>>()?;
    Some(Issue {
        id: IssueId::parse(issue_id)?,
        project_id: ProjectId::parse(&t.p)?,
        num: t.n,
        title: t.t,
        state: IssueState::parse(&t.s)?,
        description: None,
        fields,
        participants,
        version: t.v,
        created_at: t.c,
        updated_at: t.u,
        parent_id: t
            .pa
            .map(|p| IssueId::parse(&p))
            .map_or(Some(None), |p| p.map(Some))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::TenantId;
    use crate::store::records::items::issue_item;
    use crate::store::records::items::tests::issue;
    use proptest::prelude::*;

    fn def(id: &str) -> FieldDef {
        FieldDef {
            id: crate::domain::ids::FieldId::parse(id).unwrap(),
            name: id.into(),
            field_type: crate::domain::values::FieldType::Text,
            options: None,
            sortable: true,
        }
    }

    proptest! {
        /// A summary reads back as the issue it summarises, and the stream image of the issue's
        /// item gives the same bytes (the index and a recomputation from the table agree).
        #[test]
        fn a_summary_reads_back_as_its_issue_and_the_image_gives_the_same_text(
            issue in issue(),
            undefined in prop::collection::btree_set(0usize..8, 0..3),
        ) {
            // The project defines every field the issue has a value for but `undefined`.
            let ids: Vec<String> = issue.fields.keys().map(|id| id.to_string()).collect();
            let defs: Vec<FieldDef> = ids
                .iter()
                .enumerate()
                .filter(|(at, _)| !undefined.contains(at))
                .map(|(_, id)| def(id))
                .collect();
            let text = text_of(&IssueRecord::of(&issue), &defs);
            let mut shown = issue.clone();
            shown.fields.retain(|id, _| defs.iter().any(|d| d.id == *id));
            prop_assert_eq!(issue_of(issue.id.as_str(), &text), Some(shown));
            let item = issue_item(&TenantId::parse("acme").unwrap(), &issue).unwrap();
            let image: serde_dynamo::Item = item.into();
            let json = serde_json::to_string(&image).unwrap();
            let image: crate::model::event::Image<'_> = serde_json::from_str(&json).unwrap();
            let record = IssueRecord::from_image(&image).unwrap();
            prop_assert_eq!(&text_of(&record, &defs), &text);
            let summary = Summary::of_record(&record, &defs, &Hot::All);
            match &summary.text {
                Some(t) => prop_assert_eq!(&**t, text.as_str()),
                None => {
                    prop_assert_eq!(&summary, &Summary::THIN);
                    prop_assert!(text.len() + MIN_ENTRY_OVERHEAD > ENTRY_MAX_BYTES);
                }
            }
        }

        /// A compact text reads back as its issue with the field list it was written under
        /// (its project's; fields the list lacks are not shown), and as nothing with another.
        #[test]
        fn a_compact_text_reads_back_with_its_field_list_only(
            issue in issue(),
            undefined in prop::collection::btree_set(0usize..8, 0..3),
            extra in 0u64..3,
        ) {
            let ids: Vec<String> = issue.fields.keys().map(|id| id.to_string()).collect();
            let mut defs: Vec<FieldDef> = ids
                .iter()
                .enumerate()
                .filter(|(at, _)| !undefined.contains(at))
                .map(|(_, id)| def(id))
                .collect();
            // Fields without a value on this issue, between and after.
            defs.extend((0..extra).map(|n| def(FieldId::numbered(n + 1).as_ref())));
            defs.sort_by(|a, b| a.id.cmp(&b.id));
            defs.dedup_by(|a, b| a.id == b.id);
            let record = IssueRecord::of(&issue);
            let text = compact_of(&record, &defs);
            let mut shown = issue.clone();
            shown.fields.retain(|id, _| defs.iter().any(|d| d.id == *id));
            let read = issue_of_compact(issue.id.as_str(), &issue.project_id, &defs, &text);
            prop_assert_eq!(read, Some(shown));
            let mut other = defs.clone();
            other.push(def(FieldId::numbered(99).as_ref()));
            prop_assert_eq!(issue_of_compact(issue.id.as_str(), &issue.project_id, &other, &text), None);
            // A keyed text is no compact one, and the other way round.
            prop_assert_eq!(issue_of_compact(issue.id.as_str(), &issue.project_id, &defs, &text_of(&record, &defs)), None);
            prop_assert_eq!(issue_of(issue.id.as_str(), &text), None);
        }

        /// An entry carries the summary exactly when its item stays within one write unit.
        #[test]
        fn an_entry_carries_the_summary_only_within_one_write_unit(
            pk in "[a-zA-Z#]{10,300}",
            sk in "[0-9a-z]{21,90}",
            role in prop::option::of("[a-z]{6,8}"),
            len in 0usize..1100,
        ) {
            let text: Arc<str> = "x".repeat(len).into();
            let summary = Summary { digest: 7, text: Some(text.clone()), compact: Some(text.clone()) };
            let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
            let mut item = crate::store::records::items::key(pk.clone(), &sk);
            item.insert("issue_id".into(), aws_sdk_dynamodb::types::AttributeValue::S(id.into()));
            if let Some(r) = &role {
                item.insert("role".into(), aws_sdk_dynamodb::types::AttributeValue::S(r.clone()));
            }
            item.insert(ATTR.into(), aws_sdk_dynamodb::types::AttributeValue::S(text.to_string()));
            let size = crate::store::stored_size(&item);
            let carried = summary.for_entry(&pk, &sk, id, role.as_deref());
            prop_assert_eq!(carried.is_some(), size <= ENTRY_MAX_BYTES, "size {}", size);
        }
    }

    /// The issue's goal: 55 fields with typical values (the seed's: 5 typed fields, then
    /// numbers, texts and dates in turn, one in five empty), three participants, and the
    /// compact text fits a column entry of one write unit, where the keyed text does not.
    #[test]
    fn an_issue_with_55_typical_values_fits_one_write_unit_compact() {
        use crate::domain::values::FieldType;
        let defs: Vec<FieldDef> = (1..=55u64)
            .map(|n| FieldDef {
                field_type: [FieldType::Number, FieldType::Text, FieldType::Date][n as usize % 3],
                ..def(FieldId::numbered(n).as_ref())
            })
            .collect();
        let mut fields = BTreeMap::new();
        for (n, d) in defs.iter().enumerate().filter(|(n, _)| n % 5 != 4) {
            let value = match d.field_type {
                FieldType::Number => StoredValue::N(DynNumber::parse("512.37").unwrap()),
                FieldType::Text => StoredValue::S(format!("Billing word{}", n % 10)),
                _ => StoredValue::S("2026-07-14".into()),
            };
            fields.insert(d.id.clone(), value);
        }
        let seat = |kind, id: &str, role| Participant {
            kind,
            id: ParticipantId::parse(id).unwrap(),
            role,
        };
        let issue = Issue {
            id: IssueId::numbered(7),
            project_id: ProjectId::numbered(8),
            num: 12345,
            title: "Refactor checkout 12345".into(),
            state: IssueState::Open,
            description: None,
            fields,
            participants: vec![
                seat(ParticipantKind::User, "user-0012", Role::Reporter),
                seat(ParticipantKind::User, "user-0031", Role::Assignee),
                seat(
                    ParticipantKind::Team,
                    crate::domain::ids::TeamId::numbered(9).as_ref(),
                    Role::Watcher,
                ),
            ],
            version: 12,
            created_at: "2026-11-26T09:00:00.000Z".into(),
            updated_at: "2026-11-26T09:41:07.123Z".into(),
            parent_id: None,
        };
        let record = IssueRecord::of(&issue);
        let summary = Summary::of_record(&record, &defs, &Hot::All);
        assert!(summary.text.is_none(), "the keyed text is too wide");
        let tenant = crate::domain::ids::TenantId::parse("acme-corporation").unwrap();
        let pk =
            crate::keys::index::column_pk(&tenant, &issue.project_id, defs[20].id.as_str(), "open");
        let sk =
            crate::keys::index::value_sk(&crate::encoding::text::encode("Billing word1"), 12345);
        let carried = summary.for_entry(&pk, &sk, issue.id.as_str(), None);
        assert!(
            carried.is_some(),
            "{} bytes",
            summary.compact.as_deref().map_or(0, str::len)
        );
    }

    #[test]
    fn a_text_that_is_not_a_summary_reads_as_none() {
        let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
        assert_eq!(issue_of(id, "not json"), None);
        assert_eq!(issue_of(id, "{}"), None);
        let bad_number = r#"{"p":"01ARZ3NDEKTSV4RRFFQ69G5FAW","n":1,"t":"t","s":"open","f":{"x":1e999999999},"pp":[],"v":1,"c":"c","u":"u"}"#;
        assert_eq!(issue_of(id, bad_number), None);
        let bad_role = r#"{"p":"01ARZ3NDEKTSV4RRFFQ69G5FAW","n":1,"t":"t","s":"open","f":{},"pp":[["user","ann","boss"]],"v":1,"c":"c","u":"u"}"#;
        assert_eq!(issue_of(id, bad_role), None);
        let good = bad_role.replace("boss", "assignee");
        assert!(issue_of(id, &good).is_some());
    }
}
