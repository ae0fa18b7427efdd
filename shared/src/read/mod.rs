//! Read models: the product's queries, apart from HTTP. Each paging algorithm takes the reads
//! it needs as closures (one page of one partition), so it is tested against in-memory
//! partitions; each model's `page` runs the whole query against the store (its partitions,
//! the algorithm, the issues behind the entries, the names bound), so the handlers in `http/`
//! parse, call one and render.
//!
//! - [`grid`]: a project's issues sorted by any column, phase by phase (values, then missing).
//! - [`inbox`]: a participant's issues, newest first, merged over several partitions.
//! - [`children`]: an issue's sub-issues by number, over its children partitions.
//! - [`names`]: the bound on the people one page shows, which both lists end a page at.

pub mod children;
pub mod grid;
pub mod inbox;
pub mod names;

/// How long a grid function instance serves a project's field definitions and shard layout
/// from memory (`http::fields_cache`) before reading them again. A reshard waits longer than
/// this between moving reads off a layout and retiring it (`ops::reshard::READS_MOVED`).
pub const HELD_PROJECT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs a future the in-memory models answer at once (no executor needed).
#[cfg(test)]
fn ready<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the in-memory partitions answer at once"),
    }
}
