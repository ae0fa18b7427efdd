//! The inbox's read model: the issues a participant is on, newest `updated_at` first, merged
//! over several participation partitions (roles, or the caller's teams), each issue once.
//!
//! Its cursor is one sort key: the last one the page consumed. Every copy ahead of it in any
//! partition was fetched (a copy is taken only once every partition with more to read has
//! been read past it), so every partition resumes "after that key" — DynamoDB takes a start
//! key with any sort key — and the cursor stays the same size whatever the caller's teams
//! (under 2 KB with 50 of them).
//!
//! [`read_merged`] merges the partitions with any Query function, so it is tested here
//! against in-memory partitions; [`page()`] is the whole read against the store: the
//! [`Source`]s' partitions, the merge, the issues behind the copies taken, up to the names
//! bound.

use std::future::Future;

use crate::cursor::Position;
use crate::domain::Role;
use crate::store::Page;
use crate::store::index::InboxCopy;

pub(crate) mod page;

pub use page::{InboxRequest, Source, page};

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
    /// The issue's list summary, from the newest of its copies that carries one.
    pub summary: Option<String>,
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

/// How many copies a round reads from each of `partitions` partitions when `remaining` more
/// are wanted: all of them from one; from several, half again an even share (at least 4), so
/// a page over partitions of about equal activity is one round and reads about 1.5 pages, not
/// one per partition, and one over a skewed mix reads on only where it ran short. (A Query
/// bills the bytes it reads, and entries that carry summaries are hundreds of bytes.)
pub fn share(remaining: usize, partitions: usize) -> usize {
    if partitions <= 1 {
        return remaining;
    }
    (remaining * 3)
        .div_ceil(2 * partitions)
        .max(remaining.min(4))
        .min(remaining)
}

/// One partition as a page reads it: what was fetched and not consumed yet (newest first),
/// the last sort key fetched, and whether it holds more after that.
#[derive(Default)]
struct Partition {
    buffer: std::collections::VecDeque<InboxCopy>,
    after: Option<String>,
    more: bool,
}

impl Partition {
    /// Buffers a page read of this partition.
    fn absorb(&mut self, page: Page<InboxCopy>) {
        // A page of none ends the partition (a Query with a limit and no filter returns at
        // least one item while any is left).
        self.more = page.next.is_some() && !page.items.is_empty();
        if let Some(last) = page.items.last() {
            self.after = Some(last.sk.clone());
        }
        self.buffer.extend(page.items);
    }
}

impl Merged {
    /// Takes fetched copies, newest first, into a page of at most `limit` issues (and the
    /// other copies of the last one). Returns `true` when it stopped short of a full page: a
    /// partition with more to read must be read on first.
    fn take_fetched(&mut self, parts: &mut [Partition], limit: usize) -> bool {
        // Nothing below the highest key a partition with more was read to may be taken yet.
        let bound = parts
            .iter()
            .filter(|p| p.more)
            .filter_map(|p| p.after.clone())
            .max();
        loop {
            // The newest copy fetched; ties (one issue's copies) in partition order.
            let mut head: Option<(usize, &str)> = None;
            for (i, p) in parts.iter().enumerate() {
                if let Some(c) = p.buffer.front()
                    && head.is_none_or(|(_, sk)| c.sk.as_str() > sk)
                {
                    head = Some((i, c.sk.as_str()));
                }
            }
            let Some((i, sk)) = head else {
                return true;
            };
            if bound.as_deref().is_some_and(|b| sk < b) {
                return true;
            }
            let same_as_last = self.taken.last().is_some_and(|t| t.sk == sk);
            if !same_as_last && self.taken.len() == limit {
                return false;
            }
            if let Some(copy) = parts[i].buffer.pop_front() {
                take(&mut self.taken, i, &copy);
                self.last = Some(copy.sk);
            }
        }
    }
}

