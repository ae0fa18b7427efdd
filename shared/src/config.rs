//! Configuration from the environment, read once at start-up.

use crate::cursor::CursorKey;

/// Local default signing secret for tokens; the README documents it. Never used in AWS, where
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
}

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

    /// `CURSOR_SIGNING_KEY`, which only the HTTP functions need.
    pub fn cursor_key_from_env() -> Result<CursorKey, ConfigError> {
        let key = var("CURSOR_SIGNING_KEY").ok_or(ConfigError::Missing("CURSOR_SIGNING_KEY"))?;
        if key.len() < 16 {
            return Err(ConfigError::Invalid(
                "CURSOR_SIGNING_KEY",
                "must be at least 16 bytes",
            ));
        }
        Ok(CursorKey::new(key.as_bytes()))
    }

    /// The store every Lambda uses, built once per process.
    pub async fn store(&self) -> crate::store::Store {
        let client = crate::store::connect(self.dynamodb_endpoint.as_deref()).await;
        crate::store::Store::new(client, &self.records_table, &self.index_table)
    }
}
