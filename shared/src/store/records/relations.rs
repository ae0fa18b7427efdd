//! Relations between issues in the records table: an edge item in each issue's partition
//! (`R#{other}`, with the kind that issue sees), both written in one transaction with the two
//! issues' version bumps and relation counts — the seed's edge and edge set kept in step.
//!
//! The count on each issue item is what keeps the bound under concurrency: a transaction
//! that adds an edge is conditioned on it, so two relates racing for an issue's last place
//! cannot both commit. The two edges are conditioned on what was read (absent, or the kind
//! being replaced), so a concurrent change of the same pair makes one transaction fail and
//! read again.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::items::{attr, issue_key, key, sk_of};
use crate::domain::ids::{IssueId, TenantId, UserId};
use crate::domain::relation::{MAX_RELATIONS, RelationKind};
use crate::keys::{self, records::entity};
use crate::model::history::relation_change;
use crate::store::query::Query;
use crate::store::{Item, Records, StoreError, Tx, build_err};

/// How many times a relate or unrelate reads again after a concurrent change of the pair.
const ATTEMPTS: u32 = 8;

/// One of an issue's relations: the other issue and the kind this issue sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub other: IssueId,
    pub kind: RelationKind,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RelateOutcome {
    /// Both sides written (new, or another kind replaced).
    Saved,
    /// The pair already had this relation: nothing written.
    Unchanged,
    NotFound,
    OtherNotFound,
    /// One of the two issues has its 100 relations and this pair is not one of them.
    Full,
    /// One of the two issues' items is at DynamoDB's size limit: its count cannot grow.
    TooLarge,
}

/// An issue's relation edges, strongly consistent, from the items of its partition.
pub fn relations_of_items(items: &[Item]) -> Vec<Relation> {
    items
        .iter()
        .filter_map(|item| {
            let other = keys::records::parse_relation_sk(sk_of(item)?)?;
            let kind = RelationKind::parse(item.get(attr::KIND)?.as_s().ok()?)?;
            Some(Relation { other, kind })
        })
        .collect()
}

fn edge_key(tenant: &TenantId, issue: &IssueId, other: &IssueId) -> Item {
    key(
        keys::records::issue_pk(tenant, issue),
        &keys::records::relation_sk(other),
    )
}

fn edge_item(tenant: &TenantId, issue: &IssueId, other: &IssueId, kind: RelationKind) -> Item {
    let mut item = edge_key(tenant, issue, other);
    item.insert(
        attr::ENTITY.into(),
        AttributeValue::S(entity::RELATION.into()),
    );
    item.insert(attr::KIND.into(), AttributeValue::S(kind.as_str().into()));
    item
}

/// What a relate or unrelate reads first: both issues and both edges.
struct Pair {
    a: Option<Item>,
    b: Option<Item>,
    a_edge: Option<RelationKind>,
    b_edge: Option<RelationKind>,
}

