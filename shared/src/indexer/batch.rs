//! A stream batch planned into units: one per issue touched (its net change), one per field
//! change, one per record that cannot be understood; and the segments the units run in
//! (a field change or a malformed record is a barrier between runs of issues).

use std::collections::HashMap;

use crate::domain::ids::{FieldId, IssueId, ProjectId, TeamId, TenantId};
use crate::keys;
use crate::keys::index::ParkedUnit;
use crate::model::event::StreamRecord;
use crate::model::history::{self, HistoryEntry};
use crate::model::record::IssueRecord;
use crate::model::stream::{self, Change, Op};
use crate::store::records::items::attr::SORTABLE;

use super::IndexError;

/// One piece of work in a batch, at the sequence number of its first record; an issue's
/// state is borrowed from its record's image.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit<'a> {
    /// An issue's net change: its final state, or `None` if it was deleted; and the history
    /// entries of the versions its records made, in order.
    Issue {
        tenant: TenantId,
        issue_id: IssueId,
        last: Option<Box<IssueRecord<'a>>>,
        history: Vec<HistoryEntry>,
    },
    /// A field whose column must be built (one not created sortable); the first such of a
    /// project in a batch stands for all of them (its job covers every field not yet sortable).
    FieldAdded {
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
    },
    FieldRemoved {
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
    },
    /// A column turned hot: a job fills its entries' summaries. Named by the project's
    /// `fields_rev` after the mark (as a field id of that number), one job per mark.
    HotAdded {
        tenant: TenantId,
        project_id: ProjectId,
        job: FieldId,
    },
    /// A select field's options were edited so that its values move, are renamed or are
    /// removed: a job rewrites the issues and rebuilds the column. Named by the project's
    /// `fields_rev` at the edit (as a field id of that number), one job per edit.
    FieldEdited {
        tenant: TenantId,
        project_id: ProjectId,
        job: FieldId,
    },
    /// A project was deleted: a purge job deletes its issues and everything else under it.
    ProjectDeleted {
        tenant: TenantId,
        project_id: ProjectId,
    },
    /// A team was deleted: it leaves every issue it participated in and every member's list.
    TeamDeleted { tenant: TenantId, team_id: TeamId },
    /// A record that cannot be understood: it is parked, and the batch goes on.
    Malformed {
        /// The tenant its keys name, or `-` when they name none.
        tenant: TenantId,
        /// The issue its keys name, or `#record#{sequence number}`.
        subject: String,
        reason: String,
    },
}

/// A batch, planned: units at the sequence number of their first record (a record that could
/// not be understood is a [`Unit::Malformed`] at its own).
#[derive(Debug)]
pub struct Plan<'a> {
    pub units: Vec<(&'a str, Unit<'a>)>,
}

