//! Planning a step column by column: what [`Watermark::step_by_sets`] computes from every entry
//! the watermark and the desired basis derive, computed only for the columns (and the inboxes)
//! that something changed or left uncertain. A 1-field update of an issue with 55 fields builds
//! the keys of that field, `updated_at` and the inbox copies, not of all 60 columns three times;
//! the keys are compared as the parts they are built from and written into one buffer per list.

use std::collections::BTreeMap;

use super::{Basis, Pending, Placement, Seat, Step, Watermark, zip_columns};
use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::{IssueState, ParticipantKind, Role};
use crate::keys::index::{
    PARENT_COLUMN, push_child_sk, push_children_pk, push_column_pk, push_column_sk, push_inbox_pk,
    push_inbox_sk, push_shard, shard_hash, shard_of,
};
use crate::model::entries::{ALL_STATES, EntryList};

/// A column entry's key within its column, as the parts it is built from. Keys are built from
/// them injectively (ids hold no `#`, a sort key ends with the number's twenty digits), so
/// comparing parts compares keys; a child's entry is keyed by its scope, value and number
/// alone (the same whatever the project or shard layout).
#[derive(Clone, Copy)]
struct ColumnKey<'a> {
    project: &'a ProjectId,
    scope: &'a str,
    /// The layout's shard count and the issue's shard in it.
    shard: (u16, u16),
    value: Option<&'a str>,
    num: u64,
    /// The `parent` column's entries, in the parent's children partitions.
    child: bool,
}

impl PartialEq for ColumnKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        let key = |k: &Self| (k.child, k.scope, k.value, k.num);
        key(self) == key(other)
            && (self.child || (self.project, self.shard) == (other.project, other.shard))
    }
}

impl Eq for ColumnKey<'_> {}

impl ColumnKey<'_> {
    fn push_pk(&self, out: &mut String, tenant: &TenantId, column: &str) {
        if self.child {
            push_children_pk(out, tenant, self.value.unwrap_or_default(), self.scope);
            return;
        }
        push_column_pk(out, tenant, self.project, column, self.scope);
        push_shard(out, self.shard.0, self.shard.1);
    }

    fn push_sk(&self, out: &mut String) {
        if self.child {
            push_child_sk(out, self.num);
        } else {
            push_column_sk(out, self.value, self.num);
        }
    }
}

/// A column's entries at `p`: in its state's scope (and the `all` scope, for a placement of
/// the layout before), in each of its layouts (`hash`: the issue's shard hash); the `parent`
/// column's two in the parent's children partitions, its state's and every state's (none
/// without a parent).
fn column_keys<'a>(
    p: &'a Placement,
    (column, value): (&str, Option<&'a str>),
    hash: u64,
) -> impl Iterator<Item = ColumnKey<'a>> + Clone {
    let child = column == PARENT_COLUMN;
    let child_scopes = (child && value.is_some())
        .then_some([p.state.as_str(), ALL_STATES])
        .into_iter()
        .flatten();
    let child_keys = child_scopes.map(move |scope| ColumnKey {
        project: &p.project,
        scope,
        shard: (1, 0),
        value,
        num: p.num,
        child: true,
    });
    let layouts = (!child).then(|| p.shards.counts()).into_iter().flatten();
    let keys = layouts.flat_map(move |count| {
        p.scopes().map(move |scope| ColumnKey {
            project: &p.project,
            scope,
            shard: (count, shard_of(hash, count)),
            value,
            num: p.num,
            child: false,
        })
    });
    child_keys.chain(keys)
}

/// An inbox copy's key, as its parts (see [`ColumnKey`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SeatKey<'a> {
    kind: ParticipantKind,
    id: &'a str,
    state: IssueState,
    role: Option<Role>,
    updated_at: &'a str,
}

/// A participant's two copies: in their inbox for `state`, and in the one for their role.
fn seat_keys<'a>(seat: &'a Seat, state: IssueState, updated_at: &'a str) -> [SeatKey<'a>; 2] {
    [None, Some(seat.role)].map(|role| SeatKey {
        kind: seat.kind,
        id: &seat.id,
        state,
        role,
        updated_at,
    })
}

/// What the step works from: the watermark, the desired basis, what an earlier attempt may
/// have written, and where entries may be.
struct Planner<'a> {
    tenant: &'a TenantId,
    issue_id: &'a IssueId,
    /// The issue's shard hash.
    hash: u64,
    wm: &'a Watermark,
    committed: Option<&'a Basis>,
    desired: Option<&'a Basis>,
    extra: &'a Pending,
    /// Every placement column entries may be at: pending, `extra`'s and the committed one.
    placements: Vec<&'a Placement>,
    /// Whether the committed basis' entries can be certain at all (no placement pending).
    certain: bool,
    /// Whether the desired placement is the committed one (compared once, not per column).
    same_placement: bool,
    /// The desired summary is not the committed one: every desired entry that carries it (a
    /// hot column's, a participation copy) is put again, so each carries the new one (nothing
    /// of theirs is left out as certain).
    refresh: bool,
    puts: EntryList,
    deletes: EntryList,
}

