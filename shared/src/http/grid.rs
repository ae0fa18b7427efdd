//! The grid: a project's issues sorted by any column, a page at a time. A page is one Query of
//! the column's partition in the index table (two where a descending page crosses from values
//! to issues without one) and one BatchGetItem of the issues, whatever the project's size.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};

use super::AppState;
use super::extract::{ListQuery, unknown_params};
use super::views::{IssueView, List, names_fit, participants_of};
use crate::auth::Caller;
use crate::cursor::{Binding, Position};
use crate::domain::IssueState;
use crate::domain::ids::is_server_id;
use crate::encoding::text::{fold, prefix_key};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::index::ColumnQuery;
use crate::index::{Column, Kind, column_state, encode_bound};
use crate::keys;

const ROUTE: &str = "GET /projects/{project_id}/issues";
/// Cursor member naming the part of the column being read: values, then missing values.
const PHASE: &str = "~phase";
/// Longest `prefix`, in characters (API.md): its key stays well under DynamoDB's 1 KB sort key.
const MAX_PREFIX_CHARS: usize = 256;

/// The interpreted query: what the page reads and what its cursor is bound to.
struct GridQuery {
    column: Column,
    descending: bool,
    state: Option<IssueState>,
    /// Inclusive sort-key range of value entries.
    from: String,
    to: String,
    /// Bounds or a prefix leave issues without a value out.
    filtered: bool,
    /// For text columns, the bounds held to each issue's whole value.
    text: Option<TextBounds>,
    canonical: String,
}

/// A text key holds at most 64 bytes of encoding, so the key range matches a longer bound or
/// prefix on those bytes only: values that agree with it there but not after are in range.
/// The issues a page reads are held to the whole bound (folded, as the keys compare), so a
/// page never shows a value the filter excludes; such a page may hold fewer than `limit`.
#[derive(Debug, Default)]
struct TextBounds {
    gte: Option<String>,
    lte: Option<String>,
    prefix: Option<String>,
}

impl TextBounds {
    fn admits(&self, value: Option<&str>) -> bool {
        let Some(v) = value.map(fold) else {
            return false;
        };
        self.gte.as_ref().is_none_or(|g| v >= *g)
            && self.lte.as_ref().is_none_or(|l| v <= *l)
            && self
                .prefix
                .as_ref()
                .is_none_or(|p| v.starts_with(p.as_str()))
    }
}

