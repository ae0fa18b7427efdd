//! Every key string of both tables, built and parsed here only: [`records`] for the records
//! table (projects, fields, issues, people, teams), [`index`] for the index table (column
//! entries, participation copies, watermarks, parked units).
//!
//! Each key starts with the tenant (`T#{tenant}#…`), so no query can cross tenants. Ids never
//! contain `#` (ULIDs; user and tenant ids are checked), so splitting on `#` is unambiguous.

pub mod index;
pub mod records;
pub mod workspaces;

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
pub const GSI1_PK: &str = "GSI1PK";
pub const GSI1_SK: &str = "GSI1SK";

/// A partition no item ever has (it does not start with `T#`): a Query of it at start-up
/// opens the connection and finds nothing.
pub const WARM_UP_PK: &str = "#WARM-UP";

/// `T#{tenant}`: what every key of the tenant starts with.
pub(crate) fn tenant_prefix(tenant: &str) -> String {
    let mut out = String::new();
    push_tenant_prefix(&mut out, tenant);
    out
}

/// [`tenant_prefix`], appended to `out`.
pub(crate) fn push_tenant_prefix(out: &mut String, tenant: &str) {
    out.push_str("T#");
    out.push_str(tenant);
}

/// The tenant a key belongs to.
pub fn tenant_of(key: &str) -> Option<&str> {
    key.strip_prefix("T#")?.split('#').next()
}

#[cfg(test)]
mod tests {
    use super::index::*;
    use super::records::*;
    use super::*;
    use crate::domain::ids::{IssueId, ProjectId, TeamId, TenantId, UserId};
    use crate::domain::{IssueState, ParticipantKind, Role};
    use crate::encoding::text;
    use proptest::prelude::*;

    fn acme() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    #[test]
    fn partition_kinds_parse_back() {
        let (p1, i1) = (ProjectId::numbered(1), IssueId::numbered(1));
        assert_eq!(
            parse_project_pk(&project_pk(&acme(), &p1)),
            Some((acme(), p1.clone()))
        );
        assert_eq!(parse_project_pk(&issue_pk(&acme(), &i1)), None);
        assert_eq!(
            parse_issue_pk(&issue_pk(&acme(), &i1)),
            Some((acme(), i1.clone()))
        );
        assert_eq!(parse_issue_pk(&project_pk(&acme(), &p1)), None);
        // A key whose id is no id of its kind names nothing.
        assert_eq!(parse_issue_pk("T#acme#I#not-an-id"), None);
        assert!(is_watermark_pk(&watermark_pk(&acme(), &i1)));
        assert!(!is_watermark_pk(&column_pk(&acme(), &p1, "num", "all")));
        let user = |id| inbox_pk(&acme(), ParticipantKind::User, id, IssueState::Open, None);
        assert!(!is_watermark_pk(&user("W")));
        assert!(is_parked_pk(&parked_pk(&acme())));
        assert!(!is_parked_pk(&user("PARKED")));
        assert!(!is_watermark_pk(&parked_pk(&acme())));
    }

    /// The typed builders write the very strings the stored keys hold.
    #[test]
    fn typed_builders_write_the_stored_strings() {
        assert_eq!(
            inbox_pk(
                &acme(),
                ParticipantKind::User,
                "ann",
                IssueState::Open,
                None
            ),
            "T#acme#IN#user#ann#open"
        );
        assert_eq!(
            inbox_pk(
                &acme(),
                ParticipantKind::Team,
                "T1",
                IssueState::Closed,
                Some(Role::Watcher)
            ),
            "T#acme#IN#team#T1#closed#watcher"
        );
        assert_eq!(
            issue_pk(&acme(), &IssueId::numbered(1)),
            "T#acme#I#00000000000000000000000001"
        );
        assert_eq!(participant_edge(ParticipantKind::Team, "T1"), "team#T1");
        assert_eq!(parse_participant_edge("robot#x"), None);
        assert_eq!(parked_sk(ParkedUnit::Project, "P1"), "#project#P1");
        assert_eq!(parked_sk(ParkedUnit::Record, "7"), "#record#7");
        assert_eq!(parked_other("#record#7"), Some((ParkedUnit::Record, "7")));
        assert_eq!(parked_other("#robot#7"), None);
        assert_eq!(ParkedUnit::parse("project"), Some(ParkedUnit::Project));
        assert_eq!(
            parked_other(&parked_sk(ParkedUnit::Team, "T1")),
            Some((ParkedUnit::Team, "T1"))
        );
    }

