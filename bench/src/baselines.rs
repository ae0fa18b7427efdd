//! Three other designs for the grid's question "a page of 50 issues sorted by a custom field",
//! implemented honestly on the same engine and data, to measure the grid against:
//! - [`SORT_IN_MEMORY`]: read every issue of the project and sort in memory;
//! - [`VALUES_TABLE`]: field values in a table of their own (an item per issue and field, the
//!   normalised design of seed 003), one Query per issue, a sort, and a BatchGetItem of the
//!   page;
//! - [`GSI_WITH_FILTER`]: a GSI keyed on the value, and a FilterExpression on the base
//!   partition for the issues without one (a GSI cannot hold them).

use std::collections::HashMap;

use anyhow::{Context, Result};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, KeysAndAttributes, Projection, ProjectionType, PutRequest, ScalarAttributeType,
    WriteRequest,
};
use gridline::domain::ids::IssueId;
use gridline::keys;

use crate::{Env, Stat};

/// The rows' names in BENCHMARKS.md.
pub(crate) const SORT_IN_MEMORY: &str = "baseline: query the project, sort in memory";
pub(crate) const VALUES_TABLE: &str = "baseline: one query per issue (a table of field values)";
pub(crate) const GSI_WITH_FILTER: &str = "baseline: GSI + FilterExpression, page of missing values";
/// The GSI design's page of issues that have a value: one Query of the GSI.
pub(crate) const GSI_VALUES: &str = "baseline: GSI, page of values";

/// Missing-value densities (percent) the GSI design is also measured at: its page of missing
/// values reads about 50 / density issues, so its cost is the density's, not the seed's.
pub(crate) const DENSITIES: [u8; 3] = [5, 20, 80];

/// The row of the GSI design's page of missing values at `density` percent missing.
pub(crate) fn gsi_missing_row(density: u8) -> &'static str {
    match density {
        5 => "baseline: GSI + FilterExpression, page of missing values at 5 % missing",
        20 => "baseline: GSI + FilterExpression, page of missing values at 20 % missing",
        _ => "baseline: GSI + FilterExpression, page of missing values at 80 % missing",
    }
}

/// The copy's attribute standing for the sorted value at `density` percent missing: present on
/// every issue but that share of them.
fn density_attr(density: u8) -> String {
    format!("v{density:02}")
}

/// Whether issue `id` is among the `density` percent without a value: a stable hash of its id,
/// so every run and size picks the same issues.
fn missing_at(id: &str, density: u8) -> bool {
    // FNV-1a: stable across runs and platforms, unlike the standard library's hasher.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash % 100 < u64::from(density)
}

/// The table of field values: `I` the issue id, `F` the field id, `v` the value.
const VALUES: &str = "baseline-field-values";
/// A copy of the project's issues in one partition (`P` the project, `I` the issue) with the
/// GSI on the Points value: read whole for the in-memory sort, and for the GSI design.
const GSI_TABLE: &str = "baseline-gsi-issues";
const GSI: &str = "by_points";
const PAGE: usize = 50;

pub(crate) struct Baselines {
    /// Where the grid's ascending pages reach the issues without a value.
    missing_cursor: Option<String>,
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn attr(name: &str, t: ScalarAttributeType) -> Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(t)
        .build()?)
}

fn points_of(item: &HashMap<String, AttributeValue>, field: &str) -> Option<f64> {
    let fields = item.get("fields")?.as_m().ok()?;
    fields.get(field)?.as_n().ok()?.parse().ok()
}

/// Descending by value, issues without one last (the grid's order).
fn sort_desc(rows: &mut [(Option<f64>, u64)]) {
    rows.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => y.total_cmp(&x).then(b.1.cmp(&a.1)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => b.1.cmp(&a.1),
    });
}

type Item = HashMap<String, AttributeValue>;

/// Every item of a paginated read: `page` is called with each page's start key and answers
/// the page's items and the next start key.
async fn all_pages<F, Fut>(mut page: F) -> Result<Vec<Item>>
where
    F: FnMut(Option<Item>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<Item>, Option<Item>)>>,
{
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let (got, next) = page(start).await?;
        items.extend(got);
        start = next;
        if start.is_none() {
            return Ok(items);
        }
    }
}