fn count_of(issue: &Item) -> u32 {
    issue
        .get(attr::RELATION_COUNT)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl Records<'_> {
    /// An issue's relations (strongly consistent; an issue without any reads one empty page).
    pub async fn relations_of(
        &self,
        tenant: &TenantId,
        issue_id: &IssueId,
    ) -> Result<Vec<Relation>, StoreError> {
        let query = Query::partition(
            &self.store.records,
            keys::records::issue_pk(tenant, issue_id),
        )
        .sk_begins_with(keys::records::RELATION_SK_PREFIX)
        .consistent(true);
        Ok(relations_of_items(&self.store.query_all(query).await?))
    }

    /// Both issues and both edges of a pair: one strongly consistent BatchGetItem.
    async fn pair(&self, tenant: &TenantId, a: &IssueId, b: &IssueId) -> Result<Pair, StoreError> {
        let keys = vec![
            issue_key(tenant, a),
            issue_key(tenant, b),
            edge_key(tenant, a, b),
            edge_key(tenant, b, a),
        ];
        let (a_pk, b_pk) = (
            keys::records::issue_pk(tenant, a),
            keys::records::issue_pk(tenant, b),
        );
        let mut pair = Pair {
            a: None,
            b: None,
            a_edge: None,
            b_edge: None,
        };
        for item in self
            .store
            .batch_get(&self.store.records, keys, true)
            .await?
        {
            let pk = super::items::pk_of(&item).unwrap_or_default().to_string();
            let edge = relations_of_items(std::slice::from_ref(&item))
                .first()
                .map(|r| r.kind);
            match (pk == a_pk, edge) {
                (true, Some(kind)) => pair.a_edge = Some(kind),
                (false, Some(kind)) if pk == b_pk => pair.b_edge = Some(kind),
                (true, None) => pair.a = Some(item),
                (false, None) if pk == b_pk => pair.b = Some(item),
                _ => {}
            }
        }
        Ok(pair)
    }

    /// `PUT /issues/{a}/relations/{kind}/{b}`: the edge on `a` and its inverse on `b`, with
    /// both issues' version bumps, in one transaction. Reads again (bounded) when a concurrent
    /// change of either issue's relations made its conditions fail.
    #[tracing::instrument(skip_all, fields(op = "relate"))]
    pub async fn relate(
        &self,
        tenant: &TenantId,
        (a, kind, b): (&IssueId, RelationKind, &IssueId),
        (now, actor): (&str, &UserId),
    ) -> Result<RelateOutcome, StoreError> {
        for _ in 0..ATTEMPTS {
            let pair = self.pair(tenant, a, b).await?;
            let (Some(a_item), Some(b_item)) = (&pair.a, &pair.b) else {
                return Ok(if pair.a.is_none() {
                    RelateOutcome::NotFound
                } else {
                    RelateOutcome::OtherNotFound
                });
            };
            if pair.a_edge == Some(kind) && pair.b_edge == Some(kind.inverse()) {
                return Ok(RelateOutcome::Unchanged);
            }
            let full = |item: &Item, edge: Option<RelationKind>| {
                edge.is_none() && count_of(item) >= MAX_RELATIONS
            };
            if full(a_item, pair.a_edge) || full(b_item, pair.b_edge) {
                return Ok(RelateOutcome::Full);
            }
            // A side whose edge is already this one (the other side lacked its inverse) does
            // not change: no new version there.
            let mut items = Vec::with_capacity(4);
            if pair.a_edge != Some(kind) {
                let mark = relation_change(b, pair.a_edge, Some(kind));
                let count = pair.a_edge.is_none().then_some(1);
                items.push(self.bump(tenant, a, count, (mark, Some(actor)))?);
                items.push(self.put_edge(tenant, (a, b), kind, pair.a_edge)?);
            }
            if pair.b_edge != Some(kind.inverse()) {
                let mark = relation_change(a, pair.b_edge, Some(kind.inverse()));
                let count = pair.b_edge.is_none().then_some(1);
                items.push(self.bump(tenant, b, count, (mark, Some(actor)))?);
                items.push(self.put_edge(tenant, (b, a), kind.inverse(), pair.b_edge)?);
            }
            match self.store.transact(with_now(items, now)).await {
                Ok(Tx::Committed) => return Ok(RelateOutcome::Saved),
                Ok(Tx::ConditionFailed) => {}
                Err(e) if super::items::item_too_large(&e) => return Ok(RelateOutcome::TooLarge),
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention(ATTEMPTS))
    }

    /// `DELETE /issues/{a}/relations/{kind}/{b}`: both edges and both version bumps in one
    /// transaction; `false` when `a` has no such relation. The far side's edge or issue may be
    /// gone already (the other issue deleted, its clean-up under way): then only `a` changes.
    #[tracing::instrument(skip_all, fields(op = "unrelate"))]
    pub async fn unrelate(
        &self,
        tenant: &TenantId,
        (a, kind, b): (&IssueId, RelationKind, &IssueId),
        (now, actor): (&str, &UserId),
    ) -> Result<bool, StoreError> {
        for _ in 0..ATTEMPTS {
            let pair = self.pair(tenant, a, b).await?;
            if pair.a.is_none() || pair.a_edge != Some(kind) {
                return Ok(false);
            }
            let mark = relation_change(b, Some(kind), None);
            let mut items = vec![
                self.delete_edge(tenant, (a, b), Some(kind))?,
                self.bump(tenant, a, Some(-1), (mark, Some(actor)))?,
            ];
            if pair.b.is_some() && pair.b_edge.is_some() {
                let mark = relation_change(a, pair.b_edge, None);
                items.push(self.delete_edge(tenant, (b, a), pair.b_edge)?);
                items.push(self.bump(tenant, b, Some(-1), (mark, Some(actor)))?);
            }
            if self.store.transact(with_now(items, now)).await? == Tx::Committed {
                return Ok(true);
            }
        }
        Err(StoreError::Contention(ATTEMPTS))
    }

    /// After `deleted` was deleted: each of its relations removed from the other issue (a
    /// system change there: a new version, the count down by one) and from its partition.
    /// Idempotent: an edge removed is not found again, and one whose far side is gone already
    /// only loses its own item. Returns how many relations it removed.
    #[tracing::instrument(skip_all, fields(op = "drop_relations"))]
    pub async fn drop_relations_of_deleted(
        &self,
        tenant: &TenantId,
        deleted: &IssueId,
        now: &str,
    ) -> Result<usize, StoreError> {
        let relations = self.relations_of(tenant, deleted).await?;
        for r in &relations {
            // A system change: no actor.
            let mark = relation_change(deleted, Some(r.kind.inverse()), None);
            let items = vec![
                self.delete_edge(tenant, (&r.other, deleted), None)?,
                self.bump(tenant, &r.other, Some(-1), (mark, None))?,
                self.delete_edge(tenant, (deleted, &r.other), None)?,
            ];
            if self.store.transact(with_now(items, now)).await? == Tx::ConditionFailed {
                // The other issue, or its edge, is gone: its count is someone else's to mend.
                self.store
                    .delete_record(edge_key(tenant, deleted, &r.other))
                    .await?;
            }
        }
        Ok(relations.len())
    }

    /// An issue's version, for a write conditioned on nothing having changed it since (every
    /// relation change moves it); `None` when the issue is gone.
    pub async fn issue_version(
        &self,
        tenant: &TenantId,
        issue: &IssueId,
    ) -> Result<Option<u64>, StoreError> {
        let item = self
            .store
            .get_item(&self.store.records, issue_key(tenant, issue))
            .await?;
        Ok(item.and_then(|i| i.get(attr::VERSION)?.as_n().ok()?.parse().ok()))
    }

    /// Sets an issue's relation count to `count`, conditioned on its version still being
    /// `version` (a relate or unrelate since makes this skip: it kept the count right).
    pub async fn set_relation_count(
        &self,
        tenant: &TenantId,
        issue: &IssueId,
        (count, version): (usize, u64),
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue)))
            .update_expression("SET #rc = :n")
            .condition_expression("#v = :v")
            .expression_attribute_names("#rc", attr::RELATION_COUNT)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_values(":n", AttributeValue::N(count.to_string()))
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .send()
            .await;
        crate::store::condition_held("UpdateItem", result)
    }

    /// Removes an edge whose far side lacks its inverse (`gridctl repair`): the edge's delete
    /// and its issue's change, in one transaction conditioned on the edge's kind and on the
    /// far side lacking the inverse still (a relate made since the scan is left alone).
    pub async fn drop_one_sided(
        &self,
        tenant: &TenantId,
        (issue, kind, other): (&IssueId, RelationKind, &IssueId),
        now: &str,
    ) -> Result<bool, StoreError> {
        let lacking = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(edge_key(tenant, other, issue)))
            .condition_expression("attribute_not_exists(PK) OR #k <> :inverse")
            .expression_attribute_names("#k", attr::KIND)
            .expression_attribute_values(
                ":inverse",
                AttributeValue::S(kind.inverse().as_str().into()),
            )
            .build()
            .map_err(build_err)?;
        let items = vec![
            self.delete_edge(tenant, (issue, other), Some(kind))?,
            self.bump(
                tenant,
                issue,
                Some(-1),
                (relation_change(other, Some(kind), None), None),
            )?,
            TransactWriteItem::builder()
                .condition_check(lacking)
                .build(),
        ];
        Ok(self.store.transact(with_now(items, now)).await? == Tx::Committed)
    }

    /// The issue's version bump (an issue change), with its relation count moved by `count`,
    /// the change's mark ([`relation_change`]) and who made it (`None`: the system);
    /// conditioned on the issue existing and, when the count grows, on its room.
    fn bump(
        &self,
        tenant: &TenantId,
        issue: &IssueId,
        count: Option<i32>,
        (mark, actor): (String, Option<&UserId>),
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.store.records)
            .set_key(Some(issue_key(tenant, issue)))
            .expression_attribute_names("#u", attr::UPDATED_AT)
            .expression_attribute_names("#v", attr::VERSION)
            .expression_attribute_names("#lc", attr::RELATION_CHANGE)
            .expression_attribute_names("#by", attr::UPDATED_BY)
            .expression_attribute_values(":lc", AttributeValue::S(mark))
            .expression_attribute_values(":one", AttributeValue::N("1".into()));
        let by = match actor {
            Some(actor) => {
                update = update
                    .expression_attribute_values(":by", AttributeValue::S(actor.as_str().into()));
                "SET #by = :by, #lc = :lc,"
            }
            None => "REMOVE #by SET #lc = :lc,",
        };
        let (expression, condition) = match count {
            None => (
                "SET #u = :now ADD #v :one",
                "attribute_exists(PK)".to_string(),
            ),
            Some(n) => {
                update = update
                    .expression_attribute_names("#rc", attr::RELATION_COUNT)
                    .expression_attribute_values(":n", AttributeValue::N(n.to_string()));
                let condition = if n > 0 {
                    update = update.expression_attribute_values(
                        ":max",
                        AttributeValue::N(MAX_RELATIONS.to_string()),
                    );
                    "attribute_exists(PK) AND (attribute_not_exists(#rc) OR #rc < :max)"
                } else {
                    "attribute_exists(PK)"
                };
                ("SET #u = :now ADD #v :one, #rc :n", condition.to_string())
            }
        };
        let expression = expression.replacen("SET", by, 1);
        let update = update
            .update_expression(expression)
            .condition_expression(condition)
            .build()
            .map_err(build_err)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The edge `from → to` of `kind`, conditioned on the edge as read (`was`).
    fn put_edge(
        &self,
        tenant: &TenantId,
        (from, to): (&IssueId, &IssueId),
        kind: RelationKind,
        was: Option<RelationKind>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut put = Put::builder()
            .table_name(&self.store.records)
            .set_item(Some(edge_item(tenant, from, to, kind)));
        put = match was {
            None => put.condition_expression("attribute_not_exists(PK)"),
            Some(old) => put
                .condition_expression("#k = :was")
                .expression_attribute_names("#k", attr::KIND)
                .expression_attribute_values(":was", AttributeValue::S(old.as_str().into())),
        };
        Ok(TransactWriteItem::builder()
            .put(put.build().map_err(build_err)?)
            .build())
    }

    /// The edge `from → to`'s delete, conditioned on its kind when `was` names one (else on
    /// its existence).
    fn delete_edge(
        &self,
        tenant: &TenantId,
        (from, to): (&IssueId, &IssueId),
        was: Option<RelationKind>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut delete = Delete::builder()
            .table_name(&self.store.records)
            .set_key(Some(edge_key(tenant, from, to)));
        delete = match was {
            None => delete.condition_expression("attribute_exists(PK)"),
            Some(kind) => delete
                .condition_expression("#k = :was")
                .expression_attribute_names("#k", attr::KIND)
                .expression_attribute_values(":was", AttributeValue::S(kind.as_str().into())),
        };
        Ok(TransactWriteItem::builder()
            .delete(delete.build().map_err(build_err)?)
            .build())
    }
}

/// `items` with `:now` given to each update (the transaction's one time).
fn with_now(items: Vec<TransactWriteItem>, now: &str) -> Vec<TransactWriteItem> {
    items
        .into_iter()
        .map(|item| match item.update {
            Some(mut update) => {
                update
                    .expression_attribute_values
                    .get_or_insert_with(Default::default)
                    .insert(":now".into(), AttributeValue::S(now.into()));
                TransactWriteItem::builder().update(update).build()
            }
            None => item,
        })
        .collect()
}
