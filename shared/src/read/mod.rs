//! Read models: the product's query algorithms, apart from HTTP and pure where they can be.
//! Each takes the reads it needs as closures (one page of one partition), so it is tested
//! against in-memory partitions; the handlers in `http/` parse, call one and render.
//!
//! - [`grid`]: a project's issues sorted by any column, phase by phase (values, then missing).
//! - [`inbox`]: a participant's issues, newest first, merged over several partitions.

pub mod grid;
pub mod inbox;
