//! Custom-field definitions and their values, validated by type exactly as the API contract says.

use crate::domain::ids::FieldId;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime, UtcOffset};

use super::decimal::DynNumber;
use super::text;

/// The five column types a custom field can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Text,
    Number,
    Date,
    Datetime,
    Select,
}

/// A field definition as stored and returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDef {
    pub id: FieldId,
    pub name: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// Option labels for `select`, in sort order; absent for other types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// Whether the field's column of the index is complete, so the grid may sort by it. A
    /// field added to a project that has issues is not, until its field job has indexed them
    /// all (`crate::indexer::field_job`). A definition stored before the flag existed was
    /// indexed whole when it was added: absent reads as `true`.
    #[serde(default = "complete")]
    pub sortable: bool,
}

fn complete() -> bool {
    true
}

impl FieldDef {
    /// What the definition counts against the project's 64 KB: its name and option labels,
    /// in UTF-8 bytes.
    pub fn definition_bytes(&self) -> usize {
        self.name.len()
            + self
                .options
                .iter()
                .flatten()
                .map(String::len)
                .sum::<usize>()
    }
}

/// A validated value in its stored form: numbers keep their exact digits as a DynamoDB `N`,
/// every other type is a string (`S`) in its canonical form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredValue {
    S(String),
    N(DynNumber),
}

impl StoredValue {
    /// The value as JSON: numbers as a number literal with their exact digits.
    pub fn to_json(&self) -> Box<RawValue> {
        let text = match self {
            StoredValue::S(s) => serde_json::to_string(s).unwrap_or_else(|_| "null".into()),
            StoredValue::N(n) => n.to_string(),
        };
        // Both forms are valid JSON by construction (a serialized string, a canonical number).
        RawValue::from_string(text).unwrap_or_else(|_| null_raw())
    }
}

fn null_raw() -> Box<RawValue> {
    // "null" is valid JSON; this cannot fail.
    RawValue::from_string("null".to_string()).unwrap_or_default()
}

/// Validates `raw` (a JSON value straight from the request) as a value of `def`.
/// Returns the message for the client on failure.
pub fn parse_value(def: &FieldDef, raw: &RawValue) -> Result<StoredValue, String> {
    let json = raw.get().trim();
    match def.field_type {
        FieldType::Number => parse_number_json(json).map(StoredValue::N),
        FieldType::Text => {
            let s = json_string(def.field_type, json)?;
            text::check_text(&s, 1, text::MAX_TEXT_CHARS).map(|_| StoredValue::S(s))
        }
        FieldType::Date => parse_date(&json_string(def.field_type, json)?).map(StoredValue::S),
        FieldType::Datetime => {
            parse_datetime(&json_string(def.field_type, json)?).map(StoredValue::S)
        }
        FieldType::Select => {
            let s = json_string(def.field_type, json)?;
            let options = def.options.as_deref().unwrap_or_default();
            if options.contains(&s) {
                Ok(StoredValue::S(s))
            } else {
                Err("must be one of the field's options".into())
            }
        }
    }
}

/// A JSON number literal is taken verbatim; a JSON string must hold JSON number syntax.
fn parse_number_json(json: &str) -> Result<DynNumber, String> {
    const SYNTAX: &str = "must be a number or a string in JSON number syntax";
    let literal = if json.starts_with('"') {
        serde_json::from_str::<String>(json).map_err(|_| SYNTAX.to_string())?
    } else if json.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        json.to_string()
    } else {
        return Err(SYNTAX.into());
    };
    DynNumber::parse(&literal).map_err(|e| format!("number {e}"))
}

fn json_string(t: FieldType, json: &str) -> Result<String, String> {
    serde_json::from_str(json).map_err(|_| format!("must be a string ({} field)", type_name(t)))
}

fn type_name(t: FieldType) -> &'static str {
    match t {
        FieldType::Text => "text",
        FieldType::Number => "number",
        FieldType::Date => "date",
        FieldType::Datetime => "datetime",
        FieldType::Select => "select",
    }
}

/// `YYYY-MM-DD`, a real calendar date.
pub fn parse_date(s: &str) -> Result<String, String> {
    let format = format_description!("[year]-[month]-[day]");
    if s.len() != 10 {
        return Err("must be a date as YYYY-MM-DD".into());
    }
    Date::parse(s, &format)
        .map(|_| s.to_string())
        .map_err(|_| "must be a date as YYYY-MM-DD".into())
}

