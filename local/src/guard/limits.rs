//! DynamoDB's limits where the embedded engine does not enforce them.
//!
//! dynoxide 3.2 enforces, with AWS's own texts, nearly every limit AWS has (probed one by one in
//! `local/tests/system/limits.rs`): item 400 KB on every write path (an update's resulting item
//! included), partition key 2,048 B and sort key 1,024 B, 4 KB per expression, BatchWriteItem
//! 25 items / 16 MB, BatchGetItem 100 keys / 16 MB (the rest as `UnprocessedKeys`),
//! TransactWriteItems 100 items / 4 MB, and a Query/Scan page of 1 MB counted before the
//! filter. Refusing those again here would only risk a second, different answer, so this module
//! holds what the engine lets through:
//!
//! - the size of a secondary index's key values (2,048 B partition, 1,024 B sort): the engine
//!   checks only their type, AWS refuses the write;
//! - a Query/Scan answer holding more than 1 MB of items, cut as DynamoDB cuts a page (a safety
//!   net: the engine already pages at 1 MB, so its answers stand unchanged).

use gridline::keys::{GSI1, GSI1_PK, GSI1_SK};
use serde_json::{Map, Value};

/// A request AWS would refuse, with the error it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error's type, e.g. `ValidationException` (sent as `__type`).
    pub code: &'static str,
    /// AWS's message text.
    pub message: String,
}

/// DynamoDB's largest item, in bytes (400 KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// The most a Query or Scan reads for one page (1 MB).
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;

const PK: &str = "PK";
const SK: &str = "SK";

/// Every secondary index key of the template's tables: (index, attribute, most bytes). A test
/// keeps it equal to `template.yaml`.
pub const INDEX_KEYS: &[(&str, &str, usize)] = &[(GSI1, GSI1_PK, 2048), (GSI1, GSI1_SK, 1024)];

