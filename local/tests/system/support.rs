//! Helpers the test modules share, beyond `gridline_local::testing::TestApi`.

use gridline::domain::ids::TenantId;
use gridline_local::testing::TestApi;
use http::StatusCode;

/// The tenant the tests' callers belong to, typed for the store and key builders.
pub fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

/// A project named `name` with 16 number fields and one issue holding a value in each: enough
/// fields that the issue's watermark keeps them in buckets. Returns the project's id and the
/// issue as created.
pub async fn wide_issue(api: &TestApi, name: &str) -> (String, serde_json::Value) {
    let p = api.project(name).await;
    let mut values = serde_json::Map::new();
    for i in 0..16 {
        let f = api
            .field(
                &p,
                serde_json::json!({"name": format!("n{i}"), "type": "number"}),
            )
            .await;
        values.insert(f, serde_json::json!(i * 1000 + 7));
    }
    let issue = api
        .issue(&p, serde_json::json!({"title": name, "fields": values}))
        .await;
    (p, issue)
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
