//! What an issue's index entries derive from ([`Basis`]): where its columns live
//! ([`Placement`]), each column's encoded value, its participants ([`Seat`]s), `updated_at`
//! and its list summary. The watermark stores a basis; the entries follow from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::domain::{Issue, IssueState, ParticipantKind, Role};
use crate::encoding;
use crate::keys;
use crate::keys::index::Shards;
use crate::model::entries::{ALL_STATES, Entry, encode_value};
use crate::model::record::IssueRecord;
use crate::model::summary::Summary;

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

/// The columns whose entries carry the summary (participation copies always do). A column
/// turns hot when a grid page sorts by it (`Records::mark_hot`): every update rewrites every
/// entry that carries a summary, so summaries go only where pages read them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Hot {
    /// Every column: what a basis built without a project's record says (tests, tools).
    #[default]
    All,
    /// These columns (built-in names and field ids).
    Only(Arc<BTreeSet<String>>),
}

impl Hot {
    pub fn contains(&self, column: &str) -> bool {
        match self {
            Self::All => true,
            // A children page always reads summaries, as inboxes do; so does a view's.
            Self::Only(_) if column == keys::index::PARENT_COLUMN => true,
            Self::Only(_) if keys::index::is_view_column(column) => true,
            Self::Only(set) => set.contains(column),
        }
    }

    /// Whether no column is hot.
    pub fn is_none(&self) -> bool {
        matches!(self, Self::Only(set) if set.is_empty())
    }

    /// The set as the summary's digest covers it.
    pub(crate) fn push_digest_text(&self, out: &mut String) {
        match self {
            Self::All => out.push('*'),
            Self::Only(set) => set.iter().for_each(|c| {
                out.push_str(c);
                out.push(',');
            }),
        }
    }
}

/// What an issue's entries are derived from. Bases compare without their hot columns: the
/// summary's digest covers them (a basis read from a watermark knows only the digest).
#[derive(Clone, Debug)]
pub struct Basis {
    pub placement: Placement,
    pub updated_at: String,
    /// Column name → encoded sort value; `None`: no value (a missing entry).
    pub columns: BTreeMap<String, Option<String>>,
    pub seats: BTreeSet<Seat>,
    /// The list summary the entries of hot columns and participation copies carry where it
    /// fits (compared by digest).
    pub summary: Summary,
    /// The columns whose entries carry it.
    pub hot: Hot,
}

impl PartialEq for Basis {
    fn eq(&self, other: &Self) -> bool {
        self.placement == other.placement
            && self.updated_at == other.updated_at
            && self.columns == other.columns
            && self.seats == other.seats
            && self.summary == other.summary
    }
}

impl Eq for Basis {}

/// The built-in columns' names: they live in the head whatever the layout. `parent` is there
/// only for a sub-issue, and its entries are in the parent's children partitions.
pub const BUILT_IN_COLUMNS: [&str; 6] = [
    "num",
    "title",
    "state",
    "created_at",
    "updated_at",
    keys::index::PARENT_COLUMN,
];

/// Whether a column lives in the watermark's head: a built-in one, or a saved view's (an
/// issue's view memberships are read with every head, so the counts they decide are exact;
/// see `crate::model::view`); else a field, by id.
pub fn is_built_in(column: &str) -> bool {
    BUILT_IN_COLUMNS.contains(&column) || keys::index::is_view_column(column)
}

impl Basis {
    /// The basis of `issue` under its project's fields and shard layouts: every built-in
    /// column and every field the project defines (a value the field cannot hold counts as
    /// none).
    pub fn of(issue: &Issue, defs: &[FieldDef], shards: Shards) -> Self {
        Self::of_record(&IssueRecord::of(issue), defs, shards, &Hot::All)
    }

    /// [`Basis::of`] with the project's hot columns.
    pub fn of_hot(issue: &Issue, defs: &[FieldDef], shards: Shards, hot: &Hot) -> Self {
        Self::of_record(&IssueRecord::of(issue), defs, shards, hot)
    }

