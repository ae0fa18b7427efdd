//! The field-job queue on this machine, and the event source mapping that feeds the job
//! function from it: SQS standard-queue semantics as the job relies on them. A send is checked
//! against the sender's policy (`sqs:SendMessage` on the template's queue), a receive and a
//! delete against the job function's; a message is delivered at least once, stays on the
//! queue until the function reports it done, and after the template's `maxReceiveCount`
//! failed deliveries moves to the dead-letter list. `make dev` keeps the queue in a file beside
//! the data, so a restart resumes unfinished jobs.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use aws_lambda_events::event::sqs::SqsEvent;
use gridline::indexer::field_job::{FieldJob, FieldJobs, JobQueue, QueueError, Sending};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::guard::iam::{REGION, queue_arn};
use crate::guard::{InFlight, Policy};
use crate::stream::{KillSwitch, SETTLE_LIMIT};

/// The template's logical ids.
pub const FIELD_JOB_FUNCTION: &str = "FieldJobFunction";
pub const FIELD_JOB_QUEUE: &str = "FieldJobQueue";

/// The file beside the data file that holds the queue (`make dev`).
pub fn queue_path(data: &std::path::Path) -> PathBuf {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push(".field-jobs.json");
    data.with_file_name(name)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Message {
    id: String,
    body: String,
    receives: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    next_id: u64,
    messages: VecDeque<Message>,
    dead: Vec<Message>,
}

/// The queue itself, shared by its senders (the indexer, the job function) and its worker.
#[derive(Clone, Default)]
pub struct LocalQueue {
    state: Arc<Mutex<State>>,
    file: Option<PathBuf>,
}

impl LocalQueue {
    /// A queue kept in `file` (read now if it exists, written after every change).
    pub fn in_file(file: PathBuf) -> Result<Self> {
        let state = match std::fs::read_to_string(&file) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("reading the field-job queue {}", file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(e).context("reading the field-job queue"),
        };
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            file: Some(file),
        })
    }

    /// A sender with `policy` (the sending function's role).
    pub fn sender(&self, policy: Arc<Policy>) -> Sender {
        Sender {
            queue: self.clone(),
            policy,
        }
    }

    /// Messages waiting (or being handled).
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Messages moved to the dead-letter list.
    pub fn dead_letters(&self) -> Vec<String> {
        self.lock().dead.iter().map(|m| m.body.clone()).collect()
    }

    /// Moves every dead letter back to the queue with its receive count cleared, as an SQS
    /// dead-letter redrive does: how many moved. The job resumes from its checkpoint.
    pub fn redrive(&self) -> usize {
        let mut state = self.lock();
        let dead = std::mem::take(&mut state.dead);
        let moved = dead.len();
        state
            .messages
            .extend(dead.into_iter().map(|m| Message { receives: 0, ..m }));
        self.save(&state);
        moved
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, body: String) {
        let mut state = self.lock();
        state.next_id += 1;
        let id = format!("local-{:08}", state.next_id);
        state.messages.push_back(Message {
            id,
            body,
            receives: 0,
        });
        self.save(&state);
    }

    fn save(&self, state: &State) {
        let Some(file) = &self.file else { return };
        let tmp = file.with_extension("tmp");
        let written = serde_json::to_vec(state)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            tracing::warn!(error = %e, file = %file.display(), "field-job queue not saved");
        }
    }
}

/// One function's way to send to the queue, checked against its policy.
pub struct Sender {
    queue: LocalQueue,
    policy: Arc<Policy>,
}

impl JobQueue for Sender {
    fn send<'a>(&'a self, job: &'a FieldJob) -> Sending<'a> {
        Box::pin(async move {
            self.policy
                .check("sqs:SendMessage", &queue_arn(FIELD_JOB_QUEUE))
                .map_err(|d| QueueError(format!("AccessDeniedException: {}", d.message())))?;
            let body = serde_json::to_string(job).map_err(|e| QueueError(e.to_string()))?;
            self.queue.push(body);
            Ok(())
        })
    }
}