impl Watermark {
    /// Plans the change to `desired` (restricted to the parts read; `None`: the issue is gone):
    /// the entries to put (desired, not certain), to delete (possible, not desired), and the
    /// intent that makes every one of them uncertain before it is touched. `extra` is what an
    /// earlier attempt may have written (see the indexer's catch-up). The same plan as
    /// [`Watermark::step_by_sets`] (a property test holds them equal), built column by column,
    /// in another order, and with no role on a delete (a delete names only a key).
    pub fn step(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
        desired: Option<&Basis>,
        extra: &Pending,
    ) -> Step {
        if self.legacy.is_some() {
            return self.step_by_sets(tenant, issue_id, desired, extra);
        }
        let committed = self.committed.as_ref();
        let mut placements: Vec<&Placement> = self
            .pending
            .placements
            .iter()
            .chain(&extra.placements)
            .chain(committed.map(|c| &c.placement))
            .collect();
        placements.sort();
        placements.dedup();
        let mut planner = Planner {
            tenant,
            issue_id,
            hash: shard_hash(issue_id),
            wm: self,
            committed,
            desired,
            extra,
            placements,
            certain: committed.is_some()
                && self.pending.placements.is_empty()
                && extra.placements.is_empty(),
            same_placement: desired.map(|d| &d.placement) == committed.map(|c| &c.placement),
            refresh: refreshes(committed, desired),
            // A new issue puts every entry; an update, a few.
            puts: EntryList::for_issue(
                issue_id,
                if committed.is_none() || refreshes(committed, desired) {
                    desired.map_or(0, Basis::entry_count)
                } else {
                    8
                },
            )
            .with_summary(desired.map(|d| d.summary.clone()).unwrap_or_default()),
            deletes: EntryList::for_issue(issue_id, 8),
        };
        planner.columns();
        planner.seats();
        let Planner { puts, deletes, .. } = planner;
        let intent = if puts.is_empty() && deletes.is_empty() {
            extra.clone()
        } else if extra.is_empty() {
            self.intent_for(desired)
        } else {
            let mut intent = extra.clone();
            intent.merge(self.intent_for(desired));
            intent
        };
        Step {
            puts,
            deletes,
            intent,
        }
    }
}

/// Whether a step from `committed` to `desired` writes every desired entry again: their
/// summary changed (or none was recorded).
pub(super) fn refreshes(committed: Option<&Basis>, desired: Option<&Basis>) -> bool {
    matches!((committed, desired), (Some(c), Some(d)) if c.summary != d.summary)
}

/// A column's value in a basis: absent, or its encoded value (`None`: missing).
type Value<'a> = Option<&'a Option<String>>;

static NO_COLUMNS: BTreeMap<String, Option<String>> = BTreeMap::new();

impl<'a> Planner<'a> {
    /// Whether a column's entries are all put again for a new summary: it is hot.
    fn resummarized(&self, name: &str) -> bool {
        self.refresh && self.desired.is_some_and(|d| d.hot.contains(name))
    }

    /// Every column the desired or committed basis has, or something pending names.
    fn columns(&mut self) {
        let (wm, extra) = (self.wm, self.extra);
        let desired = self.desired.map_or(&NO_COLUMNS, |d| &d.columns);
        let committed = self.committed.map_or(&NO_COLUMNS, |c| &c.columns);
        for (name, dv, cv) in zip_columns(desired, committed) {
            if !self.quiet_column(name, dv, cv) {
                self.column(name, dv, cv);
            }
        }
        // Columns only something pending names (a field since removed, say).
        let (pending, extra) = (&wm.pending.columns, &extra.columns);
        let named = pending
            .keys()
            .chain(extra.keys().filter(|c| !pending.contains_key(*c)));
        for name in named {
            if !desired.contains_key(name) && !committed.contains_key(name) {
                self.column(name, None, None);
            }
        }
    }

    /// Whether a column's entries are certain and desired as they are: same value, same
    /// placement, nothing pending anywhere they could be.
    fn quiet_column(&self, name: &str, dv: Value<'_>, cv: Value<'_>) -> bool {
        dv.is_some()
            && dv == cv
            && !self.resummarized(name)
            && self.certain
            && self.extra.placements.is_empty()
            && self.same_placement
            && !self.wm.pending.columns.contains_key(name)
            && !self.extra.columns.contains_key(name)
    }

