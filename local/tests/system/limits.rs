//! DynamoDB's limits on the local stack, one test per limit. Most are the embedded engine's
//! own refusals (dynoxide 3.2 enforces them with AWS's texts): those tests document it, so an
//! engine upgrade that drops one fails here. What the engine lets through is refused by the
//! guard (`gridline_local::guard::limits`), tested through `check_request` directly.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemError, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::batch_write_item::{BatchWriteItemError, BatchWriteItemOutput};
use aws_sdk_dynamodb::operation::get_item::builders::GetItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemOutput};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, PutRequest, TransactWriteItem, WriteRequest,
};
use gridline_local::guard::limits::{self, Refusal};
use gridline_local::{Engine, TableNames};
use serde_json::json;

const TABLE: &str = "records";
const KB: usize = 1024;
const ITEM_LIMIT: usize = 400 * KB;

struct Db {
    _engine: Engine,
    client: Client,
}

async fn db() -> Db {
    let engine = Engine::start(None, 0).await.expect("engine");
    let client = gridline::store::connect(Some(&engine.endpoint)).await;
    gridline_local::ensure_tables(
        &client,
        &TableNames {
            records: TABLE.into(),
            index: "index".into(),
        },
    )
    .await
    .expect("tables");
    Db {
        _engine: engine,
        client,
    }
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// An item of exactly `size` bytes as DynamoDB counts them (names + values; `PK`, `SK` and
/// `blob` are 2 + 2 + 4 bytes of names).
fn item_of_size(pk: &str, sk: &str, size: usize) -> HashMap<String, AttributeValue> {
    let overhead = 2 + pk.len() + 2 + sk.len() + 4;
    HashMap::from([
        ("PK".to_string(), s(pk)),
        ("SK".to_string(), s(sk)),
        ("blob".to_string(), s("x".repeat(size - overhead))),
    ])
}

/// The key of item `a` of partition `p`.
fn key_pa() -> HashMap<String, AttributeValue> {
    HashMap::from([("PK".into(), s("p")), ("SK".into(), s("a"))])
}

/// The same item as the JSON the SDK sends, for the guard's functions.
fn json_item(item: &HashMap<String, AttributeValue>) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (k, v) in item {
        let AttributeValue::S(s) = v else {
            panic!("strings only here")
        };
        out.insert(k.clone(), json!({ "S": s }));
    }
    serde_json::Value::Object(out)
}

/// The error's code and message, for a call that must fail.
fn refused<T: std::fmt::Debug, E: ProvideErrorMetadata + std::fmt::Debug>(
    r: Result<T, SdkError<E>>,
) -> (String, String) {
    let err = r.expect_err("the engine must refuse this");
    (
        err.code().unwrap_or_default().to_string(),
        err.message().unwrap_or_default().to_string(),
    )
}

/// A PutItem of `item` into `table` through `client`.
fn put_item(
    client: &Client,
    table: &str,
    item: HashMap<String, AttributeValue>,
) -> PutItemFluentBuilder {
    client.put_item().table_name(table).set_item(Some(item))
}

/// An UpdateItem of item `a` of partition `p` of `table`.
fn update_a(client: &Client, table: &str) -> UpdateItemFluentBuilder {
    client
        .update_item()
        .table_name(table)
        .set_key(Some(key_pa()))
}

/// A GetItem of item `a` of partition `p` of `table`.
fn get_a(client: &Client, table: &str) -> GetItemFluentBuilder {
    client.get_item().table_name(table).set_key(Some(key_pa()))
}

/// PutItem of `item` into `table` through `client`.
async fn put_into(
    client: &Client,
    table: &str,
    item: HashMap<String, AttributeValue>,
) -> Result<PutItemOutput, SdkError<PutItemError>> {
    put_item(client, table, item).send().await
}

/// DynamoDB's refusal of an item over 400 KB, in any write.
fn assert_item_too_large((code, message): (String, String)) {
    assert_eq!(code, "ValidationException");
    assert_eq!(message, "Item size has exceeded the maximum allowed size");
}

