//! Filters on any columns: the grid's `where`, a JSON array of conditions an issue must all
//! meet (`[["<column>","<op>",<value>], ...]`).
//!
//! [`Filter::parse`] checks a `where` against the project's fields and turns every value into
//! the form it is compared in: text folded (NFC, then simple case folding: text compares as it
//! sorts), numbers, dates, datetimes, select options and issue numbers in their order-preserving
//! encodings (the same strings the index's sort keys hold, so comparing them compares the
//! values). [`Filter::matches`] holds an issue to every condition; it reads only what an
//! entry's summary carries, so a filtered page needs no read beyond the entries.
//!
//! The planner's part ([`Filter::states`], [`Filter::narrowing`], [`Filter::equality_source`])
//! says where a condition lets a page read less than the sort column's whole partition; the
//! grid ([`crate::read::grid`]) chooses among them.

use serde_json::value::RawValue;

use crate::domain::decimal::DynNumber;
use crate::domain::ids::{IssueId, ParticipantId};
use crate::domain::text::{MAX_TITLE_CHARS, check_text};
use crate::domain::values::{FieldDef, StoredValue, parse_datetime, parse_value};
use crate::domain::{FieldError, Issue, IssueState, ParticipantKind, Role};
use crate::encoding;
use crate::encoding::text::{fold, prefix_key};
use crate::keys;
use crate::model::record::{IssueRecord, ValueRef};
use crate::model::{Column, Kind};

/// Most conditions in one `where`.
pub const MAX_CONDITIONS: usize = 10;
/// Most values an `in` takes.
pub const MAX_IN_VALUES: usize = 100;
/// Longest `prefix` value, in characters (as the grid's own `prefix`).
pub const MAX_PREFIX_CHARS: usize = 256;

/// A condition's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    Prefix,
    Exists,
    Missing,
}

impl Op {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "eq" => Self::Eq,
            "ne" => Self::Ne,
            "lt" => Self::Lt,
            "lte" => Self::Lte,
            "gt" => Self::Gt,
            "gte" => Self::Gte,
            "in" => Self::In,
            "prefix" => Self::Prefix,
            "exists" => Self::Exists,
            "missing" => Self::Missing,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eq => "eq",
            Self::Ne => "ne",
            Self::Lt => "lt",
            Self::Lte => "lte",
            Self::Gt => "gt",
            Self::Gte => "gte",
            Self::In => "in",
            Self::Prefix => "prefix",
            Self::Exists => "exists",
            Self::Missing => "missing",
        }
    }

    /// Whether the operator orders values (and so fits only columns that have an order).
    fn orders(self) -> bool {
        matches!(self, Self::Lt | Self::Lte | Self::Gt | Self::Gte)
    }
}

/// What a condition is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A sortable column (built-in or a field), with its kind and, for a field, its definition.
    Column(Column, Kind, Option<FieldDef>),
    /// The issue's parent (an issue id).
    Parent,
    /// The issue's participants.
    Participant,
}

/// A condition's value, in the form it is compared in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operand {
    /// A column value's comparable key: text folded, every other kind encoded.
    Key(String),
    /// An issue id (`parent`).
    Issue(String),
    /// A participant, with the role it must have, if any.
    Participant {
        kind: ParticipantKind,
        id: String,
        role: Option<Role>,
    },
}

/// One condition: a target, an operator and its values (none for `exists` and `missing`,
/// several for `in`, one otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub target: Target,
    pub op: Op,
    pub operands: Vec<Operand>,
}

/// A parsed `where`: conditions all of which an issue must meet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub conditions: Vec<Condition>,
}

/// The comparable key of an issue's value in a column: what [`Operand::Key`] holds. `None`
/// when the issue has no value (or a select label no longer among the options, which the
/// index counts as missing too).
pub fn column_key(
    issue: &IssueRecord<'_>,
    column: &Column,
    def: Option<&FieldDef>,
) -> Option<String> {
    match column {
        Column::Num => Some(format!("{:020}", issue.num)),
        Column::Title => Some(fold(issue.title)),
        Column::State => Some(issue.state.as_str().to_string()),
        Column::CreatedAt => Some(encoding::date(issue.created_at)),
        Column::UpdatedAt => Some(encoding::date(issue.updated_at)),
        Column::Field(id) => value_key(def?, issue.fields.get(id.as_str())?),
    }
}