    /// One column: puts its desired entries that are not certain, deletes every entry it may
    /// have that is not desired.
    fn column(&mut self, name: &str, dv: Value<'a>, cv: Value<'a>) {
        let (wm, extra, hash) = (self.wm, self.extra, self.hash);
        let want = match (self.desired, dv) {
            (Some(d), Some(v)) => Some(column_keys(&d.placement, (name, v.as_deref()), hash)),
            _ => None,
        };
        let certain = match (self.committed, cv) {
            // What an earlier attempt wrote (`extra`) has these keys but maybe another summary.
            (Some(c), Some(v))
                if self.certain
                    && !self.resummarized(name)
                    && !self.wm.pending.columns.contains_key(name)
                    && !self.extra.columns.contains_key(name) =>
            {
                Some(column_keys(&c.placement, (name, v.as_deref()), hash))
            }
            _ => None,
        };
        let wanted = |k: &ColumnKey<'_>| want.clone().is_some_and(|mut w| w.any(|x| x == *k));
        let hot = self.desired.is_some_and(|d| d.hot.contains(name));
        let (tenant, puts) = (self.tenant, &mut self.puts);
        for k in want.clone().into_iter().flatten() {
            if !certain.clone().is_some_and(|mut c| c.any(|x| x == k)) {
                puts.push(|t| k.push_pk(t, tenant, name), |t| k.push_sk(t), None, hot);
            }
        }
        let values = wm
            .pending
            .columns
            .get(name)
            .into_iter()
            .chain(extra.columns.get(name))
            .flatten()
            .map(Option::as_deref)
            .chain(cv.map(Option::as_deref));
        let mut gone: Vec<ColumnKey<'_>> = Vec::new();
        for value in values {
            for &p in &self.placements {
                for k in column_keys(p, (name, value), hash) {
                    if !wanted(&k) && !gone.contains(&k) {
                        gone.push(k);
                    }
                }
            }
        }
        for k in gone {
            self.deletes.push(
                |t| k.push_pk(t, tenant, name),
                |t| k.push_sk(t),
                None,
                false,
            );
        }
    }

    /// The inbox copies: as one group, since two seats of one participant share a copy.
    fn seats(&mut self) {
        let (wm, extra) = (self.wm, self.extra);
        if let (Some(c), Some(d)) = (self.committed, self.desired)
            && !self.refresh
            && !wm.pending.touches_seats()
            && !extra.touches_seats()
            && c.placement.state == d.placement.state
            && c.updated_at == d.updated_at
            && c.seats == d.seats
        {
            return;
        }
        let want: Vec<(SeatKey<'a>, Role)> = self
            .desired
            .iter()
            .flat_map(|d| {
                d.seats.iter().flat_map(|seat| {
                    seat_keys(seat, d.placement.state, &d.updated_at).map(|k| (k, seat.role))
                })
            })
            .collect();
        let mut certain: Vec<SeatKey<'a>> = match self.committed {
            Some(c) if !self.refresh && !wm.pending.touches_seats() && !extra.touches_seats() => c
                .seats
                .iter()
                .flat_map(|seat| seat_keys(seat, c.placement.state, &c.updated_at))
                .collect(),
            _ => Vec::new(),
        };
        certain.sort_unstable();
        let (tenant, issue_id) = (self.tenant, self.issue_id);
        for (k, role) in &want {
            if certain.binary_search(k).is_err() {
                self.puts.push(
                    |t| push_inbox_pk(t, tenant, k.kind, k.id, k.state, k.role),
                    |t| push_inbox_sk(t, k.updated_at, issue_id),
                    Some(*role),
                    true,
                );
            }
        }
        let mut states: Vec<IssueState> = self.placements.iter().map(|p| p.state).collect();
        states.sort();
        states.dedup();
        let committed = self.committed;
        let updated_at: Vec<&str> = wm
            .pending
            .updated_at
            .iter()
            .chain(&extra.updated_at)
            .chain(committed.map(|c| &c.updated_at))
            .map(String::as_str)
            .collect();
        let seats = wm
            .pending
            .seats
            .iter()
            .chain(&extra.seats)
            .chain(committed.into_iter().flat_map(|c| &c.seats));
        // Sorted, so a participant-heavy issue's copies are not compared pair by pair.
        let mut wanted: Vec<SeatKey<'_>> = want.iter().map(|(k, _)| *k).collect();
        wanted.sort_unstable();
        let mut gone: Vec<SeatKey<'_>> = Vec::new();
        for seat in seats {
            for &state in &states {
                for &u in &updated_at {
                    let keys = seat_keys(seat, state, u).into_iter();
                    gone.extend(keys.filter(|k| wanted.binary_search(k).is_err()));
                }
            }
        }
        self.delete_copies(gone);
    }

    /// Deletes these inbox copies, each once.
    fn delete_copies(&mut self, mut gone: Vec<SeatKey<'_>>) {
        let (tenant, issue_id) = (self.tenant, self.issue_id);
        gone.sort_unstable();
        gone.dedup();
        for k in gone {
            self.deletes.push(
                |t| push_inbox_pk(t, tenant, k.kind, k.id, k.state, k.role),
                |t| push_inbox_sk(t, k.updated_at, issue_id),
                None,
                false,
            );
        }
    }
}
