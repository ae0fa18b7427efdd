//! A tenant's usage-plan key, so API Gateway throttles the tenant's requests on their own
//! (`TenantUsagePlan` in the template). The key's value is the one the authorizer names for
//! the tenant ([`crate::authorizer::usage_key`]); until it exists, the tenant's requests get
//! `403` (`INVALID_API_KEY`). `POST /workspaces` provisions it for a new workspace (in AWS);
//! `gridctl tenant-key` for a tenant an operator provisioned. Safe to run again: an existing
//! key is found by its name and value, and a key already in the plan is left as it is.

use crate::authorizer::usage_key;
use crate::domain::ids::TenantId;
use anyhow::{Context, Result};
use aws_sdk_apigateway::Client;
use serde::Serialize;

/// An API key as this command needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub id: String,
    pub enabled: bool,
}

/// The three calls the command makes, so tests can run it without AWS.
#[allow(async_fn_in_trait)]
pub trait ApiKeys {
    /// The key named `name` whose value is `value`, if there is one.
    async fn find(&self, name: &str, value: &str) -> Result<Option<Key>>;
    /// Creates an enabled key.
    async fn create(&self, name: &str, value: &str, description: &str) -> Result<Key>;
    /// Adds the key to the usage plan; `false` when it was in it already.
    async fn add_to_plan(&self, plan: &str, key_id: &str) -> Result<bool>;
}

/// What the command did for one tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provisioned {
    pub tenant: String,
    pub key_id: String,
    pub created: bool,
    pub added_to_plan: bool,
    /// A disabled key (an operator's suspension) stays disabled: the tenant still gets 403.
    pub enabled: bool,
}

/// The key's name: the tenant, readable in the console.
pub fn key_name(tenant: &TenantId) -> String {
    format!("gridline-tenant:{}", tenant.as_str())
}

/// Makes sure `tenant` has its key and that the key is in `plan`.
pub async fn provision(api: &impl ApiKeys, plan: &str, tenant: &TenantId) -> Result<Provisioned> {
    let name = key_name(tenant);
    let value = usage_key(tenant);
    let (key, created) = match api.find(&name, &value).await? {
        Some(key) => (key, false),
        None => {
            let description = format!("Gridline tenant {}: its rate limit", tenant.as_str());
            (api.create(&name, &value, &description).await?, true)
        }
    };
    let added_to_plan = api.add_to_plan(plan, &key.id).await?;
    Ok(Provisioned {
        tenant: tenant.as_str().to_string(),
        key_id: key.id,
        created,
        added_to_plan,
        enabled: key.enabled,
    })
}

/// The environment variable naming the usage plan a new workspace's key joins (set on the
/// function serving `POST /workspaces`; unset on the local stack).
pub const USAGE_PLAN_VAR: &str = "TENANT_USAGE_PLAN_ID";

/// The usage plan new workspaces' keys join, and the API that makes them.
pub struct PlanKeys {
    pub gateway: Gateway,
    pub plan: String,
}

impl PlanKeys {
    /// From [`USAGE_PLAN_VAR`], with the function's credentials; `None` when it is unset.
    pub async fn from_env() -> Option<Self> {
        let plan = std::env::var(USAGE_PLAN_VAR)
            .ok()
            .filter(|p| !p.is_empty())?;
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Some(Self {
            gateway: Gateway(Client::new(&config)),
            plan,
        })
    }

    /// Gives `tenant` its key in the plan (see [`provision`]).
    pub async fn provision(&self, tenant: &TenantId) -> Result<Provisioned> {
        provision(&self.gateway, &self.plan, tenant).await
    }
}

/// The API Gateway management API.
pub struct Gateway(pub Client);

impl ApiKeys for Gateway {
    async fn find(&self, name: &str, value: &str) -> Result<Option<Key>> {
        let mut position = None;
        loop {
            let page = self
                .0
                .get_api_keys()
                .name_query(name)
                .include_values(true)
                .set_position(position)
                .limit(500)
                .send()
                .await
                .context("listing API keys (apigateway:GET on /apikeys)")?;
            let found = page
                .items()
                .iter()
                .find(|k| k.name() == Some(name) && k.value() == Some(value));
            if let Some(k) = found {
                return Ok(Some(Key {
                    id: k.id().unwrap_or_default().to_string(),
                    enabled: k.enabled(),
                }));
            }
            match page.position() {
                Some(p) if !page.items().is_empty() => position = Some(p.to_string()),
                _ => return Ok(None),
            }
        }
    }

    async fn create(&self, name: &str, value: &str, description: &str) -> Result<Key> {
        let key = self
            .0
            .create_api_key()
            .name(name)
            .value(value)
            .description(description)
            .enabled(true)
            .send()
            .await
            .context("creating the API key (apigateway:POST on /apikeys)")?;
        Ok(Key {
            id: key
                .id()
                .context("API Gateway returned a key without an id")?
                .to_string(),
            enabled: key.enabled(),
        })
    }

    async fn add_to_plan(&self, plan: &str, key_id: &str) -> Result<bool> {
        let added = self
            .0
            .create_usage_plan_key()
            .usage_plan_id(plan)
            .key_id(key_id)
            .key_type("API_KEY")
            .send()
            .await;
        match added {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conflict_exception()) => {
                Ok(false)
            }
            Err(e) => Err(e).with_context(|| {
                format!("adding the key to usage plan {plan} (apigateway:POST on /usageplans/{plan}/keys)")
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// API Gateway's keys and one plan, in memory.
    #[derive(Default)]
    struct Fake {
        keys: Mutex<Vec<(String, String, Key)>>,
        plan: Mutex<Vec<String>>,
    }

    impl ApiKeys for Fake {
        async fn find(&self, name: &str, value: &str) -> Result<Option<Key>> {
            let keys = self.keys.lock().unwrap();
            Ok(keys
                .iter()
                .find(|(n, v, _)| n == name && v == value)
                .map(|(_, _, k)| k.clone()))
        }
        async fn create(&self, name: &str, value: &str, _: &str) -> Result<Key> {
            let mut keys = self.keys.lock().unwrap();
            let key = Key {
                id: format!("k{}", keys.len()),
                enabled: true,
            };
            keys.push((name.into(), value.into(), key.clone()));
            Ok(key)
        }
        async fn add_to_plan(&self, _: &str, key_id: &str) -> Result<bool> {
            let mut plan = self.plan.lock().unwrap();
            if plan.iter().any(|k| k == key_id) {
                return Ok(false);
            }
            plan.push(key_id.into());
            Ok(true)
        }
    }

    #[tokio::test]
    async fn a_tenant_gets_one_key_in_the_plan_however_often_it_runs() {
        let api = Fake::default();
        let acme = TenantId::parse("acme").unwrap();
        let first = provision(&api, "plan", &acme).await.unwrap();
        assert!(first.created && first.added_to_plan && first.enabled);
        let again = provision(&api, "plan", &acme).await.unwrap();
        assert_eq!((again.created, again.added_to_plan), (false, false));
        assert_eq!(again.key_id, first.key_id);
        // The key holds the value the authorizer names for the tenant.
        let keys = api.keys.lock().unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].1, usage_key(&acme));
        assert_eq!(keys[0].0, "gridline-tenant:acme");
    }

    #[tokio::test]
    async fn each_tenant_has_its_own_key() {
        let api = Fake::default();
        for t in ["acme", "globex"] {
            provision(&api, "plan", &TenantId::parse(t).unwrap())
                .await
                .unwrap();
        }
        assert_eq!(api.plan.lock().unwrap().len(), 2);
    }
}
