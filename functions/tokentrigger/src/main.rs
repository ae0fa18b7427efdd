//! The user pool's pre token generation trigger: sets `custom:tenant_id` in the ID token from
//! the workspace the person chose (`gridline::token_trigger`).
// The SDK call inside the handler nests deeply enough for the layout of the runtime's future
// to pass the default limit.
#![recursion_limit = "256"]

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gridline::token_trigger::run_lambda().await
}
