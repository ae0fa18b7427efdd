//! The attribute index, as pure functions: which sortable columns an issue has, and exactly
//! which index entries an issue should have given its project's field definitions.

use std::collections::BTreeSet;

use crate::domain::Issue;
use crate::domain::decimal::DynNumber;
use crate::domain::ids::TenantId;
use crate::domain::values::{FieldDef, FieldType, parse_date, parse_datetime};
use crate::domain::{IssueState, Role};
use crate::encoding;
use crate::model::record::ValueRef;
use crate::model::summary::Summary;

/// The scope of the layout before: every issue, whatever its state. Only read from old
/// watermarks (see [`crate::model::watermark::Placement::all_scope`]).
pub const ALL_STATES: &str = crate::keys::index::ALL_SCOPE;

/// A sortable column: a built-in one or a custom field (by id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Column {
    Num,
    Title,
    State,
    CreatedAt,
    UpdatedAt,
    Field(String),
}

/// The built-in columns, which every issue has a value for.
pub const BUILT_INS: [Column; 5] = [
    Column::Num,
    Column::Title,
    Column::State,
    Column::CreatedAt,
    Column::UpdatedAt,
];

/// How a column's values are compared and bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Num,
    Text,
    Number,
    Date,
    Datetime,
    Select,
}

impl Column {
    /// `sort=` names a built-in column or a field id.
    pub fn parse(s: &str) -> Self {
        match s {
            "num" => Self::Num,
            "title" => Self::Title,
            "state" => Self::State,
            "created_at" => Self::CreatedAt,
            "updated_at" => Self::UpdatedAt,
            id => Self::Field(id.to_string()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Num => "num",
            Self::Title => "title",
            Self::State => "state",
            Self::CreatedAt => "created_at",
            Self::UpdatedAt => "updated_at",
            Self::Field(id) => id,
        }
    }

    /// The column's kind; `None` for a field the project does not define.
    pub fn kind<'a>(&self, defs: &'a [FieldDef]) -> Option<(Kind, Option<&'a FieldDef>)> {
        Some(match self {
            Self::Num => (Kind::Num, None),
            Self::Title | Self::State => (Kind::Text, None),
            Self::CreatedAt | Self::UpdatedAt => (Kind::Datetime, None),
            Self::Field(id) => {
                let def = defs.iter().find(|d| &d.id == id)?;
                let kind = match def.field_type {
                    FieldType::Text => Kind::Text,
                    FieldType::Number => Kind::Number,
                    FieldType::Date => Kind::Date,
                    FieldType::Datetime => Kind::Datetime,
                    FieldType::Select => Kind::Select,
                };
                (kind, Some(def))
            }
        })
    }
}

/// The encoded sort value of a field value (a stream image's number is parsed here, once);
/// `None` if it is not a valid value of the field (a select label no longer among the
/// options), which then counts as missing.
pub fn encode_value(def: &FieldDef, value: ValueRef<'_>) -> Option<String> {
    match (def.field_type, value) {
        (FieldType::Number, ValueRef::Number(n)) => Some(encoding::number::encode(n)),
        (FieldType::Number, ValueRef::N(raw)) => DynNumber::parse(raw)
            .ok()
            .map(|n| encoding::number::encode(&n)),
        (FieldType::Text, ValueRef::S(s)) => Some(encoding::text::encode(s)),
        (FieldType::Date | FieldType::Datetime, ValueRef::S(s)) => Some(encoding::date(s)),
        (FieldType::Select, ValueRef::S(s)) => {
            let position = def.options.as_deref()?.iter().position(|o| o == s)?;
            Some(encoding::select(position))
        }
        _ => None,
    }
}

/// Encodes a `gte`/`lte` bound given as query text, in the column's own type.
pub fn encode_bound(kind: Kind, def: Option<&FieldDef>, raw: &str) -> Result<String, String> {
    match kind {
        Kind::Num => raw
            .parse::<u64>()
            .map(|n| format!("{n:020}"))
            .map_err(|_| "must be an issue number".into()),
        Kind::Text => Ok(encoding::text::encode(raw)),
        Kind::Number => DynNumber::parse(raw)
            .map(|n| encoding::number::encode(&n))
            .map_err(|e| format!("number {e}")),
        Kind::Date => parse_date(raw).map(|d| encoding::date(&d)),
        Kind::Datetime => parse_datetime(raw).map(|d| encoding::date(&d)),
        Kind::Select => def
            .and_then(|d| d.options.as_deref())
            .and_then(|o| o.iter().position(|x| x == raw))
            .map(encoding::select)
            .ok_or_else(|| "must be one of the field's options".into()),
    }
}

