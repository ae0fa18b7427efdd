//! Configuration from the environment, read once at start-up.

use crate::auth::AuthMode;
use crate::cursor::CursorKey;

/// Local default signing secret for tokens; the README documents it. Never used in AWS, where
/// API Gateway's Cognito authorizer verifies tokens.
pub const LOCAL_JWT_SECRET: &str = "gridline-local-development-secret";
/// Local default cursor key; in AWS the key comes from the deployment's secret parameter.
pub const LOCAL_CURSOR_KEY: &str = "gridline-local-cursor-signing-key";

#[derive(Clone)]
pub struct Config {
    pub records_table: String,
    pub index_table: String,
    pub cursor_key: CursorKey,
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

impl Config {
    /// Reads `RECORDS_TABLE`, `INDEX_TABLE`, `CURSOR_SIGNING_KEY` and `DYNAMODB_ENDPOINT`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let cursor = var("CURSOR_SIGNING_KEY").ok_or(ConfigError::Missing("CURSOR_SIGNING_KEY"))?;
        if cursor.len() < 16 {
            return Err(ConfigError::Invalid(
                "CURSOR_SIGNING_KEY",
                "must be at least 16 bytes",
            ));
        }
        Ok(Self {
            records_table: var("RECORDS_TABLE").ok_or(ConfigError::Missing("RECORDS_TABLE"))?,
            index_table: var("INDEX_TABLE").ok_or(ConfigError::Missing("INDEX_TABLE"))?,
            cursor_key: CursorKey::new(cursor.as_bytes()),
            dynamodb_endpoint: var("DYNAMODB_ENDPOINT"),
        })
    }

    /// How the HTTP functions learn the caller behind API Gateway: from the authorizer's claims.
    pub fn lambda_auth() -> AuthMode {
        AuthMode::ApiGateway
    }
}
