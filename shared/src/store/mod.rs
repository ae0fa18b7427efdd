//! DynamoDB access: the adapter ([`Store`]) and a narrow handle per table.
//!
//! - this file: the adapter, its error, paging positions, GetItem / BatchGetItem / transactions.
//! - [`records`]: the records table ([`Records`]): projects, people, issues and their items.
//! - [`index`]: the index table ([`IndexTable`]): entries, watermarks, parked units, scans.
//! - `query`: the one Query builder and its page (`Store::query_page`).
//! - `retry`: the one jittered backoff every retry loop sleeps through.
//! - `size`: DynamoDB's item-size arithmetic.

pub mod index;
pub(crate) mod query;
pub mod records;
pub(crate) mod retry;
mod size;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, WriteRequest};

use crate::cursor::Position;
use crate::keys;
use query::Query;
use retry::Backoff;

pub use records::idempotency::{Answer, Claimed, KeyClaim};
pub use records::issues::{CreateIssueError, ParticipantOutcome, PatchOutcome};
#[cfg(test)]
pub(crate) use records::items::issue_from_image;
pub use records::items::{ProjectItem, field_def_from, issue_from, issue_item_size};
pub use records::patch::patch_update;
pub use records::people::{AddMemberError, Profile, Team};
pub use records::projects::CreateFieldError;
pub use records::{directory, idempotency};
pub use size::{number_size, stored_size};

pub type Item = HashMap<String, AttributeValue>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DynamoDB {op} failed")]
    Dynamo {
        op: &'static str,
        #[source]
        source: Box<aws_sdk_dynamodb::Error>,
    },
    #[error("item could not be mapped")]
    Mapping(#[from] serde_dynamo::Error),
    #[error("stored item is malformed: {0}")]
    Corrupt(String),
    #[error("request could not be built: {0}")]
    Build(String),
    #[error("gave up after {0} attempts under write contention")]
    Contention(u32),
}

impl From<crate::model::codec::Malformed> for StoreError {
    fn from(m: crate::model::codec::Malformed) -> Self {
        StoreError::Corrupt(m.0)
    }
}

/// Wraps an SDK error with the operation it came from.
pub(crate) fn sdk<E, R>(op: &'static str) -> impl FnOnce(SdkError<E, R>) -> StoreError
where
    aws_sdk_dynamodb::Error: From<SdkError<E, R>>,
{
    move |e| StoreError::Dynamo {
        op,
        source: Box::new(e.into()),
    }
}

/// `Ok(true)` when a conditional write succeeded, `Ok(false)` when its condition failed;
/// any other failure is an error.
pub(crate) fn condition_held<T, E, R>(
    op: &'static str,
    result: Result<T, SdkError<E, R>>,
) -> Result<bool, StoreError>
where
    aws_sdk_dynamodb::Error: From<SdkError<E, R>>,
{
    held(op, result.map_err(aws_sdk_dynamodb::Error::from))
}

fn held<T>(
    op: &'static str,
    result: Result<T, aws_sdk_dynamodb::Error>,
) -> Result<bool, StoreError> {
    match result {
        Ok(_) => Ok(true),
        Err(aws_sdk_dynamodb::Error::ConditionalCheckFailedException(_)) => Ok(false),
        Err(e) => Err(StoreError::Dynamo {
            op,
            source: Box::new(e),
        }),
    }
}

/// [`condition_held`] of a conditional write sent again, with backoff, while DynamoDB refuses
/// it with `TransactionConflictException` (a transaction holds its item; the SDK does not
/// retry that), at most 8 times.
pub(crate) async fn condition_held_through_conflicts<T, E, R, Fut>(
    op: &'static str,
    mut send: impl FnMut() -> Fut,
) -> Result<bool, StoreError>
where
    Fut: std::future::Future<Output = Result<T, SdkError<E, R>>>,
    aws_sdk_dynamodb::Error: From<SdkError<E, R>>,
{
    const ATTEMPTS: u32 = 8;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match send().await.map_err(aws_sdk_dynamodb::Error::from) {
            Err(aws_sdk_dynamodb::Error::TransactionConflictException(_)) if attempt < ATTEMPTS => {
                retry::Backoff::Contended.sleep(attempt).await
            }
            Err(aws_sdk_dynamodb::Error::TransactionConflictException(_)) => {
                return Err(StoreError::Contention(ATTEMPTS));
            }
            result => return held(op, result),
        }
    }
}