/// One index entry: an attribute-index entry, or a participation copy (which carries the
/// participant's role, for `via` and role filters), with the issue's list summary when it fits
/// ([`crate::model::summary`]). Its key is `(pk, sk)`; the rest follows from the key and the
/// issue as indexed, so the indexer diffs entries by key (and writes them all again when the
/// summary changes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Entry {
    pub pk: String,
    pub sk: String,
    pub issue_id: String,
    pub role: Option<String>,
    pub summary: Option<String>,
}

impl Entry {
    /// `(pk, sk)`: the entry's identity in the index table; the rest follows from it.
    pub fn key(&self) -> (String, String) {
        (self.pk.clone(), self.sk.clone())
    }
}

impl Entry {
    /// The entry, borrowed.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            pk: &self.pk,
            sk: &self.sk,
            issue_id: &self.issue_id,
            role: self.role.as_deref(),
            summary: self.summary.as_deref(),
        }
    }
}

/// An index entry, borrowed: what a write of it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EntryRef<'a> {
    pub pk: &'a str,
    pub sk: &'a str,
    pub issue_id: &'a str,
    pub role: Option<&'a str>,
    pub summary: Option<&'a str>,
}

impl EntryRef<'_> {
    pub fn to_entry(&self) -> Entry {
        Entry {
            pk: self.pk.to_string(),
            sk: self.sk.to_string(),
            issue_id: self.issue_id.to_string(),
            role: self.role.map(str::to_string),
            summary: self.summary.map(str::to_string),
        }
    }
}

/// One issue's entries, their keys built into one buffer: planning a step allocates per list,
/// not per key (the indexer's core plans tens of keys per record). Made for an issue only
/// ([`EntryList::for_issue`]): every entry is written with its id, and with the list's
/// summary where it fits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryList {
    /// The issue id, then each entry's partition key and sort key.
    text: String,
    issue_end: usize,
    /// Per entry: where its partition key ends, where its sort key ends, its role, and
    /// whether it carries the summary (a hot column's entry or a participation copy).
    slots: Vec<(usize, usize, Option<Role>, bool)>,
    summary: Summary,
}

impl EntryList {
    /// An empty list of `issue_id`'s entries, with room for about `entries` of them.
    pub fn for_issue(issue_id: &str, entries: usize) -> Self {
        // Keys take about 100 bytes per entry (tenant, project, column, value, number).
        let mut text = String::with_capacity(issue_id.len() + 112 * entries);
        text.push_str(issue_id);
        Self {
            issue_end: text.len(),
            text,
            slots: Vec::with_capacity(entries),
            summary: Summary::default(),
        }
    }

    /// The list, its entries carrying `summary` where it fits (puts; deletes need none).
    pub fn with_summary(mut self, summary: Summary) -> Self {
        self.summary = summary;
        self
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Adds an entry whose keys `pk` and `sk` write into the buffer; a participation copy
    /// (`role`) or a hot column's entry (`hot`) carries the list's summary where it fits.
    pub fn push(
        &mut self,
        pk: impl FnOnce(&mut String),
        sk: impl FnOnce(&mut String),
        role: Option<Role>,
        hot: bool,
    ) {
        pk(&mut self.text);
        let pk_end = self.text.len();
        sk(&mut self.text);
        self.slots
            .push((pk_end, self.text.len(), role, hot || role.is_some()));
    }

    /// Adds `entry` (of this list's issue), carrying the summary if it does.
    pub fn push_entry(&mut self, entry: &Entry) {
        let role = entry.role.as_deref().and_then(Role::parse);
        let hot = entry.summary.is_some();
        self.push(
            |t| t.push_str(&entry.pk),
            |t| t.push_str(&entry.sk),
            role,
            hot,
        );
    }

    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'_>> {
        let issue_id = &self.text[..self.issue_end];
        let mut start = self.issue_end;
        self.slots.iter().map(move |&(pk_end, sk_end, role, hot)| {
            let (pk, sk) = (&self.text[start..pk_end], &self.text[pk_end..sk_end]);
            let role = role.map(Role::as_str);
            let summary = hot
                .then(|| self.summary.for_entry(pk, sk, issue_id, role))
                .flatten();
            let e = EntryRef {
                pk,
                sk,
                issue_id,
                role,
                summary,
            };
            start = sk_end;
            e
        })
    }

