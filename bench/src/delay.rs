//! A DynamoDB client whose every request waits before it is sent, as if the engine were a
//! region's round trip away rather than on loopback: the indexer's throughput is bound by its
//! round trips, which the local engine answers in well under a millisecond.
//!
//! Interceptors cannot wait (their hooks are synchronous), so the delay wraps the client's
//! HTTP client, as the local IAM guard does (`gridline_local::guard`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// The delay before each request, changeable while the client is in use (0: none), so a
/// benchmark can set up at full speed and measure with the delay on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Delay(Arc<AtomicU64>);

impl Delay {
    pub(crate) fn set(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.0.store(micros, Ordering::Relaxed);
    }

    fn get(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }

    /// `client` (its endpoint, interceptors, and HTTP client, the guard included) with every
    /// request held back by this delay before it is sent.
    pub(crate) fn client(
        &self,
        client: &aws_sdk_dynamodb::Client,
    ) -> anyhow::Result<aws_sdk_dynamodb::Client> {
        let inner = client
            .config()
            .http_client()
            .ok_or_else(|| anyhow::anyhow!("the client has no HTTP client to delay"))?;
        let config = client
            .config()
            .to_builder()
            .http_client(Delayed {
                inner,
                delay: self.clone(),
            })
            .build();
        Ok(aws_sdk_dynamodb::Client::from_conf(config))
    }
}

#[derive(Debug, Clone)]
struct Delayed {
    inner: SharedHttpClient,
    delay: Delay,
}

impl HttpClient for Delayed {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(DelayedConnector {
            inner: self.inner.http_connector(settings, components),
            delay: self.delay.clone(),
        })
    }
}

#[derive(Debug)]
struct DelayedConnector {
    inner: SharedHttpConnector,
    delay: Delay,
}

impl HttpConnector for DelayedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let inner = self.inner.clone();
        let delay = self.delay.get();
        HttpConnectorFuture::new(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            inner.call(request).await
        })
    }
}
