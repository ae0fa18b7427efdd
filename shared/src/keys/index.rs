//! Keys of the index table, which only the indexer writes: column entries, participation
//! copies (inboxes), watermarks, parked units and field jobs.

use super::{push_tenant_prefix, tenant_prefix};
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::{IssueState, ParticipantKind, Role};
use crate::encoding::text;

// --- Participation copies -----------------------------------------------------------------

/// The built-in column holding an issue's parent: its entries are not in a project column
/// partition but in the parent's children partition ([`children_pk`]).
pub const PARENT_COLUMN: &str = "parent";

/// An issue's direct children in one state (`None`: of every state), by number: keyed by the
/// parent (not its project), so a page of children, with a state or without, is one Query that
/// needs nothing read first. A child has an entry in both (as a participant has a copy in its
/// state's inbox and in its role's).
pub fn children_pk(tenant: &TenantId, parent: &str, state: Option<IssueState>) -> String {
    let mut out = String::new();
    let scope = state.map_or(ALL_SCOPE, IssueState::as_str);
    push_children_pk(&mut out, tenant, parent, scope);
    out
}

/// [`children_pk`], appended to `out`, with the state (or [`ALL_SCOPE`]) as its scope name.
pub fn push_children_pk(out: &mut String, tenant: &TenantId, parent: &str, scope: &str) {
    push_tenant_prefix(out, tenant);
    for part in ["#CH#", parent, "#", scope] {
        out.push_str(part);
    }
}

/// Whether `pk` is a children partition's (its entries carry the keyed summary, read without
/// the project's fields).
pub fn is_children_pk(pk: &str) -> bool {
    let mut parts = pk.strip_prefix("T#").unwrap_or_default().split('#');
    parts.nth(1) == Some("CH")
}

/// A child's sort key in its parent's partition: the number subtracted from the largest,
/// zero-padded, so a descending read (the inboxes' merge, reused) returns children by
/// ascending number.
pub fn child_sk(num: u64) -> String {
    let mut out = String::new();
    push_child_sk(&mut out, num);
    out
}

/// [`child_sk`], appended to `out`.
pub fn push_child_sk(out: &mut String, num: u64) {
    use std::fmt::Write;
    let _ = write!(out, "{:020}", u64::MAX - num);
}

/// A participant's issues in one state, newest `updated_at` first; with `role`, only the
/// issues where the participant has that role (the role-ranked copy).
///
/// `id` is a user id or a team id, as `kind` says (a [`crate::domain::Participant`]'s id).
pub fn inbox_pk(
    tenant: &TenantId,
    kind: ParticipantKind,
    id: &str,
    state: IssueState,
    role: Option<Role>,
) -> String {
    let mut out = String::new();
    push_inbox_pk(&mut out, tenant, kind, id, state, role);
    out
}

/// [`inbox_pk`], appended to `out` (the indexer builds its keys into one reused buffer).
pub fn push_inbox_pk(
    out: &mut String,
    tenant: &TenantId,
    kind: ParticipantKind,
    id: &str,
    state: IssueState,
    role: Option<Role>,
) {
    push_tenant_prefix(out, tenant);
    for part in ["#IN#", kind.as_str(), "#", id, "#", state.as_str()] {
        out.push_str(part);
    }
    if let Some(role) = role {
        out.push('#');
        out.push_str(role.as_str());
    }
}

/// `{updated_at}#{issue}`: newest first when read backwards, unique per issue.
pub fn inbox_sk(updated_at: &str, issue_id: &IssueId) -> String {
    let mut out = String::new();
    push_inbox_sk(&mut out, updated_at, issue_id);
    out
}

/// [`inbox_sk`], appended to `out`.
pub fn push_inbox_sk(out: &mut String, updated_at: &str, issue_id: &IssueId) {
    out.push_str(updated_at);
    out.push('#');
    out.push_str(issue_id);
}

// --- Column entries ---------------------------------------------------------------------

/// Partition of one sortable column of a project, for one state scope (`all`, `open`,
/// `closed`), so a state-filtered grid is a key condition too.
pub fn column_pk(tenant: &TenantId, project_id: &ProjectId, column: &str, scope: &str) -> String {
    let mut out = String::new();
    push_column_pk(&mut out, tenant, project_id, column, scope);
    out
}

/// [`column_pk`], appended to `out`.
pub fn push_column_pk(
    out: &mut String,
    tenant: &TenantId,
    project_id: &ProjectId,
    column: &str,
    scope: &str,
) {
    push_tenant_prefix(out, tenant);
    for part in ["#X#", project_id, "#", column, "#", scope] {
        out.push_str(part);
    }
}

