//! Keys of workspaces, their members and invitations (records table).
//!
//! A workspace is a tenant, so its own items live in the tenant's space (`T#{ws}#WS`). What
//! belongs to a person across workspaces (the workspaces they are in, the one they chose, the
//! invitations sent to their email) is read before any tenant is known, by a token without
//! one: it lives under `G#` (global), the only keys that do not start with a tenant.

use super::tenant_prefix;
use crate::domain::ids::{InvitationId, TenantId, UserId};
use crate::domain::role::Role;

/// Partition of a workspace: its item, its member edges and its pending invitations.
pub fn workspace_pk(ws: &TenantId) -> String {
    format!("{}#WS", tenant_prefix(ws))
}
/// Sort key of a workspace's own item (`#` sorts before members and invitations).
pub const WORKSPACE_SK: &str = "#WORKSPACE";
/// Sort-key prefix of a workspace's member edges.
pub const MEMBER_SK_PREFIX: &str = "M#";
/// Sort-key prefix of a workspace's pending invitations.
pub const INVITATION_SK_PREFIX: &str = "INV#";

pub fn member_sk(user: &UserId) -> String {
    format!("{MEMBER_SK_PREFIX}{user}")
}

pub fn invitation_sk(id: &InvitationId) -> String {
    format!("{INVITATION_SK_PREFIX}{id}")
}

/// GSI1 partition of a workspace's members ranked by role.
pub fn ranked_members_gsi1_pk(ws: &TenantId) -> String {
    format!("{}#WS#RANKED", tenant_prefix(ws))
}

/// GSI1 sort key of a member: the role's rank, then the user (seed 000's `500-LEAD` keys),
/// so the owners and admins are one range: `<` [`ranked_members_end`]`(Role::Member)`.
pub fn ranked_member_gsi1_sk(role: Role, user: &UserId) -> String {
    format!("{:03}#{user}", role.rank())
}

/// `(role, user)` of a [`ranked_member_gsi1_sk`] (GSI1 projects only the keys of a member).
pub fn parse_ranked_member_gsi1_sk(sk: &str) -> Option<(Role, UserId)> {
    let (rank, user) = sk.split_once('#')?;
    let role = Role::ALL
        .into_iter()
        .find(|r| format!("{:03}", r.rank()) == rank)?;
    Some((role, UserId::parse(user)?))
}

/// Where the ranked members start: a key condition's value may not be empty, and every rank
/// is three digits.
pub const RANKED_MEMBERS_START: &str = "000";

/// Where the members of `role`'s rank and above end in the ranked index (exclusive).
pub fn ranked_members_end(role: Role) -> String {
    format!("{:03}#~", role.rank())
}

/// Partition of a person across workspaces: an edge per workspace they are in, and the one
/// they chose for their next token.
pub fn person_pk(user: &UserId) -> String {
    format!("G#U#{user}")
}
/// Sort-key prefix of a person's workspace edges.
pub const PERSON_WORKSPACE_SK_PREFIX: &str = "W#";
/// Sort key of a person's chosen workspace (`#` sorts before the edges, so the token
/// trigger's one Query reads it first).
pub const CHOICE_SK: &str = "#CHOICE";

pub fn person_workspace_sk(ws: &TenantId) -> String {
    format!("{PERSON_WORKSPACE_SK_PREFIX}{ws}")
}

/// Partition and sort key of an invitation by its id (`POST /invitations/{id}/accept`).
pub fn invitation_pk(id: &InvitationId) -> String {
    format!("G#INV#{id}")
}
pub const INVITATION_SK: &str = "#INVITATION";

/// Partition of the invitations pending for an email (normalised): one per workspace, so a
/// second pending invitation of the same workspace for the same email is refused by its key.
pub fn email_pk(email: &str) -> String {
    format!("G#EMAIL#{email}")
}

pub fn email_invitation_sk(ws: &TenantId) -> String {
    format!("W#{ws}")
}

/// Whether `pk` is one of a person's global partitions (`G#…`), which belong to no tenant.
pub fn is_global(pk: &str) -> bool {
    pk.starts_with("G#")
}

/// The workspace a [`person_workspace_sk`] names.
pub fn parse_person_workspace_sk(sk: &str) -> Option<TenantId> {
    TenantId::parse(sk.strip_prefix(PERSON_WORKSPACE_SK_PREFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn owners_and_admins_are_one_range() {
        let u = UserId::parse("u").unwrap();
        let end = ranked_members_end(Role::Admin);
        assert!(RANKED_MEMBERS_START < ranked_member_gsi1_sk(Role::Owner, &u).as_str());
        assert!(ranked_member_gsi1_sk(Role::Owner, &u) < end);
        assert!(ranked_member_gsi1_sk(Role::Admin, &u) < end);
        assert!(ranked_member_gsi1_sk(Role::Member, &u) > end);
        assert!(ranked_member_gsi1_sk(Role::Viewer, &u) > end);
        for role in Role::ALL {
            assert_eq!(
                parse_ranked_member_gsi1_sk(&ranked_member_gsi1_sk(role, &u)),
                Some((role, u.clone()))
            );
        }
    }

    proptest! {
        /// A person's workspace edge names its workspace back, and no global key looks like a
        /// tenant's.
        #[test]
        fn person_edges_round_trip(ws in "[!-\"$-~]{1,40}", user in "[!-\"$-~]{1,40}") {
            let ws = TenantId::parse(&ws).unwrap();
            prop_assert_eq!(parse_person_workspace_sk(&person_workspace_sk(&ws)), Some(ws));
            let user = UserId::parse(&user).unwrap();
            prop_assert!(crate::keys::tenant_of(&person_pk(&user)).is_none());
        }
    }
}