    /// The entries' keys, owned (for comparisons in tests and tools).
    pub fn keys(&self) -> BTreeSet<(String, String)> {
        self.iter()
            .map(|e| (e.pk.to_string(), e.sk.to_string()))
            .collect()
    }
}

/// The keys of `entries`.
pub fn keys_of<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> BTreeSet<(String, String)> {
    entries.into_iter().map(Entry::key).collect()
}

/// Every entry `issue` should have: for each built-in column and each field the project
/// defines, a value entry (or a missing entry when it has no value) in its state's scope, in
/// each of the project's shard layouts; and for each participant, a participation copy in
/// their inbox for the issue's state and one in the inbox for their role there; the copies and
/// the hot columns' entries with the issue's summary where it fits.
pub fn entries(
    tenant: &TenantId,
    issue: &Issue,
    defs: &[FieldDef],
    shards: crate::keys::index::Shards,
    hot: &crate::model::basis::Hot,
) -> BTreeSet<Entry> {
    entries_in_views(tenant, issue, (defs, &[]), shards, hot)
}

/// [`entries`] with the entries of the saved views `views` the issue is in.
pub fn entries_in_views(
    tenant: &TenantId,
    issue: &Issue,
    (defs, views): (&[FieldDef], &[crate::model::view::IndexedView]),
    shards: crate::keys::index::Shards,
    hot: &crate::model::basis::Hot,
) -> BTreeSet<Entry> {
    let record = crate::model::record::IssueRecord::of(issue);
    crate::model::watermark::Basis::of_record(&record, defs, shards, hot)
        .with_views(&record, defs, views)
        .entries(tenant, &issue.id)
}

