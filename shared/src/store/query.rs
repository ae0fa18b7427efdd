//! The one way the store reads a partition: a [`Query`] described as data, sent by
//! [`Store::query_page`], which returns a [`Page`] of items and where the next page starts.
//!
//! DynamoDB ends a page at `Limit` items or at 1 MB read, whichever comes first, and then
//! returns `LastEvaluatedKey`; the page's `next` is that key as a cursor position, so a page
//! that is short (or empty) can still have a next one.

use aws_sdk_dynamodb::types::AttributeValue;

use super::{Item, Page, Store, StoreError, position_of, sdk, start_key};
use crate::cursor::Position;
use crate::keys;

/// Which items of the partition a Query reads.
#[derive(Debug, Clone)]
enum SortKey {
    All,
    BeginsWith(String),
    Between(String, String),
}

/// One Query of one partition of the records table, its GSI1, or the index table.
#[derive(Debug, Clone)]
pub(crate) struct Query<'a> {
    table: &'a str,
    gsi1: bool,
    pk: String,
    sort_key: SortKey,
    forward: bool,
    limit: Option<i32>,
    consistent: bool,
    start: Option<Item>,
}

impl<'a> Query<'a> {
    /// Every item of partition `pk` of `table`, in sort-key order.
    pub fn partition(table: &'a str, pk: String) -> Self {
        Self {
            table,
            gsi1: false,
            pk,
            sort_key: SortKey::All,
            forward: true,
            limit: None,
            consistent: false,
            start: None,
        }
    }

    /// Every item of GSI1 partition `pk` of the records table.
    pub fn gsi1(table: &'a str, pk: String) -> Self {
        Self {
            gsi1: true,
            ..Self::partition(table, pk)
        }
    }

    /// Only the items whose sort key starts with `prefix`.
    pub fn sk_begins_with(mut self, prefix: &str) -> Self {
        self.sort_key = SortKey::BeginsWith(prefix.to_string());
        self
    }

    /// Only the items whose sort key is within `from..=to`.
    pub fn sk_between(mut self, from: &str, to: &str) -> Self {
        self.sort_key = SortKey::Between(from.to_string(), to.to_string());
        self
    }

    /// Reads in sort-key order when `forward`, in reverse otherwise.
    pub fn forward(mut self, forward: bool) -> Self {
        self.forward = forward;
        self
    }

    /// At most `limit` items (a page also ends at 1 MB read).
    pub fn limit(mut self, limit: Option<i32>) -> Self {
        self.limit = limit;
        self
    }

    /// A strongly consistent read (twice the cost; not on GSIs).
    pub fn consistent(mut self, consistent: bool) -> Self {
        self.consistent = consistent;
        self
    }

    /// Starts after `position` (a page's `next`).
    pub fn after(self, position: Option<&Position>) -> Self {
        self.start_at(start_key(position))
    }

    /// Starts after the item with this key.
    pub fn start_at(mut self, key: Option<Item>) -> Self {
        self.start = key;
        self
    }

    /// `(key condition, attribute values)` of this Query.
    fn condition(&self) -> (String, Vec<(&'static str, AttributeValue)>) {
        let (pk_name, sk_name) = if self.gsi1 {
            (keys::GSI1_PK, keys::GSI1_SK)
        } else {
            (keys::PK, keys::SK)
        };
        let pk = (":pk", AttributeValue::S(self.pk.clone()));
        match &self.sort_key {
            SortKey::All => (format!("{pk_name} = :pk"), vec![pk]),
            SortKey::BeginsWith(p) => (
                format!("{pk_name} = :pk AND begins_with({sk_name}, :prefix)"),
                vec![pk, (":prefix", AttributeValue::S(p.clone()))],
            ),
            SortKey::Between(from, to) => (
                format!("{pk_name} = :pk AND {sk_name} BETWEEN :from AND :to"),
                vec![
                    pk,
                    (":from", AttributeValue::S(from.clone())),
                    (":to", AttributeValue::S(to.clone())),
                ],
            ),
        }
    }
}

impl Query<'_> {
    /// The key attributes of the items this Query reads: the table's, and GSI1's when it reads
    /// that index. An item's values of them are the `ExclusiveStartKey` that resumes right
    /// after it: the `LastEvaluatedKey` DynamoDB gives when a page ends at that item.
    fn key_names(&self) -> &'static [&'static str] {
        if self.gsi1 {
            &[keys::PK, keys::SK, keys::GSI1_PK, keys::GSI1_SK]
        } else {
            &[keys::PK, keys::SK]
        }
    }
}

