//! Sub-issues in the records table: `parent_id` on the issue item, a child edge in the
//! parent's children partition, and the project's tree revision.
//!
//! A parent change is checked against the tree as it is — the new parent exists in the same
//! project, is not the issue or one of its descendants (no cycle), and the deepest issue of the
//! moved subtree stays within [`MAX_DEPTH`] — and then written in one transaction with the
//! issue's update, its edges and the project's tree revision, conditioned on the revision the
//! checks read. Any other parent change in the project moves the revision, so of two changes
//! whose checks read the same tree only one commits; the other reads the tree again. A check
//! that reads and then writes without that condition would let two `PATCH`es close a loop.
//! Deleting an issue or detaching it never makes a cycle or a deeper chain: they condition
//! only on the issue's own parent.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::items::{attr, issue_key, key, sk_of};
use crate::domain::Issue;
use crate::domain::ids::{IssueId, ProjectId, TenantId};
use crate::keys::{self, records::entity};
use crate::store::query::Query;
use crate::store::{Item, Records, StoreError, Tx, build_err};

/// How many times a change of the tree reads it again after another change got in first.
pub(super) const TREE_ATTEMPTS: u32 = 8;

/// How long a change of the tree keeps trying, its pauses included, before it answers busy
/// (409): the last try may still retry its transaction's conflicts for ~2.5 s, which leaves
/// the answer well inside the function's 10 s timeout on a slow engine.
pub(super) const TREE_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// The pause before try `attempt + 1` of a tree change that did not get in (its condition
/// failed, or concurrent transactions kept cancelling it), if that try fits in the budget.
pub(super) fn tree_retry_pause(
    started: std::time::Instant,
    attempt: u32,
) -> Option<std::time::Duration> {
    let pause = crate::store::retry::Backoff::Contended.pause(attempt);
    (attempt < TREE_ATTEMPTS && started.elapsed() + pause < TREE_BUDGET).then_some(pause)
}

/// The deepest a chain may be: a top-level issue is depth 1.
pub const MAX_DEPTH: usize = 8;

/// Why a parent cannot be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeRefusal {
    /// No such issue in the issue's project (or the issue itself): `400`.
    NoParent,
    /// The parent is the issue's own descendant: `409`.
    Cycle,
    /// An issue of the moved subtree would be deeper than [`MAX_DEPTH`]: `409`.
    TooDeep,
    /// Other parent changes in the project kept getting in first: `409`, try again.
    Busy,
}

/// What a parent change's checks read: the tree revision they hold to, and the write items
/// that make the change (the edges and the revision).
pub struct TreeChange {
    pub items: Vec<TransactWriteItem>,
}

