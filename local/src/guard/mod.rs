//! What AWS enforces, enforced on the local stack: every AWS client a function builds goes
//! through a guard that refuses what the function's policy in `template.yaml` does not allow
//! (`iam`), and what DynamoDB's limits do not allow (`limits`), answering as AWS does.

pub mod iam;
pub mod limits;
