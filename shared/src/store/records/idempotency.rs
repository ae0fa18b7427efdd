//! Remembered answers to `POST`s with an `Idempotency-Key`: one item per caller and key in
//! the records table, claimed before the request runs and holding its answer after.
//!
//! A claim is a conditional put, so of two requests with one key exactly one runs; it carries
//! a token of its own, and only the request holding that token keeps its answer or frees the
//! key. The item expires a day after the claim (TTL on `expires_at`, which the reads check
//! too, as DynamoDB deletes expired items only eventually). A claim whose request died (a
//! crash) holds the key only until its lease ends, longer than any function may run (a test
//! holds every HTTP function's timeout under it). An answer too large for one item is kept in
//! parts beside it.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::ids::{TenantId, UserId};
use crate::keys::{self, records::entity};
use crate::store::{Item, Records, StoreError, condition_held};

/// How long a key is remembered: a day, as the contract says.
pub const REMEMBERED_FOR_S: i64 = 24 * 60 * 60;
/// How long a running request holds its key: longer than any HTTP function's timeout (10 s;
/// a test checks the template), after which no request with the key is still running.
pub const LEASE_S: i64 = 30;
/// The most of an answer's body one item keeps, well inside DynamoDB's 400 KB.
pub const PART_BYTES: usize = 300 * 1024;
/// The most parts an answer is kept in (2.4 MB: every create's answer is far smaller).
pub const MAX_PARTS: usize = 8;

/// Attribute names of the items.
mod attr {
    pub const FINGERPRINT: &str = "fingerprint";
    pub const TOKEN: &str = "claim";
    pub const STATE: &str = "state";
    pub const LEASE_UNTIL: &str = "lease_until";
    /// The table's TTL attribute.
    pub const EXPIRES_AT: &str = "expires_at";
    pub const STATUS: &str = "status";
    pub const HEADERS: &str = "headers";
    pub const BODY: &str = "body";
    /// How many parts hold the body, when it is not on the item itself.
    pub const PARTS: &str = "parts";
    pub const RUNNING: &str = "running";
    pub const DONE: &str = "done";
}

/// Whose key, which key (its digest), for what request (the digest of its method, path and
/// body), and the claim's own token.
#[derive(Debug, Clone)]
pub struct KeyClaim<'a> {
    pub tenant: &'a TenantId,
    pub user: &'a UserId,
    pub key_digest: &'a str,
    pub fingerprint: &'a str,
    pub token: &'a str,
}

/// A remembered answer. `body` is `None` only for one too large for [`MAX_PARTS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// What a claim found.
#[derive(Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The key is this request's: run it.
    Won,
    /// The key's first request is still running.
    Running,
    /// The key was used for another request (another method, path or body).
    Mismatch,
    /// The key's first request succeeded: its answer.
    Done(Answer),
}