async fn put(db: &Db, item: HashMap<String, AttributeValue>) {
    put_into(&db.client, TABLE, item).await.expect("put");
}

/// A Query of partition `p` of `table`.
fn query_p(client: &Client, table: &str) -> QueryFluentBuilder {
    client
        .query()
        .table_name(table)
        .key_condition_expression("PK = :p")
        .expression_attribute_values(":p", s("p"))
}

/// Items `000`, `001`, … of partition `p`, of `size` bytes each.
fn numbered(n: usize, size: usize) -> impl Iterator<Item = HashMap<String, AttributeValue>> {
    (0..n).map(move |i| item_of_size("p", &format!("{i:03}"), size))
}

async fn batch_write(
    db: &Db,
    requests: Vec<WriteRequest>,
) -> Result<BatchWriteItemOutput, SdkError<BatchWriteItemError>> {
    db.client
        .batch_write_item()
        .request_items(TABLE, requests)
        .send()
        .await
}

async fn transact(
    db: &Db,
    items: Vec<TransactWriteItem>,
) -> Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError>> {
    db.client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
}

fn put_request(item: HashMap<String, AttributeValue>) -> WriteRequest {
    WriteRequest::builder()
        .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
        .build()
}

/// PutRequests of `n` numbered items of `size` bytes.
fn puts(n: usize, size: usize) -> Vec<WriteRequest> {
    numbered(n, size).map(put_request).collect()
}

/// Transaction puts of `n` numbered items of `size` bytes.
fn transact_puts(n: usize, size: usize) -> Vec<TransactWriteItem> {
    numbered(n, size).map(transact_put).collect()
}

fn transact_put(item: HashMap<String, AttributeValue>) -> TransactWriteItem {
    TransactWriteItem::builder()
        .put(
            Put::builder()
                .table_name(TABLE)
                .set_item(Some(item))
                .build()
                .unwrap(),
        )
        .build()
}

// ---- item size: 400 KB ------------------------------------------------------------------

#[tokio::test]
async fn put_item_over_400_kb_is_refused_by_the_engine() {
    let db = db().await;
    let at_limit = item_of_size("p", "a", ITEM_LIMIT);
    // The guard sizes items exactly as the engine does (the boundary is the same byte).
    assert_eq!(
        limits::item_size(json_item(&at_limit).as_object().unwrap()),
        ITEM_LIMIT
    );
    put(&db, at_limit).await;
    let too_large = item_of_size("p", "b", ITEM_LIMIT + 1);
    assert_item_too_large(refused(put_into(&db.client, TABLE, too_large).await));
}

#[tokio::test]
async fn update_item_growing_an_item_past_400_kb_is_refused_by_the_engine() {
    let db = db().await;
    put(&db, item_of_size("p", "a", 300 * KB)).await;
    let grow_by = |kb: usize| {
        update_a(&db.client, TABLE)
            .update_expression("SET more = :v")
            .expression_attribute_values(":v", s("y".repeat(kb * KB)))
            .send()
    };
    let (code, message) = refused(grow_by(150).await);
    assert_eq!(code, "ValidationException");
    assert_eq!(
        message,
        "Item size to update has exceeded the maximum allowed size"
    );
    // Within the limit the same update goes through.
    grow_by(90).await.expect("an update within 400 KB");
}

#[tokio::test]
async fn batch_write_item_with_an_item_over_400_kb_is_refused_by_the_engine() {
    let db = db().await;
    let too_large = item_of_size("p", "b", ITEM_LIMIT + 1);
    assert_item_too_large(refused(
        batch_write(&db, vec![put_request(too_large)]).await,
    ));
}

#[tokio::test]
async fn transact_write_items_with_an_item_over_400_kb_is_refused_by_the_engine() {
    let db = db().await;
    let too_large = item_of_size("p", "b", ITEM_LIMIT + 1);
    assert_item_too_large(refused(transact(&db, vec![transact_put(too_large)]).await));
}