    /// [`Basis::of`] an issue as the indexer reads it (borrowed from its stream image), with
    /// the project's hot columns.
    pub fn of_record(
        issue: &IssueRecord<'_>,
        defs: &[FieldDef],
        shards: Shards,
        hot: &Hot,
    ) -> Self {
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
        if let Some(parent) = issue.parent_id {
            columns.push((keys::index::PARENT_COLUMN.into(), Some(parent.to_string())));
        }
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
            summary: Summary::of_record(issue, defs, hot),
            hot: hot.clone(),
        }
    }

    /// The basis with the columns of the saved views `issue` is in (see
    /// [`crate::model::view::IndexedView::columns`]). Their entries always carry the
    /// summary: when no other column is hot it was built without its compact text, and is
    /// built again with it (its digest then covers it, so a change of the project's field
    /// list, which changes the compact text alone, rewrites the view entries too).
    pub fn with_views(
        mut self,
        issue: &IssueRecord<'_>,
        defs: &[FieldDef],
        views: &[crate::model::view::IndexedView],
    ) -> Self {
        let mut added = Vec::new();
        for view in views {
            added.extend(view.columns(issue, &self.columns));
        }
        if added.is_empty() {
            return self;
        }
        self.columns.extend(added);
        if self.summary.compact.is_none() && self.summary.digest != Summary::THIN.digest {
            self.summary = Summary::with_compact(issue, defs, &self.hot);
        }
        self
    }

    /// Every entry the basis calls for.
    pub fn entries(&self, tenant: &TenantId, issue_id: &IssueId) -> BTreeSet<Entry> {
        self.entries_of(tenant, issue_id, |_| true)
    }

    /// The entries a new summary rewrites: hot columns' and the participation copies.
    pub fn summarized_entries(&self, tenant: &TenantId, issue_id: &IssueId) -> BTreeSet<Entry> {
        self.entries_of(tenant, issue_id, |c| self.hot.contains(c))
    }

    /// The participation copies and the entries of the columns `columns` accepts.
    fn entries_of(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        columns: impl Fn(&str) -> bool,
    ) -> BTreeSet<Entry> {
        let mut out = BTreeSet::new();
        let hash = keys::index::shard_hash(issue_id);
        for (column, value) in self.columns.iter().filter(|(c, _)| columns(c)) {
            column_entries(
                tenant,
                (issue_id, hash),
                &self.placement,
                (column, value.as_deref()),
                self.summary_of(column),
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

    /// The summary a column's entries carry: the basis' when the column is hot.
    pub fn summary_of(&self, column: &str) -> &Summary {
        static NONE: Summary = Summary::THIN;
        if self.hot.contains(column) {
            &self.summary
        } else {
            &NONE
        }
    }

    /// How many entries the basis calls for: one per column, layout and scope, two per
    /// participant.
    pub fn entry_count(&self) -> usize {
        let layouts = self.placement.shards.counts().count();
        let scopes = self.placement.scopes().count();
        let child = usize::from(self.columns.contains_key(keys::index::PARENT_COLUMN));
        layouts * scopes * (self.columns.len() - child) + 2 * child + 2 * self.seats.len()
    }

    /// Keeps only the columns `keep` accepts (the ones whose watermark part was read).
    pub fn retain_columns(&mut self, keep: impl Fn(&str) -> bool) {
        self.columns.retain(|c, _| keep(c));
    }

    /// The field columns, with their values (the part that may live in buckets).
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&String, &Option<String>)> {
        self.columns.iter().filter(|(c, _)| !is_built_in(c))
    }
}

/// A column's entry in its state's scope at `placement` (and in the `all` scope, for a
/// placement of the layout before), in each of its layouts (`hash`: the issue's
/// [`keys::index::shard_hash`]).
pub(crate) fn column_entries(
    tenant: &TenantId,
    (issue_id, hash): (&IssueId, u64),
    placement: &Placement,
    (column, value): (&str, Option<&str>),
    summary: &Summary,
    out: &mut BTreeSet<Entry>,
) {
    if column == keys::index::PARENT_COLUMN {
        for state in value
            .into_iter()
            .flat_map(|_| [Some(placement.state), None])
        {
            let parent = value.unwrap_or_default();
            let pk = keys::index::children_pk(tenant, parent, state);
            let sk = keys::index::child_sk(placement.num);
            let summary = summary
                .for_entry(&pk, &sk, issue_id, None)
                .map(str::to_string);
            out.insert(Entry {
                pk,
                sk,
                issue_id: issue_id.to_string(),
                role: None,
                summary,
            });
        }
        return;
    }
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
pub(crate) fn seat_entries(
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
