//! Every partition-key and sort-key string of the records table, built and parsed here only.
//!
//! Each key starts with the tenant (`T#{tenant}#…`), so no query can cross tenants. Ids never
//! contain `#` (ULIDs; user and tenant ids are checked), so splitting on `#` is unambiguous.

use crate::encoding::text;

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
pub const GSI1_PK: &str = "GSI1PK";
pub const GSI1_SK: &str = "GSI1SK";

/// Sort key of a project's own item inside its collection; `#` sorts before the fields' `F#`.
pub const PROJECT_SK: &str = "#PROJECT";
/// Sort-key prefix of field definitions in a project's collection.
pub const FIELD_SK_PREFIX: &str = "F#";
/// Sort key of an issue's summary item.
pub const ISSUE_SK: &str = "#ISSUE";
/// Sort key of an issue's long description, kept apart so summaries stay small.
pub const DESCRIPTION_SK: &str = "DESCRIPTION";

/// A partition no item ever has (it does not start with `T#`): a Query of it at start-up
/// opens the connection and finds nothing.
pub const WARM_UP_PK: &str = "#WARM-UP";

/// The `entity` attribute on every item, which stream filters and scans select by.
pub mod entity {
    pub const PROJECT: &str = "project";
    pub const FIELD: &str = "field";
    pub const ISSUE: &str = "issue";
    pub const DESCRIPTION: &str = "description";
}

fn tenant(t: &str) -> String {
    format!("T#{t}")
}

/// Partition of a project and its field definitions (one Query reads both).
pub fn project_pk(t: &str, project_id: &str) -> String {
    format!("{}#P#{project_id}", tenant(t))
}

pub fn field_sk(field_id: &str) -> String {
    format!("{FIELD_SK_PREFIX}{field_id}")
}

/// GSI1 partition listing a tenant's projects by name.
pub fn projects_gsi1_pk(t: &str) -> String {
    format!("{}#PROJECTS", tenant(t))
}

/// GSI1 sort key of a project: case-insensitive name order, then the id for uniqueness.
pub fn project_gsi1_sk(name: &str, project_id: &str) -> String {
    format!("{}{}{project_id}", text::encode(name), text::SEP)
}

/// Partition of an issue: its summary item and its description.
pub fn issue_pk(t: &str, issue_id: &str) -> String {
    format!("{}#I#{issue_id}", tenant(t))
}

/// GSI1 partition listing a project's issues by number.
pub fn issues_by_num_gsi1_pk(t: &str, project_id: &str) -> String {
    format!("{}#P#{project_id}#ISSUES", tenant(t))
}

/// Issue numbers zero-padded so string order is numeric order.
pub fn num_sk(num: u64) -> String {
    format!("{num:020}")
}

/// An entry of an issue's participant edge set: `{kind}#{id}`. The role lives in the issue's
/// `roles` map under the same key, so adding, re-roling and removing need no read.
pub fn participant_edge(kind: &str, id: &str) -> String {
    format!("{kind}#{id}")
}

/// `(kind, id)` of a participant edge.
pub fn parse_participant_edge(edge: &str) -> Option<(&str, &str)> {
    edge.split_once('#')
}

// --- People and teams -----------------------------------------------------------------------

/// Partition of a user: the profile and the user's team memberships.
pub fn user_pk(t: &str, user_id: &str) -> String {
    format!("{}#U#{user_id}", tenant(t))
}

pub const PROFILE_SK: &str = "#PROFILE";

/// Partition of a team: the team and its members.
pub fn team_pk(t: &str, team_id: &str) -> String {
    format!("{}#TEAM#{team_id}", tenant(t))
}

pub const TEAM_SK: &str = "#TEAM";
/// Sort-key prefix of a team's members (in the team's partition).
pub const MEMBER_SK_PREFIX: &str = "M#";
/// Sort-key prefix of a user's teams (in the user's partition).
pub const USER_TEAM_SK_PREFIX: &str = "TM#";

pub fn member_sk(user_id: &str) -> String {
    format!("{MEMBER_SK_PREFIX}{user_id}")
}