// ---- key sizes: partition 2,048 B, sort 1,024 B --------------------------------------------

#[tokio::test]
async fn partition_key_over_2048_bytes_is_refused_by_the_engine() {
    let db = db().await;
    put(&db, item_of_size(&"k".repeat(2048), "a", 3 * KB)).await;
    let (code, message) = refused(
        put_into(
            &db.client,
            TABLE,
            item_of_size(&"k".repeat(2049), "a", 3 * KB),
        )
        .await,
    );
    assert_eq!(code, "ValidationException");
    assert_eq!(
        message,
        "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes"
    );
    // A key on a read is held to the same limit.
    let (_, message) = refused(
        db.client
            .get_item()
            .table_name(TABLE)
            .key("PK", s("k".repeat(2049)))
            .key("SK", s("a"))
            .send()
            .await,
    );
    assert!(message.contains("2048 bytes"), "{message}");
}

#[tokio::test]
async fn sort_key_over_1024_bytes_is_refused_by_the_engine() {
    let db = db().await;
    put(&db, item_of_size("p", &"k".repeat(1024), 3 * KB)).await;
    let (code, message) = refused(
        put_into(
            &db.client,
            TABLE,
            item_of_size("p", &"k".repeat(1025), 3 * KB),
        )
        .await,
    );
    assert_eq!(code, "ValidationException");
    assert_eq!(
        message,
        "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes"
    );
}

/// The engine checks only the types of index keys, not their sizes: a GSI1PK of 2,049 bytes is
/// stored (AWS refuses it). The guard refuses it.
#[tokio::test]
async fn index_key_over_its_limit_is_stored_by_the_engine_and_refused_by_the_guard() {
    let db = db().await;
    let mut item = item_of_size("p", "a", 8 * KB);
    item.insert("GSI1PK".into(), s("g".repeat(2049)));
    item.insert("GSI1SK".into(), s("x"));
    put_into(&db.client, TABLE, item.clone())
        .await
        .expect("the engine does not check an index key's size");

    let body = json!({ "TableName": TABLE, "Item": json_item(&item) });
    assert_eq!(
        limits::check_request("PutItem", &body),
        Err(Refusal {
            code: "ValidationException",
            message:
                "One or more parameter values were invalid: Size limit exceeded for Index Key \
                      GSI1PK Actual Size: 2049 bytes Max Size: 2048 bytes IndexName: GSI1"
                    .into(),
        })
    );
    item.insert("GSI1PK".into(), s("g".repeat(2048)));
    item.insert("GSI1SK".into(), s("k".repeat(1025)));
    let body = json!({ "TableName": TABLE, "Item": json_item(&item) });
    assert_eq!(
        limits::check_request("PutItem", &body).map_err(|r| r.message),
        Err(
            "One or more parameter values were invalid: Size limit exceeded for Index Key \
             GSI1SK Actual Size: 1025 bytes Max Size: 1024 bytes IndexName: GSI1"
                .into()
        )
    );
    item.insert("GSI1SK".into(), s("k".repeat(1024)));
    let body = json!({ "TableName": TABLE, "Item": json_item(&item) });
    assert_eq!(limits::check_request("PutItem", &body), Ok(()));
}

// ---- expressions: 4 KB each ---------------------------------------------------------------

/// `a = :v` padded with spaces to `len` bytes: the limit is on the expression as sent.
fn long_condition(len: usize) -> String {
    format!("{:len$}", "a = :v")
}

/// `head`, then `term(length so far)` while more than `room` bytes are left, then spaces up to
/// 4,097 bytes: one byte over the limit, made of real terms.
fn grown_to_4097(head: &str, term: impl Fn(usize) -> String, room: usize) -> String {
    let mut out = head.to_string();
    while out.len() < 4097 - room {
        let n = out.len();
        out.push_str(&term(n));
    }
    format!("{out:4097}")
}

const EXPRESSION_TOO_LARGE: &str = "Expression size has exceeded the maximum allowed size";