/// The comparable key of a value of field `def`.
fn value_key(def: &FieldDef, value: ValueRef<'_>) -> Option<String> {
    use crate::domain::values::FieldType;
    match (def.field_type, value) {
        (FieldType::Number, ValueRef::Number(n)) => Some(encoding::number::encode(n)),
        (FieldType::Number, ValueRef::N(raw)) => DynNumber::parse(raw)
            .ok()
            .map(|n| encoding::number::encode(&n)),
        (FieldType::Text, ValueRef::S(s)) => Some(fold(s)),
        (FieldType::Date | FieldType::Datetime, ValueRef::S(s)) => Some(encoding::date(s)),
        (FieldType::Select, ValueRef::S(s)) => {
            let position = def.options.as_deref()?.iter().position(|o| o == s)?;
            Some(encoding::select(position))
        }
        _ => None,
    }
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Parses a `where` against the project's fields; every fault is named by its condition
    /// (`where[2]`), or `where` for the array itself.
    pub fn parse(raw: &str, defs: &[FieldDef]) -> Result<Self, Vec<FieldError>> {
        let list: Vec<Box<RawValue>> = serde_json::from_str(raw).map_err(|_| {
            vec![FieldError::new(
                "where",
                "must be a JSON array of conditions [column, operator, value]",
            )]
        })?;
        if list.len() > MAX_CONDITIONS {
            return Err(vec![FieldError::new(
                "where",
                format!("holds at most {MAX_CONDITIONS} conditions"),
            )]);
        }
        let mut errors = Vec::new();
        let mut conditions = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            match parse_condition(item, defs) {
                Ok(c) => conditions.push(c),
                Err(m) => errors.push(FieldError::new(format!("where[{i}]"), m)),
            }
        }
        if errors.is_empty() {
            Ok(Self { conditions })
        } else {
            Err(errors)
        }
    }

    /// Whether the issue meets every condition.
    pub fn matches(&self, issue: &Issue) -> bool {
        self.matches_record(&IssueRecord::of(issue))
    }

    /// [`Filter::matches`] for an issue as the indexer reads it (from a stream image).
    pub fn matches_record(&self, issue: &IssueRecord<'_>) -> bool {
        self.conditions.iter().all(|c| c.matches(issue))
    }

    /// The interpreted form a cursor is bound to: equivalent spellings (another case of a
    /// text, another offset of a datetime, values or conditions in another order, repeats)
    /// share it.
    pub fn canonical(&self) -> String {
        let mut conditions: Vec<String> =
            self.conditions.iter().map(Condition::canonical).collect();
        conditions.sort();
        conditions.dedup();
        serde_json::to_string(&conditions).unwrap_or_default()
    }

    /// The states an issue meeting every condition can be in (the grid reads only their
    /// partitions): each condition on `state` is tried on both.
    pub fn states(&self) -> Vec<IssueState> {
        [IssueState::Closed, IssueState::Open]
            .into_iter()
            .filter(|s| {
                self.conditions
                    .iter()
                    .filter(|c| matches!(c.target, Target::Column(Column::State, ..)))
                    .all(|c| c.holds(Some(s.as_str())))
            })
            .collect()
    }

    /// The inclusive sort-key range of `column`'s value entries that holds every issue meeting
    /// the conditions on that column (`None`: no condition narrows it). Conditions that
    /// narrow leave issues without a value out; the range may hold more than the matches
    /// (text keys are cut at 64 bytes, `in` reads from its lowest value to its highest), and
    /// [`Filter::matches`] holds each issue read to the conditions exactly.
    pub fn narrowing(&self, column: &Column) -> Option<(String, String)> {
        let mut range: Option<(String, String)> = None;
        for c in &self.conditions {
            let Target::Column(col, kind, _) = &c.target else {
                continue;
            };
            if col != column {
                continue;
            }
            let Some((from, to)) = c.key_range(*kind) else {
                continue;
            };
            range = Some(match range {
                None => (from, to),
                Some((f, t)) => (f.max(from), t.min(to)),
            });
        }
        range
    }

    /// A column whose entries with one value hold exactly the issues of an `eq` condition,
    /// by number, and that range of its sort keys: a grid sorted by `num` reads it instead of
    /// the `num` column's whole partition. Only kinds whose equal values share one sort key
    /// qualify (numbers, dates, datetimes, select options: text keys order equal values by
    /// their original spelling first), and only a field whose column is complete. A
    /// condition on a `select` field is preferred (an option is usually shared by a fraction
    /// of the issues, a number or a date by fewer); among equals, the least canonical form,
    /// so the choice does not depend on the order of the conditions. Returns the column, the
    /// value's key and its range of sort keys.
    pub fn equality_source(&self) -> Option<(Column, String, (String, String))> {
        let (_, col, key) = self
            .conditions
            .iter()
            .filter_map(|c| match (&c.target, c.op, c.operands.first()) {
                (
                    Target::Column(col @ Column::Field(_), kind, Some(def)),
                    Op::Eq,
                    Some(Operand::Key(key)),
                ) if def.sortable && *kind != Kind::Text => {
                    Some(((*kind != Kind::Select, c.canonical()), col, key))
                }
                _ => None,
            })
            .min_by(|a, b| a.0.cmp(&b.0))?;
        let range = (
            keys::index::value_floor(key),
            keys::index::value_ceiling_at(key),
        );
        Some((col.clone(), key.clone(), range))
    }
}

