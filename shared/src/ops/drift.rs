//! Drift between the records and the index: found by scanning both tables and comparing the
//! index with a recomputation from the records; fixed issue by issue while traffic flows.
//! `gridctl verify` and `repair` are thin shells over this module; the chaos tests use it too.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::domain::Issue;
use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::indexer::DELETED;
use crate::keys::index::Shards;
use crate::keys::{self, records::entity};
use crate::model::entries::keys_of;
use crate::model::watermark::{Basis, Pending, Watermark};
use crate::model::{Entry, entries_in_views};
use crate::ops::comments::{CommentDrift, CommentScan};
use crate::ops::relations::{RelationDrift, RelationScan};
use crate::ops::tree::{EdgeScan, TreeDrift};
use crate::ops::view_counts::ViewCountDrift;
use crate::store::index::{Parked, Table, entry_from_item, parked_from_item};
use crate::store::records::items::ProjectItem;
use crate::store::{Store, StoreError, issue_from};

/// `(tenant, issue id)`.
pub type IssueRef = (TenantId, IssueId);

/// The issue an entry belongs to; `None` when its key names no tenant or its id is none.
fn issue_ref(e: &Entry) -> Option<IssueRef> {
    let tenant = TenantId::parse(keys::tenant_of(&e.pk)?)?;
    Some((tenant, IssueId::parse(&e.issue_id)?))
}

/// Both tables as one scan saw them.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub issues: BTreeMap<IssueRef, Issue>,
    pub defs: HashMap<(TenantId, ProjectId), Vec<FieldDef>>,
    /// Saved views by project, as stored.
    pub views: HashMap<(TenantId, ProjectId), Vec<crate::store::records::views::ViewItem>>,
    /// Each project's shard layouts (absent: one shard).
    pub shards: HashMap<(TenantId, ProjectId), Shards>,
    /// Each project's hot columns.
    pub hot: HashMap<(TenantId, ProjectId), crate::model::basis::Hot>,
    /// Every index entry (watermarks aside).
    pub entries: BTreeSet<Entry>,
    /// The indexer's parked units.
    pub parked: Vec<Parked>,
    pub records_scanned: usize,
    pub index_scanned: usize,
    /// Watermarks still in a previous format (read as they are; `gridctl upgrade` rewrites
    /// them): not drift.
    pub previous_layout_watermarks: usize,
    /// Entries in the `all` scope of issues whose watermark is of the layout that had one:
    /// not drift, and left out of `entries` (the next indexing of the issue deletes them).
    pub previous_layout_entries: usize,
    /// The issues whose watermark is of a previous format: their entries may lack the summary
    /// (not drift either; the next indexing writes it).
    pub previous: BTreeSet<IssueRef>,
    /// Relation edges and counts, checked from both sides.
    pub relations: RelationScan,
    /// The tree's child edges, checked against the issues' `parent_id`.
    pub edges: EdgeScan,
    /// Comments and their issues' counts.
    pub comments: CommentScan,
    /// Issues' history entries.
    pub history: crate::ops::history::HistoryScan,
    /// Saved views' counts and the memberships the watermarks record.
    pub view_counts: crate::ops::view_counts::ViewCountScan,
}

/// An entry whose key is right but whose attributes are not.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Stale {
    pub expected: Entry,
    pub actual: Entry,
}

/// How the index differs from a recomputation from the records.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Drift {
    /// Entries the records call for that the index lacks.
    pub missing: Vec<Entry>,
    /// Entries the index holds that no record calls for.
    pub extra: Vec<Entry>,
    pub stale: Vec<Stale>,
    /// Units the indexer parked (a limit or a malformed record stopped them): their issues
    /// are not indexed as they are now until someone looks, so they count as drift.
    pub parked: Vec<Parked>,
    /// Relations without their inverse, dangling, or miscounted (see `ops::relations`).
    pub relations: Vec<RelationDrift>,
    /// Sub-issues and child edges out of step (see `ops::tree`).
    pub tree: Vec<TreeDrift>,
    /// Comments of deleted issues, or miscounted (see `ops::comments`).
    pub comments: Vec<CommentDrift>,
    /// Versions without their history entry, and history of deleted issues (see
    /// `ops::history`).
    pub history: Vec<crate::ops::history::HistoryDrift>,
    /// Views' counts out of step with the memberships recorded, and count items left by a view
    /// or shape gone (see `ops::view_counts`). Those strays are inert (no route reads them) and
    /// not drift: `repair` deletes them.
    pub view_counts: Vec<crate::ops::view_counts::ViewCountDrift>,
}

