//! The names bound of a list page: the display names of every participant a page shows are
//! one lookup, so a page ends early where its people would not fit in one.

use std::collections::BTreeSet;

use crate::domain::{Issue, ParticipantKind};

/// Most distinct participants whose names one page looks up: one BatchGetItem of 100 keys
/// when the tenant's directory is too large to read whole (otherwise one Query reads it).
pub const MAX_NAMES_PER_PAGE: usize = 100;

/// How many of `issues`, from the first, a page keeps so that their participants' names are
/// one lookup of at most [`MAX_NAMES_PER_PAGE`]: a page ends early, at the last issue whose
/// people fit, and its cursor points there (an issue has at most 100 participants, so the
/// first always fits and every page moves on). The contract holds: every participant shown
/// has their current name.
pub fn names_fit<'a>(issues: impl IntoIterator<Item = &'a Issue>) -> usize {
    let mut people: BTreeSet<(ParticipantKind, &str)> = BTreeSet::new();
    let mut kept = 0;
    for issue in issues {
        let before = people.len();
        let new: Vec<_> = issue
            .participants
            .iter()
            .map(|p| (p.kind, p.id.as_str()))
            .filter(|k| !people.contains(k))
            .collect();
        if kept > 0 && before + new.len() > MAX_NAMES_PER_PAGE {
            break;
        }
        people.extend(new);
        kept += 1;
    }
    kept
}