/// What the names of saved views' columns start with (no built-in column's name or field id
/// does): a view's list is a column of its project, one entry per issue in the view.
pub const VIEW_COLUMN_MARK: char = '~';

/// The column of view `view`'s list as built for its shape `rev`: every issue in the view,
/// by the view's sort value (`.` separates: column names hold no `#`).
pub fn view_column(view: &str, rev: u64) -> String {
    format!("{VIEW_COLUMN_MARK}v.{view}.{rev}")
}

/// The column of one group of view `view` (shape `rev`): its issues with group key `group`
/// ([`crate::model::view::IndexedView::group_key`]).
pub fn view_group_column(view: &str, rev: u64, group: &str) -> String {
    format!("{VIEW_COLUMN_MARK}g.{view}.{rev}.{group}")
}

/// Whether a column is a saved view's (its list or one of its groups).
pub fn is_view_column(column: &str) -> bool {
    column.starts_with(VIEW_COLUMN_MARK)
}

/// What a view column's name says: the view, the shape it was built for, and for a group's
/// column the group's key (`None`: the view's list).
pub fn parse_view_column(column: &str) -> Option<(&str, u64, Option<&str>)> {
    let rest = column.strip_prefix(VIEW_COLUMN_MARK)?;
    let (kind, rest) = rest.split_once('.')?;
    let (view, rest) = rest.split_once('.')?;
    match kind {
        "v" => Some((view, rest.parse().ok()?, None)),
        "g" => {
            let (rev, group) = rest.split_once('.')?;
            Some((view, rev.parse().ok()?, Some(group)))
        }
        _ => None,
    }
}

/// How many items a view's counts are split over (by the issue's [`shard_hash`]): each
/// commit that moves an issue in or out of a view adds to one of them in its transaction,
/// and a view's commits spread over them rather than contend for one item.
pub const VIEW_COUNT_SHARDS: u64 = 32;

/// The project a view id names (its first 26 characters: a view's id is its project's id
/// followed by its own ULID).
pub fn view_project(view: &str) -> &str {
    view.get(..26).unwrap_or(view)
}

/// Partition of the counts of a project's views: one item per view, shape (`rev`) and shard,
/// summed when read (one Query: [`VIEW_COUNT_SHARDS`] small items). Kept by project, so the
/// job that rebuilds its views finds the counts of views or shapes gone with one Query.
pub fn view_counts_pk(tenant: &TenantId, view: &str) -> String {
    format!("{}#VC#{}", tenant_prefix(tenant), view_project(view))
}

/// Sort-key prefix of the count items of view `view`'s shape `rev`.
pub fn view_counts_prefix(view: &str, rev: u64) -> String {
    format!("{view}#{rev:020}#")
}

/// Sort key of count shard `shard` of view `view`'s shape `rev`.
pub fn view_counts_sk(view: &str, rev: u64, shard: u64) -> String {
    format!("{}{shard:02}", view_counts_prefix(view, rev))
}

/// `(view, rev, shard)` of a [`view_counts_sk`].
pub fn parse_view_counts_sk(sk: &str) -> Option<(&str, u64, u64)> {
    let (view, rest) = sk.split_once('#')?;
    let (rev, shard) = rest.split_once('#')?;
    Some((view, rev.parse().ok()?, shard.parse().ok()?))
}

/// Whether an index-table partition key is a view's counts.
pub fn is_view_counts_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split('#').nth(1))
        .is_some_and(|kind| kind == "VC")
}

/// Most shards a project's columns can be split into: a grid page reads every shard at once.
pub const MAX_SHARDS: u16 = 16;

/// The shard layouts an issue's column entries are written in: bit `n - 1` stands for a layout
/// of `n` shards. One layout (the project's) as a rule; two while a project is resharded
/// (`gridctl reshard`), when the new layout is built beside the one reads use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shards(u16);

impl Shards {
    /// One shard: the layout every project starts with, whose keys carry no shard at all (the
    /// keys written before shards existed).
    pub const ONE: Shards = Shards(1);

    /// The layout of `count` shards; `None` outside `1..=MAX_SHARDS`.
    pub fn of(count: u16) -> Option<Self> {
        (1..=MAX_SHARDS)
            .contains(&count)
            .then(|| Self(1 << (count - 1)))
    }