impl Drift {
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.extra.is_empty()
            && self.stale.is_empty()
            && self.parked.is_empty()
            && self.relations.is_empty()
            && self.tree.is_empty()
            && self.comments.is_empty()
            && self.history.is_empty()
            && self.view_counts.iter().all(ViewCountDrift::is_stray)
    }

    /// Every drifted entry (a stale one as it is in the index).
    fn all(&self) -> impl Iterator<Item = &Entry> {
        self.missing
            .iter()
            .chain(&self.extra)
            .chain(self.stale.iter().map(|s| &s.actual))
    }

    /// The issues whose entries drifted.
    pub fn issues(&self) -> BTreeSet<IssueRef> {
        self.all().filter_map(issue_ref).collect()
    }

    /// Extra entries that name no issue (an issue id or a tenant that is no id): no issue's
    /// repair reaches them, so they are deleted as they are.
    pub fn unowned(&self) -> Vec<&Entry> {
        let owned = |e: &Entry| {
            keys::tenant_of(&e.pk).and_then(TenantId::parse).is_some()
                && IssueId::parse(&e.issue_id).is_some()
        };
        self.extra.iter().filter(|e| !owned(e)).collect()
    }

    /// The drifted entries of one issue, as hints for [`repair_issue`].
    pub fn entries_of(&self, issue: &IssueRef) -> Vec<Entry> {
        self.all()
            .filter(|e| e.issue_id == issue.1 && keys::tenant_of(&e.pk) == Some(issue.0.as_str()))
            .cloned()
            .collect()
    }
}