/// The scopes a grid reads: its state's, or both (merged, as shards are).
pub fn column_scopes(state: Option<IssueState>) -> Vec<&'static str> {
    match state {
        Some(state) => vec![state.as_str()],
        None => vec![IssueState::Open.as_str(), IssueState::Closed.as_str()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{FieldId, IssueId, ParticipantId, ProjectId};
    use crate::domain::values::StoredValue;
    use crate::domain::{ParticipantKind, Role};
    use crate::keys;
    use crate::keys::index::Shards;
    use std::collections::BTreeMap;

    const ONE: Shards = Shards::ONE;

    fn t() -> TenantId {
        TenantId::parse("t").unwrap()
    }

    /// Field `n`'s id, as its key in an issue's values.
    fn f(n: u64) -> String {
        FieldId::numbered(n).to_string()
    }

    fn issue(fields: BTreeMap<String, StoredValue>) -> Issue {
        Issue {
            id: IssueId::numbered(1),
            project_id: ProjectId::numbered(100),
            num: 7,
            title: "Title".into(),
            state: IssueState::Open,
            description: None,
            fields: fields
                .into_iter()
                .map(|(k, v)| (FieldId::parse(&k).expect("a field id"), v))
                .collect(),
            participants: vec![],
            version: 1,
            created_at: "2026-11-21T20:42:03.123Z".into(),
            updated_at: "2026-11-21T20:42:03.123Z".into(),
            parent_id: None,
        }
    }

    fn def(n: u64, t: FieldType) -> FieldDef {
        FieldDef {
            id: FieldId::numbered(n),
            name: format!("f{n}"),
            field_type: t,
            options: (t == FieldType::Select).then(|| vec!["low".into(), "high".into()]),
            sortable: true,
        }
    }

    #[test]
    fn every_column_gets_one_entry_in_its_state_s_scope() {
        let defs = [def(1, FieldType::Number), def(2, FieldType::Select)];
        let e = entries(
            &t(),
            &issue(BTreeMap::from([(
                f(1),
                StoredValue::N(DynNumber::parse("5").unwrap()),
            )])),
            &defs,
            ONE,
            &Default::default(),
        );
        assert_eq!(e.len(), 5 + 2);
        assert!(
            e.iter()
                .all(|x| keys::index::column_scope(&x.pk) == Some("open"))
        );
        let f2: Vec<_> = e
            .iter()
            .filter(|x| x.pk.contains(&format!("#{}#", f(2))))
            .collect();
        assert!(f2.iter().all(|x| x.sk == keys::index::missing_sk(7)));
        assert!(e.iter().any(
            |x| x.pk == keys::index::column_pk(&t(), &ProjectId::numbered(100), &f(1), "open")
        ));
    }

    #[test]
    fn each_participant_gets_a_copy_by_state_and_one_by_role() {
        use crate::domain::Participant;
        let mut i = issue(BTreeMap::new());
        i.participants = vec![
            Participant {
                kind: ParticipantKind::User,
                id: ParticipantId::parse("ann").unwrap(),
                role: Role::Assignee,
            },
            Participant {
                kind: ParticipantKind::Team,
                id: ParticipantId::parse("T1").unwrap(),
                role: Role::Watcher,
            },
        ];
        let e = entries(&t(), &i, &[], ONE, &Default::default());
        let copies: Vec<_> = e.iter().filter(|x| x.pk.contains("#IN#")).collect();
        assert_eq!(copies.len(), 4);
        assert!(copies.iter().any(|x| x.pk
            == keys::index::inbox_pk(&t(), ParticipantKind::User, "ann", IssueState::Open, None)));
        assert!(copies.iter().any(|x| x.pk
            == keys::index::inbox_pk(
                &t(),
                ParticipantKind::Team,
                "T1",
                IssueState::Open,
                Some(Role::Watcher)
            )));
        assert!(
            copies
                .iter()
                .all(|x| x.sk == keys::index::inbox_sk(&i.updated_at, &i.id))
        );
        // Closing moves the copies to the closed inboxes; a new role moves the role copy.
        let mut closed = i.clone();
        closed.state = IssueState::Closed;
        assert!(
            entries(&t(), &closed, &[], ONE, &Default::default())
                .iter()
                .filter(|x| x.pk.contains("#IN#"))
                .all(|x| x.pk.contains("#closed"))
        );
    }

    #[test]
    fn values_of_undefined_fields_are_not_indexed() {
        let e = entries(
            &t(),
            &issue(BTreeMap::from([(f(99), StoredValue::S("x".into()))])),
            &[],
            ONE,
            &Default::default(),
        );
        assert!(e.iter().all(|x| !x.pk.contains(&f(99))));
    }

    /// The entries whose keys change between two states of an issue: (removed, added).
    fn diff(a: &Issue, b: &Issue, defs: &[FieldDef]) -> (Vec<Entry>, Vec<Entry>) {
        let all = Default::default();
        let (ea, eb) = (
            entries(&t(), a, defs, ONE, &all),
            entries(&t(), b, defs, ONE, &all),
        );
        let (ka, kb) = (keys_of(&ea), keys_of(&eb));
        (
            ea.into_iter().filter(|e| !kb.contains(&e.key())).collect(),
            eb.into_iter().filter(|e| !ka.contains(&e.key())).collect(),
        )
    }

    #[test]
    fn a_modify_moves_only_the_entries_of_changed_columns() {
        let defs = [def(1, FieldType::Number), def(2, FieldType::Text)];
        let five = StoredValue::N(DynNumber::parse("5").unwrap());
        let base = issue(BTreeMap::new());
        // A value appears: the missing entry becomes a value entry.
        let with = issue(BTreeMap::from([(f(1), five.clone())]));
        let (gone, new) = diff(&base, &with, &defs);
        assert_eq!((gone.len(), new.len()), (1, 1));
        assert!(
            gone.iter().all(|e| e.sk == keys::index::missing_sk(7))
                && new.iter().all(|e| e.sk.starts_with('1'))
        );
        // It changes: the value entry moves.
        let changed = issue(BTreeMap::from([(
            f(1),
            StoredValue::N(DynNumber::parse("6").unwrap()),
        )]));
        assert_eq!(diff(&with, &changed, &defs).0.len(), 1);
        // It is removed: back to missing.
        assert_eq!(diff(&with, &base, &defs), (new.clone(), gone.clone()));
        // Nothing changes: nothing moves.
        assert_eq!(diff(&with, &with, &defs), (vec![], vec![]));
        // Closing moves every column's entry from the open scope to the closed one.
        let mut closed = with.clone();
        closed.state = IssueState::Closed;
        let (gone, new) = diff(&with, &closed, &defs);
        // All 7 columns leave `open` for `closed`, and nothing else moves.
        assert_eq!(gone.iter().filter(|e| e.pk.ends_with("#open")).count(), 7);
        assert_eq!(new.iter().filter(|e| e.pk.ends_with("#closed")).count(), 7);
        assert_eq!((gone.len(), new.len()), (7, 7));
    }

    #[test]
    fn select_sorts_by_option_position() {
        let d = def(3, FieldType::Select);
        let low = encode_value(&d, ValueRef::S("low")).unwrap();
        let high = encode_value(&d, ValueRef::S("high")).unwrap();
        assert!(low < high);
        assert_eq!(encode_value(&d, ValueRef::S("gone")), None);
    }
}