/// `item`'s values of the key attributes `names`, as a position (every key attribute of ours
/// is a string).
pub(crate) fn key_of(item: &Item, names: &[&str]) -> Result<Position, StoreError> {
    names
        .iter()
        .map(|&name| match item.get(name) {
            Some(AttributeValue::S(s)) => Ok((name.to_string(), s.clone())),
            _ => Err(StoreError::Corrupt(format!("an item without key {name}"))),
        })
        .collect()
}

impl<T> Page<T> {
    /// The page with each item mapped through `f` (the position stays).
    pub(crate) fn try_map<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<Page<U>, E> {
        Ok(Page {
            items: self.items.into_iter().map(f).collect::<Result<_, _>>()?,
            next: self.next,
        })
    }
}

impl Page<Item> {
    /// The page's items read as `T` and mapped through `f`, each with its key (`names`, see
    /// [`Query::key_names`]): the position that resumes right after it, for a list that ends
    /// its page early.
    fn parse_keyed<T: serde::de::DeserializeOwned, U>(
        self,
        names: &[&str],
        f: impl Fn(T) -> U,
    ) -> Result<Page<(U, Position)>, StoreError> {
        self.try_map(|i| {
            let key = key_of(&i, names)?;
            Ok((f(serde_dynamo::from_item(i)?), key))
        })
    }
}

impl Store {
    /// One page of `query`, its items read as `T` and mapped through `f`, each with the
    /// position that resumes right after it.
    pub(crate) async fn query_keyed<T: serde::de::DeserializeOwned, U>(
        &self,
        query: Query<'_>,
        f: impl Fn(T) -> U,
    ) -> Result<Page<(U, Position)>, StoreError> {
        let names = query.key_names();
        self.query_page(query).await?.parse_keyed(names, f)
    }

    /// The SDK request of `query`.
    fn query_request(
        &self,
        query: Query<'_>,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        let (condition, values) = query.condition();
        let mut request = self
            .client
            .query()
            .table_name(query.table)
            .key_condition_expression(condition)
            .set_limit(query.limit)
            .set_exclusive_start_key(query.start);
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        if query.gsi1 {
            request = request.index_name(keys::GSI1);
        }
        if !query.forward {
            request = request.scan_index_forward(false);
        }
        if query.consistent {
            request = request.consistent_read(true);
        }
        request
    }

    /// Sends one Query: one page of items and, when DynamoDB stopped early (at the limit or
    /// at 1 MB), the position of the next.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn query_page(&self, query: Query<'_>) -> Result<Page<Item>, StoreError> {
        let out = self
            .query_request(query)
            .send()
            .await
            .map_err(sdk("Query"))?;
        Ok(Page {
            next: position_of(out.last_evaluated_key())?,
            items: out.items.unwrap_or_default(),
        })
    }

    /// How many items `query` reads: Queries that count (`Select: COUNT`), page after page,
    /// billed on the bytes they pass over.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn count(&self, query: Query<'_>) -> Result<u64, StoreError> {
        let mut count = 0u64;
        let mut start = None;
        loop {
            let out = self
                .query_request(query.clone().start_at(start))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .send()
                .await
                .map_err(sdk("Query"))?;
            count += u64::try_from(out.count).unwrap_or(0);
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(count);
            }
        }
    }

    /// Every item of a Query, page after page.
    pub(crate) async fn query_all(&self, query: Query<'_>) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self.query_page(query.clone().after(start.as_ref())).await?;
            items.extend(page.items);
            start = page.next;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}