    #[test]
    fn project_items_sort_before_their_fields() {
        assert!(PROJECT_SK < field_sk(&crate::domain::ids::FieldId::numbered(1)).as_str());
    }

    /// The shard hash is part of stored keys: it must never change between builds.
    #[test]
    fn the_shard_hash_is_fnv_1a() {
        assert_eq!(shard_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(shard_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            column_shard_pks(&acme(), &ProjectId::numbered(1), "num", "all", 1),
            [column_pk(&acme(), &ProjectId::numbered(1), "num", "all")]
        );
        assert_eq!(Shards::of(0), None);
        assert_eq!(Shards::of(MAX_SHARDS + 1), None);
        assert_eq!(Shards::from_bits(0b111), None, "at most two layouts");
    }

    proptest! {
        #[test]
        fn shard_suffixes_and_layouts_read_back(count in 1..=MAX_SHARDS, other in 1..=MAX_SHARDS, id in "[0-9A-Z]{26}") {
            let shard = shard_of(shard_hash(&id), count);
            prop_assert!(shard < count);
            let mut out = String::new();
            push_shard(&mut out, count, shard);
            prop_assert_eq!(out, if count == 1 { String::new() } else { format!("#{count}.{shard}") });
            let pks = column_shard_pks(&acme(), &ProjectId::numbered(1), "num", "all", count);
            prop_assert_eq!(pks.len(), usize::from(count));
            let one = Shards::of(count).unwrap();
            prop_assert_eq!(one.counts().collect::<Vec<_>>(), vec![count]);
            let both = Shards::of_project(Some(count), Some(other));
            let mut want = vec![count, other];
            want.sort();
            want.dedup();
            prop_assert_eq!(both.counts().collect::<Vec<_>>(), want);
            prop_assert_eq!(Shards::from_bits(both.bits()), Some(both));
        }

        #[test]
        fn an_issue_number_is_twenty_zero_padded_digits(n in any::<u64>()) {
            for n in [n, 0, 9, 10, u64::MAX] {
                let mut out = String::from("x");
                index::push_number(&mut out, n);
                prop_assert_eq!(out, format!("x{n:020}"));
            }
        }

        #[test]
        fn keys_carry_their_tenant(t in "[A-Za-z0-9_.:-]{1,40}", n in any::<u64>()) {
            let (tenant, p, i) = (TenantId::parse(&t).unwrap(), ProjectId::numbered(n), IssueId::numbered(n));
            for key in [project_pk(&tenant, &p), issue_pk(&tenant, &i), issues_by_num_gsi1_pk(&tenant, &p), projects_gsi1_pk(&tenant)] {
                prop_assert_eq!(tenant_of(&key), Some(t.as_str()));
            }
        }

        #[test]
        fn participant_edges_round_trip(kind in "user|team", id in "[A-Za-z0-9_.:-]{1,40}") {
            let Some(typed) = ParticipantKind::parse(&kind) else { unreachable!() };
            let edge = participant_edge(typed, &id);
            prop_assert_eq!(&edge, &format!("{kind}#{id}"));
            prop_assert_eq!(parse_participant_edge(&edge), Some((typed, id.as_str())));
        }

        #[test]
        fn people_keys_carry_their_tenant(t in "[A-Za-z0-9_.:-]{1,40}", id in "[A-Za-z0-9_.:-]{1,40}", n in any::<u64>()) {
            let (tenant, user, team) = (TenantId::parse(&t).unwrap(), UserId::parse(&id).unwrap(), TeamId::numbered(n));
            for key in [
                user_pk(&tenant, &user),
                team_pk(&tenant, &team),
                inbox_pk(&tenant, ParticipantKind::User, &user, IssueState::Open, None),
                inbox_pk(&tenant, ParticipantKind::Team, &team, IssueState::Open, Some(Role::Watcher)),
            ] {
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
            let t = TenantId::parse(&t).unwrap();
            for pk in [
                column_pk(&t, &ProjectId::numbered(1), &rest, "all"),
                inbox_pk(&t, ParticipantKind::User, &rest, IssueState::Open, None),
                format!("T#other#{rest}"),
            ] {
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
