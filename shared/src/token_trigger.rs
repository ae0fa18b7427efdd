//! The user pool's pre token generation trigger (V1_0): sets `custom:tenant_id` in the ID
//! token from the workspace the person chose (`PUT /me/workspace`), so people never hold the
//! attribute themselves and no operator is needed to give them a tenant.
//!
//! - One Query of the person's partition (their choice and their workspace edges), read-only,
//!   well within the 5 seconds Cognito waits for a trigger.
//! - A choice is used only while the person is still a member of that workspace.
//! - Without one, the token is left as Cognito made it: a user an operator gave a
//!   `custom:tenant_id` attribute keeps it (operator-provisioned tenants keep working), and a
//!   person who just signed up gets a token without a tenant (the workspace routes take it).
//! - The groups Cognito passed in are passed back: an empty override would strip them.
//!
//! The local stack runs [`tenant_for`] when it mints a token without a tenant, so the flow
//! sign-up → workspace → new token works there as in AWS.

use aws_lambda_events::cognito::{ClaimsOverrideDetails, CognitoEventUserPoolsPreTokenGen};
use lambda_http::lambda_runtime::{self, LambdaEvent, service_fn};

use crate::auth::TENANT_CLAIM;
use crate::domain::ids::{TenantId, UserId};
use crate::store::{Store, StoreError};

/// The tenant a token for `user` should name, if the trigger sets one.
pub async fn tenant_for(store: &Store, user: &UserId) -> Result<Option<TenantId>, StoreError> {
    store.records().chosen_tenant(user).await
}

/// The event with its response filled in for `tenant`.
pub fn respond(
    mut event: CognitoEventUserPoolsPreTokenGen,
    tenant: Option<&TenantId>,
) -> CognitoEventUserPoolsPreTokenGen {
    let Some(tenant) = tenant else {
        return event;
    };
    let mut details = ClaimsOverrideDetails::default();
    details.group_override_details = event.request.group_configuration.clone();
    details
        .claims_to_add_or_override
        .insert(TENANT_CLAIM.into(), tenant.to_string());
    event.response.claims_override_details = Some(details);
    event
}

/// Handles one invocation: the event answered. A user without a `sub` (never, from Cognito)
/// is answered unchanged.
pub async fn handle(
    store: &Store,
    event: CognitoEventUserPoolsPreTokenGen,
) -> Result<CognitoEventUserPoolsPreTokenGen, StoreError> {
    let user = event
        .request
        .user_attributes
        .get("sub")
        .and_then(|s| UserId::parse(s));
    let tenant = match &user {
        Some(user) => tenant_for(store, user).await?,
        None => None,
    };
    Ok(respond(event, tenant.as_ref()))
}

/// Runs the trigger on Lambda.
pub async fn run_lambda() -> Result<(), lambda_runtime::Error> {
    crate::telemetry::init_lambda();
    let store = crate::config::Config::from_env()?.store().await;
    let store = &store;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<CognitoEventUserPoolsPreTokenGen>| async move {
            handle(store, event.payload)
                .await
                .map_err(lambda_runtime::Error::from)
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> CognitoEventUserPoolsPreTokenGen {
        serde_json::from_str(include_str!("../../events/token-trigger.json")).unwrap()
    }

    #[test]
    fn a_chosen_workspace_is_set_and_the_groups_are_kept() {
        let ws = TenantId::parse("01JWORKSPACE0000000000000A").unwrap();
        let answered = serde_json::to_value(respond(event(), Some(&ws))).unwrap();
        let details = &answered["response"]["claimsOverrideDetails"];
        assert_eq!(details["claimsToAddOrOverride"][TENANT_CLAIM], ws.as_str());
        assert_eq!(
            details["groupOverrideDetails"]["groupsToOverride"],
            serde_json::json!(["editors"])
        );
    }

    #[test]
    fn without_a_choice_the_token_is_left_as_cognito_made_it() {
        let answered = serde_json::to_value(respond(event(), None)).unwrap();
        assert!(answered["response"]["claimsOverrideDetails"].is_null());
    }
}
