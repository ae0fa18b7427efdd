//! A project's item and field definitions as the grid reads them, held by the function
//! instance for [`FieldsCache::MAX_AGE`]: a warm grid page makes no read for them, so a page
//! is the index Query, the issues and the names.
//!
//! Why it is safe to serve them that old:
//! - The grid and the inboxes are fresh within seconds (`openapi.yaml`: freshness); a field deleted a
//!   moment ago leaves the views within the same seconds.
//! - A query the held definitions refuse (a field created since, or one not sortable when they
//!   were read) is never answered from them: the handler reads them again, consistently, and
//!   holds what it read (see `grid::interpret`).
//! - The shard layout a page reads is at most this old, and a reshard keeps the layout reads
//!   leave exact for longer than that (`index::reshard::READS_MOVED`, whatever its settle).
//!
//! Bounded: past [`InstanceCache::MAX_PROJECTS`] keys it starts again empty.
//!
//! Saved views' definitions are held the same way ([`ViewsCache`]), each with the project's
//! `fields_rev` read beside it. A view reshaped or deleted a moment ago may be served as it was
//! for at most as long (its old list possibly incomplete, as the job rebuilding the view takes
//! issues out of it), as a field deleted a moment ago may still sort the grid. A view not
//! ready is never held; one the held project's `fields_rev` has moved past, or that refuses a
//! request (its cursor, its group), is read again before any refusal, and the fresh read
//! replaces or forgets it (`saved_views::issues`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::ids::{ProjectId, TenantId, ViewId};
use crate::domain::values::FieldDef;
use crate::store::records::items::ProjectItem;
use crate::store::records::views::ViewItem;

/// A project's item and its field definitions, as read together.
pub struct ProjectFields {
    pub project: ProjectItem,
    pub defs: Vec<FieldDef>,
}

/// Per key: when its value was read, and what was read.
type Held<K, V> = HashMap<K, (Instant, Arc<V>)>;

/// What a function instance read in the last [`InstanceCache::MAX_AGE`], by key.
pub struct InstanceCache<K, V> {
    held: Arc<Mutex<Held<K, V>>>,
}

/// Projects' items and field definitions, by tenant and project.
pub type FieldsCache = InstanceCache<(TenantId, ProjectId), ProjectFields>;

/// Saved views' definitions, by tenant and view: a warm page of a view reads only its list.
pub type ViewsCache = InstanceCache<(TenantId, ViewId), HeldView>;

/// A view as read, with the `fields_rev` of the project read beside it: every create, reshape
/// or delete of a view advances it, so held definitions of the project that moved on refuse
/// the held view.
pub struct HeldView {
    pub item: ViewItem,
    pub fields_rev: Option<u64>,
}

impl<K, V> Clone for InstanceCache<K, V> {
    fn clone(&self) -> Self {
        Self {
            held: self.held.clone(),
        }
    }
}

impl<K, V> Default for InstanceCache<K, V> {
    fn default() -> Self {
        Self {
            held: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

impl<K: std::hash::Hash + Eq, V> InstanceCache<K, V> {
    /// How long a read is served: well within the seconds the views take to catch up.
    pub const MAX_AGE: Duration = crate::read::HELD_PROJECT_MAX_AGE;
    /// Keys held at most (a grid function instance serves few projects at a time).
    pub const MAX_PROJECTS: usize = 1024;

    /// The value held for `key` if read within [`InstanceCache::MAX_AGE`].
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, value) = held.get(key)?;
        (at.elapsed() < Self::MAX_AGE).then(|| value.clone())
    }

    /// Forgets `key` (what a fresh read found no longer holds).
    pub fn remove(&self, key: &K) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.remove(key);
    }

    /// Holds what was just read.
    pub fn put(&self, key: K, value: Arc<V>) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.len() >= Self::MAX_PROJECTS {
            held.clear();
        }
        held.insert(key, (Instant::now(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(n: usize) -> Arc<ProjectFields> {
        let project: ProjectItem = serde_json::from_value(serde_json::json!({
            "PK": "T#a#P#1", "SK": "#PROJECT", "GSI1PK": "x", "GSI1SK": "y", "entity": "project",
            "id": ProjectId::numbered(1).to_string(), "name": "p", "next_num": 1,
            "created_at": "2026-11-25T00:00:00Z", "updated_at": "2026-11-25T00:00:00Z"
        }))
        .unwrap();
        Arc::new(ProjectFields {
            project,
            defs: Vec::with_capacity(n),
        })
    }

    #[test]
    fn a_read_is_served_until_it_is_too_old_and_only_for_its_project() {
        let cache = FieldsCache::default();
        let tenant = TenantId::parse("acme").unwrap();
        let other = TenantId::parse("other").unwrap();
        let (p, q) = (ProjectId::numbered(1), ProjectId::numbered(2));
        assert!(cache.get(&(tenant.clone(), p.clone())).is_none());
        cache.put((tenant.clone(), p.clone()), fields(3));
        assert_eq!(
            cache
                .get(&(tenant.clone(), p.clone()))
                .map(|f| f.defs.capacity()),
            Some(3)
        );
        assert!(cache.get(&(tenant.clone(), q)).is_none());
        assert!(cache.get(&(other, p.clone())).is_none());
        // Held longer than the limit: read again.
        let old = Instant::now() - FieldsCache::MAX_AGE;
        cache
            .held
            .lock()
            .unwrap()
            .get_mut(&(tenant.clone(), p.clone()))
            .unwrap()
            .0 = old;
        assert!(cache.get(&(tenant, p)).is_none());
    }

    #[test]
    fn a_key_removed_is_read_again() {
        let cache = FieldsCache::default();
        let key = (TenantId::parse("acme").unwrap(), ProjectId::numbered(1));
        cache.put(key.clone(), fields(1));
        cache.remove(&key);
        assert!(cache.get(&key).is_none());
    }

    #[test]
    fn it_holds_a_bounded_number_of_projects() {
        let cache = FieldsCache::default();
        let tenant = TenantId::parse("acme").unwrap();
        for n in 0..=FieldsCache::MAX_PROJECTS as u64 {
            cache.put((tenant.clone(), ProjectId::numbered(n)), fields(0));
        }
        assert!(cache.held.lock().unwrap().len() <= FieldsCache::MAX_PROJECTS);
        let last = ProjectId::numbered(FieldsCache::MAX_PROJECTS as u64);
        assert!(cache.get(&(tenant, last)).is_some());
    }
}
