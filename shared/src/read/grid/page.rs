//! A grid page whole: the partitions a query reads, their entries, the issues behind them
//! (from the entries' summaries, or read), those the query admits, up to the names bound.

use crate::cursor::Position;
use crate::domain::Issue;
use crate::domain::ids::{ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::keys;
use crate::model::column_scopes;
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

/// The column partitions a query reads: every shard of each scope, its state's or both
/// merged.
pub fn partitions(
    tenant: &TenantId,
    project_id: &ProjectId,
    query: &GridQuery,
    shards: u16,
) -> Vec<String> {
    column_scopes(query.state)
        .into_iter()
        .flat_map(|scope| {
            keys::index::column_shard_pks(tenant, project_id, query.column.name(), scope, shards)
        })
        .collect()
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
    let read = read_entries(query, &pks, limit, start, |range, start| async move {
        store.index().query_column(&range, start.as_ref()).await
    })
    .await?;
    let mut next = read.next;
    let entries = read
        .entries
        .iter()
        .map(|e| (e.issue_id.as_str(), e.summary.as_deref()));
    let reading = Reading::Columns { project_id, defs };
    let mut found = store
        .records()
        .issues_of_entries(tenant, entries, reading)
        .await?;
    // Entries of issues deleted (or moved to another state) since they were indexed are
    // skipped; an issue met twice (its entries in both state scopes while the indexer moves
    // them) shows once, at its first entry (`remove` finds it once).
    let mut issues: Vec<(usize, Issue)> = read
        .entries
        .iter()
        .enumerate()
        .filter_map(|(at, e)| found.remove(&e.issue_id).map(|i| (at, i)))
        .filter(|(_, i)| query.admits(project_id, i))
        .collect();
    // Names are bounded per page: past them the page ends at the last issue kept, and the
    // cursor points at its entry.
    let fit = names_fit(issues.iter().map(|(_, i)| i));
    if fit < issues.len() {
        next = Some(read.entries[issues[fit - 1].0].position_after());
        issues.truncate(fit);
    }
    Ok(GridPage {
        issues: issues
            .into_iter()
            .map(|(at, i)| (i, read.entries[at].position_after()))
            .collect(),
        next,
    })
}
