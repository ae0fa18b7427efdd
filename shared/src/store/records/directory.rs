//! The tenant directory: every display name of the tenant (users' and teams'), one small item
//! each in one partition, written in the same transaction as the profile or team it copies.
//!
//! A page's names are then one eventually consistent Query of the whole directory while it is
//! small — up to [`READ_WHOLE_MAX_ENTRIES`] entries: about 80 bytes each with typical ids and
//! names, so ~2.5 RCU for 250 (at most ~20 RCU were every id and name 128 bytes long) —
//! instead of a BatchGetItem that bills every person half a read unit whatever their size. A larger directory
//! is read with a BatchGetItem of just the page's people (its entries, not the profiles), and
//! the instance remembers for a while that the tenant's directory is large, so the Query that
//! found out is not repeated on every page. Freshness is the BatchGetItem's as before (both
//! reads are eventually consistent): a rename shows on the next page, with no fan-out.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};

use super::items::{key, string};
use crate::domain::ParticipantKind;
use crate::domain::ids::{TeamId, TenantId, UserId};
use crate::keys::{self, records::entity};
use crate::store::{Item, Records, StoreError, Tx, build_err, sdk};

/// Most entries a page reads the whole directory for; past it, the page's own entries.
pub const READ_WHOLE_MAX_ENTRIES: i32 = 250;
/// How long an instance remembers that a tenant's directory is past that size.
const LARGE_FOR: Duration = Duration::from_secs(300);
/// The entry's one attribute besides its key and entity: the name.
const NAME: &str = "n";

/// Names by participant, as a page shows them.
pub type Names = HashMap<(ParticipantKind, String), String>;

/// A directory entry: `kind`'s `id` is called `name`.
pub fn entry(tenant: &TenantId, kind: ParticipantKind, id: &str, name: &str) -> Item {
    let mut item = entry_key(tenant, kind, id);
    item.insert("entity".into(), string(entity::DIRECTORY));
    item.insert(NAME.into(), string(name));
    item
}

/// The key of `kind`'s `id`'s directory entry.
pub fn entry_key(tenant: &TenantId, kind: ParticipantKind, id: &str) -> Item {
    key(
        keys::records::directory_pk(tenant),
        &keys::records::directory_sk(kind, id),
    )
}

/// `(kind, id, name)` of a directory entry.
pub fn parse_entry(item: &Item) -> Option<(ParticipantKind, String, String)> {
    let sk = item.get(keys::SK)?.as_s().ok()?;
    let (kind, id) = keys::records::parse_participant_edge(sk)?;
    let name = item.get(NAME)?.as_s().ok()?;
    Some((kind, id.to_string(), name.clone()))
}

/// Tenants whose directory an instance found large, and until when it believes so.
fn large_directories() -> &'static Mutex<HashMap<TenantId, Instant>> {
    static LARGE: OnceLock<Mutex<HashMap<TenantId, Instant>>> = OnceLock::new();
    LARGE.get_or_init(Mutex::default)
}

fn known_large(tenant: &TenantId) -> bool {
    let Ok(mut large) = large_directories().lock() else {
        return false;
    };
    let now = Instant::now();
    large.retain(|_, until| *until > now);
    large.contains_key(tenant)
}

fn note_large(tenant: &TenantId) {
    if let Ok(mut large) = large_directories().lock() {
        large.insert(tenant.clone(), Instant::now() + LARGE_FOR);
    }
}