pub fn user_team_sk(team_id: &str) -> String {
    format!("{USER_TEAM_SK_PREFIX}{team_id}")
}

/// The user's membership counter (in the user's partition, outside `TM#`), which keeps a
/// user's teams under their cap in the membership transaction. Apart from the profile, which
/// `PUT /me` replaces whole.
pub const USER_TEAM_COUNT_SK: &str = "#TEAMS";

// --- Participation copies (index table) -----------------------------------------------------

/// A participant's issues in one state, newest `updated_at` first; with `role`, only the
/// issues where the participant has that role (the role-ranked copy).
pub fn inbox_pk(t: &str, kind: &str, id: &str, state: &str, role: Option<&str>) -> String {
    match role {
        Some(r) => format!("{}#IN#{kind}#{id}#{state}#{r}", tenant(t)),
        None => format!("{}#IN#{kind}#{id}#{state}", tenant(t)),
    }
}

/// `{updated_at}#{issue}`: newest first when read backwards, unique per issue.
pub fn inbox_sk(updated_at: &str, issue_id: &str) -> String {
    format!("{updated_at}#{issue_id}")
}

// --- Index table (written only by the indexer) -------------------------------------------

/// Partition of one sortable column of a project, for one state scope (`all`, `open`,
/// `closed`), so a state-filtered grid is a key condition too.
pub fn column_pk(t: &str, project_id: &str, column: &str, scope: &str) -> String {
    format!("{}#X#{project_id}#{column}#{scope}", tenant(t))
}

/// Sort-key prefix of entries that hold a value; they sort before the missing ones.
pub const VALUE_PREFIX: &str = "1";
/// Sort-key prefix of entries for issues with no value in the column.
pub const MISSING_PREFIX: &str = "2";
/// Upper bound for value sort keys: above every value entry (they all start with `1`), below
/// every missing one (`2` and twenty digits; no key is `2` alone). It must not be `1` and the
/// highest character: a value may start with that character, and its key sorts above it.
pub const VALUE_CEILING: &str = MISSING_PREFIX;

/// Bounds of the missing entries.
pub const MISSING_FLOOR: &str = MISSING_PREFIX;
pub const MISSING_CEILING: &str = "2\u{10FFFF}";

/// `1 enc(value) SEP num`: by value, ties by issue number.
pub fn value_sk(encoded: &str, num: u64) -> String {
    format!("{VALUE_PREFIX}{encoded}{}{num:020}", text::SEP)
}

/// `2 num`: issues without a value, by number.
pub fn missing_sk(num: u64) -> String {
    format!("{MISSING_PREFIX}{num:020}")
}

/// The lowest sort key of values `>= encoded` (`gte`), or starting with it (`prefix`).
pub fn value_floor(encoded: &str) -> String {
    format!("{VALUE_PREFIX}{encoded}")
}

/// The highest sort key of values `<= encoded` (`lte`): the value itself with any number.
pub fn value_ceiling_at(encoded: &str) -> String {
    format!("{VALUE_PREFIX}{encoded}{}{}", text::SEP, "9".repeat(20))
}

/// Characters of [`text::TOP`] that outrank any rest of a value key after a prefix: a key is at
/// most `1`, [`text::MAX_BYTES`] of encoding, a separator and 20 digits, and the run is longer.
const TOP_RUN: usize = (text::MAX_BYTES + 22) / 4 + 1;

/// An inclusive upper bound for the sort keys of values starting with `encoded` (`prefix`):
/// the prefix followed by a run of the highest character longer than any rest of a key, so a
/// value that continues with that character (or starts with it) is still inside.
pub fn prefix_ceiling(encoded: &str) -> String {
    let run: String = std::iter::repeat_n(text::TOP, TOP_RUN).collect();
    format!("{VALUE_PREFIX}{encoded}{run}")
}

/// The indexer's record of an issue's entries, for replay protection and exact diffs.
pub fn watermark_pk(t: &str, issue_id: &str) -> String {
    format!("{}#W#{issue_id}", tenant(t))
}

pub const WATERMARK_SK: &str = "W";

