//! Helpers the test modules share, beyond `gridline_local::testing::TestApi`.

use gridline::domain::ids::TenantId;
use gridline_local::testing::TestApi;
use http::StatusCode;

/// The tenant the tests' callers belong to, typed for the store and key builders.
pub fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

/// Deletes `path` as Alice twice: the first delete is 204, the second finds nothing (404).
pub async fn delete_twice(api: &TestApi, path: &str) {
    let r = api.delete(path).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = api.delete(path).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
