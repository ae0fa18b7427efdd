//! DynamoDB access: the records table (projects, fields, issues) through one adapter.

mod issues;
mod items;
mod projects;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::cursor::Position;

pub use issues::{CreateIssueError, PatchOutcome};
pub use projects::CreateFieldError;

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

/// Why a transaction was cancelled, per item, when it was (`None` for other failures).
pub(crate) fn cancellation_codes<R>(
    e: &SdkError<TransactWriteItemsError, R>,
) -> Option<Vec<String>> {
    match e.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(c) => Some(
            c.cancellation_reasons()
                .iter()
                .map(|r| r.code().unwrap_or("None").to_string())
                .collect(),
        ),
        _ => None,
    }
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
    position.map(|p| {
        p.iter()
            .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
            .collect()
    })
}

/// The DynamoDB adapter. Cheap to clone: the client is shared.
#[derive(Clone)]
pub struct Store {
    client: Client,
    records: String,
}

impl Store {
    pub fn new(client: Client, records_table: impl Into<String>) -> Self {
        Self {
            client,
            records: records_table.into(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn records_table(&self) -> &str {
        &self.records
    }
}

/// Builds the DynamoDB client once per process. With `endpoint` (the local engine, DynamoDB
/// Local) and no credentials in the environment, static placeholder credentials are used, as
/// local engines ignore them.
pub async fn connect(endpoint: Option<&str>) -> Client {
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
    Client::new(&loader.load().await)
}