fn target_name(target: &Target) -> &str {
    match target {
        Target::Column(column, ..) => column.name(),
        Target::Parent => "parent",
        Target::Participant => "participant",
    }
}

fn canonical_operand(operand: &Operand) -> String {
    match operand {
        Operand::Key(k) | Operand::Issue(k) => k.clone(),
        Operand::Participant { kind, id, role } => {
            format!("{}:{id}:{}", kind.as_str(), role.map_or("", |r| r.as_str()))
        }
    }
}

impl Condition {
    /// The condition as interpreted, in one string: its target, operator and values in
    /// their compared form (already sorted).
    fn canonical(&self) -> String {
        let operands: Vec<String> = self.operands.iter().map(canonical_operand).collect();
        serde_json::json!([target_name(&self.target), self.op.as_str(), operands]).to_string()
    }

    fn matches(&self, issue: &IssueRecord<'_>) -> bool {
        match &self.target {
            Target::Column(column, _, def) => self.holds(column_key(issue, column, def.as_ref())),
            Target::Parent => self.holds(issue.parent_id),
            Target::Participant => self.holds_participants(issue),
        }
    }

    /// The operator applied to a value's key (`None`: no value).
    fn holds<K: AsRef<str>>(&self, value: Option<K>) -> bool {
        fn key(o: &Operand) -> &str {
            match o {
                Operand::Key(k) | Operand::Issue(k) => k.as_str(),
                Operand::Participant { .. } => "",
            }
        }
        let first = self.operands.first().map(key).unwrap_or_default();
        let Some(v) = value else {
            return matches!(self.op, Op::Ne | Op::Missing);
        };
        let v = v.as_ref();
        match self.op {
            Op::Eq => v == first,
            Op::Ne => v != first,
            Op::Lt => v < first,
            Op::Lte => v <= first,
            Op::Gt => v > first,
            Op::Gte => v >= first,
            // Operands are sorted and of one kind (see `parse_condition`).
            Op::In => self.operands.binary_search_by(|o| key(o).cmp(v)).is_ok(),
            Op::Prefix => v.starts_with(first),
            Op::Exists => true,
            Op::Missing => false,
        }
    }

    /// `eq`: the issue has one of the participants named (with its role, where one is
    /// named); `ne`: it has none of them; `exists`/`missing`: it has participants or none.
    fn holds_participants(&self, issue: &IssueRecord<'_>) -> bool {
        // Each of the issue's participants is looked up among the sorted operands, as named
        // without a role and with its own: at most 100 × 2 searches, whatever `in` holds.
        let named = || {
            issue.seats.iter().any(|p| {
                [None, Some(p.role)].into_iter().any(|role| {
                    let wanted = Operand::Participant {
                        kind: p.kind,
                        id: p.id.to_string(),
                        role,
                    };
                    self.operands.binary_search(&wanted).is_ok()
                })
            })
        };
        match self.op {
            Op::Eq | Op::In => named(),
            Op::Ne => !named(),
            Op::Exists => !issue.seats.is_empty(),
            Op::Missing => issue.seats.is_empty(),
            _ => false,
        }
    }

