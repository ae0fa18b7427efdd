//! Remembered answers to `POST`s with an `Idempotency-Key`: one item per caller and key in
//! the records table, claimed before the request runs and holding its answer after.
//!
//! A claim is a conditional put, so of two requests with one key exactly one runs. The item
//! expires a day after the claim (TTL on `expires_at`, which the reads check too, as DynamoDB
//! deletes expired items only eventually). A claim whose request died (a timeout, a crash)
//! holds the key only until its lease ends, longer than any request can run behind API
//! Gateway.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::ids::{TenantId, UserId};
use crate::keys::{self, records::entity};
use crate::store::{Item, Records, StoreError, condition_held};

/// How long a key is remembered: a day, as the contract says.
pub const REMEMBERED_FOR_S: i64 = 24 * 60 * 60;
/// How long a running request holds its key: past API Gateway's 29 s integration timeout,
/// after which no request is still running.
pub const LEASE_S: i64 = 30;

/// Attribute names of the item.
mod attr {
    pub const FINGERPRINT: &str = "fingerprint";
    pub const STATE: &str = "state";
    pub const LEASE_UNTIL: &str = "lease_until";
    /// The table's TTL attribute.
    pub const EXPIRES_AT: &str = "expires_at";
    pub const STATUS: &str = "status";
    pub const HEADERS: &str = "headers";
    pub const BODY: &str = "body";
    pub const RUNNING: &str = "running";
    pub const DONE: &str = "done";
}

/// Whose key, which key (its digest) and for what request (the digest of its method, path
/// and body).
#[derive(Debug, Clone)]
pub struct KeyClaim<'a> {
    pub tenant: &'a TenantId,
    pub user: &'a UserId,
    pub key_digest: &'a str,
    pub fingerprint: &'a str,
}

/// A remembered answer. `body` is `None` when it was too large to keep.
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
        // At most twice: the second time only if the item found expired in between.
        for _ in 0..2 {
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
                .expression_attribute_values(":running", AttributeValue::S(attr::RUNNING.into()))
                .send()
                .await;
            if condition_held("PutItem", result)? {
                return Ok(Claimed::Won);
            }
            let key = key_of(claim);
            let Some(found) = self.store.get_item(&self.store.records, key).await? else {
                continue;
            };
            if number_of(&found, attr::EXPIRES_AT).is_some_and(|e| e < now) {
                continue;
            }
            return Ok(found_claim(&found, claim.fingerprint));
        }
        Err(StoreError::Contention(2))
    }

    /// Keeps the answer of the request that claimed the key.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn remember_answer(
        &self,
        claim: &KeyClaim<'_>,
        answer: &Answer,
    ) -> Result<(), StoreError> {
        let headers: HashMap<String, AttributeValue> = answer
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
            .collect();
        let mut update = self
            .store
            .client
            .update_item()
            .table_name(&self.store.records)
            .set_key(Some(key_of(claim)))
            .condition_expression("#f = :f AND #s = :running")
            .expression_attribute_names("#f", attr::FINGERPRINT)
            .expression_attribute_names("#s", attr::STATE)
            .expression_attribute_names("#st", attr::STATUS)
            .expression_attribute_names("#h", attr::HEADERS)
            .expression_attribute_names("#l", attr::LEASE_UNTIL)
            .expression_attribute_values(":f", AttributeValue::S(claim.fingerprint.into()))
            .expression_attribute_values(":running", AttributeValue::S(attr::RUNNING.into()))
            .expression_attribute_values(":done", AttributeValue::S(attr::DONE.into()))
            .expression_attribute_values(":st", number(i64::from(answer.status)))
            .expression_attribute_values(":h", AttributeValue::M(headers));
        update = match &answer.body {
            Some(body) => update
                .update_expression("SET #s = :done, #st = :st, #h = :h, #b = :b REMOVE #l")
                .expression_attribute_names("#b", attr::BODY)
                .expression_attribute_values(":b", AttributeValue::B(Blob::new(body.clone()))),
            None => update.update_expression("SET #s = :done, #st = :st, #h = :h REMOVE #l"),
        };
        // A claim that lost its lease to a repeat is that repeat's now: nothing to keep.
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
            .condition_expression("#f = :f AND #s = :running")
            .expression_attribute_names("#f", attr::FINGERPRINT)
            .expression_attribute_names("#s", attr::STATE)
            .expression_attribute_values(":f", AttributeValue::S(claim.fingerprint.into()))
            .expression_attribute_values(":running", AttributeValue::S(attr::RUNNING.into()))
            .send()
            .await;
        // A claim that lost its lease is another request's now: not this one's to free.
        condition_held("DeleteItem", result)?;
        Ok(())
    }
}

fn number(n: i64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

fn number_of(item: &Item, name: &str) -> Option<i64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

fn key_of(claim: &KeyClaim<'_>) -> Item {
    HashMap::from([
        (
            keys::PK.to_string(),
            AttributeValue::S(keys::records::idempotency_pk(
                claim.tenant,
                claim.user,
                claim.key_digest,
            )),
        ),
        (
            keys::SK.to_string(),
            AttributeValue::S(keys::records::IDEMPOTENCY_SK.into()),
        ),
    ])
}

/// The item of a running claim.
fn claim_item(claim: &KeyClaim<'_>, now: i64) -> Item {
    let mut item = key_of(claim);
    item.insert(
        "entity".into(),
        AttributeValue::S(entity::IDEMPOTENCY.into()),
    );
    item.insert(
        attr::FINGERPRINT.into(),
        AttributeValue::S(claim.fingerprint.into()),
    );
    item.insert(attr::STATE.into(), AttributeValue::S(attr::RUNNING.into()));
    item.insert(attr::LEASE_UNTIL.into(), number(now + LEASE_S));
    item.insert(attr::EXPIRES_AT.into(), number(now + REMEMBERED_FOR_S));
    item
}

/// What a live item someone else claimed means for a request with `fingerprint`.
fn found_claim(found: &Item, fingerprint: &str) -> Claimed {
    let state = found.get(attr::STATE).and_then(|v| v.as_s().ok());
    if found
        .get(attr::FINGERPRINT)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        != Some(fingerprint)
    {
        return Claimed::Mismatch;
    }
    if state.map(String::as_str) != Some(attr::DONE) {
        // Running, its lease not over (the put's condition would have taken it otherwise).
        return Claimed::Running;
    }
    let headers = match found.get(attr::HEADERS).and_then(|v| v.as_m().ok()) {
        Some(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
            .collect(),
        None => Vec::new(),
    };
    Claimed::Done(Answer {
        status: number_of(found, attr::STATUS)
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(200),
        headers,
        body: found
            .get(attr::BODY)
            .and_then(|v| v.as_b().ok())
            .map(|b| b.as_ref().to_vec()),
    })
}