/// BatchWriteItem takes at most 25 requests.
const WRITE_CHUNK: usize = 25;
/// Rounds of retrying unprocessed items (throttling) before giving up on a batch.
const MAX_ROUNDS: u32 = 8;

/// How a transaction ended, when it did not fail outright.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Tx {
    Committed,
    /// Cancelled because one of its conditions failed; nothing was written.
    ConditionFailed,
}

/// Wraps a request builder's error (a missing required member: a bug, not bad input).
pub(crate) fn build_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Build(e.to_string())
}

/// A page of items and where the next one starts.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<Position>,
}

/// `LastEvaluatedKey` to a cursor position. Every key attribute of ours is a string.
pub(crate) fn position_of(key: Option<&Item>) -> Result<Option<Position>, StoreError> {
    let Some(key) = key else { return Ok(None) };
    key.iter()
        .map(|(k, v)| match v {
            AttributeValue::S(s) => Ok((k.clone(), s.clone())),
            _ => Err(StoreError::Corrupt(format!("non-string key attribute {k}"))),
        })
        .collect::<Result<Position, _>>()
        .map(Some)
}

/// A cursor position back to an `ExclusiveStartKey`.
pub(crate) fn start_key(position: Option<&Position>) -> Option<Item> {
    // An empty position (the grid's cursor at the start of a phase) is no start key: DynamoDB
    // refuses an empty `ExclusiveStartKey`.
    position.filter(|p| !p.is_empty()).map(|p| {
        p.iter()
            .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
            .collect()
    })
}

/// The DynamoDB adapter: one client and both tables' names. Cheap to clone: the client is
/// shared. Each table's operations are on its own narrow handle, [`Store::records`] and
/// [`Store::index`], so a call says which table it touches; what reads both (whole-table
/// scans) and the shared request plumbing stay here.
#[derive(Clone)]
pub struct Store {
    pub(crate) client: Client,
    pub(crate) records: String,
    pub(crate) index: String,
}

/// The records table: projects and their fields, issues, people and teams.
#[derive(Clone, Copy)]
pub struct Records<'a> {
    pub(crate) store: &'a Store,
}

