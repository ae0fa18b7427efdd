//! List pages within Lambda's response limit. Every list route renders its page here: items
//! are rendered one at a time, and a page ends early, before the item that would take it past
//! [`PAGE_BUDGET_BYTES`], with a cursor that resumes exactly at that item. A list is bounded
//! by `limit` (its count) and by this budget (its bytes), whichever comes first.
//!
//! Lambda refuses a synchronous response over 6 MB (6,291,456 bytes), and API Gateway then
//! answers `502`: a page's size is measured as it travels in that response, not as rendered.
//! API Gateway's proxy response carries the body as a JSON string, in which every `"` and `\`
//! of the rendered JSON is escaped (so a value of quotes takes four bytes a character on the
//! wire); [`wire_len`] counts them. A body sent base64-encoded would take 4/3 of its rendered
//! bytes instead, which [`wire_len`] never undercounts by more than that.

use axum::Json;
use serde::Serialize;
use serde_json::value::RawValue;

use super::error::ApiError;
use super::extract::BoundCursor;
use super::views::List;
use crate::cursor::Position;
use crate::store::StoreError;

/// The most a page's items take in Lambda's response payload (as [`wire_len`] counts them):
/// 4 MiB. As a JSON string the body is then at most 4 MiB plus the list's frame, and
/// base64-encoded at most 4/3 of that, 5.34 MiB: either way at least 650 KB under Lambda's
/// 6 MB, left for the frame, the `next_cursor` (at most 2 KB), the headers and the proxy
/// response's own members. One item never comes near it: an issue summary is bounded by the
/// contract (a 256-character title, at most 400 fields of at most 1,024 characters, 100
/// participants with their names) at under 2 MiB on the wire whatever its characters (a test
/// renders the worst), and by DynamoDB's 400 KB item to far less; so a page's first item
/// always fits, and every page moves on.
pub const PAGE_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// A rendered list page: `{"items": [...], "next_cursor": ...}`.
pub type PageBody = Json<List<Box<RawValue>>>;

/// The bytes `json` takes inside a JSON string: its own, plus one for each `"` and `\` that
/// string escaping doubles. (Rendered JSON holds no raw control character: serde escapes
/// them as it renders, and the escapes are ASCII.)
pub fn wire_len(json: &str) -> usize {
    json.len() + json.bytes().filter(|b| matches!(b, b'"' | b'\\')).count()
}

/// A page's running size against its budget.
struct Budget {
    budget: usize,
    used: usize,
    kept: usize,
}

impl Budget {
    fn new(budget: usize) -> Self {
        Self {
            budget,
            used: 0,
            kept: 0,
        }
    }

    /// Keeps an item of `size` wire bytes (after a `,` unless it is the first) if the page
    /// stays within its budget; the first item is always kept.
    fn admit(&mut self, size: usize) -> bool {
        let with = self.used + usize::from(self.kept > 0) + size;
        if self.kept > 0 && with > self.budget {
            return false;
        }
        self.used = with;
        self.kept += 1;
        true
    }
}

/// A list page rendered within the budget: `items` in order, each with the position that
/// resumes right after it, and `next` where the page resumes when every item is kept. When
/// the budget ends the page early, its cursor is the position after the last item kept, so
/// the next page starts exactly at the first item left out (never skipping or repeating one).
pub fn render<T: Serialize>(
    items: impl IntoIterator<Item = (T, Position)>,
    next: Option<Position>,
    cursor: &BoundCursor<'_>,
) -> Result<PageBody, ApiError> {
    let (items, cut) = within(items, PAGE_BUDGET_BYTES)?;
    Ok(Json(List {
        items,
        next_cursor: cut.or(next).map(|p| cursor.seal(&p)),
    }))
}