/// RFC 3339 with any offset, returned as UTC with milliseconds (`2026-11-21T20:42:03.123Z`).
/// Sub-millisecond digits are truncated: every timestamp in the API has millisecond precision.
pub fn parse_datetime(s: &str) -> Result<String, String> {
    let parsed = OffsetDateTime::parse(s, &Rfc3339)
        .map_err(|_| "must be an RFC 3339 date-time, e.g. 2026-11-21T20:42:03.123Z".to_string())?
        .to_offset(UtcOffset::UTC);
    if !(0..=9999).contains(&parsed.year()) {
        return Err("must be between years 0000 and 9999 in UTC".into());
    }
    Ok(format_timestamp(parsed))
}

/// The API's timestamp form: RFC 3339, UTC, milliseconds.
pub fn format_timestamp(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// Validates a field definition's body (`name`, `type`, `options`).
pub fn check_field_def(
    name: &str,
    field_type: FieldType,
    options: Option<&[String]>,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    if let Err(m) = text::check_text(name, 1, 128) {
        errors.push(("name".into(), m));
    }
    match (field_type, options) {
        (FieldType::Select, None) => {
            errors.push(("options".into(), "is required for select fields".into()))
        }
        (FieldType::Select, Some(opts)) => {
            if opts.is_empty() || opts.len() > 100 {
                errors.push(("options".into(), "must list 1 to 100 labels".into()));
            }
            for (i, o) in opts.iter().enumerate() {
                if let Err(m) = text::check_text(o, 1, 100) {
                    errors.push((format!("options[{i}]"), m));
                }
                if opts[..i].contains(o) {
                    errors.push((
                        format!("options[{i}]"),
                        "duplicates an earlier label".into(),
                    ));
                }
            }
        }
        (_, Some(_)) => errors.push(("options".into(), "is only allowed for select fields".into())),
        (_, None) => {}
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(t: FieldType) -> FieldDef {
        FieldDef {
            id: FieldId::numbered(1),
            name: "f".into(),
            field_type: t,
            options: (t == FieldType::Select).then(|| vec!["low".into(), "high".into()]),
            sortable: true,
        }
    }

    fn parse(t: FieldType, json: &str) -> Result<StoredValue, String> {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        parse_value(&def(t), &raw)
    }

    #[test]
    fn numbers_keep_their_literal_digits() {
        let n = parse(FieldType::Number, "123456789012345678901234567890.12345678").unwrap();
        assert_eq!(n.to_json().get(), "123456789012345678901234567890.12345678");
        assert_eq!(
            parse(FieldType::Number, "\"-12.5\"")
                .unwrap()
                .to_json()
                .get(),
            "-12.5"
        );
        assert_eq!(
            parse(FieldType::Number, "\"1E+100\"")
                .unwrap()
                .to_json()
                .get(),
            "1E+100"
        );
        assert!(parse(FieldType::Number, "true").is_err());
        assert!(parse(FieldType::Number, "\"12 \"").is_err());
        assert!(parse(FieldType::Number, "1E+126").is_err());
    }

    #[test]
    fn datetimes_are_stored_in_utc_with_milliseconds() {
        assert_eq!(
            parse(FieldType::Datetime, "\"2026-11-21T22:42:03.123456+02:00\"").unwrap(),
            StoredValue::S("2026-11-21T20:42:03.123Z".into())
        );
        assert_eq!(
            parse(FieldType::Datetime, "\"2026-11-21T20:42:03Z\"").unwrap(),
            StoredValue::S("2026-11-21T20:42:03.000Z".into())
        );
        assert!(parse(FieldType::Datetime, "\"2026-11-21\"").is_err());
    }

    #[test]
    fn dates_must_be_real_calendar_days() {
        assert!(parse(FieldType::Date, "\"2024-02-29\"").is_ok());
        assert!(parse(FieldType::Date, "\"2023-02-29\"").is_err());
        assert!(parse(FieldType::Date, "\"2023-2-1\"").is_err());
    }

    #[test]
    fn select_takes_only_option_labels_and_text_rejects_controls() {
        assert!(parse(FieldType::Select, "\"high\"").is_ok());
        assert!(parse(FieldType::Select, "\"HIGH\"").is_err());
        assert!(parse(FieldType::Text, "\"a\\u0007b\"").is_err());
        assert!(parse(FieldType::Text, "\"\"").is_err());
        assert!(parse(FieldType::Text, &format!("\"{}\"", "é".repeat(1024))).is_ok());
        assert!(parse(FieldType::Text, &format!("\"{}\"", "é".repeat(1025))).is_err());
        assert!(parse(FieldType::Text, "5").is_err());
    }
}