    /// The project's layouts: the one reads use and, during a reshard, the one being built
    /// (or retired). A count out of range counts as one shard.
    pub fn of_project(read: Option<u16>, also: Option<u16>) -> Self {
        let read = read.and_then(Self::of).unwrap_or(Self::ONE);
        match also.and_then(Self::of) {
            Some(also) => Self(read.0 | also.0),
            None => read,
        }
    }

    /// The shard counts, smallest first.
    pub fn counts(self) -> impl Iterator<Item = u16> + Clone {
        (1..=MAX_SHARDS).filter(move |n| self.0 & (1 << (n - 1)) != 0)
    }

    /// The stored form (a bit set).
    pub fn bits(self) -> u16 {
        self.0
    }

    /// From the stored form; `None` for no layout or more than two.
    pub fn from_bits(bits: u16) -> Option<Self> {
        (bits != 0 && bits.count_ones() <= 2).then_some(Self(bits))
    }
}

/// The issue's hash its shard derives from (FNV-1a: stable across builds and platforms, as
/// keys written by one version are read and deleted by the next).
pub fn shard_hash(issue_id: &str) -> u64 {
    issue_id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The issue's shard in a layout of `count` shards, from its [`shard_hash`].
pub fn shard_of(hash: u64, count: u16) -> u16 {
    (hash % u64::from(count.max(1))) as u16
}

/// `#{count}.{shard}` after a column partition key; nothing for one shard, so a project that
/// never resharded keeps its keys. The count is part of the key because two layouts live side
/// by side during a reshard, and shard 1 of 2 and shard 1 of 4 hold different issues.
pub fn push_shard(out: &mut String, count: u16, shard: u16) {
    if count > 1 {
        out.push('#');
        push_small(out, count);
        out.push('.');
        push_small(out, shard);
    }
}

fn push_small(out: &mut String, n: u16) {
    if n >= 10 {
        push_small(out, n / 10);
    }
    out.push(char::from(b'0' + (n % 10) as u8));
}

/// The partitions of one column and scope in a layout of `count` shards, by shard.
pub fn column_shard_pks(
    tenant: &TenantId,
    project_id: &ProjectId,
    column: &str,
    scope: &str,
    count: u16,
) -> Vec<String> {
    (0..count.max(1))
        .map(|shard| {
            let mut out = column_pk(tenant, project_id, column, scope);
            push_shard(&mut out, count, shard);
            out
        })
        .collect()
}

/// The state scope of a column partition key (`all`, `open` or `closed`); `None` for a key
/// that is not a column partition's.
pub fn column_scope(pk: &str) -> Option<&str> {
    // `T#{tenant}#X#{project}#{column}#{scope}[#{count}.{shard}]`: no part holds a `#`.
    let mut parts = pk.strip_prefix("T#")?.split('#');
    let (_tenant, kind) = (parts.next()?, parts.next()?);
    let (_project, _column) = (parts.next()?, parts.next()?);
    (kind == "X").then_some(())?;
    parts.next()
}

/// The scope of the layout before scopes were halved, which held every issue: it is read as a
/// merge of the `open` and `closed` scopes now, and its entries are retired by
/// `gridctl upgrade`.
pub const ALL_SCOPE: &str = "all";

/// What every column partition of a project starts with (for tools that group partitions).
pub fn project_columns_prefix(tenant: &TenantId, project_id: &ProjectId) -> String {
    let mut out = String::new();
    push_tenant_prefix(&mut out, tenant);
    for part in ["#X#", project_id, "#"] {
        out.push_str(part);
    }
    out
}

/// What every participation partition (inbox) of a tenant starts with.
pub fn inboxes_prefix(tenant: &TenantId) -> String {
    let mut out = String::new();
    push_tenant_prefix(&mut out, tenant);
    out.push_str("#IN#");
    out
}

/// Sort-key prefix of entries that hold a value; they sort before the missing ones.
pub const VALUE_PREFIX: &str = "1";
/// Sort-key prefix of entries for issues with no value in the column.
pub const MISSING_PREFIX: &str = "2";
/// Upper bound for value sort keys: above every value entry (they all start with `1`), below
/// every missing one (`2` and twenty digits; no key is `2` alone). It must not be `1` and the
/// highest character: a value may start with that character, and its key sorts above it.
pub const VALUE_CEILING: &str = MISSING_PREFIX;

/// Bounds of the missing entries.
pub const MISSING_FLOOR: &str = MISSING_PREFIX;
pub const MISSING_CEILING: &str = "2\u{10FFFF}";

/// `1 enc(value) SEP num`: by value, ties by issue number.
pub fn value_sk(encoded: &str, num: u64) -> String {
    let mut out = String::new();
    push_column_sk(&mut out, Some(encoded), num);
    out
}

/// `2 num`: issues without a value, by number.
pub fn missing_sk(num: u64) -> String {
    let mut out = String::new();
    push_column_sk(&mut out, None, num);
    out
}

/// [`value_sk`] (or [`missing_sk`] for `None`), appended to `out`.
pub fn push_column_sk(out: &mut String, encoded: Option<&str>, num: u64) {
    match encoded {
        Some(encoded) => {
            out.push_str(VALUE_PREFIX);
            out.push_str(encoded);
            out.push(text::SEP);
        }
        None => out.push_str(MISSING_PREFIX),
    }
    push_number(out, num);
}

/// `num` as twenty digits, zero-padded (`{num:020}` without the formatting machinery: the
/// indexer writes one per entry key).
pub fn push_number(out: &mut String, mut num: u64) {
    // Twenty digits hold any u64; the leading ones stay zero.
    let mut digits = [b'0'; 20];
    for d in digits.iter_mut().rev() {
        if num == 0 {
            break;
        }
        *d = b'0' + (num % 10) as u8;
        num /= 10;
    }
    // ASCII digits: always UTF-8, pushed as one slice rather than char by char.
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

/// The lowest sort key of values `>= encoded` (`gte`), or starting with it (`prefix`).
pub fn value_floor(encoded: &str) -> String {
    format!("{VALUE_PREFIX}{encoded}")
}

/// The highest sort key of values `<= encoded` (`lte`): the value itself with any number.
pub fn value_ceiling_at(encoded: &str) -> String {
    format!("{VALUE_PREFIX}{encoded}{}{}", text::SEP, "9".repeat(20))
}

/// Characters of [`text::TOP`] that outrank any rest of a value key after a prefix: a key is at
/// most `1`, [`text::MAX_BYTES`] of encoding, a separator and 20 digits, and the run is longer.
const TOP_RUN: usize = (text::MAX_BYTES + 22) / 4 + 1;

/// An inclusive upper bound for the sort keys of values starting with `encoded` (`prefix`):
/// the prefix followed by a run of the highest character longer than any rest of a key, so a
/// value that continues with that character (or starts with it) is still inside.
pub fn prefix_ceiling(encoded: &str) -> String {
    let run: String = std::iter::repeat_n(text::TOP, TOP_RUN).collect();
    format!("{VALUE_PREFIX}{encoded}{run}")
}

/// The indexer's record of an issue's entries, for replay protection and exact diffs.
pub fn watermark_pk(tenant: &TenantId, issue_id: &IssueId) -> String {
    format!("{}#W#{issue_id}", tenant_prefix(tenant))
}

pub const WATERMARK_SK: &str = "W";

/// Bucket `k` of an issue's watermark whose fields are laid out in `buckets` buckets (see
/// `crate::model::watermark`): each layout has its own items.
pub fn watermark_bucket_sk(buckets: u16, k: u16) -> String {
    format!("B{buckets}.{k}")
}

/// Sort-key prefix of an issue's history entries, in its watermark's partition: `B` < `H` <
/// `W`, so one Query from the head (`W`) down reads the head (is the issue indexed, or gone?)
/// and then the newest entries.
pub const HISTORY_SK_PREFIX: &str = "H#";

/// Sort key of the history entry of `version` (zero-padded: string order is version order).
pub fn history_sk(version: u64) -> String {
    format!("{HISTORY_SK_PREFIX}{version:020}")
}

/// Sort key of the item that lists an issue's versions whose entries were lost for good and
/// acknowledged as lost (`gridctl repair --accept-lost-history`). `G` sorts below `H#`: outside
/// a history page's range.
pub const HISTORY_LOST_SK: &str = "G#LOST";

/// Sort-key prefix of the parts of history entries too large for one item (`A` sorts below `B`:
/// outside a history page's range and the watermark's buckets).
pub const HISTORY_PART_PREFIX: &str = "A#";

/// Sort-key prefix of the parts of the entry of `version`.
pub fn history_parts_prefix(version: u64) -> String {
    format!("{HISTORY_PART_PREFIX}{version:020}#")
}

/// Sort key of part `k` of the entry of `version` (parts in order).
pub fn history_part_sk(version: u64, k: usize) -> String {
    format!("{}{k:04}", history_parts_prefix(version))
}

/// The version a [`history_sk`] names.
pub fn parse_history_sk(sk: &str) -> Option<u64> {
    sk.strip_prefix(HISTORY_SK_PREFIX)?.parse().ok()
}

/// The sort-key prefix of every bucket of a watermark, whatever its layout.
pub const WATERMARK_BUCKETS: &str = "B";

/// The sort-key prefix of a layout's buckets.
pub fn watermark_buckets_prefix(buckets: u16) -> String {
    format!("B{buckets}.")
}

/// An entry's key as one string in the watermark's set (no key part contains U+0002). The
/// watermark belongs to one tenant, so the `T#{tenant}#` every entry key starts with is left
/// out: with 128-character tenant ids it would be most of the item.
pub fn entry_ref(tenant: &TenantId, pk: &str, sk: &str) -> String {
    let own = format!("{}#", tenant_prefix(tenant));
    let pk = pk.strip_prefix(own.as_str()).unwrap_or(pk);
    format!("{pk}\u{2}{sk}")
}

/// `(pk, sk)` of an [`entry_ref`] of tenant `t`; refs written whole (they start with `T#`,
/// which no tenant-relative key does) are read as they are.
pub fn parse_entry_ref(tenant: &TenantId, r: &str) -> Option<(String, String)> {
    let (pk, sk) = r.split_once('\u{2}')?;
    let pk = if pk.starts_with("T#") {
        pk.to_string()
    } else {
        format!("{}#{pk}", tenant_prefix(tenant))
    };
    Some((pk, sk.to_string()))
}

/// Partition of a tenant's field jobs: one item per job, its checkpoint
/// ([`crate::indexer::field_job`]).
pub fn jobs_pk(tenant: &TenantId) -> String {
    format!("{}#JOBS", tenant_prefix(tenant))
}

/// Sort key of a field job: `{project}#{field}#{add|remove}` (a field is added once and
/// removed once, so the two never share an item).
pub fn job_sk(project_id: &ProjectId, field_id: &FieldId, kind: &str) -> String {
    format!("{project_id}#{field_id}#{kind}")
}

/// Whether an index-table partition key is a tenant's field jobs.
pub fn is_jobs_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split_once('#'))
        .is_some_and(|(_, kind)| kind == "JOBS")
}

