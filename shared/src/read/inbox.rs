//! The inbox's read model: the issues a participant is on, newest `updated_at` first, merged
//! over several participation partitions (roles, or the caller's teams), each issue once.
//!
//! Its cursor is one sort key: the last one the page consumed. Every copy ahead of it in any
//! partition was fetched (each partition's first `limit` copies, and a page holds at most
//! `limit` issues), so every partition resumes "after that key" — DynamoDB takes a start key
//! with any sort key — and the cursor stays the same size whatever the caller's teams (under
//! 2 KB with 50 of them).

use std::future::Future;

use crate::cursor::Position;
use crate::domain::Role;
use crate::index::InboxCopy;
use crate::store::Page;

/// The cursor's member: the last sort key a page consumed.
pub const AFTER_MEMBER: &str = "after";

/// The position resuming after sort key `sk`.
pub fn position_after(sk: String) -> Position {
    Position::from([(AFTER_MEMBER.to_string(), sk)])
}

/// The sort key a position resumes after; `None` if it is not an inbox position.
pub fn after_of(mut position: Position) -> Option<String> {
    position.remove(AFTER_MEMBER)
}

/// An issue a page takes, with the sort key of its last copy consumed and, for each copy,
/// the partition (by index) and role it came through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub sk: String,
    pub issue_id: String,
    pub via: Vec<(usize, Role)>,
}

/// A merged page: its issues, newest first, and where the next one starts.
#[derive(Debug, Default)]
pub struct Merged {
    pub taken: Vec<Taken>,
    /// The last sort key consumed.
    pub last: Option<String>,
    /// Whether any copy is left after `last` (fetched and not consumed, or not yet fetched).
    pub any_left: bool,
}

/// Reads one page over `partitions` partitions after sort key `after`: `fetch(i, limit,
/// after)` reads partition `i`'s first `limit` copies after it, newest first; all are read at
/// once and merged into at most `limit` issues.
pub async fn read_merged<F, Fut, E>(
    partitions: usize,
    limit: i32,
    after: Option<String>,
    mut fetch: F,
) -> Result<Merged, E>
where
    F: FnMut(usize, i32, Option<String>) -> Fut,
    Fut: Future<Output = Result<Page<InboxCopy>, E>>,
{
    let pages =
        futures::future::join_all((0..partitions).map(|i| fetch(i, limit, after.clone()))).await;
    let pages = pages.into_iter().collect::<Result<Vec<_>, E>>()?;
    Ok(merge(pages, usize::try_from(limit).unwrap_or(0)))
}

/// Merges partition pages (page `i` from partition `i`, each newest first) into at most
/// `limit` issues, newest first, each once.
pub fn merge(pages: Vec<Page<InboxCopy>>, limit: usize) -> Merged {
    // Every candidate, newest first; an issue several partitions hold has the same sort key in
    // each (updated_at#id), so its copies are adjacent.
    let mut candidates: Vec<(usize, InboxCopy)> = Vec::new();
    let mut more = false;
    for (i, page) in pages.into_iter().enumerate() {
        more |= page.next.is_some();
        candidates.extend(page.items.into_iter().map(|c| (i, c)));
    }
    candidates.sort_by(|(ia, a), (ib, b)| b.sk.cmp(&a.sk).then(ia.cmp(ib)));
    let fetched = candidates.len();
    let mut merged = Merged::default();
    let mut consumed = 0usize;
    for (i, copy) in candidates {
        let same_as_last = merged.taken.last().is_some_and(|t| t.sk == copy.sk);
        if !same_as_last && merged.taken.len() == limit {
            break;
        }
        take(&mut merged.taken, i, &copy);
        merged.last = Some(copy.sk);
        consumed += 1;
    }
    merged.any_left = consumed < fetched || more;
    merged
}

/// Takes one copy: a new issue, or another copy of one taken.
fn take(taken: &mut Vec<Taken>, partition: usize, copy: &InboxCopy) {
    // While the index catches up, one issue's copies may carry different sort keys.
    let slot = match taken.iter().position(|t| t.issue_id == copy.issue_id) {
        Some(existing) => existing,
        None => {
            taken.push(Taken {
                sk: copy.sk.clone(),
                issue_id: copy.issue_id.clone(),
                via: Vec::new(),
            });
            taken.len() - 1
        }
    };
    taken[slot].sk = copy.sk.clone();
    if let Some(role) = Role::parse(&copy.role) {
        taken[slot].via.push((partition, role));
    }
}