impl Records<'_> {
    /// Claims the key for a request at `now` (seconds since the epoch), or tells who has it.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_key(&self, claim: &KeyClaim<'_>, now: i64) -> Result<Claimed, StoreError> {
        // Again only when the item found has expired, or its lease ended, since the put.
        for _ in 0..3 {
            let result = self
                .store
                .client
                .put_item()
                .table_name(&self.store.records)
                .set_item(Some(claim_item(claim, now)))
                .condition_expression(
                    "attribute_not_exists(PK) OR #e < :now OR (#s = :running AND #l < :now)",
                )
                .expression_attribute_names("#e", attr::EXPIRES_AT)
                .expression_attribute_names("#s", attr::STATE)
                .expression_attribute_names("#l", attr::LEASE_UNTIL)
                .expression_attribute_values(":now", number(now))
                .expression_attribute_values(":running", string(attr::RUNNING))
                .send()
                .await;
            if condition_held("PutItem", result)? {
                return Ok(Claimed::Won);
            }
            let Some(found) = self.get(claim, None).await? else {
                continue;
            };
            let live = |name| number_of(&found, name).is_none_or(|t| t >= now);
            if !live(attr::EXPIRES_AT) {
                continue;
            }
            let state = found.get(attr::STATE).and_then(|v| v.as_s().ok());
            if text(&found, attr::FINGERPRINT) != Some(claim.fingerprint) {
                return Ok(Claimed::Mismatch);
            }
            if state.map(String::as_str) == Some(attr::DONE) {
                return Ok(Claimed::Done(self.answer_of(claim, &found).await?));
            }
            if live(attr::LEASE_UNTIL) {
                return Ok(Claimed::Running);
            }
        }
        Err(StoreError::Contention(3))
    }

    /// Keeps the answer of the request holding the claim: a body too large for the item in
    /// parts first, then the item marked done (its parts are read only once it is).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn remember_answer(
        &self,
        claim: &KeyClaim<'_>,
        answer: &Answer,
        now: i64,
    ) -> Result<(), StoreError> {
        let body = answer.body.as_deref().unwrap_or_default();
        let parts: Vec<&[u8]> = body.chunks(PART_BYTES).collect();
        let inline = answer.body.is_some() && parts.len() <= 1;
        let kept = answer.body.is_some() && parts.len() <= MAX_PARTS;
        if kept && !inline {
            for (i, part) in parts.iter().enumerate() {
                let mut item = part_key(claim, i);
                item.insert("entity".into(), string(entity::IDEMPOTENCY));
                item.insert(attr::BODY.into(), AttributeValue::B(Blob::new(*part)));
                item.insert(attr::EXPIRES_AT.into(), number(now + REMEMBERED_FOR_S));
                self.store.put(&self.store.records, item).await?;
            }
        }
        let headers: HashMap<String, AttributeValue> = answer
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), string(v)))
            .collect();
        let update = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key_of(claim)))
            .condition_expression("#c = :c AND #s = :running")
            .expression_attribute_names("#c", attr::TOKEN)
            .expression_attribute_names("#s", attr::STATE)
            .expression_attribute_names("#st", attr::STATUS)
            .expression_attribute_names("#h", attr::HEADERS)
            .expression_attribute_names("#l", attr::LEASE_UNTIL)
            .expression_attribute_values(":c", string(claim.token))
            .expression_attribute_values(":running", string(attr::RUNNING))
            .expression_attribute_values(":done", string(attr::DONE))
            .expression_attribute_values(":st", number(i64::from(answer.status)))
            .expression_attribute_values(":h", AttributeValue::M(headers));
        let update = match (inline, kept) {
            (true, _) => update
                .update_expression("SET #s = :done, #st = :st, #h = :h, #b = :b REMOVE #l")
                .expression_attribute_names("#b", attr::BODY)
                .expression_attribute_values(":b", AttributeValue::B(Blob::new(body))),
            (false, true) => update
                .update_expression("SET #s = :done, #st = :st, #h = :h, #p = :p REMOVE #l")
                .expression_attribute_names("#p", attr::PARTS)
                .expression_attribute_values(":p", number(parts.len() as i64)),
            (false, false) => {
                update.update_expression("SET #s = :done, #st = :st, #h = :h REMOVE #l")
            }
        };
        // A claim whose lease ended and was taken is the taker's now: nothing to keep.
        condition_held("UpdateItem", update.send().await)?;
        Ok(())
    }

    /// Frees the key after a request that failed: only a success is remembered.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn release_key(&self, claim: &KeyClaim<'_>) -> Result<(), StoreError> {
        let result = self
            .store
            .client
            .delete_item()
            .table_name(&self.store.records)
            .set_key(Some(key_of(claim)))
            .condition_expression("#c = :c AND #s = :running")
            .expression_attribute_names("#c", attr::TOKEN)
            .expression_attribute_names("#s", attr::STATE)
            .expression_attribute_values(":c", string(claim.token))
            .expression_attribute_values(":running", string(attr::RUNNING))
            .send()
            .await;
        // A claim whose lease ended and was taken is the taker's: not this one's to free.
        condition_held("DeleteItem", result)?;
        Ok(())
    }

    /// The claim's item (`part` `None`) or one of its answer's parts, strongly consistent.
    async fn get(
        &self,
        claim: &KeyClaim<'_>,
        part: Option<usize>,
    ) -> Result<Option<Item>, StoreError> {
        let key = match part {
            None => key_of(claim),
            Some(i) => part_key(claim, i),
        };
        self.store.get_item(&self.store.records, key).await
    }

    /// The answer a done item keeps, its body read back from its parts when it has them.
    async fn answer_of(&self, claim: &KeyClaim<'_>, found: &Item) -> Result<Answer, StoreError> {
        let headers = match found.get(attr::HEADERS).and_then(|v| v.as_m().ok()) {
            Some(m) => m
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
                .collect(),
            None => Vec::new(),
        };
        let body = match (bytes_of(found), number_of(found, attr::PARTS)) {
            (Some(body), _) => Some(body),
            (None, Some(n)) => {
                let mut body = Vec::new();
                for i in 0..usize::try_from(n).unwrap_or(0) {
                    let part = self.get(claim, Some(i)).await?;
                    let bytes = part.as_ref().and_then(bytes_of).ok_or_else(|| {
                        StoreError::Corrupt("a remembered answer lost a part".into())
                    })?;
                    body.extend(bytes);
                }
                Some(body)
            }
            (None, None) => None,
        };
        Ok(Answer {
            status: number_of(found, attr::STATUS)
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(200),
            headers,
            body,
        })
    }
}

fn string(s: &str) -> AttributeValue {
    AttributeValue::S(s.into())
}

fn number(n: i64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

fn number_of(item: &Item, name: &str) -> Option<i64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)?.as_s().ok().map(String::as_str)
}

fn bytes_of(item: &Item) -> Option<Vec<u8>> {
    Some(item.get(attr::BODY)?.as_b().ok()?.as_ref().to_vec())
}

fn key_of(claim: &KeyClaim<'_>) -> Item {
    super::items::key(
        keys::records::idempotency_pk(claim.tenant, claim.user, claim.key_digest),
        keys::records::IDEMPOTENCY_SK,
    )
}

fn part_key(claim: &KeyClaim<'_>, i: usize) -> Item {
    super::items::key(
        keys::records::idempotency_pk(claim.tenant, claim.user, claim.key_digest),
        &keys::records::idempotency_part_sk(i),
    )
}

/// The item of a running claim.
fn claim_item(claim: &KeyClaim<'_>, now: i64) -> Item {
    let mut item = key_of(claim);
    item.insert("entity".into(), string(entity::IDEMPOTENCY));
    item.insert(attr::FINGERPRINT.into(), string(claim.fingerprint));
    item.insert(attr::TOKEN.into(), string(claim.token));
    item.insert(attr::STATE.into(), string(attr::RUNNING));
    item.insert(attr::LEASE_UNTIL.into(), number(now + LEASE_S));
    item.insert(attr::EXPIRES_AT.into(), number(now + REMEMBERED_FOR_S));
    item
}
