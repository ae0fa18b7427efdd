//! Views' counts: how many issues a view (and each of its groups) holds, kept exact under
//! at-least-once delivery. An issue's view memberships are columns of its watermark's head,
//! so the commit that changes them knows exactly what it changes: it adds the difference to
//! the view's count items in the same transaction as the head, conditioned as the head put
//! always is (on the head it read). A commit that loses its race adds nothing; a retry, a
//! duplicate or a replay finds the memberships already recorded and adds nothing again.

use std::collections::BTreeMap;

use crate::keys;
use crate::model::basis::Basis;

/// What one commit adds to a view's counts: its list's and its groups'.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CountDelta {
    pub total: i64,
    pub groups: BTreeMap<String, i64>,
}

impl CountDelta {
    fn is_zero(&self) -> bool {
        self.total == 0 && self.groups.values().all(|d| *d == 0)
    }
}

/// The views (by id) whose counts commits keep, with the shape each is built for: counts of
/// a view deleted or rebuilt since are not kept (its count items are removed with it).
pub type LiveViews = BTreeMap<String, u64>;

/// The changes to views' counts from an issue's committed basis to the desired one (`None`:
/// none committed yet, or the issue is gone), for views still live at the shape named.
pub fn count_deltas(
    committed: Option<&Basis>,
    desired: Option<&Basis>,
    live: &LiveViews,
) -> BTreeMap<(String, u64), CountDelta> {
    let mut out: BTreeMap<(String, u64), CountDelta> = BTreeMap::new();
    let mut add = |basis: Option<&Basis>, sign: i64| {
        let columns = basis.into_iter().flat_map(|b| b.columns.keys());
        for column in columns {
            let Some((view, rev, group)) = keys::index::parse_view_column(column) else {
                continue;
            };
            if live.get(view) != Some(&rev) {
                continue;
            }
            let delta = out.entry((view.to_string(), rev)).or_default();
            match group {
                None => delta.total += sign,
                Some(g) => *delta.groups.entry(g.to_string()).or_default() += sign,
            }
        }
    };
    add(committed, -1);
    add(desired, 1);
    out.retain(|_, d| {
        d.groups.retain(|_, n| *n != 0);
        !d.is_zero()
    });
    out
}