impl Snapshot {
    /// One records-table item: an issue, or what its entries derive from (its project's
    /// record, fields and views).
    fn absorb_record(&mut self, item: crate::store::Item) -> Result<(), StoreError> {
        let snap = self;
        let kind = item.get("entity").and_then(|v| v.as_s().ok()).cloned();
        let pk = item
            .get(keys::PK)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        match kind.as_deref() {
            Some(entity::ISSUE) => {
                let Some(tenant) = keys::tenant_of(&pk).and_then(TenantId::parse) else {
                    return Ok(());
                };
                let issue = issue_from(item, None)?;
                snap.issues.insert((tenant, issue.id.clone()), issue);
            }
            Some(entity::PROJECT) => {
                if let Some((t, p)) = keys::records::parse_project_pk(&pk)
                    && let Ok(project) = serde_dynamo::from_item::<_, ProjectItem>(item)
                {
                    snap.hot.insert((t.clone(), p.clone()), project.hot());
                    snap.shards.insert((t, p), project.layouts());
                }
            }
            Some(entity::FIELD) => {
                if let Some((t, p)) = keys::records::parse_project_pk(&pk) {
                    let def = crate::store::field_def_from(item)?;
                    snap.defs.entry((t, p)).or_default().push(def);
                }
            }
            Some(entity::VIEW) => {
                if let Some((t, p)) = keys::records::parse_project_pk(&pk) {
                    let view = serde_dynamo::from_item(item).map_err(StoreError::from)?;
                    snap.views.entry((t, p)).or_default().push(view);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Scans both tables, each in `segments` parallel segments.
pub async fn snapshot(
    store: &Store,
    segments: u32,
    on_page: &(dyn Fn(usize) + Sync),
) -> Result<Snapshot, StoreError> {
    let (records, index) = futures::join!(
        store.scan_table(Table::Records, segments, on_page),
        store.scan_table(Table::Index, segments, on_page)
    );
    let (records, index) = (records?, index?);
    let mut snap = Snapshot {
        records_scanned: records.len(),
        index_scanned: index.len(),
        ..Snapshot::default()
    };
    for item in records {
        snap.relations.absorb(&item);
        snap.edges.absorb(&item);
        snap.comments.absorb(&item);
        snap.absorb_record(item)?;
    }
    let previous: BTreeSet<IssueRef> = index
        .iter()
        .filter_map(crate::store::index::watermark_item::previous_format_head)
        .collect();
    let all_scope: BTreeSet<IssueRef> = index
        .iter()
        .filter(|i| crate::store::index::watermark_item::all_scope_head(i))
        .filter_map(crate::store::index::watermark_item::previous_format_head)
        .collect();
    snap.previous_layout_watermarks = previous.len();
    snap.previous = previous;
    // The `all`-scope entries of issues whose watermark is still of the layout that wrote
    // them are that layout's, not drift: the issue's next indexing (or `gridctl upgrade`)
    // deletes them. Anyone else's are strays.
    for entry in index.iter().filter_map(entry_from_item) {
        let old_layout = keys::index::column_scope(&entry.pk) == Some(keys::index::ALL_SCOPE)
            && issue_ref(&entry).is_some_and(|issue| all_scope.contains(&issue));
        if old_layout {
            snap.previous_layout_entries += 1;
        } else {
            snap.entries.insert(entry);
        }
    }
    index.iter().for_each(|item| snap.history.absorb(item));
    index.iter().for_each(|item| snap.view_counts.absorb(item));
    snap.parked = index.iter().filter_map(parked_from_item).collect();
    snap.parked
        .sort_by(|a, b| (&a.tenant, &a.subject).cmp(&(&b.tenant, &b.subject)));
    Ok(snap)
}

/// The entries the records call for.
pub fn expected(snap: &Snapshot) -> BTreeSet<Entry> {
    let mut out = BTreeSet::new();
    for ((tenant, _), issue) in &snap.issues {
        let defs = snap
            .defs
            .get(&(tenant.clone(), issue.project_id.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let shards = snap
            .shards
            .get(&(tenant.clone(), issue.project_id.clone()))
            .copied()
            .unwrap_or(Shards::ONE);
        let hot = snap
            .hot
            .get(&(tenant.clone(), issue.project_id.clone()))
            .cloned()
            .unwrap_or_default();
        let views = snap
            .views
            .get(&(tenant.clone(), issue.project_id.clone()))
            .map(|v| crate::store::records::views::indexed_views(v, defs))
            .unwrap_or_default();
        out.extend(entries_in_views(
            tenant,
            issue,
            (defs, &views),
            shards,
            &hot,
        ));
    }
    out
}

fn by_key(set: &BTreeSet<Entry>) -> BTreeMap<(&str, &str), &Entry> {
    set.iter()
        .map(|e| ((e.pk.as_str(), e.sk.as_str()), e))
        .collect()
}

/// Compares the index with the recomputation.
pub fn compare(snap: &Snapshot) -> Drift {
    let expected = expected(snap);
    let want = by_key(&expected);
    let have = by_key(&snap.entries);
    let mut drift = Drift {
        parked: snap.parked.clone(),
        relations: crate::ops::relations::check(&snap.relations, &|r| snap.issues.contains_key(r)),
        tree: crate::ops::tree::check(&snap.edges, &snap.issues),
        comments: crate::ops::comments::check(&snap.comments),
        history: crate::ops::history::check(&snap.history, &snap.issues),
        view_counts: crate::ops::view_counts::check(&snap.view_counts, &live_views(snap)),
        ..Drift::default()
    };
    // A thin entry of an issue whose watermark predates summaries is that layout's, not stale.
    let unsummarized = |a: &Entry, e: &Entry| {
        a.summary.is_none()
            && a.role == e.role
            && a.issue_id == e.issue_id
            && issue_ref(e).is_some_and(|issue| snap.previous.contains(&issue))
    };
    for (k, e) in &want {
        match have.get(k) {
            None => drift.missing.push((*e).clone()),
            Some(a) if a != e && !unsummarized(a, e) => drift.stale.push(Stale {
                expected: (*e).clone(),
                actual: (*a).clone(),
            }),
            Some(_) => {}
        }
    }
    for (k, a) in &have {
        if !want.contains_key(k) {
            drift.extra.push((*a).clone());
        }
    }
    drift
}

/// Every view's current shape, by tenant and id: those whose definitions hold (the others
/// are being deleted with the field they name, and the index keeps no list of them).
fn live_views(snap: &Snapshot) -> BTreeSet<(TenantId, String, u64)> {
    let mut out = BTreeSet::new();
    for ((tenant, project), views) in &snap.views {
        let defs = snap
            .defs
            .get(&(tenant.clone(), project.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        for view in crate::store::records::views::indexed_views(views, defs) {
            out.insert((tenant.clone(), view.id, view.rev));
        }
    }
    out
}

/// What [`repair_issue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repaired {
    /// Entries were written and deleted; the watermark now lists exactly the right ones.
    Fixed { puts: usize, deletes: usize },
    /// A fresh look found nothing wrong (the stream fixed it meanwhile).
    AlreadyRight,
    /// The stream has not applied the issue's latest version yet; the indexer will.
    InFlight,
}

/// What `issue`'s entries derive from with its project's current fields (none when deleted),
/// and the revision of those fields.
async fn desired_basis(
    store: &Store,
    tenant: &TenantId,
    issue: Option<&Issue>,
) -> Result<(Option<Basis>, u64), StoreError> {
    let Some(issue) = issue else {
        return Ok((None, 0));
    };
    let Some((project, defs, views)) = store
        .records()
        .project_definitions(tenant, &issue.project_id)
        .await?
    else {
        return Ok((Some(Basis::of(issue, &[], Shards::ONE)), 0));
    };
    let views = crate::store::records::views::indexed_views(&views, &defs);
    let record = crate::model::record::IssueRecord::of(issue);
    let basis = Basis::of_record(&record, &defs, project.layouts(), &project.hot())
        .with_views(&record, &defs, &views);
    Ok((Some(basis), project.fields_rev.unwrap_or(0)))
}

/// What makes `actual` into `desired`: the entries to put (absent or different) and the ones
/// to delete (not desired).
fn differences<'a>(
    desired: &'a BTreeSet<Entry>,
    actual: &'a BTreeSet<Entry>,
) -> (Vec<&'a Entry>, Vec<&'a Entry>) {
    let (want, have) = (by_key(desired), by_key(actual));
    let puts = desired
        .iter()
        .filter(|e| have.get(&(e.pk.as_str(), e.sk.as_str())) != Some(e))
        .collect();
    let deletes = actual
        .iter()
        .filter(|e| !want.contains_key(&(e.pk.as_str(), e.sk.as_str())))
        .collect();
    (puts, deletes)
}

/// Attempts before an issue that keeps changing is left to the stream.
const ATTEMPTS: u32 = 5;

/// Entry keys, `(PK, SK)`.
type Keys = BTreeSet<(String, String)>;

/// The keys of the entries a watermark says are in the index, and of those that may be.
fn recorded_and_possible(
    wm: Option<&Watermark>,
    tenant: &TenantId,
    issue_id: &IssueId,
) -> (Keys, Keys) {
    let Some(wm) = wm else {
        return (BTreeSet::new(), BTreeSet::new());
    };
    let recorded = keys_of(wm.certain(tenant, issue_id).iter());
    let possible = keys_of(wm.possible(tenant, issue_id, &Pending::default()).iter());
    (recorded, possible)
}

/// Makes the index hold exactly the entries the issue's current record calls for.
///
/// Safe while the indexer runs: it acts only when the watermark already reflects the issue's
/// current version (otherwise the stream is about to write and the issue is `InFlight`), reads
/// the entries it may touch fresh (the watermark's, the desired ones and `hints`, the ones a
/// scan flagged), and records the result with a watermark write conditioned on the version it
/// read. If the indexer recorded a newer version meanwhile, it starts over.
pub async fn repair_issue(
    store: &Store,
    tenant: &TenantId,
    issue_id: &IssueId,
    hints: &[Entry],
) -> Result<Repaired, StoreError> {
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        let wm = store.index().get_full_watermark(tenant, issue_id).await?;
        let issue = store.records().get_issue_item(tenant, issue_id).await?;
        let version = issue.as_ref().map_or(DELETED, |i| i.version);
        let wm_version = wm.as_ref().map(|w| w.version);
        // An issue never indexed and gone: only stray entries to delete, no watermark to keep.
        let orphan = issue.is_none() && wm.is_none();
        if !orphan && wm_version.is_none_or(|w| w < version) {
            continue;
        }
        let (basis, fields_rev) = desired_basis(store, tenant, issue.as_ref()).await?;
        let desired = basis
            .as_ref()
            .map(|b| b.entries(tenant, issue_id))
            .unwrap_or_default();
        let (recorded, possible) = recorded_and_possible(wm.as_ref(), tenant, issue_id);
        // Every entry this may have to touch, read fresh.
        let mut candidates = keys_of(desired.iter().chain(hints));
        candidates.extend(possible.iter().cloned());
        let candidates: Vec<_> = candidates.into_iter().collect();
        let actual: BTreeSet<Entry> = store
            .index()
            .entries_at(&candidates)
            .await?
            .into_iter()
            .collect();
        let (puts, deletes) = differences(&desired, &actual);
        if puts.is_empty()
            && deletes.is_empty()
            && (orphan || (recorded == keys_of(&desired) && possible == recorded))
        {
            return Ok(Repaired::AlreadyRight);
        }
        store
            .index()
            .write_entries(
                puts.iter().map(|e| e.as_ref()),
                deletes.iter().map(|e| e.as_ref()),
            )
            .await?;
        let (puts, deletes) = (puts.len(), deletes.len());
        if orphan {
            return Ok(Repaired::Fixed { puts, deletes });
        }
        if store
            .index()
            .replace_watermark(
                tenant,
                issue_id,
                wm.as_ref(),
                basis.as_ref(),
                (wm_version.unwrap_or(version), fields_rev),
            )
            .await?
        {
            if wm.as_ref().is_some_and(|w| w.parked) {
                store.index().unpark(tenant, issue_id).await?;
            }
            return Ok(Repaired::Fixed { puts, deletes });
        }
    }
    Ok(Repaired::InFlight)
}