    /// The sort-key range of value entries that holds every issue meeting this condition.
    fn key_range(&self, kind: Kind) -> Option<(String, String)> {
        use keys::index::{VALUE_CEILING, VALUE_PREFIX, prefix_ceiling, value_ceiling_at};
        // A text key is `fold SEP original`, cut at 64 bytes: a range on the folded text cut
        // the same way holds every spelling of it.
        let floor = |k: &str| match kind {
            Kind::Text => keys::index::value_floor(&prefix_key(k)),
            _ => keys::index::value_floor(k),
        };
        let ceiling = |k: &str| match kind {
            Kind::Text => prefix_ceiling(&prefix_key(k)),
            _ => value_ceiling_at(k),
        };
        let keys: Vec<&str> = self
            .operands
            .iter()
            .filter_map(|o| match o {
                Operand::Key(k) => Some(k.as_str()),
                _ => None,
            })
            .collect();
        let (low, high) = (keys.iter().min()?, keys.iter().max()?);
        let (all_from, all_to) = (VALUE_PREFIX.to_string(), VALUE_CEILING.to_string());
        Some(match self.op {
            Op::Eq | Op::In => (floor(low), ceiling(high)),
            Op::Prefix => (floor(low), prefix_ceiling(&prefix_key(low))),
            Op::Gt | Op::Gte => (floor(low), all_to),
            Op::Lt | Op::Lte => (all_from, ceiling(high)),
            Op::Ne | Op::Exists | Op::Missing => return None,
        })
    }
}

/// One condition: `[column, op]` or `[column, op, value]`.
fn parse_condition(item: &RawValue, defs: &[FieldDef]) -> Result<Condition, String> {
    const SHAPE: &str = "must be [column, operator] or [column, operator, value]";
    let parts: Vec<Box<RawValue>> = serde_json::from_str(item.get()).map_err(|_| SHAPE)?;
    let (column, op, value) = match parts.as_slice() {
        [c, o] => (c, o, None),
        [c, o, v] => (c, o, Some(v.as_ref())),
        _ => return Err(SHAPE.into()),
    };
    let column: String =
        serde_json::from_str(column.get()).map_err(|_| "the column must be a string")?;
    let op: String = serde_json::from_str(op.get()).map_err(|_| "the operator must be a string")?;
    let target = parse_target(&column, defs)?;
    let op = Op::parse(&op).ok_or_else(|| {
        format!("unknown operator {op:?}: eq, ne, lt, lte, gt, gte, in, prefix, exists or missing")
    })?;
    check_fit(&target, op, &column)?;
    let operands = match (op, value) {
        (Op::Exists | Op::Missing, None) => Vec::new(),
        (Op::Exists | Op::Missing, Some(_)) => {
            return Err(format!("{} takes no value", op.as_str()));
        }
        (_, None) => return Err(format!("{} takes a value", op.as_str())),
        (Op::In, Some(v)) => parse_in(&target, v)?,
        (Op::Prefix, Some(v)) => vec![parse_prefix(v)?],
        (_, Some(v)) => vec![parse_operand(&target, v)?],
    };
    // Sorted and without repeats: `in` and participant lookups are binary searches, and the
    // canonical form does not depend on the order the values came in.
    let mut operands = operands;
    operands.sort();
    operands.dedup();
    Ok(Condition {
        target,
        op,
        operands,
    })
}

fn parse_target(column: &str, defs: &[FieldDef]) -> Result<Target, String> {
    match column {
        "parent" => return Ok(Target::Parent),
        "participant" => return Ok(Target::Participant),
        _ => {}
    }
    let col = Column::parse(column);
    let (kind, def) = col.kind(defs).ok_or_else(|| {
        format!(
            "unknown column {column:?}: a field of this project, title, state, num, \
             created_at, updated_at, parent or participant"
        )
    })?;
    Ok(Target::Column(col.clone(), kind, def.cloned()))
}

/// Whether the operator fits the column: `prefix` only text fields and `title`; ordering
/// operators only columns with an order (not `parent` or `participant`).
fn check_fit(target: &Target, op: Op, column: &str) -> Result<(), String> {
    let fits = match target {
        Target::Column(col, kind, _) => match op {
            Op::Prefix => *kind == Kind::Text && *col != Column::State,
            _ => true,
        },
        Target::Parent | Target::Participant => !op.orders() && op != Op::Prefix,
    };
    if fits {
        Ok(())
    } else {
        Err(format!("{} does not apply to {column}", op.as_str()))
    }
}