/// Checks a DynamoDB request (`operation` is the `X-Amz-Target` suffix, e.g. `PutItem`; `body`
/// the JSON request) against the limits AWS enforces.
pub fn check_request(operation: &str, body: &Value) -> Result<(), Refusal> {
    match operation {
        "PutItem" => check_put(body),
        "UpdateItem" => check_update(body),
        "BatchWriteItem" => {
            let requests = body
                .get("RequestItems")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|tables| tables.values())
                .filter_map(Value::as_array)
                .flatten();
            for request in requests {
                if let Some(put) = request.get("PutRequest") {
                    check_put(put)?;
                }
            }
            Ok(())
        }
        "TransactWriteItems" => {
            let actions = body
                .get("TransactItems")
                .and_then(Value::as_array)
                .into_iter()
                .flatten();
            for action in actions {
                if let Some(put) = action.get("Put") {
                    check_put(put)?;
                }
                if let Some(update) = action.get("Update") {
                    check_update(update)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A put's item (`{"Item": …}`), held to the index key limits.
fn check_put(put: &Value) -> Result<(), Refusal> {
    let Some(item) = put.get("Item").and_then(Value::as_object) else {
        return Ok(());
    };
    for &(index, attribute, max) in INDEX_KEYS {
        if let Some(value) = item.get(attribute) {
            check_index_key(index, attribute, max, value)?;
        }
    }
    Ok(())
}

/// An update that sets an index key to a value (`SET GSI1PK = :v`), held to the index key
/// limits. Other forms (`if_not_exists`, `+`) never build a key in this product.
fn check_update(update: &Value) -> Result<(), Refusal> {
    let Some(expression) = update.get("UpdateExpression").and_then(Value::as_str) else {
        return Ok(());
    };
    let names = update
        .get("ExpressionAttributeNames")
        .and_then(Value::as_object);
    let values = update
        .get("ExpressionAttributeValues")
        .and_then(Value::as_object);
    for (path, operand) in set_assignments(expression) {
        let attribute = match path.strip_prefix('#') {
            Some(_) => names
                .and_then(|n| n.get(path))
                .and_then(Value::as_str)
                .unwrap_or(path),
            None => path,
        };
        let Some(&(index, attribute, max)) = INDEX_KEYS.iter().find(|k| k.1 == attribute) else {
            continue;
        };
        if let Some(value) = values.and_then(|v| v.get(operand)) {
            check_index_key(index, attribute, max, value)?;
        }
    }
    Ok(())
}

fn check_index_key(index: &str, attribute: &str, max: usize, value: &Value) -> Result<(), Refusal> {
    let size = key_value_size(value);
    if size > max {
        return Err(Refusal {
            code: "ValidationException",
            message: format!(
                "One or more parameter values were invalid: Size limit exceeded for Index Key \
                 {attribute} Actual Size: {size} bytes Max Size: {max} bytes IndexName: {index}"
            ),
        });
    }
    Ok(())
}

/// The `path = operand` actions of an update expression's SET clause, where both sides are a
/// single token (the form that sets an attribute to a value).
fn set_assignments(expression: &str) -> Vec<(&str, &str)> {
    const CLAUSES: [&str; 4] = ["SET", "REMOVE", "ADD", "DELETE"];
    let words: Vec<(usize, &str)> = expression
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - expression.as_ptr() as usize, w))
        .collect();
    let mut out = Vec::new();
    for (i, &(start, word)) in words.iter().enumerate() {
        if !word.eq_ignore_ascii_case("SET") {
            continue;
        }
        let body_start = start + word.len();
        let body_end = words[i + 1..]
            .iter()
            .find(|(_, w)| CLAUSES.iter().any(|c| w.eq_ignore_ascii_case(c)))
            .map_or(expression.len(), |&(at, _)| at);
        for action in split_top_level(&expression[body_start..body_end]) {
            if let Some((path, operand)) = action.split_once('=') {
                let (path, operand) = (path.trim(), operand.trim());
                let single = |t: &str| !t.is_empty() && !t.contains(char::is_whitespace);
                if single(path) && single(operand) && operand.starts_with(':') {
                    out.push((path, operand));
                }
            }
        }
    }
    out
}

/// `s` split on the commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut from, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[from..]);
    parts
}

/// Response-side limits (a Query or Scan page stops at 1 MB): a new response body when the
/// engine's answer must change, `None` when it stands.
///
/// DynamoDB stops a page before the item that would take what it read past 1 MB (the page is
/// "1 MB or less"), unless that is the page's first item; `LastEvaluatedKey` is then the last
/// item answered. Only the items answered can be sized here: a filter or a projection hides
/// what was read, so such answers are cut where what they show crosses 1 MB (the engine itself
/// pages at 1 MB counted before the filter, so its answers are never cut).
///
/// The engine does get one thing wrong on the pages it cuts at 1 MB: it counts the item it
/// stopped before in `ScannedCount` (4 read, 3 answered). Without a filter DynamoDB's
/// `ScannedCount` is always `Count`, so it is set so; with one, the extra item cannot be told
/// from the answer and stays.
pub fn limit_response(operation: &str, request: &Value, response: &Value) -> Option<Value> {
    if operation != "Query" && operation != "Scan" {
        return None;
    }
    let mut out = response.as_object()?.clone();
    let mut changed = false;
    if let Some((keep, key)) = page_cut(request, response) {
        let items = response.get("Items").and_then(Value::as_array)?;
        let dropped = items.len() - keep;
        out.insert("Items".into(), Value::Array(items[..keep].to_vec()));
        out.insert("Count".into(), Value::from(keep));
        let scanned = response
            .get("ScannedCount")
            .and_then(Value::as_u64)
            .map_or(keep, |n| (n as usize).saturating_sub(dropped).max(keep));
        out.insert("ScannedCount".into(), Value::from(scanned));
        out.insert("LastEvaluatedKey".into(), Value::Object(key));
        changed = true;
    }
    let filtered = ["FilterExpression", "QueryFilter", "ScanFilter"]
        .iter()
        .any(|k| request.get(*k).is_some());
    if !filtered
        && let Some(count) = out.get("Count").cloned()
        && out.get("ScannedCount") != Some(&count)
    {
        out.insert("ScannedCount".into(), count);
        changed = true;
    }
    changed.then_some(Value::Object(out))
}

/// Where a page over 1 MB stops: how many items it keeps, and the key to resume after the
/// last of them (the table's key, plus the index's through an index). `None` when the page
/// stands, or when it is read through an index this guard does not know (no key to resume
/// from).
fn page_cut(request: &Value, response: &Value) -> Option<(usize, Map<String, Value>)> {
    let items = response.get("Items")?.as_array()?;
    let mut read = 0;
    let keep = items.iter().enumerate().find_map(|(i, item)| {
        read += item.as_object().map_or(0, item_size);
        (read > MAX_PAGE_BYTES && i > 0).then_some(i)
    })?;
    let key_names: &[&str] = match request.get("IndexName").and_then(Value::as_str) {
        None => &[PK, SK],
        Some(GSI1) => &[PK, SK, GSI1_PK, GSI1_SK],
        Some(_) => return None,
    };
    let last = items[keep - 1].as_object()?;
    let key = key_names
        .iter()
        .filter_map(|k| last.get(*k).map(|v| ((*k).to_string(), v.clone())))
        .collect();
    Some((keep, key))
}

/// An item's size as DynamoDB counts it against the 400 KB and 1 MB limits: each attribute's
/// name (UTF-8 bytes) plus its value.
pub fn item_size(item: &Map<String, Value>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + attribute_size(value))
        .sum()
}