/// An entry's key as one string in the watermark's set (no key part contains U+0002). The
/// watermark belongs to one tenant, so the `T#{tenant}#` every entry key starts with is left
/// out: with 128-character tenant ids it would be most of the item.
pub fn entry_ref(t: &str, pk: &str, sk: &str) -> String {
    let own = format!("{}#", tenant(t));
    let pk = pk.strip_prefix(own.as_str()).unwrap_or(pk);
    format!("{pk}\u{2}{sk}")
}

/// `(pk, sk)` of an [`entry_ref`] of tenant `t`; refs written whole (they start with `T#`,
/// which no tenant-relative key does) are read as they are.
pub fn parse_entry_ref(t: &str, r: &str) -> Option<(String, String)> {
    let (pk, sk) = r.split_once('\u{2}')?;
    let pk = if pk.starts_with("T#") {
        pk.to_string()
    } else {
        format!("{}#{pk}", tenant(t))
    };
    Some((pk, sk.to_string()))
}

/// Partition of a tenant's parked units: what the indexer could not index for a reason no
/// retry fixes (a DynamoDB limit, a malformed record), one item per issue (sort key: its id).
pub fn parked_pk(t: &str) -> String {
    format!("{}#PARKED", tenant(t))
}

/// Sort key of a parked unit that is not one issue: a project's re-index, or a record whose
/// keys name nothing (then its sequence number).
pub fn parked_sk_other(kind: &str, id: &str) -> String {
    format!("#{kind}#{id}")
}

/// What a parked unit's sort key names: `(kind, id)` for a unit that is not one issue
/// (`("project", id)`, `("record", sequence number)`), `None` for an issue id.
pub fn parked_other(sk: &str) -> Option<(&str, &str)> {
    sk.strip_prefix('#')?.split_once('#')
}

/// Whether an index-table partition key is a tenant's parked units.
pub fn is_parked_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split_once('#'))
        .is_some_and(|(_, kind)| kind == "PARKED")
}

/// The tenant a key belongs to.
pub fn tenant_of(key: &str) -> Option<&str> {
    key.strip_prefix("T#")?.split('#').next()
}

/// `(tenant, project)` of a [`project_pk`].
pub fn parse_project_pk(pk: &str) -> Option<(&str, &str)> {
    let mut parts = pk.strip_prefix("T#")?.split('#');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), Some("P"), Some(p), None) => Some((t, p)),
        _ => None,
    }
}

/// `(tenant, issue)` of an [`issue_pk`].
pub fn parse_issue_pk(pk: &str) -> Option<(&str, &str)> {
    let mut parts = pk.strip_prefix("T#")?.split('#');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), Some("I"), Some(i), None) => Some((t, i)),
        _ => None,
    }
}

