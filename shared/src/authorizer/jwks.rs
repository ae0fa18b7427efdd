//! The user pool's signing keys (its JSON Web Key Set), fetched at cold start ([`super::Live`]
//! fetches them again for a key they lack).

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

/// A key set is a few keys; anything larger is not the pool's.
const MAX_JWKS_BYTES: usize = 64 * 1024;
/// The fetch's share of the function's start-up (Lambda gives its init 10 seconds).
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the key set could not be had: the authorizer cannot start without it.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("fetching the user pool's keys from {url}")]
    Fetch {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the user pool's keys answered HTTP {status}")]
    Status { status: u16 },
    #[error("the user pool's keys did not arrive within {FETCH_TIMEOUT:?}")]
    Timeout,
    #[error("the user pool's key set is not a JSON Web Key Set")]
    Parse(#[from] serde_json::Error),
    #[error("the user pool's key set holds no RSA signing key")]
    NoKeys,
}

#[derive(Deserialize)]
struct JwkSet {
    keys: Vec<Jwk>,
}

#[derive(Deserialize)]
struct Jwk {
    kid: String,
    kty: String,
    #[serde(default)]
    n: String,
    #[serde(default)]
    e: String,
    #[serde(default, rename = "use")]
    usage: Option<String>,
}

struct RsaKey {
    kid: String,
    n: Vec<u8>,
    e: Vec<u8>,
}

/// The RSA signing keys of a key set, by `kid`.
pub struct Jwks {
    keys: Vec<RsaKey>,
}

impl Jwks {
    /// The RSA signing keys of a JSON Web Key Set; other keys are left out.
    pub fn parse(json: &[u8]) -> Result<Self, JwksError> {
        let set: JwkSet = serde_json::from_slice(json)?;
        let keys: Vec<RsaKey> = set
            .keys
            .into_iter()
            .filter(|k| k.kty == "RSA" && k.usage.as_deref().is_none_or(|u| u == "sig"))
            .filter_map(|k| {
                Some(RsaKey {
                    n: B64.decode(k.n.trim_end_matches('=')).ok()?,
                    e: B64.decode(k.e.trim_end_matches('=')).ok()?,
                    kid: k.kid,
                })
            })
            .collect();
        if keys.is_empty() {
            return Err(JwksError::NoKeys);
        }
        Ok(Self { keys })
    }

    /// Whether the key `kid` signed `message` with RS256 (RSASSA-PKCS1-v1_5, SHA-256, a
    /// 2048–8192-bit key).
    pub fn verify(&self, kid: &str, message: &[u8], signature: &[u8]) -> Result<(), KeyError> {
        let key = self
            .keys
            .iter()
            .find(|k| k.kid == kid)
            .ok_or(KeyError::Unknown)?;
        RsaPublicKeyComponents {
            n: &key.n,
            e: &key.e,
        }
        .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
        .map_err(|_| KeyError::BadSignature)
    }
}

/// Why a signature did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// No key of the set has the token's `kid`.
    Unknown,
    BadSignature,
}

/// GETs the key set at `url` (the pool's `/.well-known/jwks.json`) over HTTPS, with the
/// system's roots, within 5 seconds.
pub async fn fetch(url: &str) -> Result<Jwks, JwksError> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_now(url))
        .await
        .map_err(|_| JwksError::Timeout)?
}

async fn fetch_now(url: &str) -> Result<Jwks, JwksError> {
    let fetch_error = |source: Box<dyn std::error::Error + Send + Sync>| JwksError::Fetch {
        url: url.to_string(),
        source,
    };
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| fetch_error(e.into()))?
        .https_only()
        .enable_http1()
        .build();
    let client: Client<_, Empty<axum::body::Bytes>> =
        Client::builder(TokioExecutor::new()).build(https);
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| fetch_error(e.into()))?;
    let response = client.get(uri).await.map_err(|e| fetch_error(e.into()))?;
    if !response.status().is_success() {
        return Err(JwksError::Status {
            status: response.status().as_u16(),
        });
    }
    let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map_err(fetch_error)?
        .to_bytes();
    Jwks::parse(&body)
}