/// The size of one attribute value in DynamoDB's JSON (`{"S": "…"}`): strings their UTF-8
/// length, binary its decoded length, numbers by significant digits, booleans and null 1 byte,
/// sets their elements' sum, lists 3 bytes + 1 per element + the elements, maps 3 bytes + per
/// entry its name, 1 byte and its value.
pub fn attribute_size(value: &Value) -> usize {
    let Some((kind, inner)) = value.as_object().and_then(|m| m.iter().next()) else {
        return 0;
    };
    let strings = || {
        inner
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "N" => inner.as_str().map_or(0, number_size),
        "B" => inner.as_str().map_or(0, base64_len),
        "BOOL" | "NULL" => 1,
        "SS" => strings().map(str::len).sum(),
        "NS" => strings().map(number_size).sum(),
        "BS" => strings().map(base64_len).sum(),
        "L" => {
            let list = inner.as_array().map(Vec::as_slice).unwrap_or_default();
            3 + list.len() + list.iter().map(attribute_size).sum::<usize>()
        }
        "M" => {
            3 + inner.as_object().map_or(0, |m| {
                m.iter()
                    .map(|(k, v)| k.len() + 1 + attribute_size(v))
                    .sum::<usize>()
            })
        }
        _ => 0,
    }
}

/// A key value's size against the key limits: a string's or binary's bytes, a number's digits.
fn key_value_size(value: &Value) -> usize {
    match value.as_object().and_then(|m| m.iter().next()) {
        Some((k, v)) if k == "S" => v.as_str().map_or(0, str::len),
        Some((k, v)) if k == "B" => v.as_str().map_or(0, base64_len),
        Some((k, v)) if k == "N" => v.as_str().map_or(0, number_size),
        _ => 0,
    }
}

