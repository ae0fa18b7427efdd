//! The grid's read model: a project's issues sorted by any column, a page at a time.
//!
//! [`parse`] interprets a request into a [`GridQuery`]; [`GridQuery::ranges`] plans the sort-key
//! ranges of the column's partitions it reads, in order; [`read_entries`] pages across them
//! (values, then issues without a value) with any Query function, and returns the entries read
//! and the position to resume at. Only the Query itself is I/O there, so the paging is tested
//! here against in-memory partitions. [`page()`] is the whole query against the store: the
//! partitions, their entries, the issues behind them that the query admits, up to the names
//! bound.
//!
//! A column of a sharded project is several partitions (one per shard, each issue in one):
//! a page reads a share of its entries from each shard at once and merges them by sort key,
//! as the inbox merges its partitions. Sort keys end with the issue number, so no two shards share
//! one, and the position is one sort key (the last one the page took) and the phase: every
//! shard resumes after it (DynamoDB takes a start key with any sort key). The cursor is the
//! same size whatever the shard count, and a cursor issued before a reshard resumes in the new
//! layout at the same place.

use std::future::Future;

use crate::cursor::Position;
use crate::domain::FieldError;
use crate::domain::ids::ProjectId;
use crate::domain::values::{FieldDef, StoredValue};
use crate::domain::{Issue, IssueState};
use crate::encoding::text::{fold, prefix_key};
use crate::keys;
use crate::model::filter::{Filter, parse_order, parse_state};
use crate::model::{Column, Kind, encode_bound};
use crate::store::Page;
use crate::store::index::ColumnQuery;
use crate::store::index::table::ColumnHit;

#[cfg(test)]
mod filtered;
mod page;

pub use page::{PageRequest, page};

/// The cursor member naming the [`Phase`] a position is in, beside the last sort key taken
/// ([`keys::SK`]). Its `~` keeps it apart from DynamoDB's key attributes (cursors issued before
/// shards also hold the partition, `PK`, which is not needed and is ignored).
pub const PHASE_MEMBER: &str = "~phase";

/// Longest `prefix`, in characters (as `openapi.yaml` documents it): its key stays well under
/// DynamoDB's 1 KB sort key.
pub const MAX_PREFIX_CHARS: usize = crate::model::filter::MAX_PREFIX_CHARS;

/// The part of a column partition a range reads. On the wire (a cursor's [`PHASE_MEMBER`]) it
/// is one letter; cursors already issued hold those letters, so they must not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `"v"`: the value entries. An ascending read without bounds reaches the missing entries
    /// in this same range, as they sort after every value.
    Values,
    /// `"m"`: the missing entries, read on their own by a descending read after the values.
    Missing,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Values => "v",
            Phase::Missing => "m",
        }
    }

    /// The phase a cursor names; pages find it among their ranges by [`Phase::as_str`], so
    /// only the round-trip test reads a phase back on its own.
    #[cfg(test)]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "v" => Some(Phase::Values),
            "m" => Some(Phase::Missing),
            _ => None,
        }
    }
}

/// A grid request's parameters as given (`None` where absent).
#[derive(Debug, Default, Clone, Copy)]
pub struct GridParams<'a> {
    pub sort: Option<&'a str>,
    pub order: Option<&'a str>,
    pub state: Option<&'a str>,
    pub gte: Option<&'a str>,
    pub lte: Option<&'a str>,
    pub prefix: Option<&'a str>,
    /// `where`: a JSON array of conditions ([`Filter`]).
    pub filter: Option<&'a str>,
}

/// The interpreted query: what the page reads and what its cursor is bound to.
#[derive(Debug)]
pub struct GridQuery {
    pub column: Column,
    /// The column whose partitions the page reads: the sort column, or a column whose
    /// entries of one value hold exactly an equality's matches in the sort order
    /// ([`Filter::equality_source`]).
    pub source: Column,
    /// The value's key when the source is an equality's column ([`GridQuery::resume_at`]).
    source_key: Option<String>,
    pub descending: bool,
    pub state: Option<IssueState>,
    /// The state scopes read: the state asked for, less those no issue meeting the filter
    /// can be in.
    pub scopes: Vec<IssueState>,
    /// The conditions every issue on a page meets (`where`).
    pub filter: Filter,
    /// Inclusive sort-key range of value entries.
    from: String,
    to: String,
    /// Bounds or a prefix leave issues without a value out.
    filtered: bool,
    /// For text columns, the bounds held to each issue's whole value.
    text: Option<TextBounds>,
    /// The canonical parameters (defaults applied) a cursor is bound to.
    pub canonical: String,
}