/// Partition of a tenant's parked units: what the indexer could not index for a reason no
/// retry fixes (a DynamoDB limit, a malformed record), one item per issue (sort key: its id).
pub fn parked_pk(tenant: &TenantId) -> String {
    format!("{}#PARKED", tenant_prefix(tenant))
}

/// A parked unit that is not one issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkedUnit {
    /// A project's re-index (after a field change); its id follows.
    Project,
    /// A record whose keys name no issue; its sequence number follows.
    Record,
    /// A deleted team's clean-up; its id follows.
    Team,
}

impl ParkedUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::Record => "record",
            Self::Team => "team",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "project" => Some(Self::Project),
            "record" => Some(Self::Record),
            "team" => Some(Self::Team),
            _ => None,
        }
    }
}

/// Sort key of a parked unit that is not one issue: `#project#{id}` or `#record#{sequence}`.
pub fn parked_sk(unit: ParkedUnit, id: &str) -> String {
    format!("#{}#{id}", unit.as_str())
}

/// What a parked unit's sort key names: `(unit, id)` for a unit that is not one issue
/// (a project's id, a record's sequence number), `None` for an issue id.
pub fn parked_other(sk: &str) -> Option<(ParkedUnit, &str)> {
    let (unit, id) = sk.strip_prefix('#')?.split_once('#')?;
    Some((ParkedUnit::parse(unit)?, id))
}

/// Whether an index-table partition key is a tenant's parked units.
pub fn is_parked_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split_once('#'))
        .is_some_and(|(_, kind)| kind == "PARKED")
}

/// The tenant and issue of a watermark partition key.
pub fn parse_watermark_pk(pk: &str) -> Option<(TenantId, IssueId)> {
    let rest = pk.strip_prefix("T#")?;
    let (tenant, rest) = rest.split_once('#')?;
    let issue = rest.strip_prefix("W#")?;
    Some((TenantId::parse(tenant)?, IssueId::parse(issue)?))
}

/// Whether an index-table partition key is a watermark's.
pub fn is_watermark_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split('#').nth(1))
        .is_some_and(|kind| kind == "W")
}
