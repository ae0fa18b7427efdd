//! Bringing the local stack to rest between measures: the stream indexed, the field jobs run.

use anyhow::Result;

use crate::Env;

/// Runs the poller until the stream has nothing left; how many records it delivered.
pub(crate) async fn drain(poller: &mut gridline_local::stream::Poller) -> Result<usize> {
    let mut n = 0;
    loop {
        let got = poller.poll_once().await?;
        if got == 0 {
            return Ok(n);
        }
        n += got;
    }
}

/// Indexes what the stream holds and runs the field jobs that starts, until both are idle.
pub(crate) async fn settle(env: &Env) -> Result<()> {
    let mut poller = env.poller.lock().await;
    let worker = env.stack.job_worker()?;
    loop {
        drain(&mut poller).await?;
        if worker.queue.is_empty() {
            return Ok(());
        }
        worker.drain().await?;
    }
}
