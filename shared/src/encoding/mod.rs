//! Order-preserving sort-key encodings: pure functions whose byte order equals value order.

pub mod text;