/// The text an issue shows in a text column.
fn text_of<'a>(issue: &'a crate::domain::Issue, column: &Column) -> Option<&'a str> {
    match column {
        Column::Title => Some(&issue.title),
        Column::Field(id) => match issue.fields.get(id) {
            Some(crate::domain::values::StoredValue::S(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

fn parse(
    project_id: &str,
    params: &HashMap<String, String>,
    defs: &[crate::domain::values::FieldDef],
) -> Result<GridQuery, ApiError> {
    let mut errors = unknown_params(params, &["sort", "order", "gte", "lte", "prefix", "state"]);
    let column = Column::parse(params.get("sort").map_or("num", String::as_str));
    let kind = column.kind(defs);
    if kind.is_none() {
        errors.push(FieldError::new(
            "sort",
            "must be num, title, state, created_at, updated_at or a field of this project",
        ));
    }
    let descending = match params.get("order").map(String::as_str) {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(_) => {
            errors.push(FieldError::new("order", "must be asc or desc"));
            false
        }
    };
    let state = match params.get("state").map(String::as_str) {
        None => None,
        Some(s) => {
            let parsed = IssueState::parse(s);
            if parsed.is_none() {
                errors.push(FieldError::new("state", "must be open or closed"));
            }
            parsed
        }
    };
    let mut from = keys::index::VALUE_PREFIX.to_string();
    let mut to = keys::index::VALUE_CEILING.to_string();
    let mut bound = |name: &str| -> Option<String> {
        let (k, def) = kind?;
        let raw = params.get(name)?;
        match encode_bound(k, def, raw) {
            Ok(e) => Some(e),
            Err(m) => {
                errors.push(FieldError::new(name, m));
                None
            }
        }
    };
    let gte = bound("gte");
    let lte = bound("lte");
    if let Some(g) = &gte {
        from = from.max(keys::index::value_floor(g));
    }
    if let Some(l) = &lte {
        to = to.min(keys::index::value_ceiling_at(l));
    }
    let prefix = params.get("prefix");
    if let Some(p) = prefix {
        let is_text = matches!(column, Column::Title)
            || (matches!(column, Column::Field(_)) && matches!(kind, Some((Kind::Text, _))));
        if !is_text {
            errors.push(FieldError::new(
                "prefix",
                "applies only to title and text fields",
            ));
        } else if p.is_empty() || p.chars().count() > MAX_PREFIX_CHARS {
            errors.push(FieldError::new(
                "prefix",
                format!("must be 1 to {MAX_PREFIX_CHARS} characters"),
            ));
        } else {
            from = from.max(keys::index::value_floor(&prefix_key(p)));
            to = to.min(keys::index::prefix_ceiling(&prefix_key(p)));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    let canonical = format!(
        "project_id={project_id}&sort={}&order={}&state={}&gte={}&lte={}&prefix={}",
        column.name(),
        if descending { "desc" } else { "asc" },
        state.map_or("", IssueState::as_str),
        gte.unwrap_or_default(),
        lte.unwrap_or_default(),
        prefix.map(|p| fold(p)).unwrap_or_default(),
    );
    let is_text = matches!(column, Column::Title)
        || (matches!(column, Column::Field(_)) && matches!(kind, Some((Kind::Text, _))));
    let filtered = params.contains_key("gte") || params.contains_key("lte") || prefix.is_some();
    let text = (is_text && filtered).then(|| TextBounds {
        gte: params.get("gte").map(|g| fold(g)),
        lte: params.get("lte").map(|l| fold(l)),
        prefix: prefix.map(|p| fold(p)),
    });
    Ok(GridQuery {
        column,
        descending,
        state,
        filtered,
        text,
        from,
        to,
        canonical,
    })
}

/// The phases of a read, in order: ascending reads values then missing ones in one range;
/// descending reads values downwards, then missing ones downwards.
fn ranges(q: &GridQuery) -> Vec<(&'static str, String, String)> {
    if q.filtered {
        vec![("v", q.from.clone(), q.to.clone())]
    } else if q.descending {
        vec![
            (
                "v",
                keys::index::VALUE_PREFIX.into(),
                keys::index::VALUE_CEILING.into(),
            ),
            (
                "m",
                keys::index::MISSING_FLOOR.into(),
                keys::index::MISSING_CEILING.into(),
            ),
        ]
    } else {
        vec![(
            "v",
            keys::index::VALUE_PREFIX.into(),
            keys::index::MISSING_CEILING.into(),
        )]
    }
}

pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    q: ListQuery,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<IssueView>>> {
    if !is_server_id(&project_id) {
        return Err(ApiError::NotFound("project"));
    }
    params.remove("limit");
    params.remove("cursor");
    // Eventually consistent: the grid is fresh within seconds anyway, and a field created a
    // moment ago is not sortable until its column is complete. A just-created project may
    // not be there yet for this read: one consistent read tells before a 404.
    let read = s
        .store
        .project_with_fields_read(&caller.tenant, &project_id, false)
        .await?;
    let read = match read {
        Some(found) => Some(found),
        None => {
            s.store
                .project_with_fields(&caller.tenant, &project_id)
                .await?
        }
    };
    let (_, mut defs) = read.ok_or(ApiError::NotFound("project"))?;
    // A field created a moment ago may be missing from that read too: a query it refuses is
    // parsed again against a consistent read before it is refused.
    let grid = match parse(&project_id, &params, &defs) {
        Ok(grid) => grid,
        Err(first) => match s
            .store
            .project_with_fields(&caller.tenant, &project_id)
            .await?
        {
            Some((_, fresh)) => {
                defs = fresh;
                parse(&project_id, &params, &defs)?
            }
            None => return Err(first),
        },
    };
    let scope_ = Binding {
        tenant: &caller.tenant,
        route: ROUTE,
        params: &grid.canonical,
        caller: None,
    };
    let mut position = q.position(&s, &scope_)?;
    let pk = keys::index::column_pk(
        &caller.tenant,
        &project_id,
        grid.column.name(),
        column_state(grid.state),
    );
    let phases = ranges(&grid);
    let mut phase_index = position
        .as_mut()
        .and_then(|p| p.remove(PHASE))
        .and_then(|name| phases.iter().position(|(n, _, _)| *n == name))
        .unwrap_or(0);
    // Entries read: issue id, sort key, phase.
    let mut entries: Vec<(String, String, &'static str)> = Vec::new();
    let mut next: Option<Position> = None;
    while phase_index < phases.len() {
        let (name, from, to) = &phases[phase_index];
        let remaining = q.limit - entries.len() as i32;
        if remaining == 0 {
            // The page is full exactly at a phase boundary: continue there next time.
            next = Some(Position::from([(PHASE.to_string(), name.to_string())]));
            break;
        }
        if from > to {
            break; // An empty range (e.g. gte above lte); DynamoDB rejects BETWEEN with from > to.
        }
        let query = ColumnQuery {
            pk: pk.clone(),
            from: from.clone(),
            to: to.clone(),
            forward: !grid.descending,
            limit: remaining,
        };
        let page = s
            .store
            .query_column(&query, position.take().as_ref())
            .await?;
        entries.extend(page.items.into_iter().map(|(id, sk)| (id, sk, *name)));
        if let Some(mut p) = page.next {
            p.insert(PHASE.into(), name.to_string());
            next = Some(p);
            break;
        }
        phase_index += 1;
    }
    let ids: Vec<String> = entries.iter().map(|e| e.0.clone()).collect();
    let mut found = s.store.batch_get_issues(&caller.tenant, &ids).await?;
    // Entries of issues deleted (or moved to another state) since they were indexed are skipped.
    let mut issues: Vec<(usize, crate::domain::Issue)> = entries
        .iter()
        .enumerate()
        .filter_map(|(at, e)| found.remove(&e.0).map(|i| (at, i)))
        .filter(|(_, i)| i.project_id == project_id && grid.state.is_none_or(|st| i.state == st))
        .filter(|(_, i)| {
            grid.text
                .as_ref()
                .is_none_or(|t| t.admits(text_of(i, &grid.column)))
        })
        .collect();
    // Names are bounded per page: past them the page ends at the last issue kept, and the
    // cursor points at its entry (a position is the entry's key and its phase).
    let fit = names_fit(issues.iter().map(|(_, i)| i));
    if fit < issues.len() {
        let (at, _) = &issues[fit - 1];
        let (_, sk, phase) = &entries[*at];
        next = Some(Position::from([
            (keys::PK.to_string(), pk.clone()),
            (keys::SK.to_string(), sk.clone()),
            (PHASE.to_string(), phase.to_string()),
        ]));
        issues.truncate(fit);
    }
    let issues: Vec<_> = issues.into_iter().map(|(_, i)| i).collect();
    let names = s
        .store
        .names(&caller.tenant, &participants_of(&issues))
        .await?;
    let items = issues
        .into_iter()
        .map(|i| IssueView::summary(i, &defs, &names))
        .collect();
    Ok(Json(List {
        items,
        next_cursor: next.map(|p| s.cursor_key.seal(&scope_, &p)),
    }))
}
