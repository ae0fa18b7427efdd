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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::convert::Infallible;

    use proptest::prelude::*;

    use super::*;

    const ROLES: [&str; 3] = ["assignee", "reporter", "watcher"];

    /// Partitions of copies, each newest first: issue `n` (sort key `t{n}#I{n}`) is in each
    /// partition its mask names, with a role.
    fn partitions(issues: &[(u8, usize)], count: usize) -> Vec<Vec<InboxCopy>> {
        let mut parts = vec![Vec::new(); count];
        for (n, (mask, role)) in issues.iter().enumerate() {
            for (i, part) in parts.iter_mut().enumerate() {
                if mask & (1 << i) != 0 {
                    part.push(InboxCopy {
                        sk: format!("t{n:04}#I{n}"),
                        issue_id: format!("I{n}"),
                        role: ROLES[(role + i) % ROLES.len()].to_string(),
                    });
                }
            }
        }
        for part in &mut parts {
            part.reverse();
        }
        parts
    }

    /// One partition's copies after `after`, at most `limit`, as DynamoDB answers.
    fn query(part: &[InboxCopy], limit: i32, after: Option<&str>) -> Page<InboxCopy> {
        let items: Vec<InboxCopy> = part
            .iter()
            .filter(|c| after.is_none_or(|a| c.sk.as_str() < a))
            .take(limit as usize)
            .cloned()
            .collect();
        let next = (items.len() == limit as usize).then(Position::new);
        Page { items, next }
    }

    /// Every issue a client reads, with its partitions, page by page; a page keeps its first
    /// `keep[i]` issues (as the names bound may cut it) and resumes after the last one kept.
    fn read_all(parts: &[Vec<InboxCopy>], limit: i32, keep: &[usize]) -> Vec<Taken> {
        let mut seen: Vec<Taken> = Vec::new();
        let mut after: Option<String> = None;
        for round in 0.. {
            let total: usize = parts.iter().map(Vec::len).sum();
            assert!(round <= total + 2, "paging does not end");
            let fetch = |i: usize, limit: i32, after: Option<String>| {
                let page = query(&parts[i], limit, after.as_deref());
                async move { Ok::<_, Infallible>(page) }
            };
            let Ok(mut merged) =
                crate::read::ready(read_merged(parts.len(), limit, after.clone(), fetch));
            assert!(merged.taken.len() <= limit as usize);
            let kept = keep[round % keep.len()].max(1);
            if kept < merged.taken.len() {
                merged.last = Some(merged.taken[kept - 1].sk.clone());
                merged.any_left = true;
                merged.taken.truncate(kept);
            }
            seen.extend(merged.taken);
            let next = merged.last.filter(|_| merged.any_left).map(position_after);
            match next.and_then(after_of) {
                Some(sk) => after = Some(sk),
                None => return seen,
            }
        }
        unreachable!()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_issue_comes_once_newest_first(
            count in 1usize..5,
            issues in proptest::collection::vec((1u8..16, 0usize..3), 0..40),
            limit in 1i32..7,
            keep in proptest::collection::vec(1usize..8, 1..4),
        ) {
            let issues: Vec<(u8, usize)> = issues
                .into_iter()
                .map(|(mask, role)| (mask & ((1 << count) - 1), role))
                .collect();
            let parts = partitions(&issues, count);
            let seen = read_all(&parts, limit, &keep);
            // Reference: every issue in some partition, newest first, with each partition
            // holding it, in partition order.
            let mut expected: Vec<(String, Vec<usize>)> = issues
                .iter()
                .enumerate()
                .filter(|(_, (mask, _))| *mask != 0)
                .map(|(n, (mask, _))| {
                    (format!("I{n}"), (0..count).filter(|i| mask & (1 << i) != 0).collect())
                })
                .collect();
            expected.reverse();
            let got: Vec<(String, Vec<usize>)> = seen
                .iter()
                .map(|t| (t.issue_id.clone(), t.via.iter().map(|v| v.0).collect()))
                .collect();
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn copies_of_one_issue_merge_into_one_with_every_role() {
        let parts = partitions(&[(0b11, 0), (0b01, 1), (0b10, 2)], 2);
        let pages: Vec<_> = parts.iter().map(|p| query(p, 10, None)).collect();
        let merged = merge(pages, 10);
        let ids: Vec<&str> = merged.taken.iter().map(|t| t.issue_id.as_str()).collect();
        assert_eq!(ids, ["I2", "I1", "I0"]);
        assert_eq!(
            merged.taken[2].via,
            [(0, Role::Assignee), (1, Role::Reporter)]
        );
        assert!(!merged.any_left);
        assert_eq!(merged.last.as_deref(), Some("t0000#I0"));
    }

    #[test]
    fn a_full_page_still_consumes_the_last_issues_other_copies() {
        let parts = partitions(&[(0b11, 0), (0b11, 0)], 2);
        let pages: Vec<_> = parts.iter().map(|p| query(p, 1, None)).collect();
        let merged = merge(pages, 1);
        assert_eq!(merged.taken.len(), 1);
        assert_eq!(merged.taken[0].via.len(), 2);
        assert!(merged.any_left);
        let ids: BTreeSet<_> = merged.taken.iter().map(|t| &t.issue_id).collect();
        assert_eq!(ids.len(), 1);
    }

    #[test]
    fn the_cursor_member_keeps_its_wire_form() {
        assert_eq!(
            position_after("k".into()),
            Position::from([("after".to_string(), "k".to_string())])
        );
        assert_eq!(after_of(Position::new()), None);
    }
}