/// The event source mapping: takes one message at a time (the template's `BatchSize: 1`) to
/// the job function's handler, as the SQS event Lambda would send.
pub struct Worker {
    pub queue: LocalQueue,
    pub jobs: FieldJobs,
    /// The job function's policy (receive and delete are checked against it).
    pub policy: Arc<Policy>,
    /// The function's Timeout: the run's deadline, and where an invocation is cut.
    pub timeout: Duration,
    /// The queue's `maxReceiveCount`.
    pub max_receives: u32,
    /// Thrown when a fault injector stops the invocation at its timeout (see [`KillSwitch`]):
    /// the message is then not done, and is delivered again.
    pub kill_switch: Option<KillSwitch>,
    /// The function's requests in flight: after a killed invocation, delivery waits for them
    /// to land, as Lambda's next invocation comes after the stopped one's writes.
    pub in_flight: Option<InFlight>,
    /// Deliveries the function did not report done (failed, timed out or stopped): each
    /// message is delivered again or moved to the dead-letter list.
    pub undone: std::sync::atomic::AtomicU64,
}

impl Worker {
    /// Delivers every message on the queue once: how many invocations it made.
    pub async fn run_once(&self) -> Result<usize> {
        let arn = queue_arn(FIELD_JOB_QUEUE);
        let pending: Vec<Message> = self.queue.lock().messages.iter().cloned().collect();
        let mut invocations = 0;
        for message in pending {
            for action in ["sqs:ReceiveMessage", "sqs:DeleteMessage"] {
                self.policy
                    .check(action, &arn)
                    .map_err(|d| anyhow::anyhow!("AccessDeniedException: {}", d.message()))?;
            }
            let receives = {
                let mut state = self.queue.lock();
                let Some(m) = state.messages.iter_mut().find(|m| m.id == message.id) else {
                    continue;
                };
                m.receives += 1;
                m.receives
            };
            invocations += 1;
            let done = self.invoke(&message, receives, &arn).await;
            if !done {
                self.undone
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let mut state = self.queue.lock();
            let at = state.messages.iter().position(|m| m.id == message.id);
            match (done, at) {
                (true, Some(at)) => {
                    state.messages.remove(at);
                }
                (false, Some(at)) if receives >= self.max_receives => {
                    if let Some(m) = state.messages.remove(at) {
                        tracing::error!(message_id = %m.id, "field job message moved to the dead-letter queue");
                        state.dead.push(m);
                    }
                }
                _ => {}
            }
            self.queue.save(&state);
        }
        Ok(invocations)
    }

    /// Delivers until the queue is empty (or holds only messages that keep failing, until they
    /// reach the dead-letter list): how many invocations it made.
    pub async fn drain(&self) -> Result<usize> {
        let mut total = 0;
        loop {
            let n = self.run_once().await?;
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// `make dev`: delivers what arrives, every `every`.
    pub async fn run(self, every: Duration) {
        loop {
            if let Err(e) = self.run_once().await {
                tracing::error!(error = %e, "field-job delivery failed");
            }
            tokio::time::sleep(every).await;
        }
    }

    /// One invocation with one message: whether the function reported it done.
    async fn invoke(&self, message: &Message, receives: u32, arn: &str) -> bool {
        let event = json!({"Records": [{
            "messageId": message.id,
            "receiptHandle": format!("{}#{receives}", message.id),
            "body": message.body,
            "attributes": {"ApproximateReceiveCount": receives.to_string()},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": REGION,
        }]});
        // As Lambda: the handler gets the event through its JSON.
        let event: SqsEvent = match serde_json::from_value(event) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "SQS event not decodable");
                return false;
            }
        };
        if let Some(switch) = &self.kill_switch {
            switch.reset();
        }
        let deadline = Instant::now() + self.timeout;
        let done = match tokio::time::timeout(
            self.timeout,
            gridline::runtime::handle_sqs(&self.jobs, &event, deadline),
        )
        .await
        {
            Ok(response) => response.batch_item_failures.is_empty(),
            Err(_) => {
                tracing::error!(message_id = %message.id, "field job invocation timed out");
                false
            }
        };
        if self.kill_switch.as_ref().is_some_and(KillSwitch::is_killed) {
            tracing::warn!(message_id = %message.id, "field job invocation stopped at its timeout");
            if let Some(in_flight) = &self.in_flight {
                in_flight.settled(SETTLE_LIMIT).await;
            }
            return false;
        }
        done
    }
}

/// The template's `maxReceiveCount` of the job queue.
pub fn max_receive_count() -> Result<u32> {
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(crate::template::TEMPLATE).context("template.yaml is not YAML")?;
    doc["Resources"][FIELD_JOB_QUEUE]["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        .as_u64()
        .map(|n| n as u32)
        .context("FieldJobQueue has no RedrivePolicy.maxReceiveCount")
}
