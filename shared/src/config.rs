//! Configuration from the environment, read once at start-up.

use crate::cursor::CursorKey;

/// Local default signing secret for tokens; docs/deploying.md documents it. Never used in AWS, where
/// API Gateway's Cognito authorizer verifies tokens.
pub const LOCAL_JWT_SECRET: &str = "gridline-local-development-secret";
/// Local default cursor key; in AWS the key comes from the deployment's secret parameter.
pub const LOCAL_CURSOR_KEY: &str = "gridline-local-cursor-signing-key";

#[derive(Clone, Debug)]
pub struct Config {
    pub records_table: String,
    pub index_table: String,
    /// Another DynamoDB endpoint (the local stack's engine, DynamoDB Local), if any.
    pub dynamodb_endpoint: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {0} {1}")]
    Invalid(&'static str, &'static str),
    #[error("the cursor signing key could not be read from Secrets Manager")]
    Secret(#[source] Box<aws_sdk_secretsmanager::Error>),
    #[error("the cursor signing key secret {0}")]
    SecretInvalid(&'static str),
}

/// The secret (ARN or name) holding the cursor signing key, in AWS.
pub const CURSOR_KEY_SECRET_VAR: &str = "CURSOR_SIGNING_KEY_SECRET_ARN";
/// The cursor signing key itself, on the local stack and in tests.
pub const CURSOR_KEY_VAR: &str = "CURSOR_SIGNING_KEY";
/// How many distinct issues of a stream batch the indexer indexes at once.
pub const INDEXER_CONCURRENCY_VAR: &str = "INDEXER_CONCURRENCY";
/// Shortest key accepted: HMAC-SHA256 wants at least 16 bytes of secret.
const MIN_KEY_BYTES: usize = 16;

fn var(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    /// Reads `RECORDS_TABLE`, `INDEX_TABLE` and `DYNAMODB_ENDPOINT`.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            records_table: var("RECORDS_TABLE").ok_or(ConfigError::Missing("RECORDS_TABLE"))?,
            index_table: var("INDEX_TABLE").ok_or(ConfigError::Missing("INDEX_TABLE"))?,
            dynamodb_endpoint: var("DYNAMODB_ENDPOINT"),
        })
    }

    /// `INDEXER_CONCURRENCY` (1–256), or the indexer's default when unset.
    pub fn indexer_concurrency() -> Result<usize, ConfigError> {
        parse_concurrency(var(INDEXER_CONCURRENCY_VAR).as_deref())
    }

    /// `CURSOR_SIGNING_KEY`, which only the HTTP functions need (the local stack and tests).
    pub fn cursor_key_from_env() -> Result<CursorKey, ConfigError> {
        let key = var(CURSOR_KEY_VAR).ok_or(ConfigError::Missing(CURSOR_KEY_VAR))?;
        if key.len() < MIN_KEY_BYTES {
            return Err(ConfigError::Invalid(
                CURSOR_KEY_VAR,
                "must be at least 16 bytes",
            ));
        }
        Ok(CursorKey::new(key.as_bytes()))
    }

    /// The cursor key as a Lambda gets it: from the secret named by
    /// `CURSOR_SIGNING_KEY_SECRET_ARN` (read once, at init), or from `CURSOR_SIGNING_KEY` when
    /// that is set instead (`sam local invoke` with an env file, the local stack).
    pub async fn cursor_key(&self) -> Result<CursorKey, ConfigError> {
        let Some(secret_id) = var(CURSOR_KEY_SECRET_VAR) else {
            return Self::cursor_key_from_env();
        };
        // Not the DynamoDB endpoint: the SDK honours AWS_ENDPOINT_URL_SECRETS_MANAGER itself.
        let sdk = crate::store::sdk_config(None).await;
        let client = aws_sdk_secretsmanager::Client::new(&sdk);
        cursor_key_from_secret(&client, &secret_id).await
    }

    /// The store every Lambda uses, built once per process.
    pub async fn store(&self) -> crate::store::Store {
        let client = crate::store::connect(self.dynamodb_endpoint.as_deref()).await;
        crate::store::Store::new(client, &self.records_table, &self.index_table)
    }
}

/// An indexer concurrency setting: unset is the default; anything but 1–256 is refused at
/// start-up rather than clamped, so a typo in the template shows at once.
pub fn parse_concurrency(value: Option<&str>) -> Result<usize, ConfigError> {
    match value {
        None => Ok(crate::indexer::DEFAULT_CONCURRENCY),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n @ 1..=256) => Ok(n),
            _ => Err(ConfigError::Invalid(
                INDEXER_CONCURRENCY_VAR,
                "must be a whole number from 1 to 256",
            )),
        },
    }
}

/// Reads the key from Secrets Manager. The secret is the key itself (the template generates
/// 64 random characters); its value never reaches a log.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn cursor_key_from_secret(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<CursorKey, ConfigError> {
    let out = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| ConfigError::Secret(Box::new(e.into())))?;
    let key = out
        .secret_string()
        .ok_or(ConfigError::SecretInvalid("has no string value"))?;
    if key.len() < MIN_KEY_BYTES {
        return Err(ConfigError::SecretInvalid("must be at least 16 bytes"));
    }
    Ok(CursorKey::new(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexer_concurrency_is_the_default_unset_and_refused_out_of_range() {
        let default = crate::indexer::DEFAULT_CONCURRENCY;
        assert_eq!(parse_concurrency(None).unwrap(), default);
        assert_eq!(parse_concurrency(Some("4")).unwrap(), 4);
        for bad in ["0", "257", "-1", "many", ""] {
            assert!(parse_concurrency(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