async fn batch_put(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<HashMap<String, AttributeValue>>,
) -> Result<()> {
    for chunk in items.chunks(25) {
        let mut pending: Vec<WriteRequest> = chunk
            .iter()
            .map(|i| {
                Ok(WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(i.clone())).build()?)
                    .build())
            })
            .collect::<Result<_>>()?;
        while !pending.is_empty() {
            let out = client
                .batch_write_item()
                .request_items(table, pending)
                .send()
                .await?;
            pending = out
                .unprocessed_items
                .and_then(|mut m| m.remove(table))
                .unwrap_or_default();
        }
    }
    Ok(())
}

/// Every issue of the project, as its items, through the records table's listing of a
/// project's issues (GSI1), page after page; `projection` limits the attributes returned
/// (not the capacity: DynamoDB charges for the whole item read).
async fn project_issues(
    client: &aws_sdk_dynamodb::Client,
    env: &Env,
    projection: Option<&str>,
) -> Result<Vec<Item>> {
    all_pages(|start| async move {
        let out = client
            .query()
            .table_name(&env.stack.tables.records)
            .index_name(keys::GSI1)
            .key_condition_expression("GSI1PK = :p")
            .expression_attribute_values(":p", project_gsi1_pk(env))
            .set_projection_expression(projection.map(str::to_string))
            .set_exclusive_start_key(start)
            .send()
            .await?;
        Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
    })
    .await
}

/// Every issue of the project as stored, every attribute (setup, not metered): GSI1 projects
/// only keys and project attributes, so the issues are read from the table itself.
async fn stored_issues(client: &aws_sdk_dynamodb::Client, env: &Env) -> Result<Vec<Item>> {
    all_pages(|start| async move {
        let out = client
            .scan()
            .table_name(&env.stack.tables.records)
            .filter_expression("GSI1PK = :p")
            .expression_attribute_values(":p", project_gsi1_pk(env))
            .set_exclusive_start_key(start)
            .send()
            .await?;
        Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
    })
    .await
}

/// The seeded project's partition in the records table's GSI1 (its issues by number).
fn project_gsi1_pk(env: &Env) -> AttributeValue {
    AttributeValue::S(keys::records::issues_by_num_gsi1_pk(
        &env.seeded.tenant,
        &env.seeded.project_id,
    ))
}

