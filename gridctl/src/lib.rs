//! `gridctl`: the operator's tools. Every command works against the local stack's engine or
//! AWS alike; the logic that compares and fixes the index lives in `gridline::ops::drift`.

pub mod ops;
pub mod replay;
pub mod seed;
/// `gridctl tenant-key`: the same provisioning `POST /workspaces` runs for a new workspace.
pub use gridline::usage_keys as tenant_key;
