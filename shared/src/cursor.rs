//! Pagination cursors: a position (DynamoDB's `LastEvaluatedKey`, string attributes only) that
//! is opaque to clients, tamper-evident (HMAC-SHA256) and bound to the tenant, the route, the
//! interpreted query parameters and, where given, the caller.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A position: attribute name to string value.
pub type Position = BTreeMap<String, String>;

/// The key that signs cursors.
#[derive(Clone)]
pub struct CursorKey(Vec<u8>);

impl CursorKey {
    pub fn new(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }
}

/// What a cursor is bound to. `params` is the canonical form of the interpreted query
/// parameters (defaults applied), so equivalent spellings share cursors.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    pub tenant: &'a str,
    pub route: &'a str,
    pub params: &'a str,
    pub caller: Option<&'a str>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CursorError {
    #[error("cursor is malformed")]
    Malformed,
    #[error("cursor was not issued for this request")]
    Foreign,
}

impl CursorKey {
    fn tag(&self, binding: &Binding<'_>, payload: &str) -> Vec<u8> {
        // HMAC accepts keys of any length.
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        // Length-prefixed parts, so no two different bindings produce the same input.
        for part in [
            "gridline-cursor-v1",
            binding.tenant,
            binding.route,
            binding.params,
            binding.caller.unwrap_or(""),
            payload,
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac.finalize().into_bytes().to_vec()
    }

    pub fn seal(&self, binding: &Binding<'_>, position: &Position) -> String {
        let payload = B64.encode(serde_json::to_vec(position).unwrap_or_default());
        let tag = B64.encode(self.tag(binding, &payload));
        format!("{payload}.{tag}")
    }

    pub fn open(&self, binding: &Binding<'_>, cursor: &str) -> Result<Position, CursorError> {
        let (payload, tag) = cursor.split_once('.').ok_or(CursorError::Malformed)?;
        let tag = B64.decode(tag).map_err(|_| CursorError::Malformed)?;
        let expected = self.tag(binding, payload);
        // Constant-time comparison: a cursor is an oracle otherwise.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            tag.as_slice(),
            expected.as_slice(),
        )) {
            return Err(CursorError::Foreign);
        }
        let bytes = B64.decode(payload).map_err(|_| CursorError::Malformed)?;
        serde_json::from_slice(&bytes).map_err(|_| CursorError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn binding<'a>(tenant: &'a str, params: &'a str) -> Binding<'a> {
        Binding {
            tenant,
            route: "GET /projects",
            params,
            caller: None,
        }
    }

    proptest! {
        #[test]
        fn sealed_positions_round_trip(pos in proptest::collection::btree_map("[A-Z0-9]{1,8}", "\\PC{0,40}", 0..5)) {
            let key = CursorKey::new(b"k");
            let s = binding("acme", "limit=10");
            prop_assert_eq!(key.open(&s, &key.seal(&s, &pos)).unwrap(), pos);
        }
    }

    #[test]
    fn cursors_do_not_travel() {
        let key = CursorKey::new(b"k");
        let pos: Position = [("PK".to_string(), "T#acme#P#1".to_string())].into();
        let cursor = key.seal(&binding("acme", "sort=num"), &pos);
        assert_eq!(
            key.open(&binding("other", "sort=num"), &cursor),
            Err(CursorError::Foreign)
        );
        assert_eq!(
            key.open(&binding("acme", "sort=title"), &cursor),
            Err(CursorError::Foreign)
        );
        assert_eq!(
            CursorKey::new(b"x").open(&binding("acme", "sort=num"), &cursor),
            Err(CursorError::Foreign)
        );
        let with_caller = Binding {
            caller: Some("bob"),
            ..binding("acme", "sort=num")
        };
        assert_eq!(key.open(&with_caller, &cursor), Err(CursorError::Foreign));
        let mut tampered = cursor.clone();
        tampered.replace_range(0..1, if cursor.starts_with('e') { "f" } else { "e" });
        assert!(key.open(&binding("acme", "sort=num"), &tampered).is_err());
        assert_eq!(
            key.open(&binding("acme", "sort=num"), "garbage"),
            Err(CursorError::Malformed)
        );
    }
}