fn id_of(item: &Item) -> String {
    item.get("id")
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// A stored issue's id, parsed.
fn issue_id_of(item: &Item) -> Result<IssueId> {
    let id = id_of(item);
    IssueId::parse(&id).with_context(|| format!("{id:?} is not a valid issue id"))
}

/// An issue's number: the attribute on full items, GSI1's zero-padded sort key on its
/// projection.
fn num_of(item: &HashMap<String, AttributeValue>) -> u64 {
    item.get("num")
        .or_else(|| item.get("GSI1SK"))
        .and_then(|v| v.as_n().or_else(|_| v.as_s()).ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A CreateTable of `name`, on demand, keyed by `hash` and `range` (`attrs`: every key
/// attribute's type, the GSI's included).
fn new_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    attrs: &[(&str, ScalarAttributeType)],
    (hash, range): (&str, &str),
) -> Result<aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder> {
    let mut create = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(hash, KeyType::Hash)?)
        .key_schema(key(range, KeyType::Range)?);
    for (a, t) in attrs {
        create = create.attribute_definitions(attr(a, t.clone())?);
    }
    Ok(create)
}

/// The table of field values, keyed by issue and field.
async fn create_values_table(client: &aws_sdk_dynamodb::Client) -> Result<()> {
    let s = ScalarAttributeType::S;
    new_table(client, VALUES, &[("I", s.clone()), ("F", s)], ("I", "F"))?
        .send()
        .await
        .context("creating the table of field values")?;
    Ok(())
}

/// The copy of the project's issues, with a GSI keyed on the Points value.
async fn create_gsi_table(client: &aws_sdk_dynamodb::Client) -> Result<()> {
    let by_points = GlobalSecondaryIndex::builder()
        .index_name(GSI)
        .key_schema(key("P", KeyType::Hash)?)
        .key_schema(key("points", KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()?;
    let (s, n) = (ScalarAttributeType::S, ScalarAttributeType::N);
    let attrs = [("P", s.clone()), ("I", s), ("points", n)];
    new_table(client, GSI_TABLE, &attrs, ("P", "I"))?
        .global_secondary_indexes(by_points)
        .send()
        .await
        .context("creating the GSI table")?;
    Ok(())
}

/// A stored issue as the GSI table holds it: every attribute but the records table's keys
/// (a fair copy), keyed by project and issue, with the Points value as the GSI's key.
fn gsi_copy(item: &Item, project_id: &str, points: &str) -> Item {
    let mut copy: Item = item
        .iter()
        .filter(|(k, _)| !["PK", "SK", "GSI1PK", "GSI1SK"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let id = id_of(item);
    copy.insert("P".into(), AttributeValue::S(project_id.to_string()));
    for density in DENSITIES {
        if !missing_at(&id, density) {
            copy.insert(density_attr(density), AttributeValue::N("1".into()));
        }
    }
    copy.insert("I".into(), AttributeValue::S(id));
    if let Some(v) = item
        .get("fields")
        .and_then(|f| f.as_m().ok())
        .and_then(|m| m.get(points))
    {
        copy.insert("points".into(), v.clone());
    }
    copy
}

/// A stored issue's values as the table of field values holds them: an item per field.
fn value_items(item: &Item) -> Vec<Item> {
    let id = id_of(item);
    let Some(fields) = item.get("fields").and_then(|f| f.as_m().ok()) else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|(field, v)| {
            HashMap::from([
                ("I".to_string(), AttributeValue::S(id.clone())),
                ("F".to_string(), AttributeValue::S(field.clone())),
                ("v".to_string(), v.clone()),
            ])
        })
        .collect()
}

/// The grid's ascending path by Points, its first page.
fn ascending_by_points(env: &Env) -> String {
    format!(
        "/projects/{}/issues?sort={}&order=asc&limit=50",
        env.seeded.project_id, env.seeded.fields["Points"]
    )
}

/// The grid's cursor at the first page of issues without a value (not metered: the walk there
/// is setup, the page after it is what is compared).
async fn missing_values_cursor(env: &Env) -> Result<Option<String>> {
    let user = &env.seeded.users[0];
    let points = &env.seeded.fields["Points"];
    let base = ascending_by_points(env);
    let mut path = base.clone();
    let mut missing_cursor = None;
    loop {
        let (_, body) = env.call(user, http::Method::GET, &path, None).await?;
        let items = body["items"].as_array().cloned().unwrap_or_default();
        let cursor = body["next_cursor"].as_str().map(str::to_string);
        let reached_missing = items
            .iter()
            .any(|i| i["fields"].get(points.as_str()).is_none());
        if reached_missing || cursor.is_none() {
            return Ok(missing_cursor);
        }
        // The next page starts at or after the last valued issue.
        missing_cursor = cursor.clone();
        path = format!("{base}&cursor={}", cursor.unwrap_or_default());
    }
}

impl Baselines {
    /// Creates and fills the baseline tables from the seeded issues (not metered).
    pub(crate) async fn build(env: &Env) -> Result<Self> {
        let client = &env.stack.client;
        let points = &env.seeded.fields["Points"];
        create_values_table(client).await?;
        create_gsi_table(client).await?;
        let (mut values, mut gsi) = (Vec::new(), Vec::new());
        // The issues as stored (every attribute), for the GSI design's table: a fair copy.
        for item in stored_issues(client, env).await? {
            gsi.push(gsi_copy(&item, &env.seeded.project_id, points));
            values.extend(value_items(&item));
        }
        batch_put(client, VALUES, values).await?;
        batch_put(client, GSI_TABLE, gsi).await?;
        Ok(Self {
            missing_cursor: missing_values_cursor(env).await?,
        })
    }

    /// [`SORT_IN_MEMORY`]: reads every issue of the project (a partition holding the
    /// project's issues in full, as a GSI projecting everything would) and sorts.
    pub(crate) async fn sort_in_memory(&self, env: &Env) -> Result<usize> {
        let client = env.store.client();
        let points = &env.seeded.fields["Points"];
        let project = AttributeValue::S(env.seeded.project_id.to_string());
        let items = all_pages(|start| {
            let project = project.clone();
            async move {
                let out = client
                    .query()
                    .table_name(GSI_TABLE)
                    .key_condition_expression("P = :p")
                    .expression_attribute_values(":p", project)
                    .set_exclusive_start_key(start)
                    .send()
                    .await?;
                Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
            }
        })
        .await?;
        let mut rows: Vec<(Option<f64>, u64)> = items
            .iter()
            .map(|item| (points_of(item, points), num_of(item)))
            .collect();
        sort_desc(&mut rows);
        Ok(rows.len().min(PAGE))
    }

    /// [`VALUES_TABLE`]: list the project's issues, one Query per issue for its field values,
    /// sort, then one BatchGetItem for the page's issues.
    pub(crate) async fn values_table(&self, env: &Env) -> Result<usize> {
        let client = env.store.client();
        let points = &env.seeded.fields["Points"];
        let ids: Vec<(IssueId, u64)> = project_issues(client, env, Some("id, GSI1SK"))
            .await?
            .iter()
            .map(|item| Ok((issue_id_of(item)?, num_of(item))))
            .collect::<Result<_>>()?;
        let mut rows = Vec::with_capacity(ids.len());
        let mut by_num = HashMap::new();
        for (id, num) in &ids {
            let out = client
                .query()
                .table_name(VALUES)
                .key_condition_expression("I = :i")
                .expression_attribute_values(":i", AttributeValue::S(id.to_string()))
                .send()
                .await?;
            let value = out
                .items()
                .iter()
                .find(|i| {
                    i.get("F").and_then(|v| v.as_s().ok()).map(String::as_str)
                        == Some(points.as_str())
                })
                .and_then(|i| i.get("v")?.as_n().ok()?.parse().ok());
            rows.push((value, *num));
            by_num.insert(*num, id.clone());
        }
        sort_desc(&mut rows);
        let keys: Vec<HashMap<String, AttributeValue>> = rows
            .iter()
            .take(PAGE)
            .filter_map(|(_, num)| by_num.get(num))
            .map(|id| {
                HashMap::from([
                    (
                        "PK".to_string(),
                        AttributeValue::S(keys::records::issue_pk(&env.seeded.tenant, id)),
                    ),
                    (
                        "SK".to_string(),
                        AttributeValue::S(keys::records::ISSUE_SK.into()),
                    ),
                ])
            })
            .collect();
        let out = client
            .batch_get_item()
            .request_items(
                &env.stack.tables.records,
                KeysAndAttributes::builder().set_keys(Some(keys)).build()?,
            )
            .send()
            .await?;
        Ok(out
            .responses
            .and_then(|mut r| r.remove(&env.stack.tables.records))
            .map_or(0, |v| v.len()))
    }

    /// [`GSI_WITH_FILTER`], where it is weakest: a page of the issues without a value: a GSI cannot hold them (its key attribute is
    /// missing), so the base partition is read with a FilterExpression until 50 match.
    pub(crate) async fn gsi_missing_page(&self, env: &Env) -> Result<usize> {
        self.gsi_missing_page_of(env, "points").await
    }

    /// [`gsi_missing_row`]: the same page with `density` percent of the issues missing a value.
    pub(crate) async fn gsi_missing_page_at(&self, env: &Env, density: u8) -> Result<usize> {
        self.gsi_missing_page_of(env, &density_attr(density)).await
    }

    /// [`GSI_VALUES`]: the first page of the GSI, highest values first.
    pub(crate) async fn gsi_values_page(&self, env: &Env) -> Result<usize> {
        let out = env
            .store
            .client()
            .query()
            .table_name(GSI_TABLE)
            .index_name(GSI)
            .key_condition_expression("P = :p")
            .expression_attribute_values(":p", AttributeValue::S(env.seeded.project_id.to_string()))
            .scan_index_forward(false)
            .limit(PAGE as i32)
            .send()
            .await?;
        Ok(out.items().len())
    }

    /// A page of the issues without attribute `value`, read from the base partition with a
    /// FilterExpression until 50 match.
    async fn gsi_missing_page_of(&self, env: &Env, value: &str) -> Result<usize> {
        let client = env.store.client();
        let mut found = 0;
        let mut start = None;
        loop {
            let out = client
                .query()
                .table_name(GSI_TABLE)
                .key_condition_expression("P = :p")
                .filter_expression("attribute_not_exists(#v)")
                .expression_attribute_names("#v", value)
                .expression_attribute_values(
                    ":p",
                    AttributeValue::S(env.seeded.project_id.to_string()),
                )
                .limit(PAGE as i32)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            found += out.items().len();
            start = out.last_evaluated_key;
            if found >= PAGE || start.is_none() {
                return Ok(found.min(PAGE));
            }
        }
    }

    /// The grid's page at the same position: the first page of issues without a value.
    pub(crate) async fn grid_missing_page(&self, env: &Env, samples: usize) -> Result<Stat> {
        let base = ascending_by_points(env);
        let user = env.seeded.users[0].clone();
        let cursor = self.missing_cursor.clone().unwrap_or_default();
        let start = if cursor.is_empty() {
            base.clone()
        } else {
            format!("{base}&cursor={cursor}")
        };
        crate::pages_from(env, (&env.seeded.tenant, &user), base, start, samples).await
    }
}
