//! DynamoDB's limits where the embedded engine does not enforce them.

use serde_json::Value;

/// A request AWS would refuse, with the error it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error's type, e.g. `ValidationException` (sent as `__type`).
    pub code: &'static str,
    /// AWS's message text.
    pub message: String,
}

/// Checks a DynamoDB request (`operation` is the `X-Amz-Target` suffix, e.g. `PutItem`; `body`
/// the JSON request) against the limits AWS enforces.
pub fn check_request(_operation: &str, _body: &Value) -> Result<(), Refusal> {
    Ok(())
}

/// Response-side limits (a Query or Scan page stops at 1 MB): a new response body when the
/// engine's answer must change, `None` when it stands.
pub fn limit_response(_operation: &str, _request: &Value, _response: &Value) -> Option<Value> {
    None
}