/// Groups a batch's records into units, keeping per-issue order: each issue's unit sits at its
/// first record and holds its last record's outcome. A record that cannot be understood
/// becomes a unit of its own, to be parked: retrying it can never succeed, and the records
/// after it must not wait for it.
pub fn plan<'a>(records: &'a [StreamRecord<'a>]) -> Plan<'a> {
    let mut units: Vec<(&'a str, Unit<'a>)> = Vec::new();
    // foldhash, as the images: SipHash's resistance buys nothing for ids of one's own table.
    let mut issue_slot: HashMap<IssueId, usize, foldhash::fast::RandomState> = HashMap::default();
    // Projects whose re-index for an added field is already planned in this batch: where.
    let mut reindexed: HashMap<(TenantId, ProjectId), usize> = HashMap::new();
    for record in records {
        let seq = record.sequence_number();
        match plan_one(record) {
            Ok(None) => {}
            Ok(Some(unit)) => {
                // A re-index reads the project's fields when it runs, after every record of
                // the batch was written: one re-index covers every field the batch adds to the
                // project (a burst of 100 new fields is one pass over its issues, not 100).
                // It is named after the newest: a job whose field is built already built every
                // field before it, where the oldest may be a replayed record whose job
                // finished long ago, and the job would then be stale with the others unbuilt.
                // (It keeps the first's place: a failure retries from there.)
                if let Unit::FieldAdded {
                    tenant, project_id, ..
                } = &unit
                {
                    match reindexed.entry((tenant.clone(), project_id.clone())) {
                        std::collections::hash_map::Entry::Occupied(at) => {
                            units[*at.get()].1 = unit;
                            continue;
                        }
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(units.len());
                        }
                    }
                }
                if let Unit::Issue { issue_id, .. } = &unit {
                    if let Some(&i) = issue_slot.get(issue_id) {
                        let earlier = match &mut units[i].1 {
                            Unit::Issue { history, .. } => std::mem::take(history),
                            _ => Vec::new(),
                        };
                        units[i].1 = unit;
                        if let Unit::Issue { history, .. } = &mut units[i].1 {
                            let later = std::mem::replace(history, earlier);
                            history.extend(later);
                        }
                        continue;
                    }
                    issue_slot.insert(issue_id.clone(), units.len());
                }
                units.push((seq, unit));
            }
            Err(message) => {
                let pk = record.key(keys::PK);
                let tenant = pk
                    .and_then(keys::tenant_of)
                    .and_then(TenantId::parse)
                    .unwrap_or_else(TenantId::unknown);
                let subject = pk
                    .and_then(keys::records::parse_issue_pk)
                    .map(|(_, issue)| issue.to_string())
                    .unwrap_or_else(|| keys::index::parked_sk(ParkedUnit::Record, seq));
                let reason = IndexError::Malformed(seq.to_string(), message).to_string();
                units.push((
                    seq,
                    Unit::Malformed {
                        tenant,
                        subject,
                        reason,
                    },
                ));
            }
        }
    }
    Plan { units }
}

/// The unit one record is, if it is the indexer's business (see [`stream::classify`]).
fn plan_one<'a>(record: &'a StreamRecord<'a>) -> Result<Option<Unit<'a>>, String> {
    let change =
        stream::classify(record.key(keys::PK), record.key(keys::SK)).map_err(|e| e.to_string())?;
    let op = record
        .event_name
        .as_ref()
        .and_then(|n| Op::parse(n.as_str()));
    Ok(match change {
        Change::Issue { tenant, issue_id } => {
            let mut history = Vec::new();
            let last = if op == Some(Op::Remove) {
                None
            } else {
                let image = record.dynamodb.new_image.as_ref().ok_or("no NewImage")?;
                let issue = IssueRecord::from_image(image).map_err(|e| e.to_string())?;
                history.extend(history::entry_of(record.dynamodb.old_image.as_ref(), image));
                Some(Box::new(issue))
            };
            Some(Unit::Issue {
                tenant,
                issue_id,
                last,
                history,
            })
        }
        Change::Field {
            tenant,
            project_id,
            field_id,
        } => match op {
            // A field created sortable (its project had no issue yet) needs nothing; one
            // without the flag was created before it existed, and is built like any other.
            Some(Op::Insert) => {
                let sortable = record
                    .dynamodb
                    .new_image
                    .as_ref()
                    .and_then(|image| image.get(SORTABLE))
                    .is_some_and(|a| matches!(a, crate::model::event::Attr::Bool(true)));
                (!sortable).then_some(Unit::FieldAdded {
                    tenant,
                    project_id,
                    field_id,
                })
            }
            Some(Op::Remove) => Some(Unit::FieldRemoved {
                tenant,
                project_id,
                field_id,
            }),
            // A definition changes in place only by `PATCH`; only an edit of its options that
            // moves values has work for the index (`field_edit`).
            Some(Op::Modify) => edit_rev(record).map(|rev| Unit::FieldEdited {
                tenant,
                project_id,
                job: FieldId::numbered(rev),
            }),
            None => None,
        },
        // A project's removal: its purge job deletes everything under it.
        Change::Project { tenant, project_id } if op == Some(Op::Remove) => {
            Some(Unit::ProjectDeleted { tenant, project_id })
        }
        Change::Project { tenant, project_id } => hot_added(record).map(|rev| Unit::HotAdded {
            tenant,
            project_id,
            job: FieldId::numbered(rev),
        }),
        // Anything else (the template's filter keeps it out in AWS) is not the indexer's business.
        Change::Team { tenant, team_id } => {
            (op == Some(Op::Remove)).then_some(Unit::TeamDeleted { tenant, team_id })
        }
        Change::IssueDetail { .. } | Change::Ignored => None,
    })
}