/// Reads one page over `partitions` partitions after sort key `after`: `fetch(i, limit,
/// after)` reads partition `i`'s first `limit` copies after it, newest first. Partitions are
/// read at once, a [`share`] each, and merged into at most `limit` issues, newest first,
/// each once; a copy is taken only when every partition with more to read has been read past
/// it, and a partition that ran short is read again (the others' copies are kept, not read
/// twice).
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
    let limit = usize::try_from(limit).unwrap_or(0);
    let mut parts: Vec<Partition> = (0..partitions)
        .map(|_| Partition {
            after: after.clone(),
            more: true,
            ..Partition::default()
        })
        .collect();
    let mut merged = Merged::default();
    loop {
        let to_read: Vec<usize> = (0..partitions)
            .filter(|&i| parts[i].more && parts[i].buffer.is_empty())
            .collect();
        if !to_read.is_empty() {
            let remaining = limit.saturating_sub(merged.taken.len()).max(1);
            let per = i32::try_from(share(remaining, to_read.len())).unwrap_or(i32::MAX);
            let reads = to_read
                .iter()
                .map(|&i| fetch(i, per, parts[i].after.clone()));
            let pages = futures::future::join_all(reads).await;
            for (&i, page) in to_read.iter().zip(pages) {
                parts[i].absorb(page?);
            }
        }
        let short = merged.take_fetched(&mut parts, limit);
        let exhausted = parts.iter().all(|p| !p.more);
        if !short || exhausted || merged.taken.len() == limit {
            break;
        }
    }
    merged.any_left = parts.iter().any(|p| p.more || !p.buffer.is_empty());
    Ok(merged)
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
                summary: None,
            });
            taken.len() - 1
        }
    };
    taken[slot].sk = copy.sk.clone();
    if taken[slot].summary.is_none() {
        taken[slot].summary.clone_from(&copy.summary);
    }
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
                        summary: None,
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

    /// The first page over `parts`.
    fn first_page(parts: &[Vec<InboxCopy>], limit: i32) -> Merged {
        let fetch = |i: usize, limit: i32, after: Option<String>| {
            let page = query(&parts[i], limit, after.as_deref());
            async move { Ok::<_, Infallible>(page) }
        };
        let Ok(merged) = crate::read::ready(read_merged(parts.len(), limit, None, fetch));
        merged
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
            issues in proptest::collection::vec((1u8..16, 0usize..3), 0..80),
            // Past 10, a round reads a share of the page from each partition.
            limit in prop_oneof![1i32..7, 11i32..40],
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
        let merged = first_page(&parts, 10);
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
        let merged = first_page(&parts, 1);
        assert_eq!(merged.taken.len(), 1);
        assert_eq!(merged.taken[0].via.len(), 2);
        assert!(merged.any_left);
        let ids: BTreeSet<_> = merged.taken.iter().map(|t| &t.issue_id).collect();
        assert_eq!(ids.len(), 1);
    }

    /// Five partitions of about equal activity: a page of 50 is one round of five reads of 15
    /// (75 copies read, not 250); a page over one busy and four quiet partitions reads on only
    /// where it ran short.
    #[test]
    fn a_page_over_several_partitions_reads_a_share_of_it_from_each() {
        let count = |issues: &[(u8, usize)]| {
            let parts = partitions(issues, 5);
            let reads = std::cell::RefCell::new(Vec::new());
            let fetch = |i: usize, limit: i32, after: Option<String>| {
                let page = query(&parts[i], limit, after.as_deref());
                reads.borrow_mut().push(page.items.len());
                async move { Ok::<_, Infallible>(page) }
            };
            let Ok(merged) = crate::read::ready(read_merged(5, 50, None, fetch));
            assert_eq!(merged.taken.len(), 50);
            reads.into_inner()
        };
        let even: Vec<(u8, usize)> = (0..500).map(|n| (1 << (n % 5), 0)).collect();
        assert_eq!(count(&even), [15; 5]);
        let skewed: Vec<(u8, usize)> = (0..500)
            .map(|n| (if n % 10 == 0 { 1 << (n % 5) } else { 1 }, 0))
            .collect();
        let reads = count(&skewed);
        assert!(reads.len() > 5, "{reads:?}");
        assert!(reads.iter().sum::<usize>() < 150, "{reads:?}");
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