#[tokio::test]
async fn expressions_over_4_kb_are_refused_by_the_engine() {
    let db = db().await;
    put(&db, item_of_size("p", "a", KB)).await;

    // At 4,096 bytes each is accepted (substitution maps are not counted).
    put_item(&db.client, TABLE, item_of_size("p", "b", KB))
        .condition_expression(long_condition(4096))
        .expression_attribute_values(":v", s("z".repeat(8 * KB)))
        .send()
        .await
        .expect_err("the condition fails (a is absent), but it is not refused for its size")
        .into_service_error()
        .meta()
        .code()
        .filter(|c| *c == "ConditionalCheckFailedException")
        .expect("a failed condition, not a size refusal");

    let condition = refused(
        put_item(&db.client, TABLE, item_of_size("p", "b", KB))
            .condition_expression(long_condition(4097))
            .expression_attribute_values(":v", s("z"))
            .send()
            .await,
    );
    let filter = refused(
        query_p(&db.client, TABLE)
            .filter_expression(long_condition(4097))
            .expression_attribute_values(":v", s("z"))
            .send()
            .await,
    );
    let scan_filter = refused(
        db.client
            .scan()
            .table_name(TABLE)
            .filter_expression(long_condition(4097))
            .expression_attribute_values(":v", s("z"))
            .send()
            .await,
    );
    // The partition's own condition, padded.
    let key_condition = refused(
        query_p(&db.client, TABLE)
            .key_condition_expression(format!("{:4097}", "PK = :p"))
            .send()
            .await,
    );
    let update = refused(
        update_a(&db.client, TABLE)
            .update_expression(grown_to_4097("SET a = :v", |n| format!(", a{n} = :v"), 12))
            .expression_attribute_values(":v", s("z"))
            .send()
            .await,
    );
    let projection = refused(
        get_a(&db.client, TABLE)
            .projection_expression(grown_to_4097("PK", |n| format!(", a{n}"), 8))
            .send()
            .await,
    );
    for (what, (code, message)) in [
        ("ConditionExpression", condition),
        ("FilterExpression (Query)", filter),
        ("FilterExpression (Scan)", scan_filter),
        ("KeyConditionExpression", key_condition),
        ("UpdateExpression", update),
        ("ProjectionExpression", projection),
    ] {
        eprintln!("{what}: {code}: {message}");
        assert_eq!(code, "ValidationException", "{what}");
        assert!(message.contains(EXPRESSION_TOO_LARGE), "{what}: {message}");
    }
}

// ---- BatchWriteItem: 25 items / 16 MB -------------------------------------------------------

#[tokio::test]
async fn batch_write_item_over_25_items_is_refused_by_the_engine() {
    let db = db().await;
    batch_write(&db, puts(25, 100)).await.expect("25 items");
    assert_too_many(refused(batch_write(&db, puts(26, 100)).await), 25);
}

/// 25 items of at most 400 KB are 10 MB: no BatchWriteItem AWS accepts item by item can pass
/// 16 MB of items, so that limit cannot be reached (the engine checks it anyway, and its HTTP
/// server takes no body over 16 MB).
#[tokio::test]
async fn batch_write_item_of_25_items_at_400_kb_is_accepted() {
    let db = db().await;
    let out = batch_write(&db, puts(25, ITEM_LIMIT))
        .await
        .expect("10 MB of items");
    assert!(out.unprocessed_items.unwrap_or_default().is_empty());
}

// ---- BatchGetItem: 100 keys / 16 MB ---------------------------------------------------------

/// DynamoDB's refusal of a request listing more than `max` items or keys.
fn assert_too_many((code, message): (String, String), max: usize) {
    assert_eq!(code, "ValidationException");
    assert!(
        message.contains(&format!(
            "Member must have length less than or equal to {max}"
        )),
        "{message}"
    );
}

/// A BatchGetItem of the first `n` keys of partition `p`.
async fn batch_get(db: &Db, n: usize) -> Result<BatchGetItemOutput, SdkError<BatchGetItemError>> {
    db.client
        .batch_get_item()
        .request_items(
            TABLE,
            KeysAndAttributes::builder()
                .set_keys(Some(keys(n)))
                .build()
                .unwrap(),
        )
        .send()
        .await
}