impl Records<'_> {
    /// The project's tree revision (0 before its first parent change).
    async fn tree_rev(&self, tenant: &TenantId, project: &ProjectId) -> Result<u64, StoreError> {
        let item = self
            .store
            .get_item(
                &self.store.records,
                key(
                    keys::records::tree_pk(tenant, project),
                    keys::records::TREE_SK,
                ),
            )
            .await?;
        Ok(item
            .and_then(|i| i.get(attr::VERSION)?.as_n().ok()?.parse().ok())
            .unwrap_or(0))
    }

    /// The chain above `parent`, itself first, up to a top-level issue: strongly consistent,
    /// one read per level, at most [`MAX_DEPTH`] (a longer chain is refused as too deep).
    async fn chain(
        &self,
        tenant: &TenantId,
        project: &ProjectId,
        parent: &IssueId,
    ) -> Result<Result<Vec<Issue>, TreeRefusal>, StoreError> {
        let mut chain: Vec<Issue> = Vec::new();
        let mut next = Some(parent.clone());
        while let Some(id) = next {
            if chain.len() == MAX_DEPTH {
                return Ok(Err(TreeRefusal::TooDeep));
            }
            let Some(issue) = self.get_issue_item(tenant, &id).await? else {
                return Ok(Err(TreeRefusal::NoParent));
            };
            if &issue.project_id != project {
                return Ok(Err(TreeRefusal::NoParent));
            }
            next = issue.parent_id.clone();
            chain.push(issue);
        }
        Ok(Ok(chain))
    }

    /// The project of an issue, or `None` when there is no such issue: an eventually
    /// consistent read of only that attribute (billed on the item's size, as any read).
    pub async fn issue_project(
        &self,
        tenant: &TenantId,
        issue: &IssueId,
    ) -> Result<Option<ProjectId>, StoreError> {
        let out = self
            .store
            .client
            .get_item()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue)))
            .projection_expression("project_id")
            .send()
            .await
            .map_err(crate::store::sdk("GetItem"))?;
        Ok(out
            .item
            .and_then(|i| ProjectId::parse(i.get("project_id")?.as_s().ok()?)))
    }

    /// The children of `parent` as its edges say (strongly consistent).
    pub async fn children_of(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
    ) -> Result<Vec<IssueId>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::children_pk(tenant, parent),
        )
        .consistent(true);
        Ok(self
            .store
            .query_all(query)
            .await?
            .iter()
            .filter_map(|i| IssueId::parse(sk_of(i)?))
            .collect())
    }

    /// How many levels hang below `issue` (0 for a leaf), walking its children's edges level
    /// by level; stops once it passes `room` (the answer is then `room + 1`).
    async fn height(
        &self,
        tenant: &TenantId,
        issue: &IssueId,
        room: usize,
    ) -> Result<usize, StoreError> {
        let mut level = vec![issue.clone()];
        let mut height = 0;
        while height <= room {
            use futures::StreamExt;
            // A few reads at a time: a wide subtree is many partitions. (The futures are made
            // first: a stream mapped by a borrowing closure is not provably `Send`.)
            let reads: Vec<_> = level
                .iter()
                .map(|id| self.children_of(tenant, id))
                .collect();
            let mut reads = futures::stream::iter(reads).buffer_unordered(8);
            let mut below = Vec::new();
            while let Some(children) = reads.next().await {
                below.extend(children?);
            }
            drop(reads);
            if below.is_empty() {
                return Ok(height);
            }
            height += 1;
            level = below;
        }
        Ok(height)
    }

    /// Checks moving `issue` (with its subtree; `None` for a new issue) under `parent` in
    /// `project`, and returns the write items that make it, conditioned on the tree as read;
    /// `from` is the issue's current parent. A refusal writes nothing.
    pub async fn plan_parent(
        &self,
        tenant: &TenantId,
        project: &ProjectId,
        (issue, from, parent): (&IssueId, Option<&IssueId>, Option<&IssueId>),
        existing: bool,
    ) -> Result<Result<TreeChange, TreeRefusal>, StoreError> {
        let rev = self.tree_rev(tenant, project).await?;
        let mut items = Vec::new();
        if let Some(parent) = parent {
            if parent == issue {
                return Ok(Err(TreeRefusal::NoParent));
            }
            let chain = match self.chain(tenant, project, parent).await? {
                Ok(chain) => chain,
                Err(refusal) => return Ok(Err(refusal)),
            };
            if chain.iter().any(|a| &a.id == issue) {
                return Ok(Err(TreeRefusal::Cycle));
            }
            // The issue's depth under the parent, and what hangs below it.
            let depth = chain.len() + 1;
            if depth > MAX_DEPTH {
                return Ok(Err(TreeRefusal::TooDeep));
            }
            let room = MAX_DEPTH - depth;
            if existing && self.height(tenant, issue, room).await? > room {
                return Ok(Err(TreeRefusal::TooDeep));
            }
            items.push(self.parent_exists(tenant, parent, project)?);
            items.push(self.put_child_edge(tenant, parent, issue)?);
        }
        if let Some(from) = from {
            items.push(self.delete_child_edge(tenant, from, issue)?);
        }
        items.push(self.next_tree_rev(tenant, project, rev)?);
        Ok(Ok(TreeChange { items }))
    }

    /// The parent still there, in the project (a deleted parent fails the change), marked as
    /// having had children: `GET` of an issue never so marked counts none without reading the
    /// index. Not an issue change (no new version); a mark already there writes nothing the
    /// stream would carry.
    fn parent_exists(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        project: &ProjectId,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, parent)))
            .update_expression("SET #hc = :t")
            .condition_expression("project_id = :project")
            .expression_attribute_names("#hc", attr::HAS_CHILDREN)
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .expression_attribute_values(":project", AttributeValue::S(project.to_string()))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    fn put_child_edge(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut item = key(keys::records::children_pk(tenant, parent), child.as_str());
        item.insert(attr::ENTITY.into(), AttributeValue::S(entity::CHILD.into()));
        let put = Put::builder()
            .table_name(&self.store.records)
            .set_item(Some(item))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    pub(crate) fn delete_child_edge(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
    ) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::children_pk(tenant, parent),
                child.as_str(),
            )))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// The tree revision moved on from `rev`, conditioned on still being `rev`.
    fn next_tree_rev(
        &self,
        tenant: &TenantId,
        project: &ProjectId,
        rev: u64,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(key(
                keys::records::tree_pk(tenant, project),
                keys::records::TREE_SK,
            )))
            .update_expression("SET #v = :next, #e = :tree")
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_names("#e", attr::ENTITY)
            .expression_attribute_values(":next", AttributeValue::N((rev + 1).to_string()))
            .expression_attribute_values(":tree", AttributeValue::S(entity::TREE.into()));
        update = if rev == 0 {
            update.condition_expression("attribute_not_exists(#v)")
        } else {
            update
                .condition_expression("#v = :rev")
                .expression_attribute_values(":rev", AttributeValue::N(rev.to_string()))
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(build_err)?)
            .build())
    }

    /// A child's `parent_id` removed (a system change: a new version, its time), conditioned
    /// on the child being under `parent`.
    fn detach_update(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
        now: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, child)))
            .update_expression("REMOVE #p, #by SET #u = :now ADD #v :one")
            .condition_expression("#p = :parent")
            .expression_attribute_names("#p", attr::PARENT_ID)
            .expression_attribute_names("#by", attr::UPDATED_BY)
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_values(":parent", AttributeValue::S(parent.to_string()))
            .expression_attribute_values(":now", AttributeValue::S(now.into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// A condition on `child`'s parent as it compares with `parent` (`condition` names them
    /// `#p` and `:parent`).
    fn parent_check(
        &self,
        tenant: &TenantId,
        (child, parent): (&IssueId, &IssueId),
        condition: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, child)))
            .condition_expression(condition)
            .expression_attribute_names("#p", attr::PARENT_ID)
            .expression_attribute_values(":parent", AttributeValue::S(parent.to_string()))
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Detaches one child from `parent` (a system change: its `parent_id` removed, a new
    /// version) and removes its edge, conditioned on the child still being under it; `false`
    /// when it is not (then only the edge, if left, goes).
    pub async fn detach_child(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
        now: &str,
    ) -> Result<bool, StoreError> {
        let update = self.detach_update(tenant, parent, child, now)?;
        let items = vec![update, self.delete_child_edge(tenant, parent, child)?];
        if self.store.transact(items).await? == Tx::Committed {
            return Ok(true);
        }
        // The child moved or went meanwhile (its own write removed this edge, or will).
        let edge = key(keys::records::children_pk(tenant, parent), child.as_str());
        self.store.delete_record(edge).await?;
        Ok(false)
    }

    /// Detaches a child whose parent is gone (`gridctl repair`), conditioned on the parent
    /// being gone still and the child being under it; `false` when either changed.
    pub async fn detach_orphan(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
        now: &str,
    ) -> Result<bool, StoreError> {
        let gone = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, parent)))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(build_err)?;
        let update = self.detach_update(tenant, parent, child, now)?;
        let items = vec![
            TransactWriteItem::builder().condition_check(gone).build(),
            update,
            self.delete_child_edge(tenant, parent, child)?,
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// Puts back the edge of a child that says it is under `parent` (`gridctl repair`),
    /// conditioned on the child saying so still.
    pub async fn restore_child_edge(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
    ) -> Result<bool, StoreError> {
        let items = vec![
            self.parent_check(tenant, (child, parent), "#p = :parent")?,
            self.put_child_edge(tenant, parent, child)?,
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// Deletes an edge whose child is gone or elsewhere (`gridctl repair`), conditioned on the
    /// child not being under `parent` (absent, or another parent).
    pub async fn drop_stray_edge(
        &self,
        tenant: &TenantId,
        parent: &IssueId,
        child: &IssueId,
    ) -> Result<bool, StoreError> {
        let items = vec![
            self.parent_check(
                tenant,
                (child, parent),
                "attribute_not_exists(#p) OR #p <> :parent",
            )?,
            self.delete_child_edge(tenant, parent, child)?,
        ];
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// After `deleted` was deleted: each child detached (a system change on the child: its
    /// `parent_id` removed, a new version) and its edge removed, one transaction each,
    /// conditioned on the child still being under it. Idempotent: a replay finds no edges.
    /// Returns how many children it detached.
    #[tracing::instrument(skip_all, fields(op = "detach_children"))]
    pub async fn detach_children_of_deleted(
        &self,
        tenant: &TenantId,
        deleted: &IssueId,
        now: &str,
    ) -> Result<usize, StoreError> {
        let children = self.children_of(tenant, deleted).await?;
        for child in &children {
            self.detach_child(tenant, deleted, child, now).await?;
        }
        Ok(children.len())
    }
}

/// Whether an item is a child edge (for scans).
pub fn child_edge_of(item: &Item) -> Option<(TenantId, IssueId, IssueId)> {
    let pk = super::items::pk_of(item)?;
    let rest = pk.strip_suffix("#C")?;
    let (tenant, parent) = keys::records::parse_issue_pk(rest)?;
    Some((tenant, parent, IssueId::parse(sk_of(item)?)?))
}