/// The bytes a base64 string decodes to.
fn base64_len(b64: &str) -> usize {
    let b64 = b64.trim_end();
    let padding = b64.bytes().rev().take_while(|&c| c == b'=').count();
    (b64.len() / 4 * 3 + (b64.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

/// A number's size, by the rule the product's own `413` check uses.
pub use gridline::store::number_size;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(message: &str) -> Result<(), Refusal> {
        Err(Refusal {
            code: "ValidationException",
            message: message.into(),
        })
    }

    #[test]
    fn sizes_follow_dynamodbs_rules() {
        assert_eq!(attribute_size(&json!({"S": "héllo"})), 6);
        assert_eq!(attribute_size(&json!({"B": "aGVsbG8="})), 5); // "hello"
        assert_eq!(attribute_size(&json!({"B": "aGk="})), 2);
        assert_eq!(attribute_size(&json!({"B": "YWJj"})), 3);
        assert_eq!(attribute_size(&json!({"BOOL": true})), 1);
        assert_eq!(attribute_size(&json!({"NULL": true})), 1);
        assert_eq!(attribute_size(&json!({"SS": ["a", "bc"]})), 3);
        assert_eq!(attribute_size(&json!({"NS": ["1", "22"]})), 4);
        assert_eq!(
            attribute_size(&json!({"L": [{"S": "ab"}, {"N": "1"}]})),
            3 + 2 + 2 + 2
        );
        assert_eq!(
            attribute_size(&json!({"M": {"k": {"S": "ab"}, "kk": {"BOOL": false}}})),
            3 + (1 + 1 + 2) + (2 + 1 + 1)
        );
        let item = json!({"PK": {"S": "p"}, "n": {"N": "12"}});
        assert_eq!(item_size(item.as_object().unwrap()), 2 + 1 + 1 + 2);
    }

    #[test]
    fn numbers_count_significant_digits() {
        for (n, size) in [
            ("0", 1),
            ("-0", 1),
            ("1", 2),
            ("12", 2),
            ("123", 3),
            ("-42", 3),
            ("1200", 2),
            ("0.5", 2),
            ("0.05", 2),
            ("1.5", 3),
            ("1E+100", 2),
            ("1.5e2", 2), // 150: two significant digits, both before the point
            ("12345678901234567890123456789012345678", 20),
            ("00042", 2),
        ] {
            assert_eq!(number_size(n), size, "{n}");
        }
    }

    /// A random attribute value in DynamoDB JSON, nested up to `depth`.
    fn random_value(rng: &mut rand::rngs::StdRng, depth: u32) -> Value {
        use rand::Rng;
        let text = |rng: &mut rand::rngs::StdRng| -> String {
            let n = rng.gen_range(1..12);
            (0..n)
                .map(|_| ['a', 'é', '€', '𝄞', 'Z'][rng.gen_range(0..5)])
                .collect()
        };
        let number = |rng: &mut rand::rngs::StdRng| -> String {
            let sign = if rng.gen_bool(0.3) { "-" } else { "" };
            let int: String = (0..rng.gen_range(1..20))
                .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
                .collect();
            let frac: String = (0..rng.gen_range(0..18))
                .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
                .collect();
            let mut n = format!("{sign}{int}");
            if !frac.is_empty() {
                n = format!("{n}.{frac}");
            }
            if rng.gen_bool(0.3) {
                n = format!("{n}E{}", rng.gen_range(-40..40));
            }
            n
        };
        let b64 = ["", "YQ==", "YWI=", "YWJj", "YWJjZA==", "AAECAwQF"];
        let kinds = if depth == 0 { 8 } else { 10 };
        match rng.gen_range(0..kinds) {
            0 => json!({"S": text(rng)}),
            1 => json!({"N": number(rng)}),
            2 => json!({"B": b64[rng.gen_range(1..b64.len())]}),
            3 => json!({"BOOL": rng.gen_bool(0.5)}),
            4 => json!({"NULL": true}),
            5 => {
                json!({"SS": (0..rng.gen_range(1..4)).map(|i| format!("{i}{}", text(rng))).collect::<Vec<_>>()})
            }
            6 => {
                json!({"NS": (0..rng.gen_range(1..4)).map(|i| format!("{i}{}", rng.gen_range(0..999))).collect::<Vec<_>>()})
            }
            7 => json!({"BS": [b64[1], b64[3]]}),
            8 => {
                json!({"L": (0..rng.gen_range(0..4)).map(|_| random_value(rng, depth - 1)).collect::<Vec<_>>()})
            }
            _ => {
                let m: Map<String, Value> = (0..rng.gen_range(0..4))
                    .map(|_| (text(rng), random_value(rng, depth - 1)))
                    .collect();
                json!({ "M": m })
            }
        }
    }

    /// The engine's measure was taken byte-exact against AWS at the 400 KB boundary; the guard's
    /// must agree with it on any item, or the two would draw the limit in different places.
    #[test]
    fn sizes_agree_with_the_engines_on_random_items() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..2000 {
            let item: Map<String, Value> = (0..rng.gen_range(1..6))
                .map(|i| (format!("a{i}"), random_value(&mut rng, 3)))
                .collect();
            let engine: dynoxide::types::Item =
                serde_json::from_value(Value::Object(item.clone())).expect("a valid item");
            assert_eq!(
                item_size(&item),
                dynoxide::types::item_size(&engine),
                "{}",
                Value::Object(item)
            );
        }
    }

    #[test]
    fn index_keys_are_the_templates() {
        let template: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(crate::template::TEMPLATE).expect("template");
        let mut found = Vec::new();
        for (_, resource) in template["Resources"].as_mapping().expect("resources") {
            let indexes = resource["Properties"]["GlobalSecondaryIndexes"].as_sequence();
            for gsi in indexes.into_iter().flatten() {
                for key in gsi["KeySchema"].as_sequence().expect("key schema") {
                    let max = if key["KeyType"].as_str() == Some("HASH") {
                        2048
                    } else {
                        1024
                    };
                    found.push((
                        gsi["IndexName"].as_str().expect("name").to_string(),
                        key["AttributeName"].as_str().expect("attr").to_string(),
                        max,
                    ));
                }
            }
        }
        let listed: Vec<_> = INDEX_KEYS
            .iter()
            .map(|&(i, a, m)| (i.to_string(), a.to_string(), m))
            .collect();
        assert_eq!(found, listed);
    }

    #[test]
    fn index_keys_over_their_limits_are_refused_on_every_write() {
        let long_pk = json!({"S": "g".repeat(2049)});
        let long_sk = json!({"S": "é".repeat(513)}); // 1,026 bytes
        let pk_message = "One or more parameter values were invalid: Size limit exceeded for Index \
             Key GSI1PK Actual Size: 2049 bytes Max Size: 2048 bytes IndexName: GSI1";
        let sk_message = "One or more parameter values were invalid: Size limit exceeded for Index \
             Key GSI1SK Actual Size: 1026 bytes Max Size: 1024 bytes IndexName: GSI1";
        let item = json!({"PK": {"S": "p"}, "SK": {"S": "s"}, "GSI1PK": long_pk});
        assert_eq!(
            check_request("PutItem", &json!({"TableName": "t", "Item": item})),
            refusal(pk_message)
        );
        let batch = json!({"RequestItems": {"t": [
            {"DeleteRequest": {"Key": {"PK": {"S": "p"}, "SK": {"S": "s"}}}},
            {"PutRequest": {"Item": {"PK": {"S": "p"}, "SK": {"S": "s"}, "GSI1SK": long_sk}}}
        ]}});
        assert_eq!(check_request("BatchWriteItem", &batch), refusal(sk_message));
        let transact = json!({"TransactItems": [
            {"ConditionCheck": {"TableName": "t", "Key": {}, "ConditionExpression": "x"}},
            {"Put": {"TableName": "t", "Item": {"GSI1PK": long_pk}}}
        ]});
        assert_eq!(
            check_request("TransactWriteItems", &transact),
            refusal(pk_message)
        );
        let update = json!({
            "UpdateExpression": "SET a = list_append(a, :x), #k = :v REMOVE b",
            "ExpressionAttributeNames": {"#k": "GSI1SK"},
            "ExpressionAttributeValues": {":v": long_sk, ":x": {"L": []}}
        });
        assert_eq!(check_request("UpdateItem", &update), refusal(sk_message));
        let transact = json!({"TransactItems": [{"Update": update}]});
        assert_eq!(
            check_request("TransactWriteItems", &transact),
            refusal(sk_message)
        );
        let update = json!({
            "UpdateExpression": "REMOVE x SET GSI1PK = :v",
            "ExpressionAttributeValues": {":v": long_pk}
        });
        assert_eq!(check_request("UpdateItem", &update), refusal(pk_message));
    }

    #[test]
    fn requests_within_the_limits_pass() {
        let item = json!({
            "PK": {"S": "p"}, "SK": {"S": "s"},
            "GSI1PK": {"S": "g".repeat(2048)}, "GSI1SK": {"S": "k".repeat(1024)},
            // Only index keys are held to key limits.
            "other": {"S": "x".repeat(5000)}
        });
        assert_eq!(check_request("PutItem", &json!({"Item": item})), Ok(()));
        let update = json!({
            "UpdateExpression": "SET other = :v",
            "ExpressionAttributeValues": {":v": {"S": "x".repeat(5000)}}
        });
        assert_eq!(check_request("UpdateItem", &update), Ok(()));
        assert_eq!(check_request("GetItem", &json!({})), Ok(()));
        assert_eq!(check_request("PutItem", &json!({"Item": 3})), Ok(()));
    }

    fn item(sk: usize, size: usize) -> Value {
        // PK, SK, GSI1PK, GSI1SK, pad: 2 + 4 + 2 + 4 + 6 + 2 + 6 + 2 + 3 bytes besides the pad.
        let sk = format!("{sk:04}");
        let pad = size - (2 + 4 + 2 + 4 + 6 + 2 + 6 + 2 + 3);
        json!({
            "PK": {"S": "pppp"}, "SK": {"S": sk}, "GSI1PK": {"S": "gg"}, "GSI1SK": {"S": "hh"},
            "pad": {"S": "x".repeat(pad)}
        })
    }

    fn page(items: Vec<Value>) -> Value {
        let n = items.len();
        json!({"Items": items, "Count": n, "ScannedCount": n})
    }

    #[test]
    fn a_query_page_over_1_mb_is_cut_before_the_item_that_crosses_it() {
        assert_eq!(
            item_size(item(0, 1000).as_object().unwrap()),
            1000,
            "the test's items have the size asked"
        );
        // 300 KB items: three fit in 1 MB, the fourth would cross it.
        let items: Vec<Value> = (0..5).map(|i| item(i, 300 * 1024)).collect();
        let cut =
            limit_response("Query", &json!({"TableName": "t"}), &page(items.clone())).expect("cut");
        assert_eq!(cut["Items"].as_array().unwrap().len(), 3);
        assert_eq!(cut["Items"][2], items[2]);
        assert_eq!(
            (cut["Count"].as_u64(), cut["ScannedCount"].as_u64()),
            (Some(3), Some(3))
        );
        assert_eq!(
            cut["LastEvaluatedKey"],
            json!({"PK": {"S": "pppp"}, "SK": {"S": "0002"}})
        );

        // Through GSI1 the key holds the table's key and the index's.
        let cut = limit_response(
            "Query",
            &json!({"TableName": "t", "IndexName": "GSI1"}),
            &page(items.clone()),
        )
        .expect("cut");
        assert_eq!(
            cut["LastEvaluatedKey"],
            json!({"PK": {"S": "pppp"}, "SK": {"S": "0002"},
                   "GSI1PK": {"S": "gg"}, "GSI1SK": {"S": "hh"}})
        );

        // A Scan the same; a filter's ScannedCount keeps what was read before the cut.
        let mut filtered = page(items);
        filtered["ScannedCount"] = json!(9);
        let request = json!({"FilterExpression": "attribute_exists(pad)"});
        let cut = limit_response("Scan", &request, &filtered).expect("cut");
        assert_eq!(
            (cut["Count"].as_u64(), cut["ScannedCount"].as_u64()),
            (Some(3), Some(7))
        );
    }

    #[test]
    fn pages_within_1_mb_stand() {
        // Exactly 1 MB: the page is "1 MB or less".
        let items: Vec<Value> = (0..4).map(|i| item(i, 256 * 1024)).collect();
        assert_eq!(limit_response("Query", &json!({}), &page(items)), None);
        // One item over 1 MB on its own cannot happen (400 KB), but the first item always stays.
        let items = vec![item(0, 1024 * 1024 + 1)];
        assert_eq!(limit_response("Query", &json!({}), &page(items)), None);
        // Other operations, COUNT answers and unknown indexes are not cut.
        let big: Vec<Value> = (0..5).map(|i| item(i, 300 * 1024)).collect();
        assert_eq!(
            limit_response("GetItem", &json!({}), &page(big.clone())),
            None
        );
        assert_eq!(
            limit_response("Query", &json!({}), &json!({"Count": 5, "ScannedCount": 5})),
            None
        );
        assert_eq!(
            limit_response("Query", &json!({"IndexName": "Other"}), &page(big)),
            None
        );
    }

    #[test]
    fn without_a_filter_scanned_count_is_count() {
        // The engine's page cut at 1 MB: 3 answered, 4 counted as scanned.
        let items: Vec<Value> = (0..3).map(|i| item(i, 300 * 1024)).collect();
        let mut answer = page(items);
        answer["ScannedCount"] = json!(4);
        answer["LastEvaluatedKey"] = json!({"PK": {"S": "pppp"}, "SK": {"S": "0002"}});
        let fixed = limit_response("Query", &json!({}), &answer).expect("fixed");
        assert_eq!(fixed["ScannedCount"], json!(3));
        assert_eq!(fixed["LastEvaluatedKey"], answer["LastEvaluatedKey"]);
        // A COUNT answer the same.
        let count = json!({"Count": 3, "ScannedCount": 4});
        let fixed = limit_response("Scan", &json!({"Select": "COUNT"}), &count).expect("fixed");
        assert_eq!(fixed["ScannedCount"], json!(3));
        // With a filter the answer cannot tell, and stands.
        let filtered = json!({"FilterExpression": "a = :a"});
        assert_eq!(limit_response("Query", &filtered, &answer), None);
    }
}
