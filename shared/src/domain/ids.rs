//! Typed ids, parsed once at the edge: a [`ProjectId`] cannot be passed where an [`IssueId`] is
//! expected, and a value of any of these types is known to be safe inside a key.
//!
//! Server-chosen ids ([`ProjectId`], [`IssueId`], [`TeamId`], [`FieldId`]) are ULIDs, so they
//! sort by creation time; anything else cannot exist, so a path naming one is answered `404`
//! without a database call. [`UserId`] is the token's `sub` and [`TenantId`] its tenant claim:
//! 1–128 printable ASCII characters other than `#`, the key separator.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// A new server id: a ULID, so ids sort by creation time.
pub fn new_id() -> String {
    Ulid::new().to_string()
}

/// Whether `s` could be an id this server issued.
pub fn is_server_id(s: &str) -> bool {
    s.len() == 26 && Ulid::from_string(s).is_ok()
}

/// Whether `s` could be a comment id this server issued: its issue's id, then its own ULID.
pub fn is_comment_id(s: &str) -> bool {
    s.len() == 52 && s.is_char_boundary(26) && is_server_id(&s[..26]) && is_server_id(&s[26..])
}

/// User ids: 1–128 printable ASCII characters other than `#`, which keeps them safe inside keys.
pub fn is_user_id(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// Tenant ids follow the same rule as user ids.
pub fn is_tenant_id(s: &str) -> bool {
    is_user_id(s)
}

/// A string newtype that exists only once its rule holds. Serialized as the plain string;
/// deserializing checks the rule, so an item read back cannot smuggle in a malformed id.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $rule:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The id, if `s` follows the rule.
            pub fn parse(s: &str) -> Option<Self> {
                $rule(s).then(|| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, InvalidId> {
                if $rule(&s) { Ok(Self(s)) } else { Err(InvalidId(stringify!($name))) }
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

/// Why a string is not an id of the named type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {0}")]
pub struct InvalidId(&'static str);

id_type!(
    /// A tenant: the verified token's tenant claim, never a request's own words.
    TenantId,
    is_tenant_id
);
id_type!(
    /// A user: the verified token's `sub`, or a participant or member named in a request.
    UserId,
    is_user_id
);
id_type!(
    /// A project (a ULID this server issued).
    ProjectId,
    is_server_id
);
id_type!(
    /// An issue (a ULID this server issued).
    IssueId,
    is_server_id
);
id_type!(
    /// A team (a ULID this server issued).
    TeamId,
    is_server_id
);
id_type!(
    /// A custom field of a project (a ULID this server issued).
    FieldId,
    is_server_id
);
id_type!(
    /// An invitation to a workspace (a ULID this server issued).
    InvitationId,
    is_server_id
);

id_type!(
    /// A comment: its issue's id followed by its own ULID, so a comment route finds the
    /// comment's item (under its issue) with no lookup, and its own part sorts by time.
    CommentId,
    is_comment_id
);

id_type!(
    /// A saved view: its project's id followed by its own ULID, so a view route finds the
    /// view's item (in its project's collection) with no lookup.
    ViewId,
    is_comment_id
);

impl ViewId {
    /// A fresh id for a new view of `project`.
    pub fn new(project: &ProjectId) -> Self {
        Self(format!("{project}{}", Ulid::new()))
    }

    /// The project the view belongs to.
    pub fn project(&self) -> ProjectId {
        ProjectId(self.0[..26].to_owned())
    }

    /// The view's own part (its sort key in the project's collection).
    pub fn own(&self) -> &str {
        &self.0[26..]
    }
}

impl CommentId {
    /// A fresh id for a new comment on `issue` made at `at` (its ULID's time is the
    /// comment's `created_at`, so the order by id is the order by creation time).
    pub fn new(issue: &IssueId, at: std::time::SystemTime) -> Self {
        Self(format!("{issue}{}", Ulid::from_datetime(at)))
    }

    /// The issue the comment is on.
    pub fn issue(&self) -> IssueId {
        IssueId(self.0[..26].to_owned())
    }

    /// The comment's own part (a ULID: its sort key under the issue).
    pub fn own(&self) -> &str {
        &self.0[26..]
    }

    /// When the comment was made: its ULID's time (to the millisecond).
    pub fn created_at(&self) -> std::time::SystemTime {
        Ulid::from_string(self.own()).map_or(std::time::UNIX_EPOCH, |u| u.datetime())
    }
}

id_type!(
    /// A participant of an issue: a user's id (the token's `sub`) or a team's (a server id).
    /// The participant's kind says which; an issue's validation holds the id to that kind's
    /// rule, and this type to the rule both share.
    ParticipantId,
    is_user_id
);

impl From<UserId> for ParticipantId {
    fn from(id: UserId) -> Self {
        Self(id.0)
    }
}

impl From<TeamId> for ParticipantId {
    fn from(id: TeamId) -> Self {
        Self(id.0)
    }
}

impl TenantId {
    /// `-`: where the indexer parks a record whose keys name no tenant (a valid tenant id that
    /// no token is issued for).
    pub fn unknown() -> Self {
        Self("-".to_owned())
    }
}

macro_rules! new_server_id {
    ($($name:ident),*) => {$(
        impl $name {
            /// A fresh id for a new record.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(new_id())
            }

            /// The id numbered `n` (a ULID of time zero): stable ids for tests and fixtures.
            pub fn numbered(n: u64) -> Self {
                Self(Ulid(u128::from(n)).to_string())
            }
        }
    )*};
}
new_server_id!(ProjectId, IssueId, TeamId, FieldId, InvitationId);

impl FieldId {
    /// `n` of a [`FieldId::numbered`] id (a job named by a revision); 0 for any other id.
    pub fn numbered_value(&self) -> u64 {
        Ulid::from_string(&self.0)
            .ok()
            .and_then(|u| u64::try_from(u.0).ok())
            .unwrap_or(0)
    }
}

impl TenantId {
    /// A new workspace's tenant: a ULID, which no operator-provisioned tenant is given.
    pub fn new_workspace() -> Self {
        Self(new_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbered_ids_give_their_number_back() {
        assert_eq!(FieldId::numbered(42).numbered_value(), 42);
        assert_eq!(FieldId::new().numbered_value(), 0);
    }

    #[test]
    fn new_ids_are_recognised() {
        assert!(is_server_id(&new_id()));
        assert!(IssueId::parse(&IssueId::new()).is_some());
        assert!(!is_server_id("nope"));
        assert!(!is_server_id("../etc"));
        assert!(ProjectId::parse("../etc").is_none());
    }

    #[test]
    fn user_ids_exclude_key_separators() {
        assert!(is_user_id("7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6"));
        assert!(!is_user_id("a#b"));
        assert!(!is_user_id(""));
        assert!(!is_user_id("a b"));
        assert!(UserId::parse(&"u".repeat(129)).is_none());
    }

    #[test]
    fn deserializing_checks_the_rule() {
        let ok: TeamId = serde_json::from_str("\"01ARZ3NDEKTSV4RRFFQ69G5FAV\"").unwrap();
        assert_eq!(ok, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
        assert!(serde_json::from_str::<TeamId>("\"x#y\"").is_err());
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            "\"01ARZ3NDEKTSV4RRFFQ69G5FAV\""
        );
    }

    proptest! {
        #[test]
        fn parse_accepts_exactly_what_the_rule_accepts(s in "\\PC{0,140}") {
            prop_assert_eq!(UserId::parse(&s).is_some(), is_user_id(&s));
            prop_assert_eq!(TenantId::parse(&s).is_some(), is_tenant_id(&s));
            prop_assert_eq!(IssueId::parse(&s).is_some(), is_server_id(&s));
            if let Some(id) = UserId::parse(&s) {
                prop_assert!(!id.contains('#'));
                prop_assert_eq!(id.as_str(), s.as_str());
            }
        }
    }
}