impl Records<'_> {
    /// The display names of `who` (people without one are left out): the whole directory
    /// while it is small, else the entries of `who`. No call when `who` is empty.
    #[tracing::instrument(skip_all, fields(op = "names"))]
    pub async fn names(
        &self,
        tenant: &TenantId,
        who: &BTreeSet<(ParticipantKind, String)>,
    ) -> Result<Names, StoreError> {
        if who.is_empty() {
            return Ok(Names::new());
        }
        if !known_large(tenant)
            && let Some(all) = self.whole_directory(tenant).await?
        {
            return Ok(all.into_iter().filter(|(k, _)| who.contains(k)).collect());
        }
        note_large(tenant);
        let keys_ = who
            .iter()
            .map(|(kind, id)| entry_key(tenant, *kind, id))
            .collect();
        Ok(self
            .store
            .batch_get_records(keys_)
            .await?
            .iter()
            .filter_map(parse_entry)
            .map(|(kind, id, name)| ((kind, id), name))
            .collect())
    }

    /// Sets `kind`'s `id`'s entry to `name` (`None`: removes it), in one transaction on the
    /// conditions that the entry still holds `seen` (`None`: there is none) and that the
    /// profile or team still has that name: a repair never undoes a rename made since it
    /// looked, whatever order its scan read the two in. `false` when either had changed.
    pub async fn fix_directory_entry(
        &self,
        tenant: &TenantId,
        (kind, id): (ParticipantKind, &str),
        seen: Option<&str>,
        name: Option<&str>,
    ) -> Result<bool, StoreError> {
        let (condition, names, values) = match seen {
            Some(old) => (
                "#n = :seen",
                Some(HashMap::from([("#n".to_string(), NAME.to_string())])),
                Some(HashMap::from([(":seen".to_string(), string(old))])),
            ),
            None => ("attribute_not_exists(PK)", None, None),
        };
        let write = match name {
            Some(name) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.store.records)
                    .set_item(Some(entry(tenant, kind, id, name)))
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .build()
                    .map_err(build_err)?,
            ),
            None => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(&self.store.records)
                    .set_key(Some(entry_key(tenant, kind, id)))
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .build()
                    .map_err(build_err)?,
            ),
        };
        let mut items = vec![write.build()];
        if let Some(check) = self.source_has(tenant, (kind, id), name)? {
            items.push(TransactWriteItem::builder().condition_check(check).build());
        }
        Ok(self.store.transact(items).await? == Tx::Committed)
    }

    /// The check that `kind`'s `id`'s profile or team is called `name` (`None`: has no name);
    /// none for an id no profile or team can have (its entry is removed unchecked).
    fn source_has(
        &self,
        tenant: &TenantId,
        (kind, id): (ParticipantKind, &str),
        name: Option<&str>,
    ) -> Result<Option<ConditionCheck>, StoreError> {
        let (key_, attribute) = match kind {
            ParticipantKind::User => match UserId::parse(id) {
                Some(user) => (
                    key(
                        keys::records::user_pk(tenant, &user),
                        keys::records::PROFILE_SK,
                    ),
                    "display_name",
                ),
                None => return Ok(None),
            },
            ParticipantKind::Team => match TeamId::parse(id) {
                Some(team) => (
                    key(
                        keys::records::team_pk(tenant, &team),
                        keys::records::TEAM_SK,
                    ),
                    "name",
                ),
                None => return Ok(None),
            },
        };
        let check = ConditionCheck::builder()
            .table_name(&self.store.records)
            .set_key(Some(key_))
            .expression_attribute_names("#a", attribute);
        let check = match name {
            Some(name) => check
                .condition_expression("#a = :want")
                .expression_attribute_values(":want", string(name)),
            None => check.condition_expression("attribute_not_exists(#a)"),
        };
        check.build().map(Some).map_err(build_err)
    }

    /// Every name of the tenant's directory, or `None` when it holds more than
    /// [`READ_WHOLE_MAX_ENTRIES`] entries.
    async fn whole_directory(&self, tenant: &TenantId) -> Result<Option<Names>, StoreError> {
        let out = self
            .store
            .client
            .query()
            .table_name(&self.store.records)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(keys::records::directory_pk(tenant)),
            )
            // One more than the most: a directory of exactly the most is read whole (DynamoDB
            // answers a `LastEvaluatedKey` whenever it stops at the limit).
            .limit(READ_WHOLE_MAX_ENTRIES + 1)
            .send()
            .await
            .map_err(sdk("Query"))?;
        if out.last_evaluated_key.is_some() {
            return Ok(None);
        }
        Ok(Some(
            out.items()
                .iter()
                .filter_map(parse_entry)
                .map(|(kind, id, name)| ((kind, id), name))
                .collect(),
        ))
    }
}
