//! Why indexing a unit failed, and whether a retry can fix it.

use crate::indexer::field_job::QueueError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("stream record {0} is malformed: {1}")]
    Malformed(String, String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(QueueError),
    /// A deleted issue's clean-up did its invocation's share and has more to do: the record
    /// is retried (its done part is not redone), and after the stream's retries `gridctl
    /// repair` finishes it.
    #[error("clean-up of deleted issue {0} continues on retry")]
    Unfinished(String),
}

impl IndexError {
    /// Whether retrying cannot fix it: a DynamoDB limit or validation error (an item over
    /// 400 KB, a key too long), an item or record that cannot be read. Throttling, timeouts,
    /// 5xx, network errors and denied permissions (fixed by a deploy) are transient.
    pub fn is_permanent(&self) -> bool {
        use aws_sdk_dynamodb::error::ProvideErrorMetadata;
        match self {
            Self::Malformed(..) => true,
            Self::Store(StoreError::Dynamo { source, .. }) => {
                matches!(
                    source.as_ref(),
                    aws_sdk_dynamodb::Error::ItemCollectionSizeLimitExceededException(_)
                ) || matches!(
                    source.code(),
                    Some("ValidationException" | "SerializationException")
                )
            }
            Self::Store(StoreError::Mapping(_) | StoreError::Corrupt(_) | StoreError::Build(_)) => {
                true
            }
            Self::Store(StoreError::Contention(_)) | Self::Queue(_) | Self::Unfinished(_) => false,
        }
    }
}
