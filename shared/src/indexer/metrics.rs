//! A batch's outcome and counters, and their Embedded Metric Format line.

use crate::telemetry::{Emf, MetricUnit, now_ms};

/// How a batch ended: the sequence number the event source must retry from (`None`: the
/// batch is done), and its counters.
#[derive(Debug)]
pub struct BatchOutcome {
    pub retry_from: Option<String>,
    pub metrics: Metrics,
}

/// Counters for one batch, reported as CloudWatch Embedded Metric Format.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Metrics {
    pub records: usize,
    pub units: usize,
    pub skipped: usize,
    pub writes: usize,
    pub failures: usize,
    /// Units parked: failed for a reason no retry fixes, marked, and passed over.
    pub parked: usize,
    /// Field jobs started (messages sent to the job queue).
    pub jobs_started: usize,
    /// History entries put (also counted in `writes`).
    pub history: usize,
    pub iterator_age_ms: i64,
}

/// A batch's metrics: by function.
const BATCH_METRICS: Emf<'static> = Emf {
    dimensions: &[&["Function"]],
    metrics: &[
        ("Records", MetricUnit::Count),
        ("IndexWrites", MetricUnit::Count),
        ("SkippedUnits", MetricUnit::Count),
        ("Failures", MetricUnit::Count),
        ("Parked", MetricUnit::Count),
        ("FieldJobsStarted", MetricUnit::Count),
        ("HistoryEntries", MetricUnit::Count),
        ("IteratorAge", MetricUnit::Milliseconds),
    ],
};

impl Metrics {
    /// One EMF line: CloudWatch turns it into metrics in namespace `Gridline`.
    pub fn emf(&self) -> String {
        let members = serde_json::json!({
            "Function": "indexer",
            "Records": self.records,
            "IndexWrites": self.writes,
            "SkippedUnits": self.skipped,
            "Failures": self.failures,
            "Parked": self.parked,
            "FieldJobsStarted": self.jobs_started,
            "HistoryEntries": self.history,
            "IteratorAge": self.iterator_age_ms,
        });
        BATCH_METRICS.document(now_ms(), members).to_string()
    }
}

impl Metrics {
    /// Adds a unit's counters to the batch's (the batch-level ones stay).
    pub(super) fn absorb(&mut self, unit: &Metrics) {
        self.skipped += unit.skipped;
        self.writes += unit.writes;
        self.parked += unit.parked;
        self.jobs_started += unit.jobs_started;
        self.history += unit.history;
    }
}
