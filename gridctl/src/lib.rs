//! `gridctl`: the operator's tools. Every command works against the local stack's engine or
//! AWS alike; the logic that compares and fixes the index lives in `gridline::ops::drift`.

pub mod ops;
pub mod replay;
pub mod seed;
pub mod tenant_key;