/// The items rendered, up to `budget`, and the position after the last one kept when the
/// budget left any out.
fn within<T: Serialize>(
    items: impl IntoIterator<Item = (T, Position)>,
    budget: usize,
) -> Result<(Vec<Box<RawValue>>, Option<Position>), ApiError> {
    let mut budget = Budget::new(budget);
    let mut rendered = Vec::new();
    let mut last: Option<Position> = None;
    for (item, after) in items {
        let raw = serde_json::value::to_raw_value(&item).map_err(|e| {
            ApiError::Internal(StoreError::Corrupt(format!("an item does not render: {e}")))
        })?;
        if !budget.admit(wire_len(raw.get())) {
            return Ok((rendered, last));
        }
        rendered.push(raw);
        last = Some(after);
    }
    Ok((rendered, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_counts_what_string_escaping_doubles() {
        assert_eq!(wire_len(r#"{"a":1}"#), 7 + 2);
        assert_eq!(wire_len(r#""\"""#), 4 + 4);
        assert_eq!(wire_len("\"é\""), 4 + 2);
    }

    /// How many items of these wire sizes a page of `budget` keeps.
    fn fit(sizes: &[usize], budget: usize) -> usize {
        let mut b = Budget::new(budget);
        sizes.iter().take_while(|&&s| b.admit(s)).count()
    }

    #[test]
    fn a_page_ends_before_the_item_that_would_pass_the_budget() {
        // 10 + 1 + 10 + 1 + 10 = 32.
        assert_eq!(fit(&[10, 10, 10, 10], 32), 3);
        assert_eq!(fit(&[10, 10, 10, 10], 31), 2);
        assert_eq!(fit(&[10, 10, 10], 1_000), 3);
        assert_eq!(fit(&[], 10), 0);
        // The first item is always kept, however large.
        assert_eq!(fit(&[50, 1], 10), 1);
    }

    fn at(i: usize) -> Position {
        Position::from([("SK".to_string(), format!("{i:03}"))])
    }

    #[test]
    fn a_cut_page_resumes_after_the_last_item_kept() {
        // Items of 100 quotes: 202 rendered bytes, 404 on the wire.
        let items: Vec<(String, Position)> = (0..5).map(|i| ("\"".repeat(100), at(i))).collect();
        let one = wire_len(&serde_json::to_string(&items[0].0).unwrap());
        // The rendered string: 2 quotes and 100 escaped ones (`\"`), each byte of those escaped again.
        assert_eq!(one, 2 * 2 + 100 * 4);
        let (kept, cut) = within(items.clone(), 3 * one + 2).unwrap();
        assert_eq!(kept.len(), 3);
        assert_eq!(cut, Some(at(2)));
        let (kept, cut) = within(items.clone(), 3 * one + 1).unwrap();
        assert_eq!((kept.len(), cut), (2, Some(at(1))));
        // Everything fits: no cut, the page's own `next` stands.
        let (kept, cut) = within(items.clone(), usize::MAX).unwrap();
        assert_eq!((kept.len(), cut), (5, None));
        // A first item over the budget is kept alone.
        let (kept, cut) = within(items, 10).unwrap();
        assert_eq!((kept.len(), cut), (1, Some(at(0))));
    }

    /// The largest list item the contract allows, with every character one that costs the
    /// most on the wire (a `"`: escaped when rendered, and both bytes escaped again in the
    /// proxy response): a 256-character title, 400 text fields of 1,024 characters, 100
    /// participants with 128-byte ids and 128-character names, and an inbox's `via` of 50
    /// teams. DynamoDB's 400 KB item keeps a real one far smaller; even this fits the budget
    /// with room to spare, so a page's first item always fits and every page moves on.
    #[test]
    fn the_largest_item_fits_the_budget() {
        use crate::domain::ids::{FieldId, IssueId, ParticipantId, ProjectId, TeamId};
        use crate::domain::text::{MAX_TEXT_CHARS, MAX_TITLE_CHARS};
        use crate::domain::{
            IssueState, MAX_FIELDS_PER_PROJECT, MAX_PARTICIPANTS, MAX_TEAMS_PER_USER, Participant,
            ParticipantKind, Role,
        };
        use crate::http::views::{InboxItem, IssueView, ParticipantView};
        let quotes = |n: usize| "\"".repeat(n);
        let text = serde_json::to_string(&quotes(MAX_TEXT_CHARS)).unwrap();
        let fields = (0..MAX_FIELDS_PER_PROJECT)
            .map(|_| (FieldId::new(), RawValue::from_string(text.clone()).unwrap()))
            .collect();
        let participants = (0..MAX_PARTICIPANTS)
            .map(|i| ParticipantView {
                participant: Participant {
                    kind: ParticipantKind::User,
                    id: ParticipantId::parse(&format!("{i:03}{}", quotes(125))).unwrap(),
                    role: Role::Watcher,
                },
                display_name: Some(quotes(128)),
            })
            .collect();
        let via = (0..MAX_TEAMS_PER_USER)
            .map(|_| Participant {
                kind: ParticipantKind::Team,
                id: ParticipantId::from(TeamId::new()),
                role: Role::Watcher,
            })
            .collect();
        let item = InboxItem {
            issue: IssueView {
                id: IssueId::new(),
                project_id: ProjectId::new(),
                num: u64::MAX,
                title: quotes(MAX_TITLE_CHARS),
                state: IssueState::Closed,
                description: None,
                fields,
                participants,
                version: u64::MAX,
                created_at: "2026-11-21T20:42:03.123Z".into(),
                updated_at: "2026-11-21T20:42:03.123Z".into(),
                parent_id: Some(IssueId::new()),
                sub_issues: None,
                relations: None,
                comment_count: None,
            },
            via,
        };
        let size = wire_len(&serde_json::to_string(&item).unwrap());
        assert!(size > 1_600_000, "the worst case is rendered: {size}");
        assert!(size < 2 * 1024 * 1024, "{size} bytes on the wire");
        assert!(size < PAGE_BUDGET_BYTES);
    }
}
