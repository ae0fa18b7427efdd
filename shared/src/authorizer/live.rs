//! The authorizer as its process runs it: the pool's keys are fetched again when a token names
//! a key they lack (the pool's keys changed since the cold start), at most once per
//! [`REFETCH_AFTER`], so tokens with made-up key ids cannot make it hammer the pool.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerRequest, ApiGatewayCustomAuthorizerResponse,
};
use lambda_http::lambda_runtime::Diagnostic;
use tokio::sync::RwLock;

use super::{Authorizer, Jwks, JwksError, Rejection, jwks_url, respond};

/// The least time between two fetches of the pool's keys.
pub const REFETCH_AFTER: Duration = Duration::from_secs(300);

struct State {
    authorizer: Arc<Authorizer>,
    fetched: Instant,
}

/// An authorizer whose keys can be renewed.
pub struct Live {
    state: RwLock<State>,
}

impl Live {
    /// `authorizer`, whose keys were fetched at `fetched`.
    pub fn new(authorizer: Authorizer, fetched: Instant) -> Self {
        Self {
            state: RwLock::new(State {
                authorizer: Arc::new(authorizer),
                fetched,
            }),
        }
    }

    /// [`super::handle`], fetching the keys again with `fetch` (given their URL) when the
    /// token names a key they lack and the last fetch is [`REFETCH_AFTER`] old.
    pub async fn handle<F, Fut>(
        &self,
        event: &ApiGatewayCustomAuthorizerRequest,
        now: i64,
        fetch: F,
    ) -> Result<ApiGatewayCustomAuthorizerResponse, Diagnostic>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<Jwks, JwksError>>,
    {
        let authorizer = self.state.read().await.authorizer.clone();
        let mut answer = authorizer.authorize(event, now);
        if matches!(answer, Err(Rejection::UnknownKey))
            && let Some(renewed) = self.refetch(fetch).await
        {
            answer = renewed.authorize(event, now);
        }
        respond(answer)
    }

    async fn refetch<F, Fut>(&self, fetch: F) -> Option<Arc<Authorizer>>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<Jwks, JwksError>>,
    {
        let mut state = self.state.write().await;
        if state.fetched.elapsed() < REFETCH_AFTER {
            return None;
        }
        state.fetched = Instant::now();
        match fetch(jwks_url(&state.authorizer.issuer)).await {
            Ok(keys) => {
                tracing::info!("a token named a key the pool's key set lacked: fetched it again");
                let renewed = Arc::new(Authorizer {
                    issuer: state.authorizer.issuer.clone(),
                    client_ids: state.authorizer.client_ids.clone(),
                    no_tenant_key: state.authorizer.no_tenant_key.clone(),
                    keys,
                });
                state.authorizer = renewed.clone();
                Some(renewed)
            }
            Err(error) => {
                tracing::warn!(%error, "fetching the pool's keys again failed");
                None
            }
        }
    }
}