/// The project's `fields_rev` when a project record names a column waiting for its fill
/// (`attr::HOT_FILL`, set with the mark and cleared when the job begins; the stream holds new
/// images only, so the mark says itself that it is new).
fn hot_added(record: &StreamRecord<'_>) -> Option<u64> {
    use crate::model::codec::attr;
    use crate::model::event::Attr;
    let image = record.dynamodb.new_image.as_ref()?;
    image.get(attr::HOT_FILL)?;
    match image.get(attr::FIELDS_REV) {
        Some(Attr::N(n)) => n.as_str().parse().ok(),
        _ => None,
    }
}

/// The revision of the options edit a field's new image holds, if any (cleared when its job
/// finishes, so only the edit's own record and the field's changes meanwhile name it; its job
/// starting twice is one job).
fn edit_rev(record: &StreamRecord<'_>) -> Option<u64> {
    use crate::model::event::Attr;
    let image = record.dynamodb.new_image.as_ref()?;
    match image.get(crate::store::records::field_edit::EDIT_REV)? {
        Attr::N(n) => n.as_str().parse().ok(),
        _ => None,
    }
}

/// Where the segment starting at `start` ends: a field change is a segment of its own (it
/// re-indexes its project from the records as they are, so the units before it finish first
/// and the ones after it wait), and so is a malformed record (parking flags its issue's
/// watermark, which that issue's own unit, earlier in the batch, rewrites: in record order as
/// before, the flag is not lost); any other run of units is one segment.
pub(super) fn segment_end(units: &[(&str, Unit<'_>)], start: usize) -> usize {
    let is_barrier = |u: &Unit| {
        matches!(
            u,
            Unit::FieldAdded { .. }
                | Unit::FieldRemoved { .. }
                | Unit::HotAdded { .. }
                | Unit::FieldEdited { .. }
                | Unit::TeamDeleted { .. }
                | Unit::ProjectDeleted { .. }
                | Unit::Malformed { .. }
        )
    };
    if units.get(start).is_some_and(|(_, u)| is_barrier(u)) {
        return start + 1;
    }
    units[start..]
        .iter()
        .position(|(_, u)| is_barrier(u))
        .map_or(units.len(), |p| start + p)
}

impl Unit<'_> {
    /// `(tenant, marker subject, whether the subject is one issue)` for parking this unit.
    pub(super) fn subject(&self) -> (&TenantId, String, bool) {
        match self {
            Self::Issue {
                tenant, issue_id, ..
            } => (tenant, issue_id.to_string(), true),
            Self::FieldAdded {
                tenant, project_id, ..
            }
            | Self::FieldRemoved {
                tenant, project_id, ..
            }
            | Self::HotAdded {
                tenant, project_id, ..
            }
            | Self::FieldEdited {
                tenant, project_id, ..
            }
            | Self::ProjectDeleted { tenant, project_id } => (
                tenant,
                keys::index::parked_sk(ParkedUnit::Project, project_id),
                false,
            ),
            Self::TeamDeleted { tenant, team_id } => (
                tenant,
                keys::index::parked_sk(ParkedUnit::Team, team_id.as_str()),
                false,
            ),
            Self::Malformed {
                tenant, subject, ..
            } => {
                let issue = !subject.starts_with('#');
                (tenant, subject.clone(), issue)
            }
        }
    }
}
