//! A workspace member's role, and what each role may do.

use serde::{Deserialize, Serialize};

/// A member's role in a workspace, most powerful first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Owner,
    Admin,
    Member,
    Viewer,
}

/// What a route needs of the caller's role on a workspace's tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Reads: every member, a viewer too.
    Read,
    /// What a viewer may write: their own profile and comments (the comment routes check
    /// authorship themselves).
    Own,
    /// Writes: every member but a viewer.
    Write,
    /// Project and field changes, members and invitations: owners and admins.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The role's rank in a member edge's ranked sort key: most powerful lowest, so "owners
    /// and admins" is one range of the ranked index (`rank <= Admin's`).
    pub fn rank(self) -> u16 {
        match self {
            Role::Owner => 100,
            Role::Admin => 200,
            Role::Member => 500,
            Role::Viewer => 800,
        }
    }

    /// Whether this role may do what `need` asks.
    pub fn allows(self, need: Need) -> bool {
        match need {
            Need::Read | Need::Own => true,
            Need::Write => self != Role::Viewer,
            Need::Admin => matches!(self, Role::Owner | Role::Admin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_rank_and_allow() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("Owner"), None);
        let mut ranks: Vec<u16> = Role::ALL.iter().map(|r| r.rank()).collect();
        let sorted = ranks.clone();
        ranks.sort_unstable();
        assert_eq!(ranks, sorted, "ALL is in rank order");
        assert!(!Role::Viewer.allows(Need::Write));
        assert!(Role::Viewer.allows(Need::Own));
        assert!(Role::Member.allows(Need::Write));
        assert!(!Role::Member.allows(Need::Admin));
        assert!(Role::Admin.allows(Need::Admin));
    }
}
