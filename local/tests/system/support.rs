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

/// A log writer the test reads back.
#[derive(Clone, Default)]
pub struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Buffer {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