fn parse_in(target: &Target, raw: &RawValue) -> Result<Vec<Operand>, String> {
    let values: Vec<Box<RawValue>> = serde_json::from_str(raw.get())
        .map_err(|_| format!("in takes an array of 1 to {MAX_IN_VALUES} values"))?;
    if values.is_empty() || values.len() > MAX_IN_VALUES {
        return Err(format!("in takes 1 to {MAX_IN_VALUES} values"));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| parse_operand(target, v).map_err(|m| format!("value {i}: {m}")))
        .collect()
}

fn parse_prefix(raw: &RawValue) -> Result<Operand, String> {
    let p: String = serde_json::from_str(raw.get()).map_err(|_| "prefix takes a string")?;
    check_text(&p, 1, MAX_PREFIX_CHARS)?;
    Ok(Operand::Key(fold(&p)))
}

/// A value in the target's own type, in its compared form.
fn parse_operand(target: &Target, raw: &RawValue) -> Result<Operand, String> {
    let string = || -> Result<String, String> {
        serde_json::from_str(raw.get()).map_err(|_| "must be a string".to_string())
    };
    match target {
        Target::Parent => {
            let id = string()?;
            IssueId::parse(&id)
                .map(|id| Operand::Issue(id.to_string()))
                .ok_or_else(|| "must be an issue id".into())
        }
        Target::Participant => parse_participant(raw),
        Target::Column(column, _, def) => column_operand(column, def.as_ref(), raw, string),
    }
}

fn column_operand(
    column: &Column,
    def: Option<&FieldDef>,
    raw: &RawValue,
    string: impl Fn() -> Result<String, String>,
) -> Result<Operand, String> {
    let key = match (column, def) {
        (Column::Num, _) => serde_json::from_str::<u64>(raw.get())
            .map(|n| format!("{n:020}"))
            .map_err(|_| "must be a whole number (an issue number)".to_string())?,
        (Column::Title, _) => {
            let s = string()?;
            check_text(&s, 1, MAX_TITLE_CHARS)?;
            fold(&s)
        }
        (Column::State, _) => {
            let s = string()?;
            IssueState::parse(&s).ok_or("must be open or closed")?;
            s
        }
        (Column::CreatedAt | Column::UpdatedAt, _) => encoding::date(&parse_datetime(&string()?)?),
        (Column::Field(_), Some(def)) => {
            let value = parse_value(def, raw)?;
            let value = match &value {
                StoredValue::S(s) => ValueRef::S(s),
                StoredValue::N(n) => ValueRef::Number(n),
            };
            value_key(def, value).ok_or("must be one of the field's options")?
        }
        (Column::Field(_), None) => return Err("unknown field".into()),
    };
    Ok(Operand::Key(key))
}

/// `{"kind","id"}`, optionally with `"role"`.
fn parse_participant(raw: &RawValue) -> Result<Operand, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Named {
        kind: String,
        id: String,
        role: Option<String>,
    }
    const SHAPE: &str = "must be {\"kind\": \"user\"|\"team\", \"id\", \"role\"?}";
    let named: Named = serde_json::from_str(raw.get()).map_err(|_| SHAPE)?;
    let kind = ParticipantKind::parse(&named.kind).ok_or("kind must be user or team")?;
    if ParticipantId::parse(&named.id).is_none() {
        return Err("id must be a user or team id".into());
    }
    let role = match named.role.as_deref() {
        None => None,
        Some(r) => Some(Role::parse(r).ok_or("role must be assignee, reporter or watcher")?),
    };
    Ok(Operand::Participant {
        kind,
        id: named.id,
        role,
    })
}

/// `order`: `asc` (the default) or `desc`; whether it is descending (a grid's and a view's).
pub(crate) fn parse_order(order: Option<&str>, errors: &mut Vec<FieldError>) -> bool {
    match order {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(_) => {
            errors.push(FieldError::new("order", "must be asc or desc"));
            false
        }
    }
}

/// `state`: `open` or `closed`, or none (every state).
pub(crate) fn parse_state(state: Option<&str>, errors: &mut Vec<FieldError>) -> Option<IssueState> {
    let parsed = IssueState::parse(state?);
    if parsed.is_none() {
        errors.push(FieldError::new("state", "must be open or closed"));
    }
    parsed
}

#[cfg(test)]
mod tests;