/// A text key holds at most 64 bytes of encoding, so the key range matches a longer bound or
/// prefix on those bytes only: values that agree with it there but not after are in range.
/// The issues a page reads are held to the whole bound (folded, as the keys compare), so a
/// page never shows a value the filter excludes; such a page may hold fewer than `limit`.
#[derive(Debug, Default)]
struct TextBounds {
    gte: Option<String>,
    lte: Option<String>,
    prefix: Option<String>,
}

impl TextBounds {
    fn admits(&self, value: Option<&str>) -> bool {
        let Some(v) = value.map(fold) else {
            return false;
        };
        self.gte.as_ref().is_none_or(|g| v >= *g)
            && self.lte.as_ref().is_none_or(|l| v <= *l)
            && self
                .prefix
                .as_ref()
                .is_none_or(|p| v.starts_with(p.as_str()))
    }
}

/// The text an issue shows in a text column.
fn text_of<'a>(issue: &'a Issue, column: &Column) -> Option<&'a str> {
    match column {
        Column::Title => Some(&issue.title),
        Column::Field(id) => match issue.fields.get(id.as_str()) {
            Some(StoredValue::S(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// A sort-key range of the column's partition, read in one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub phase: Phase,
    /// Inclusive bounds.
    pub from: String,
    pub to: String,
}

impl Range {
    fn new(phase: Phase, from: &str, to: &str) -> Self {
        Self {
            phase,
            from: from.into(),
            to: to.into(),
        }
    }
}

/// Interprets a grid request against the project's fields; every invalid parameter is named.
pub fn parse(
    project_id: &ProjectId,
    p: &GridParams<'_>,
    defs: &[FieldDef],
) -> Result<GridQuery, Vec<FieldError>> {
    let mut errors = Vec::new();
    let column = Column::parse(p.sort.unwrap_or("num"));
    let kind = column.kind(defs);
    if kind.is_none() {
        errors.push(FieldError::new(
            "sort",
            "must be num, title, state, created_at, updated_at or a field of this project",
        ));
    }
    let descending = parse_order(p.order, &mut errors);
    let state = parse_state(p.state, &mut errors);
    let mut bound = |name: &str, raw: Option<&str>| -> Option<String> {
        let (k, def) = kind?;
        encode_bound(k, def, raw?)
            .map_err(|m| errors.push(FieldError::new(name, m)))
            .ok()
    };
    let gte = bound("gte", p.gte);
    let lte = bound("lte", p.lte);
    let is_text = matches!(column, Column::Title)
        || (matches!(column, Column::Field(_)) && matches!(kind, Some((Kind::Text, _))));
    let (from, to) = value_range(
        gte.as_deref(),
        lte.as_deref(),
        p.prefix,
        is_text,
        &mut errors,
    );
    let filter = p
        .filter
        .map_or_else(|| Ok(Filter::default()), |raw| Filter::parse(raw, defs));
    let filter = filter.unwrap_or_else(|more| {
        errors.extend(more);
        Filter::default()
    });
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut canonical = format!(
        "project_id={project_id}&sort={}&order={}&state={}&gte={}&lte={}&prefix={}",
        column.name(),
        if descending { "desc" } else { "asc" },
        state.map_or("", IssueState::as_str),
        gte.unwrap_or_default(),
        lte.unwrap_or_default(),
        p.prefix.map(fold).unwrap_or_default(),
    );
    if !filter.is_empty() {
        // Only a filtered grid's binding names it, so cursors issued before `where` hold;
        // as a JSON pair, so no `prefix` can spell another query's filter.
        canonical = serde_json::to_string(&[canonical, filter.canonical()]).unwrap_or_default();
    }
    let filtered = p.gte.is_some() || p.lte.is_some() || p.prefix.is_some();
    let text = (is_text && filtered).then(|| TextBounds {
        gte: p.gte.map(fold),
        lte: p.lte.map(fold),
        prefix: p.prefix.map(fold),
    });
    let mut query = GridQuery {
        source: column.clone(),
        source_key: None,
        column,
        descending,
        state,
        scopes: Vec::new(),
        filter,
        from,
        to,
        filtered,
        text,
        canonical,
    };
    query.plan();
    Ok(query)
}

/// The inclusive sort-key range of the value entries within the encoded bounds and `prefix`.
fn value_range(
    gte: Option<&str>,
    lte: Option<&str>,
    prefix: Option<&str>,
    is_text: bool,
    errors: &mut Vec<FieldError>,
) -> (String, String) {
    let mut from = keys::index::VALUE_PREFIX.to_string();
    let mut to = keys::index::VALUE_CEILING.to_string();
    if let Some(g) = gte {
        from = from.max(keys::index::value_floor(g));
    }
    if let Some(l) = lte {
        to = to.min(keys::index::value_ceiling_at(l));
    }
    match prefix {
        None => {}
        Some(_) if !is_text => errors.push(FieldError::new(
            "prefix",
            "applies only to title and text fields",
        )),
        Some(p) if p.is_empty() || p.chars().count() > MAX_PREFIX_CHARS => {
            errors.push(FieldError::new(
                "prefix",
                format!("must be 1 to {MAX_PREFIX_CHARS} characters"),
            ))
        }
        Some(p) => {
            from = from.max(keys::index::value_floor(&prefix_key(p)));
            to = to.min(keys::index::prefix_ceiling(&prefix_key(p)));
        }
    }
    (from, to)
}

impl GridQuery {
    /// A saved view's list (or one group's): the view's column of the index, in the view's
    /// order and state, every entry a member (the index holds the view's filter to each
    /// issue); `canonical` is what its cursors are bound to.
    pub fn of_view(
        column: String,
        descending: bool,
        state: Option<IssueState>,
        canonical: String,
    ) -> Self {
        let column = Column::Field(column);
        Self {
            source: column.clone(),
            source_key: None,
            column,
            descending,
            state,
            scopes: [IssueState::Closed, IssueState::Open]
                .into_iter()
                .filter(|s| state.is_none_or(|asked| asked == *s))
                .collect(),
            filter: Filter::default(),
            from: keys::index::VALUE_PREFIX.to_string(),
            to: keys::index::VALUE_CEILING.to_string(),
            filtered: false,
            text: None,
            canonical,
        }
    }

    /// Where the filter lets a page read less: only the state scopes a match can be in;
    /// conditions on the sort column narrow its range; sorted by `num` with no bound on it,
    /// an equality on a column whose equal values share a key reads that column's entries of
    /// the value instead (they are in `num` order). The choice depends on the parameters
    /// alone, so every page of a cursor reads the same partitions.
    fn plan(&mut self) {
        self.scopes = self
            .filter
            .states()
            .into_iter()
            .filter(|s| self.state.is_none_or(|asked| asked == *s))
            .collect();
        if let Some((from, to)) = self.filter.narrowing(&self.column) {
            self.from = self.from.clone().max(from);
            self.to = self.to.clone().min(to);
            self.filtered = true;
        } else if self.column == Column::Num
            && !self.filtered
            && let Some((source, key, (from, to))) = self.filter.equality_source()
        {
            self.source = source;
            self.source_key = Some(key);
            self.from = from;
            self.to = to;
            self.filtered = true;
        }
    }

    /// Where a page of this query starts, from a position a page of it returned. Sorted by
    /// `num` with a filter, the source may differ from the page before's (an equality's
    /// column is a source only while its field is `sortable`, and function instances learn
    /// that a few seconds apart): both sources are in `num` order and every sort key ends
    /// with the issue's number, so the position is rebuilt for this page's source from that
    /// number. A position past the values (the `num` column has no missing entries) stays
    /// past them: [`read_entries`] ends there.
    pub fn resume_at(&self, start: Option<Position>) -> Option<Position> {
        let mut start = start?;
        if self.column != Column::Num || self.filter.is_empty() {
            return Some(start);
        }
        let Some(sk) = start.get(keys::SK) else {
            return Some(start);
        };
        let Some(num) = sk
            .len()
            .checked_sub(20)
            .and_then(|at| sk.get(at..))
            .and_then(|digits| digits.parse::<u64>().ok())
        else {
            return Some(start);
        };
        let encoded = match &self.source_key {
            Some(key) => key.clone(),
            None => format!("{num:020}"),
        };
        start.insert(keys::SK.to_string(), keys::index::value_sk(&encoded, num));
        Some(start)
    }

    /// The ranges of a read, in order: ascending reads values then missing ones in one range;
    /// descending reads values downwards, then missing ones downwards. Bounds or a prefix read
    /// the values within them only.
    pub fn ranges(&self) -> Vec<Range> {
        use keys::index::{MISSING_CEILING, MISSING_FLOOR, VALUE_CEILING, VALUE_PREFIX};
        if self.filtered {
            vec![Range::new(Phase::Values, &self.from, &self.to)]
        } else if self.descending {
            vec![
                Range::new(Phase::Values, VALUE_PREFIX, VALUE_CEILING),
                Range::new(Phase::Missing, MISSING_FLOOR, MISSING_CEILING),
            ]
        } else {
            vec![Range::new(Phase::Values, VALUE_PREFIX, MISSING_CEILING)]
        }
    }

    /// Whether an issue an entry pointed at belongs on the page: it is still in the project
    /// and the state read (entries lag the records), and its whole text is within the bounds.
    pub fn admits(&self, project_id: &ProjectId, issue: &Issue) -> bool {
        issue.project_id == *project_id
            && self.state.is_none_or(|st| issue.state == st)
            && self.filter.matches(issue)
            && self
                .text
                .as_ref()
                .is_none_or(|t| t.admits(text_of(issue, &self.column)))
    }
}

/// One entry read from the column's partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnEntry {
    pub issue_id: String,
    pub sk: String,
    pub phase: Phase,
    /// The issue's list summary, when the entry carries one.
    pub summary: Option<String>,
}

impl ColumnEntry {
    fn new(hit: ColumnHit, phase: Phase) -> Self {
        Self {
            issue_id: hit.issue_id,
            sk: hit.sk,
            phase,
            summary: hit.summary,
        }
    }

    /// The position that resumes right after this entry, in every shard: its sort key and
    /// its phase.
    pub fn position_after(&self) -> Position {
        Position::from([
            (keys::SK.to_string(), self.sk.clone()),
            (PHASE_MEMBER.to_string(), self.phase.as_str().to_string()),
        ])
    }
}

/// Entries read for one page, in order, and where the next page starts (`None`: the end).
#[derive(Debug, Default)]
pub struct EntryPage {
    pub entries: Vec<ColumnEntry>,
    pub next: Option<Position>,
}

/// Reads up to `limit` entries of the column's partitions `pks` (one per shard and scope) from
/// `start` (a position this returned, or none), across the query's ranges in order. `fetch`
/// runs one Query of a range from a start key; a round reads a share of what the page still
/// needs from each partition that may hold more (see `inbox::share`), and another round reads
/// on where one ran short (or DynamoDB ended a read early), from the last key taken: entries a
/// round fetched beyond what it could take are read again then.
pub async fn read_entries<F, Fut, E>(
    query: &GridQuery,
    pks: &[String],
    limit: i32,
    start: Option<Position>,
    mut fetch: F,
) -> Result<EntryPage, E>
where
    F: FnMut(ColumnQuery, Option<Position>) -> Fut,
    Fut: Future<Output = Result<Page<ColumnHit>, E>>,
{
    let ranges = query.ranges();
    let mut position = start.unwrap_or_default();
    let mut at = match position.remove(PHASE_MEMBER) {
        None => 0,
        // A phase this read does not have (a position from another source of the same
        // query, past its values: see `GridQuery::resume_at`): nothing is left.
        Some(name) => match ranges.iter().position(|r| r.phase.as_str() == name) {
            Some(at) => at,
            None => return Ok(EntryPage::default()),
        },
    };
    let mut partitions = Partitions::new(pks, query.descending, position.remove(keys::SK));
    let mut out = EntryPage::default();
    while let Some(range) = ranges.get(at) {
        let remaining = limit - out.entries.len() as i32;
        if remaining <= 0 {
            // The page is full exactly at a phase boundary: continue there next time.
            out.next = Some(phase_start(range.phase));
            break;
        }
        if range.from > range.to {
            break; // An empty range (e.g. gte above lte); DynamoDB rejects BETWEEN with from > to.
        }
        // A share of the page from each partition (see `inbox::share`): merged partitions read
        // about 1.5 pages between them, not a page each.
        let reading = partitions.reading();
        let per = crate::read::inbox::share(usize::try_from(remaining).unwrap_or(0), reading.len());
        let per = i32::try_from(per).unwrap_or(remaining);
        let reads = reading.iter().map(|&i| {
            let (column_query, start_key) = partitions.query(i, range, per);
            fetch(column_query, start_key)
        });
        let pages = futures::future::join_all(reads).await;
        let round = partitions.absorb(&reading, pages)?;
        let taken = partitions.take(round, usize::try_from(remaining).unwrap_or(0), range.phase);
        out.entries.extend(taken.entries);
        if taken.range_ended {
            // This range is read to its end.
            at += 1;
            partitions.restart();
            continue;
        }
        if out.entries.len() as i32 >= limit {
            out.next = out.entries.last().map(ColumnEntry::position_after);
            break;
        }
        // Short: a partition's share ran out first (or DynamoDB's 1 MB ended a read): read on
        // from where each partition stands.
        partitions.read_on();
    }
    Ok(out)
}

/// Where each partition of a page stands in the range being read.
struct Partitions<'a> {
    pks: &'a [String],
    descending: bool,
    /// The last sort key taken: every partition resumes after it.
    after: Option<String>,
    /// Within this page, where each partition resumes: after `after`, or further where a
    /// partition said it had read further than anything it returned.
    starts: Vec<Option<String>>,
    /// Partitions that may hold more of the current range after where they stand.
    live: Vec<bool>,
}

/// What one round's reads returned, merged.
#[derive(Default)]
struct Round {
    /// Every entry fetched, with its partition (by index), in the read's key order.
    candidates: Vec<(usize, ColumnHit)>,
    /// The nearest key a partition with more to read was read through: nothing beyond it may
    /// be taken yet (that partition may hold keys before it that it has not returned).
    bound: Option<String>,
    /// Whether any partition read has more of the range.
    more: bool,
}

/// The entries a round took, in key order, and whether that read its range to the end.
struct RoundTaken {
    entries: Vec<ColumnEntry>,
    range_ended: bool,
}

/// Whether sort key `a` comes after `b` in the read's direction.
fn further(descending: bool, a: &str, b: &str) -> bool {
    if descending { a < b } else { a > b }
}

impl<'a> Partitions<'a> {
    fn new(pks: &'a [String], descending: bool, after: Option<String>) -> Self {
        Self {
            pks,
            descending,
            starts: vec![after.clone(); pks.len()],
            live: vec![true; pks.len()],
            after,
        }
    }

    /// The partitions a round reads: those that may hold more.
    fn reading(&self) -> Vec<usize> {
        (0..self.pks.len()).filter(|&i| self.live[i]).collect()
    }

    /// Partition `i`'s Query of `range` for `limit` entries, and its start key.
    fn query(&self, i: usize, range: &Range, limit: i32) -> (ColumnQuery, Option<Position>) {
        let pk = &self.pks[i];
        let column_query = ColumnQuery {
            pk: pk.clone(),
            from: range.from.clone(),
            to: range.to.clone(),
            forward: !self.descending,
            limit,
        };
        let start_key = self.starts[i].as_ref().map(|sk| {
            Position::from([
                (keys::PK.to_string(), pk.clone()),
                (keys::SK.to_string(), sk.clone()),
            ])
        });
        (column_query, start_key)
    }

    /// Merges the pages the partitions `reading` returned into a [`Round`], noting which
    /// partitions may hold more and where one read through keys it did not return.
    fn absorb<E>(
        &mut self,
        reading: &[usize],
        pages: Vec<Result<Page<ColumnHit>, E>>,
    ) -> Result<Round, E> {
        let mut round = Round::default();
        for (&i, page) in reading.iter().zip(pages) {
            let page = page?;
            self.live[i] = page.next.is_some();
            if let Some(next) = &page.next {
                round.more = true;
                if let Some(through) = self.through(&page.items, next) {
                    if round
                        .bound
                        .as_deref()
                        .is_none_or(|b| further(self.descending, b, through))
                    {
                        round.bound = Some(through.to_string());
                    }
                    if page.items.is_empty() {
                        // Read through keys it did not return: resume after them.
                        self.starts[i] = Some(through.to_string());
                    }
                }
            }
            round
                .candidates
                .extend(page.items.into_iter().map(|hit| (i, hit)));
        }
        // Sort keys are unique across shards (they end with the issue number), and across
        // scopes but while the indexer moves an issue between them (the page shows it once).
        let descending = self.descending;
        round.candidates.sort_by(|(_, a), (_, b)| {
            if descending {
                b.sk.cmp(&a.sk)
            } else {
                a.sk.cmp(&b.sk)
            }
        });
        Ok(round)
    }

    /// The key a partition with more to read (`next`) was read through: its last entry's, or
    /// the further one DynamoDB ended its read at.
    fn through<'p>(&self, items: &'p [ColumnHit], next: &'p Position) -> Option<&'p str> {
        let last = items.last().map(|hit| hit.sk.as_str());
        match (last, next.get(keys::SK).map(String::as_str)) {
            (Some(l), Some(n)) if further(self.descending, n, l) => Some(n),
            (Some(l), _) => Some(l),
            (None, n) => n,
        }
    }

    /// Takes the round's entries (of `phase`) up to its bound, at most `room`. A partition
    /// whose entries were not all taken is read again from the last one taken.
    fn take(&mut self, round: Round, room: usize, phase: Phase) -> RoundTaken {
        let Round {
            mut candidates,
            bound,
            more,
        } = round;
        let fetched = candidates.len();
        let within = candidates
            .iter()
            .take_while(|(_, hit)| {
                bound
                    .as_deref()
                    .is_none_or(|b| !further(self.descending, &hit.sk, b))
            })
            .count();
        let take = within.min(room);
        for (i, _) in &candidates[take..] {
            self.live[*i] = true;
        }
        candidates.truncate(take);
        if let Some((_, last)) = candidates.last() {
            self.after = Some(last.sk.clone());
        }
        RoundTaken {
            entries: candidates
                .into_iter()
                .map(|(_, hit)| ColumnEntry::new(hit, phase))
                .collect(),
            range_ended: !(take < fetched || more),
        }
    }

    /// Moves on to the next range, read from its start.
    fn restart(&mut self) {
        self.after = None;
        self.starts = vec![None; self.pks.len()];
        self.live = vec![true; self.pks.len()];
    }

    /// After a short round: every partition resumes after the last key taken, unless it
    /// stands further already.
    fn read_on(&mut self) {
        let Some(after) = &self.after else {
            return;
        };
        for start in &mut self.starts {
            if start
                .as_deref()
                .is_none_or(|s| further(self.descending, after, s))
            {
                *start = Some(after.clone());
            }
        }
    }
}

/// The position at the start of a phase: no key yet.
fn phase_start(phase: Phase) -> Position {
    Position::from([(PHASE_MEMBER.to_string(), phase.as_str().to_string())])
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use proptest::prelude::*;

    use super::*;
    use crate::domain::values::FieldType;
    use crate::encoding::text::encode;

    const PK: &str = "T#acme#X#P#F#all";

    /// The partitions of a column split in `shards` shards.
    fn pks(shards: usize) -> Vec<String> {
        if shards == 1 {
            return vec![PK.to_string()];
        }
        (0..shards).map(|i| format!("{PK}#{shards}.{i}")).collect()
    }

    /// The id of the grid's text field, as the `sort` parameter names it.
    const F: &str = "00000000000000000000000001";

    fn project() -> ProjectId {
        ProjectId::numbered(2)
    }

    fn text_field() -> Vec<FieldDef> {
        vec![FieldDef {
            id: crate::domain::ids::FieldId::parse(F).unwrap(),
            name: "F".into(),
            field_type: FieldType::Text,
            options: None,
            sortable: true,
        }]
    }

    /// The column of a text field: one entry per issue (its value's, or a missing one), each
    /// with its partition (the shard from the issue's hash), sorted by sort key as DynamoDB
    /// keeps each partition.
    fn partition(values: &[Option<String>], shards: usize) -> Vec<(String, String, String)> {
        let pks = pks(shards);
        let mut entries: Vec<(String, String, String)> = values
            .iter()
            .enumerate()
            .map(|(n, v)| {
                let num = n as u64 + 1;
                let sk = match v {
                    Some(v) => keys::index::value_sk(&encode(v), num),
                    None => keys::index::missing_sk(num),
                };
                let id = format!("I{num}");
                let hash = keys::index::shard_hash(&id);
                let shard = keys::index::shard_of(hash, shards as u16);
                (sk, id, pks[usize::from(shard)].clone())
            })
            .collect();
        entries.sort();
        entries
    }

    /// One Query of the in-memory partition, as DynamoDB answers it: the range in the
    /// direction asked, after the start key, at most `limit` items, and a last-evaluated key
    /// whenever the limit was reached.
    fn query(
        partition: &[(String, String, String)],
        q: &ColumnQuery,
        start: Option<&Position>,
    ) -> Page<ColumnHit> {
        if let Some(p) = start {
            assert_eq!(
                p.get(keys::PK),
                Some(&q.pk),
                "a start key names its partition"
            );
        }
        let after = start.and_then(|p| p.get(keys::SK));
        let in_range = |sk: &String| *sk >= q.from && *sk <= q.to;
        let past = |sk: &String| after.is_none_or(|a| if q.forward { sk > a } else { sk < a });
        let mut items: Vec<ColumnHit> = partition
            .iter()
            .filter(|(sk, _, pk)| *pk == q.pk && in_range(sk) && past(sk))
            .map(|(sk, id, _)| ColumnHit {
                issue_id: id.clone(),
                sk: sk.clone(),
                summary: None,
            })
            .collect();
        if !q.forward {
            items.reverse();
        }
        items.truncate(q.limit as usize);
        let next = (items.len() == q.limit as usize).then(|| {
            Position::from([
                (keys::PK.to_string(), q.pk.clone()),
                (keys::SK.to_string(), items[items.len() - 1].sk.clone()),
            ])
        });
        Page { items, next }
    }

    /// Every issue id a client reads, page by page. A page keeps its first `keep[i]` entries
    /// (as the names bound may cut it) and resumes after the last one kept.
    /// Every issue id a client reads (see above); with `short`, a shard's read may end
    /// after that many entries with a last-evaluated key, as DynamoDB's 1 MB cap ends one.
    fn read_all(
        grid: &GridQuery,
        partition: &[(String, String, String)],
        (shards, limit, short): (usize, i32, usize),
        keep: &[usize],
    ) -> Vec<String> {
        let pks = pks(shards);
        let mut seen = Vec::new();
        let mut start = None;
        for round in 0.. {
            assert!(round <= 2 * partition.len() + 4, "paging does not end");
            let fetch = |q: ColumnQuery, s: Option<Position>| {
                let mut page = query(partition, &q, s.as_ref());
                // Ends early on a shard whose number is odd (each read, so it stays short).
                let cut = short > 0 && q.pk.ends_with(['1', '3']);
                if cut && page.items.len() > short {
                    page.items.truncate(short);
                    page.next = Some(Position::from([
                        (keys::PK.to_string(), q.pk.clone()),
                        (keys::SK.to_string(), page.items[short - 1].sk.clone()),
                    ]));
                }
                async move { Ok::<_, Infallible>(page) }
            };
            let Ok(mut page) = crate::read::ready(read_entries(grid, &pks, limit, start, fetch));
            assert!(page.entries.len() <= limit as usize);
            let kept = keep[round % keep.len()].max(1);
            if kept < page.entries.len() {
                page.next = Some(page.entries[kept - 1].position_after());
                page.entries.truncate(kept);
            }
            seen.extend(page.entries.into_iter().map(|e| e.issue_id));
            // A cursor is sealed JSON: the position must survive it, and stays small.
            if let Some(p) = &page.next {
                assert!(serde_json::to_vec(p).unwrap().len() < 2048);
            }
            start = page
                .next
                .map(|p| serde_json::from_value(serde_json::to_value(p).unwrap()).unwrap());
            if start.is_none() {
                return seen;
            }
        }
        unreachable!()
    }

    /// What a read must return: the values within the bounds in key order, then (without
    /// bounds) the issues without a value, by number; descending reverses each part.
    fn reference(
        partition: &[(String, String, String)],
        values: &[Option<String>],
        p: &GridParams<'_>,
        descending: bool,
    ) -> Vec<String> {
        let filtered = p.gte.is_some() || p.lte.is_some() || p.prefix.is_some();
        let value_of = |id: &str| values[id[1..].parse::<usize>().unwrap() - 1].as_deref();
        let admits = |v: &str| {
            p.gte.is_none_or(|g| v >= g)
                && p.lte.is_none_or(|l| v <= l)
                && p.prefix.is_none_or(|x| v.starts_with(x))
        };
        let ids = |want_value: bool| {
            let mut ids: Vec<String> = partition
                .iter()
                .filter(|(_, id, _)| match value_of(id) {
                    Some(v) => want_value && admits(v),
                    None => !want_value && !filtered,
                })
                .map(|(_, id, _)| id.clone())
                .collect();
            if descending {
                ids.reverse();
            }
            ids
        };
        [ids(true), ids(false)].concat()
    }

    fn plan(p: &GridParams<'_>) -> GridQuery {
        parse(&project(), p, &text_field()).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_issue_comes_once_in_order(
            values in proptest::collection::vec(proptest::option::of("[a-c]{1,3}"), 0..80),
            descending in any::<bool>(),
            gte in proptest::option::of("[a-c]{1,2}"),
            lte in proptest::option::of("[a-c]{1,3}"),
            prefix in proptest::option::of("[a-c]{1,2}"),
            // Past 10, a round reads a share of the page from each partition.
            limit in prop_oneof![1i32..8, 11i32..40],
            keep in proptest::collection::vec(1usize..9, 1..4),
            shards in prop::sample::select(vec![1usize, 2, 3, 4, 16]),
            short in 0usize..3,
        ) {
            let p = GridParams {
                sort: Some(F),
                order: Some(if descending { "desc" } else { "asc" }),
                gte: gte.as_deref(),
                lte: lte.as_deref(),
                prefix: prefix.as_deref(),
                ..GridParams::default()
            };
            let grid = plan(&p);
            let partition = partition(&values, shards);
            prop_assert_eq!(
                read_all(&grid, &partition, (shards, limit, short), &keep),
                reference(&partition, &values, &p, descending)
            );
        }
    }

    #[test]
    fn ascending_reads_values_then_missing_in_one_range() {
        let grid = plan(&GridParams::default());
        assert_eq!(grid.column, Column::Num);
        assert_eq!(
            grid.ranges(),
            vec![Range::new(
                Phase::Values,
                keys::index::VALUE_PREFIX,
                keys::index::MISSING_CEILING
            )]
        );
        let desc = plan(&GridParams {
            order: Some("desc"),
            ..GridParams::default()
        });
        let phases: Vec<Phase> = desc.ranges().iter().map(|r| r.phase).collect();
        assert_eq!(phases, [Phase::Values, Phase::Missing]);
    }

    #[test]
    fn a_page_full_at_the_boundary_resumes_at_the_missing_phase() {
        let values = [Some("a".to_string()), Some("b".to_string()), None];
        let partition = partition(&values, 1);
        let grid = plan(&GridParams {
            sort: Some(F),
            order: Some("desc"),
            ..GridParams::default()
        });
        // DynamoDB may end a page at its limit without a last-evaluated key.
        let fetch = |q: ColumnQuery, s: Option<Position>| {
            let mut page = query(&partition, &q, s.as_ref());
            page.next = page.next.filter(|_| q.from == keys::index::MISSING_FLOOR);
            async move { Ok::<_, Infallible>(page) }
        };
        let Ok(page) = crate::read::ready(read_entries(&grid, &pks(1), 2, None, fetch));
        assert_eq!(page.entries.len(), 2);
        assert_eq!(
            page.next,
            Some(Position::from([(PHASE_MEMBER.into(), "m".into())]))
        );
    }

    /// A cursor issued before shards (it names the partition too) or before a reshard
    /// resumes in any layout at the same place: it is a sort key, which every layout shares.
    #[test]
    fn a_cursor_from_before_a_reshard_resumes_in_the_new_layout() {
        let values: Vec<Option<String>> = (0..20)
            .map(|n| (n % 3 != 0).then(|| format!("v{}", n % 7)))
            .collect();
        let grid = plan(&GridParams {
            sort: Some(F),
            order: Some("desc"),
            ..GridParams::default()
        });
        let read = |shards: usize, limit: i32, start: Option<Position>| {
            let partition = partition(&values, shards);
            let fetch = |q: ColumnQuery, s: Option<Position>| {
                let page = query(&partition, &q, s.as_ref());
                async move { Ok::<_, Infallible>(page) }
            };
            let Ok(page) =
                crate::read::ready(read_entries(&grid, &pks(shards), limit, start, fetch));
            page
        };
        let everything: Vec<String> = read(1, 100, None)
            .entries
            .into_iter()
            .map(|e| e.issue_id)
            .collect();
        for cut in [1, 9, 15] {
            let first = read(1, cut, None);
            let mut old = first.next.clone().unwrap();
            old.insert(keys::PK.into(), PK.into());
            let rest = read(4, 100, Some(old));
            let ids: Vec<String> = first
                .entries
                .into_iter()
                .chain(rest.entries)
                .map(|e| e.issue_id)
                .collect();
            assert_eq!(ids, everything, "cut after {cut}");
        }
    }

    #[test]
    fn cursor_sentinels_keep_their_wire_form() {
        assert_eq!(PHASE_MEMBER, "~phase");
        assert_eq!(Phase::Values.as_str(), "v");
        assert_eq!(Phase::Missing.as_str(), "m");
        for phase in [Phase::Values, Phase::Missing] {
            assert_eq!(Phase::parse(phase.as_str()), Some(phase));
        }
    }

    #[test]
    fn invalid_parameters_are_each_named() {
        let p = GridParams {
            sort: Some("nope"),
            order: Some("up"),
            state: Some("done"),
            prefix: Some("x"),
            ..GridParams::default()
        };
        let fields: Vec<String> = parse(&project(), &p, &text_field())
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["sort", "order", "state", "prefix"]);
        let num = GridParams {
            prefix: Some("1"),
            ..GridParams::default()
        };
        assert!(parse(&project(), &num, &[]).is_err());
    }

    #[test]
    fn canonical_parameters_apply_defaults() {
        let grid = plan(&GridParams {
            prefix: Some("AB"),
            sort: Some("title"),
            ..GridParams::default()
        });
        assert_eq!(
            grid.canonical,
            "project_id=00000000000000000000000002&sort=title&order=asc&state=&gte=&lte=&prefix=ab"
        );
    }
}