fn keys(n: usize) -> Vec<HashMap<String, AttributeValue>> {
    (0..n)
        .map(|i| HashMap::from([("PK".into(), s("p")), ("SK".into(), s(format!("{i:03}")))]))
        .collect()
}

#[tokio::test]
async fn batch_get_item_over_100_keys_is_refused_by_the_engine() {
    let db = db().await;
    batch_get(&db, 100).await.expect("100 keys");
    assert_too_many(refused(batch_get(&db, 101).await), 100);
}

/// 50 items of 400 KB are 20 MB: the engine answers 16 MB of them and returns the rest as
/// `UnprocessedKeys`, as DynamoDB does.
#[tokio::test]
async fn batch_get_item_over_16_mb_returns_unprocessed_keys_from_the_engine() {
    let db = db().await;
    for batch in puts(50, ITEM_LIMIT).chunks(25) {
        batch_write(&db, batch.to_vec()).await.expect("write");
    }
    let out = batch_get(&db, 50).await.expect("batch get");
    let got = out
        .responses
        .unwrap_or_default()
        .remove(TABLE)
        .unwrap_or_default()
        .len();
    let left = out
        .unprocessed_keys
        .unwrap_or_default()
        .remove(TABLE)
        .map(|k| k.keys.len())
        .unwrap_or_default();
    assert_eq!(got + left, 50);
    assert!(got * ITEM_LIMIT <= 16 * KB * KB, "{got} items answered");
    assert!(left > 0, "nothing left unprocessed");
}

// ---- TransactWriteItems: 100 items / 4 MB ---------------------------------------------------

#[tokio::test]
async fn transact_write_items_over_100_items_is_refused_by_the_engine() {
    let db = db().await;
    transact(&db, transact_puts(100, 100))
        .await
        .expect("100 items");
    assert_too_many(refused(transact(&db, transact_puts(101, 100)).await), 100);
}

#[tokio::test]
async fn transact_write_items_over_4_mb_is_refused_by_the_engine() {
    let db = db().await;
    transact(&db, transact_puts(10, ITEM_LIMIT))
        .await
        .expect("4,000 KB");
    let (code, message) = refused(transact(&db, transact_puts(11, ITEM_LIMIT)).await);
    assert_eq!(code, "ValidationException");
    assert_eq!(
        message,
        "Collection size of items exceeded, which can also be caused by the aggregate size of the items in the transaction exceeding the 4MB limit"
    );
}

// ---- Query / Scan: a page stops at 1 MB -----------------------------------------------------

#[tokio::test]
async fn a_query_or_scan_page_stops_at_1_mb_in_the_engine() {
    let db = db().await;
    for item in numbered(4, 300 * KB) {
        put(&db, item).await;
    }
    let first = query_p(&db.client, TABLE).send().await.expect("query");
    assert_eq!(first.count, 3);
    assert_eq!(
        first.last_evaluated_key.as_ref().and_then(|k| k.get("SK")),
        Some(&s("002"))
    );
    let second = query_p(&db.client, TABLE)
        .set_exclusive_start_key(first.last_evaluated_key)
        .send()
        .await
        .expect("query");
    assert_eq!(second.count, 1);
    assert!(second.last_evaluated_key.is_none());

    // A filter does not lift the limit: items are counted as read.
    let filtered = query_p(&db.client, TABLE)
        .filter_expression("attribute_exists(nothing)")
        .send()
        .await
        .expect("query");
    // The engine counts the item it stopped before as scanned (DynamoDB: 3); the guard cannot
    // tell that from a filtered answer, so it stands.
    assert_eq!((filtered.count, filtered.scanned_count), (0, 4));
    assert_eq!(
        filtered
            .last_evaluated_key
            .as_ref()
            .and_then(|k| k.get("SK")),
        Some(&s("002"))
    );

    let scan = db
        .client
        .scan()
        .table_name(TABLE)
        .send()
        .await
        .expect("scan");
    assert_eq!(scan.count, 3);
    assert!(scan.last_evaluated_key.is_some());
}

