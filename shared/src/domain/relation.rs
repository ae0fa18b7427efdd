//! Relations between issues: the kinds, each with its inverse, and their bound.

/// A relation's kind as one issue sees it. Declared in the order `GET /issues/{id}` lists
/// relations (`blocked_by`, `blocks`, `duplicated_by`, `duplicates`, `relates_to`), so the
/// derived order is that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RelationKind {
    BlockedBy,
    Blocks,
    DuplicatedBy,
    Duplicates,
    RelatesTo,
}

/// Relations an issue may have, counting both directions.
pub const MAX_RELATIONS: u32 = 100;

impl RelationKind {
    pub const ALL: [RelationKind; 5] = [
        RelationKind::BlockedBy,
        RelationKind::Blocks,
        RelationKind::DuplicatedBy,
        RelationKind::Duplicates,
        RelationKind::RelatesTo,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RelationKind::BlockedBy => "blocked_by",
            RelationKind::Blocks => "blocks",
            RelationKind::DuplicatedBy => "duplicated_by",
            RelationKind::Duplicates => "duplicates",
            RelationKind::RelatesTo => "relates_to",
        }
    }

    /// The kind the other issue sees.
    pub fn inverse(self) -> Self {
        match self {
            RelationKind::BlockedBy => RelationKind::Blocks,
            RelationKind::Blocks => RelationKind::BlockedBy,
            RelationKind::DuplicatedBy => RelationKind::Duplicates,
            RelationKind::Duplicates => RelationKind::DuplicatedBy,
            RelationKind::RelatesTo => RelationKind::RelatesTo,
        }
    }
}

impl serde::Serialize for RelationKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_back_and_its_inverse_inverts_back() {
        for k in RelationKind::ALL {
            assert_eq!(RelationKind::parse(k.as_str()), Some(k));
            assert_eq!(k.inverse().inverse(), k);
        }
        assert_eq!(RelationKind::parse("parent_of"), None);
    }

    #[test]
    fn kinds_order_as_the_contract_lists_them() {
        let mut names: Vec<&str> = RelationKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        let ordered: Vec<&str> = RelationKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ordered);
    }
}