/// Whether an index-table partition key is a watermark's.
pub fn is_watermark_pk(pk: &str) -> bool {
    pk.strip_prefix("T#")
        .and_then(|rest| rest.split('#').nth(1))
        .is_some_and(|kind| kind == "W")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn partition_kinds_parse_back() {
        assert_eq!(
            parse_project_pk(&project_pk("acme", "P1")),
            Some(("acme", "P1"))
        );
        assert_eq!(parse_project_pk(&issue_pk("acme", "I1")), None);
        assert_eq!(
            parse_issue_pk(&issue_pk("acme", "I1")),
            Some(("acme", "I1"))
        );
        assert_eq!(parse_issue_pk(&project_pk("acme", "P1")), None);
        assert!(is_watermark_pk(&watermark_pk("acme", "I1")));
        assert!(!is_watermark_pk(&column_pk("acme", "P1", "num", "all")));
        assert!(!is_watermark_pk(&inbox_pk(
            "acme", "user", "W", "open", None
        )));
        assert!(is_parked_pk(&parked_pk("acme")));
        assert!(!is_parked_pk(&inbox_pk(
            "acme", "user", "PARKED", "open", None
        )));
        assert!(!is_watermark_pk(&parked_pk("acme")));
    }

    #[test]
    fn project_items_sort_before_their_fields() {
        assert!(PROJECT_SK < field_sk("01ARZ3NDEKTSV4RRFFQ69G5FAV").as_str());
    }

    proptest! {
        #[test]
        fn keys_carry_their_tenant(t in "[A-Za-z0-9_.:-]{1,40}", id in "[0-9A-Z]{26}") {
            for key in [project_pk(&t, &id), issue_pk(&t, &id), issues_by_num_gsi1_pk(&t, &id), projects_gsi1_pk(&t)] {
                prop_assert_eq!(tenant_of(&key), Some(t.as_str()));
            }
        }

        #[test]
        fn participant_edges_round_trip(kind in "user|team", id in "[A-Za-z0-9_.:-]{1,40}") {
            let edge = participant_edge(&kind, &id);
            prop_assert_eq!(parse_participant_edge(&edge), Some((kind.as_str(), id.as_str())));
        }

        #[test]
        fn people_keys_carry_their_tenant(t in "[A-Za-z0-9_.:-]{1,40}", id in "[0-9A-Z]{26}") {
            for key in [user_pk(&t, &id), team_pk(&t, &id), inbox_pk(&t, "user", &id, "open", None), inbox_pk(&t, "team", &id, "open", Some("watcher"))] {
                prop_assert_eq!(tenant_of(&key), Some(t.as_str()));
            }
        }

        #[test]
        fn values_sort_before_missing_and_ties_break_by_number(enc in "[ -~]{0,30}", a in any::<u64>(), b in any::<u64>()) {
            prop_assert!(value_sk(&enc, a) < missing_sk(b));
            prop_assert!(value_sk(&enc, a).as_str() < VALUE_CEILING);
            prop_assert_eq!(value_sk(&enc, a).cmp(&value_sk(&enc, b)), a.cmp(&b));
            prop_assert!(value_floor(&enc) <= value_sk(&enc, a) && value_sk(&enc, a) <= value_ceiling_at(&enc));
        }

        /// Values starting with, or continuing with, the highest character are inside the
        /// value range and inside every prefix range that matches them.
        #[test]
        fn the_highest_character_is_below_every_ceiling(
            head in "[a-z]{0,3}",
            tops in 1usize..300,
            tail in "[a-z\u{10FFFF}]{0,5}",
            num in any::<u64>(),
        ) {
            let value = format!("{head}{}{tail}", text::TOP.to_string().repeat(tops));
            let sk = value_sk(&text::encode(&value), num);
            prop_assert!(sk.as_str() < VALUE_CEILING && sk.as_str() >= VALUE_PREFIX);
            prop_assert!(sk < missing_sk(0));
            let chars: Vec<char> = value.chars().collect();
            for cut in 1..=chars.len().min(8) {
                let p: String = chars[..cut].iter().collect();
                let p = text::prefix_key(&p);
                prop_assert!(value_floor(&p) <= sk && sk <= prefix_ceiling(&p), "prefix {cut}");
            }
            // `lte` at the value itself keeps it.
            prop_assert!(sk <= value_ceiling_at(&text::encode(&value)));
        }

        #[test]
        fn entry_refs_round_trip(t in "[A-Za-z0-9_.:-]{1,128}", rest in "[ -~]{1,40}", sk in "[\u{1} -~]{1,40}") {
            for pk in [column_pk(&t, "P", &rest, "all"), inbox_pk(&t, "user", &rest, "open", None), format!("T#other#{rest}")] {
                let r = entry_ref(&t, &pk, &sk);
                let own = format!("T#{t}#");
                prop_assert!(!r.starts_with(&own));
                prop_assert_eq!(parse_entry_ref(&t, &r), Some((pk.clone(), sk.clone())));
                // A whole ref (as watermarks wrote them before) reads the same.
                prop_assert_eq!(parse_entry_ref(&t, &format!("{pk}\u{2}{sk}")), Some((pk.clone(), sk.clone())));
            }
        }

        #[test]
        fn num_keys_sort_numerically(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(num_sk(a).cmp(&num_sk(b)), a.cmp(&b));
        }
    }
}
