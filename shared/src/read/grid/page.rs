//! A grid page whole: the partitions a query reads, their entries, the issues behind them
//! (from the entries' summaries, or read), those the query admits, up to the names bound.

use crate::cursor::Position;
use crate::domain::Issue;
use crate::domain::ids::{ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::keys;
use crate::model::summary::Reading;
use crate::read::names::names_fit;
use crate::store::{Store, StoreError};

use super::{GridQuery, read_entries};

/// One grid page to read.
#[derive(Debug)]
pub struct PageRequest<'a> {
    pub tenant: &'a TenantId,
    pub project_id: &'a ProjectId,
    /// The project's field list, which the entries' summaries are read with.
    pub defs: &'a [FieldDef],
    pub query: &'a GridQuery,
    /// The project's shard count for reads.
    pub shards: u16,
    pub limit: i32,
    /// Where the page starts: a position a page returned, or `None` for the first.
    pub start: Option<Position>,
}

/// A grid page: its issues in the column's order, each with the position that resumes right
/// after it (where a page the handler ends early resumes), and where the next one starts
/// (`None`: the end).
#[derive(Debug, Default)]
pub struct GridPage {
    pub issues: Vec<(Issue, Position)>,
    pub next: Option<Position>,
}

/// The column partitions a query reads: every shard of each scope it reads (its state's, or
/// both merged), of its source column.
pub fn partitions(
    tenant: &TenantId,
    project_id: &ProjectId,
    query: &GridQuery,
    shards: u16,
) -> Vec<String> {
    query
        .scopes
        .iter()
        .flat_map(|scope| {
            let (column, scope) = (query.source.name(), scope.as_str());
            keys::index::column_shard_pks(tenant, project_id, column, scope, shards)
        })
        .collect()
}

/// Most index entries one filtered page reads: with rare matches a page ends short (even
/// empty) with a cursor, rather than read on without bound. At about 0.4 KB an entry that is
/// at most ~50 read units, and a few Queries per shard.
pub const FILTER_READ_BUDGET: usize = 1_000;

/// Most issues one filtered page reads whole (those whose entries carry no summary: a column
/// not hot yet, an issue too wide for one), as many as an unfiltered page of 100 may.
pub const WHOLE_READ_BUDGET: usize = 100;

/// What a filtered page has read so far.
#[derive(Default)]
struct Spent {
    entries: usize,
    whole: usize,
}

impl Spent {
    fn exhausted(&self) -> bool {
        self.entries >= FILTER_READ_BUDGET || self.whole >= WHOLE_READ_BUDGET
    }

    /// How many entries a filtered page reads next, having `matched` and needing `needed`
    /// more: first twice what it needs (at most [`WHOLE_READ_BUDGET`], as they may all be read
    /// whole); then what the matches so far say it needs, with a quarter more (at least what
    /// it still needs); never more than the budget left, nor, once entries without a summary
    /// were met, than the whole reads left.
    fn next_read(&self, needed: usize, matched: usize) -> usize {
        let left = FILTER_READ_BUDGET.saturating_sub(self.entries);
        let want = if self.entries == 0 {
            (2 * needed).min(WHOLE_READ_BUDGET)
        } else {
            (needed * (self.entries + 1) / (matched + 1)) * 5 / 4 + 1
        };
        let mut count = want.max(needed).min(left);
        if self.whole > 0 {
            count = count.min(WHOLE_READ_BUDGET.saturating_sub(self.whole));
        }
        count.max(1)
    }
}

/// Reads one grid page: its entries ([`read_entries`]), then their issues in one call.
pub async fn page(store: &Store, request: PageRequest<'_>) -> Result<GridPage, StoreError> {
    let PageRequest {
        tenant,
        project_id,
        defs,
        query,
        shards,
        limit,
        start,
    } = request;
    let pks = partitions(tenant, project_id, query, shards);
    let needed = usize::try_from(limit).unwrap_or(0);
    let (mut issues, mut next) = (Vec::new(), query.resume_at(start));
    let mut spent = Spent::default();
    loop {
        // Unfiltered, one read of `limit` entries; filtered, reads until the page is full,
        // the entries end or the budget is spent.
        let count = if query.filter.is_empty() {
            needed
        } else {
            spent.next_read(needed - issues.len(), issues.len())
        };
        let chunk = Chunk {
            tenant,
            project_id,
            defs,
            query,
            pks: &pks,
        };
        let (found, whole, after) = chunk.read(store, count, next.take()).await?;
        spent.entries += count;
        spent.whole += whole;
        issues.extend(found);
        next = after;
        if query.filter.is_empty() || issues.len() >= needed || spent.exhausted() {
            break;
        }
        if next.is_none() {
            break;
        }
    }
    if issues.len() > needed {
        // A read found more matches than the page holds: it ends at the last one it holds.
        issues.truncate(needed);
        next = issues.last().map(|(_, after)| after.clone());
    }
    // Names are bounded per page: past them the page ends at the last issue kept, and the
    // cursor points at its entry.
    let fit = names_fit(issues.iter().map(|(i, _)| i));
    if fit < issues.len() {
        issues.truncate(fit);
        next = issues.last().map(|(_, after)| after.clone());
    }
    Ok(GridPage { issues, next })
}

/// What one read of a page's entries is about.
struct Chunk<'a> {
    tenant: &'a TenantId,
    project_id: &'a ProjectId,
    defs: &'a [FieldDef],
    query: &'a GridQuery,
    pks: &'a [String],
}

impl Chunk<'_> {
    /// Reads `count` entries from `start` and the issues behind them that the query admits,
    /// each with the position right after its entry; how many issues were read whole (their
    /// entries carry no summary), and where the next read starts.
    async fn read(
        &self,
        store: &Store,
        count: usize,
        start: Option<Position>,
    ) -> Result<(Vec<(Issue, Position)>, usize, Option<Position>), StoreError> {
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        let read = read_entries(
            self.query,
            self.pks,
            count,
            start,
            |range, start| async move { store.index().query_column(&range, start.as_ref()).await },
        )
        .await?;
        let whole = read.entries.iter().filter(|e| e.summary.is_none()).count();
        let entries = read
            .entries
            .iter()
            .map(|e| (e.issue_id.as_str(), e.summary.as_deref()));
        let reading = Reading::Columns {
            project_id: self.project_id,
            defs: self.defs,
        };
        let mut found = store
            .records()
            .issues_of_entries(self.tenant, entries, reading)
            .await?;
        // Entries of issues deleted (or moved to another state) since they were indexed are
        // skipped; an issue met twice (its entries in both state scopes while the indexer
        // moves them) shows once, at its first entry (`remove` finds it once).
        let issues = read
            .entries
            .iter()
            .filter_map(|e| found.remove(&e.issue_id).map(|i| (i, e.position_after())))
            .filter(|(i, _)| self.query.admits(self.project_id, i))
            .collect();
        Ok((issues, whole, read.next))
    }
}