// ---- through a function's guarded client ----------------------------------------------------

/// ProjectsFunction may PutItem and Query the records table, so its client shows the guard's
/// limits and nothing else.
const FUNCTION: &str = "ProjectsFunction";

#[tokio::test]
async fn a_function_cannot_write_an_index_key_over_its_limit() {
    let api = gridline_local::testing::TestApi::start().await;
    let client = api.stack.function_client(FUNCTION);
    let table = api.stack.tables.records.clone();
    let mut item = item_of_size("p", "a", 8 * KB);
    item.insert("GSI1PK".into(), s("g".repeat(2049)));
    item.insert("GSI1SK".into(), s("x"));
    let (code, message) = refused(put_into(&client, &table, item.clone()).await);
    assert_eq!(code, "ValidationException");
    assert_eq!(
        message,
        "One or more parameter values were invalid: Size limit exceeded for Index Key GSI1PK \
         Actual Size: 2049 bytes Max Size: 2048 bytes IndexName: GSI1"
    );
    // Nothing was written.
    let got = get_a(&api.stack.client, &table).send().await.expect("get");
    assert!(got.item.is_none());

    let (_, message) = refused(
        client
            .update_item()
            .table_name(&table)
            .key("PK", s("p"))
            .key("SK", s("b"))
            .update_expression("SET #k = :k")
            .expression_attribute_names("#k", "GSI1SK")
            .expression_attribute_values(":k", s("k".repeat(1025)))
            .send()
            .await,
    );
    assert!(
        message.contains("Index Key GSI1SK Actual Size: 1025 bytes"),
        "{message}"
    );

    // At the limits the write goes through.
    item.insert("GSI1PK".into(), s("g".repeat(2048)));
    item.insert("GSI1SK".into(), s("k".repeat(1024)));
    put_into(&client, &table, item)
        .await
        .expect("index keys at their limits");
}

/// The engine pages at 1 MB, but counts the item it stopped before as scanned; through the
/// guard `ScannedCount` is `Count`, as DynamoDB answers without a filter.
#[tokio::test]
async fn a_functions_query_page_stops_at_1_mb_with_dynamodbs_counts() {
    // Always the embedded engine, whose behaviour this documents (DynamoDB Local, which the
    // suite also runs against, returns all four items in one page: only the guard cuts it).
    let stack = gridline_local::testing::test_stack(gridline_local::Data::Memory)
        .await
        .expect("stack");
    let table = stack.tables.records.clone();
    for i in 0..4 {
        let mut item = item_of_size("p", &format!("{i:03}"), 300 * KB - 20);
        item.insert("GSI1PK".into(), s("g"));
        item.insert("GSI1SK".into(), s(format!("{i:03}")));
        put_into(&stack.client, &table, item).await.expect("put");
    }
    let query = |client: &Client| query_p(client, &table).send();
    let raw = query(&stack.client).await.expect("query");
    assert_eq!(
        (raw.count, raw.scanned_count),
        (3, 4),
        "the engine's own counts"
    );
    let guarded = query(&stack.function_client(FUNCTION))
        .await
        .expect("query");
    assert_eq!((guarded.count, guarded.scanned_count), (3, 3));
    assert_eq!(guarded.last_evaluated_key, raw.last_evaluated_key);

    // Through GSI1 the same, resuming from the table's key and the index's. GSI1 projects
    // only a few attributes, so its entries are small: the page is not cut.
    let by_index = stack
        .function_client(FUNCTION)
        .query()
        .table_name(&table)
        .index_name("GSI1")
        .key_condition_expression("GSI1PK = :g")
        .expression_attribute_values(":g", s("g"))
        .send()
        .await
        .expect("query");
    assert_eq!((by_index.count, by_index.scanned_count), (4, 4));
    assert!(by_index.last_evaluated_key.is_none());
}
