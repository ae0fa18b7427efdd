//! Field definitions per project, read once per batch segment and again after a field
//! change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::ids::{ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::keys::index::Shards;
use crate::model::basis::Hot;
use crate::model::record::IssueRecord;
use crate::model::view::IndexedView;
use crate::model::view::counts::LiveViews;
use crate::model::watermark::Basis;
use crate::store::{Store, StoreError};

/// Field definitions per project, read once per segment of a batch by whichever unit needs
/// them first (the others wait for that read), and again after a field change.
#[derive(Default)]
pub(super) struct Defs(Mutex<HashMap<(TenantId, ProjectId), Arc<DefsCell>>>);

/// One project's field definitions and their revision (the project's `fields_rev`, which a
/// reshard advances too), and its shard layouts.
#[derive(Clone)]
pub(super) struct Fields {
    pub(super) rev: u64,
    pub(super) defs: Arc<[FieldDef]>,
    pub(super) shards: Shards,
    /// The columns whose entries carry summaries.
    pub(super) hot: Hot,
    /// The project's saved views, whose lists are columns of the index.
    pub(super) views: Arc<[IndexedView]>,
    /// The views whose counts commits keep, at the shape each is built for.
    pub(super) live: Arc<LiveViews>,
    /// Whether the project exists: an issue of a deleted one is deleted, not indexed.
    pub(super) exists: bool,
}

/// One project's definitions, read once.
type DefsCell = tokio::sync::OnceCell<Fields>;

impl Defs {
    pub(super) fn cell(&self, tenant: &TenantId, project_id: &ProjectId) -> Arc<DefsCell> {
        let mut cells = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cells
            .entry((tenant.clone(), project_id.clone()))
            .or_default()
            .clone()
    }

    pub(super) async fn get(
        &self,
        store: &Store,
        tenant: &TenantId,
        project_id: &ProjectId,
    ) -> Result<Fields, StoreError> {
        let cell = self.cell(tenant, project_id);
        // A failed read leaves the cell empty: the next unit that needs it reads again. The
        // project item sorts first in the Query, so the revision read is never newer than
        // the definitions read with it.
        let fields = cell
            .get_or_try_init(|| async {
                Ok::<_, StoreError>(
                    match store
                        .records()
                        .project_definitions(tenant, project_id)
                        .await?
                    {
                        Some((project, defs, views)) => {
                            let views = crate::store::records::views::indexed_views(&views, &defs);
                            let live = views.iter().map(|v| (v.id.clone(), v.rev)).collect();
                            Fields {
                                rev: project.fields_rev.unwrap_or(0),
                                shards: project.layouts(),
                                hot: project.hot(),
                                defs: Arc::from(defs),
                                views: Arc::from(views),
                                live: Arc::new(live),
                                exists: true,
                            }
                        }
                        None => Fields {
                            rev: 0,
                            defs: Arc::from(Vec::new()),
                            shards: Shards::ONE,
                            hot: Hot::default(),
                            views: Arc::from(Vec::new()),
                            live: Arc::default(),
                            exists: false,
                        },
                    },
                )
            })
            .await?;
        Ok(fields.clone())
    }

    /// The project's definitions, read again (for every unit of the segment) when the ones
    /// held are older than revision `rev`: an issue's watermark recorded under a newer one
    /// means a field changed after they were read, and the field's job has already been
    /// here; indexing with the old ones would undo its work.
    pub(super) async fn at_least(
        &self,
        store: &Store,
        tenant: &TenantId,
        project_id: &ProjectId,
        rev: u64,
    ) -> Result<Fields, StoreError> {
        let held = self.get(store, tenant, project_id).await?;
        if held.rev >= rev {
            return Ok(held);
        }
        tracing::debug!(
            held = held.rev,
            seen = rev,
            "field definitions changed meanwhile; reading them again"
        );
        {
            let mut cells = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (tenant.clone(), project_id.clone());
            // Unless another unit has already replaced them.
            if cells
                .get(&key)
                .and_then(|c| c.get())
                .is_none_or(|f| f.rev < rev)
            {
                cells.insert(key, Arc::default());
            }
        }
        // Read after the watermark, so at least as new as its revision (unless the project is
        // gone, and then there is nothing newer to read).
        self.get(store, tenant, project_id).await
    }

    /// What `issue`'s entries derive from under its project's fields and views (none when
    /// deleted), with definitions at least as new as revision `min_rev`, their revision, and
    /// the views whose counts the commit keeps: for a deleted issue, those of the project its
    /// watermark names (`committed_in`), which it leaves.
    pub(super) async fn basis(
        &self,
        store: &Store,
        tenant: &TenantId,
        issue: Option<&IssueRecord<'_>>,
        (min_rev, committed_in): (u64, Option<&ProjectId>),
    ) -> Result<(Option<Basis>, u64, Arc<LiveViews>), StoreError> {
        Ok(match issue {
            Some(issue) => {
                let fields = self
                    .at_least(store, tenant, &issue.project_id, min_rev)
                    .await?;
                let basis = Basis::of_record(issue, &fields.defs, fields.shards, &fields.hot)
                    .with_views(issue, &fields.defs, &fields.views);
                (Some(basis), fields.rev, fields.live)
            }
            None => {
                // Definitions at least as new as the ones the head was committed under: the
                // views it is counted in are live in them (older ones might not know them,
                // and the delete would leave their counts high).
                let live = match committed_in {
                    Some(project) => self.at_least(store, tenant, project, min_rev).await?.live,
                    None => Arc::default(),
                };
                (None, 0, live)
            }
        })
    }
}