/// The index table, which only the indexer (and the operator's repair) writes: entries,
/// watermarks, parked units, field jobs' checkpoints.
#[derive(Clone, Copy)]
pub struct IndexTable<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// The records table's operations.
    pub fn records(&self) -> Records<'_> {
        Records { store: self }
    }

    /// The index table's operations.
    pub fn index(&self) -> IndexTable<'_> {
        IndexTable { store: self }
    }

    pub fn new(
        client: Client,
        records_table: impl Into<String>,
        index_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            records: records_table.into(),
            index: index_table.into(),
        }
    }

    /// Opens the client's connection (DNS, TCP, TLS) during Lambda init, so the first request
    /// does not pay for it: one Query of an empty partition, which every function may make.
    /// A failure is only logged; requests will simply open the connection themselves.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn warm_up(&self) {
        let warm_up = Query::partition(&self.records, keys::WARM_UP_PK.into()).limit(Some(1));
        if let Err(e) = self.query_page(warm_up).await {
            tracing::warn!(error = %crate::telemetry::chain(&e), "warm-up query failed");
        }
    }

    pub fn index_table(&self) -> &str {
        &self.index
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn records_table(&self) -> &str {
        &self.records
    }

    /// Puts a new item into the records table; its key must not exist yet.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn put_new(&self, item: Item) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.records)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await
            .map_err(sdk("PutItem"))?;
        Ok(())
    }

    /// Puts `new` into the records table (its key must not exist yet) and `beside` (replacing
    /// any item with its key) in one transaction: an item and its companion, never one alone.
    pub(crate) async fn put_new_with(&self, new: Item, beside: Item) -> Result<Tx, StoreError> {
        let items = vec![
            TransactWriteItem::builder()
                .put(self.put_in_tx(new, Some("attribute_not_exists(PK)"))?)
                .build(),
            TransactWriteItem::builder()
                .put(self.put_in_tx(beside, None)?)
                .build(),
        ];
        self.transact(items).await
    }

    /// Deletes a records-table item, if there is one.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn delete_record(&self, key: Item) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.records)
            .set_key(Some(key))
            .send()
            .await
            .map_err(sdk("DeleteItem"))?;
        Ok(())
    }

    /// Puts an item, replacing any with its key.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn put(&self, table: &str, item: Item) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(sdk("PutItem"))?;
        Ok(())
    }

    /// Sends write requests to `table`, 25 a BatchWriteItem; returns how many there were.
    pub(crate) async fn batch_write_all(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
    ) -> Result<usize, StoreError> {
        for chunk in requests.chunks(WRITE_CHUNK) {
            self.batch_write(table, chunk.to_vec()).await?;
        }
        Ok(requests.len())
    }

    /// Deletes `table`'s items by key, 25 a BatchWriteItem; how many.
    pub(crate) async fn delete_all(
        &self,
        table: &str,
        keys: Vec<Item>,
    ) -> Result<usize, StoreError> {
        let requests = keys
            .into_iter()
            .map(|k| {
                let delete = aws_sdk_dynamodb::types::DeleteRequest::builder()
                    .set_key(Some(k))
                    .build()
                    .map_err(build_err)?;
                Ok(WriteRequest::builder().delete_request(delete).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.batch_write_all(table, requests).await
    }

    /// One BatchWriteItem of at most 25 requests on `table`, its unprocessed items
    /// (throttling) retried with jittered exponential backoff.
    pub(crate) async fn batch_write(
        &self,
        table: &str,
        mut pending: Vec<WriteRequest>,
    ) -> Result<(), StoreError> {
        for round in 0..MAX_ROUNDS {
            if round > 0 {
                Backoff::Throttled.sleep(round).await;
            }
            let out = self
                .client
                .batch_write_item()
                .request_items(table, pending)
                .send()
                .await
                .map_err(sdk("BatchWriteItem"))?;
            pending = out
                .unprocessed_items
                .and_then(|mut m| m.remove(table))
                .unwrap_or_default();
            if pending.is_empty() {
                return Ok(());
            }
        }
        Err(StoreError::Contention(MAX_ROUNDS))
    }

    /// A Put of a records-table item for a transaction, with its condition if any.
    pub(crate) fn put_in_tx(
        &self,
        item: Item,
        condition: Option<&str>,
    ) -> Result<aws_sdk_dynamodb::types::Put, StoreError> {
        aws_sdk_dynamodb::types::Put::builder()
            .table_name(&self.records)
            .set_item(Some(item))
            .set_condition_expression(condition.map(str::to_string))
            .build()
            .map_err(build_err)
    }

    /// A strongly consistent GetItem.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn get_item(
        &self,
        table: &str,
        key: Item,
    ) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk("GetItem"))?;
        Ok(out.item)
    }

    /// Every item of `keys` that exists in the records table: BatchGetItems of 100 keys, with
    /// unprocessed keys (throttling) retried under jittered backoff.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn batch_get_records(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        self.batch_get(&self.records, keys, false).await
    }

    /// Every item of `keys` that exists in `table` (see [`Store::batch_get_records`]), read
    /// strongly consistently when `consistent`.
    pub(crate) async fn batch_get(
        &self,
        table: &str,
        keys: Vec<Item>,
        consistent: bool,
    ) -> Result<Vec<Item>, StoreError> {
        const ROUNDS: u32 = 8;
        let mut found = Vec::new();
        for chunk in keys.chunks(100) {
            let mut pending = Some(
                aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(chunk.to_vec()))
                    .consistent_read(consistent)
                    .build()
                    .map_err(build_err)?,
            );
            let mut round = 0;
            while let Some(request) = pending.take() {
                if round == ROUNDS {
                    return Err(StoreError::Contention(ROUNDS));
                }
                if round > 0 {
                    Backoff::Throttled.sleep(round).await;
                }
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(table, request)
                    .send()
                    .await
                    .map_err(sdk("BatchGetItem"))?;
                found.extend(
                    out.responses
                        .and_then(|mut r| r.remove(table))
                        .unwrap_or_default(),
                );
                pending = out
                    .unprocessed_keys
                    .and_then(|mut m| m.remove(table))
                    .filter(|k| !k.keys().is_empty());
                round += 1;
            }
        }
        Ok(found)
    }

    /// Runs a transaction. Cancellation by a failed condition is an outcome for the caller to
    /// interpret; cancellation by concurrent transactions alone is retried a few times with
    /// jittered backoff (the SDK does not retry it); any other failure is an error.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<Tx, StoreError> {
        // Memberships share one count item per user, so a script adding a user to many teams
        // at once conflicts with itself: enough attempts, spread exponentially (up to ~2.5 s
        // in all), for a burst of such writes to get through.
        const ATTEMPTS: u32 = 8;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .send()
                .await;
            let e = match result {
                Ok(_) => return Ok(Tx::Committed),
                Err(e) => e,
            };
            let codes = match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => c
                    .cancellation_reasons()
                    .iter()
                    .map(|r| r.code().unwrap_or("None").to_string())
                    .collect::<Vec<_>>(),
                _ => return Err(sdk("TransactWriteItems")(e)),
            };
            let condition_failed = codes.iter().any(|c| c == "ConditionalCheckFailed");
            let only_expected = codes.iter().all(|c| {
                ["None", "ConditionalCheckFailed", "TransactionConflict"].contains(&c.as_str())
            });
            if !only_expected {
                return Err(sdk("TransactWriteItems")(e));
            }
            if condition_failed {
                return Ok(Tx::ConditionFailed);
            }
            if attempt >= ATTEMPTS {
                return Err(StoreError::Contention(ATTEMPTS));
            }
            Backoff::Contended.sleep(attempt).await;
        }
    }
}

/// Builds the DynamoDB client once per process. With `endpoint` (the local engine, DynamoDB
/// Local) and no credentials in the environment, static placeholder credentials are used, as
/// local engines ignore them.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn connect(endpoint: Option<&str>) -> Client {
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config(endpoint).await)
        .interceptor(crate::telemetry::CallCounter)
        .build();
    Client::from_conf(config)
}

/// The SDK configuration every client of the process shares (DynamoDB, and DynamoDB Streams
/// on the local stack).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn sdk_config(endpoint: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
        if std::env::var_os("AWS_REGION").is_none()
            && std::env::var_os("AWS_DEFAULT_REGION").is_none()
        {
            loader = loader.region(aws_config::Region::new("us-east-1"));
        }
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local",
                "local",
                None,
                None,
                "gridline-local",
            ));
        }
    }
    loader.load().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_position_is_no_start_key() {
        assert_eq!(start_key(Some(&Position::new())), None);
        assert_eq!(start_key(None), None);
        let p = Position::from([("PK".to_string(), "a".to_string())]);
        assert_eq!(
            start_key(Some(&p)),
            Some(Item::from([(
                "PK".to_string(),
                AttributeValue::S("a".into())
            )]))
        );
    }
}
