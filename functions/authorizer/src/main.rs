//! The API's Lambda authorizer: verifies the caller's Cognito ID token and names the tenant's
//! usage-plan key, so API Gateway throttles each tenant on its own.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gridline::authorizer::run_lambda().await
}
