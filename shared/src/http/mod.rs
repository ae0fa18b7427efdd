//! The HTTP API: one router, served by Lambda (`lambda_http::run`), by the local server
//! (`axum::serve`) and by tests (`oneshot`).

pub mod access;
mod children;
mod comments;
pub mod cors;
pub mod error;
mod extract;
pub mod fields_cache;
mod grid;
mod history;
pub mod idempotency;
mod inbox;
mod issues;
pub mod page;
mod people;
mod projects;
mod relations;
mod saved_views;
pub(crate) mod views;
mod workspaces;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::FromRef;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{MethodFilter, MethodRouter, on};

pub use extract::{MAX_BODY_BYTES, parse_json};

use crate::auth::AuthMode;
use crate::cursor::CursorKey;
use crate::domain::role::Need;
use crate::store::Store;
use crate::telemetry::{LogStyle, RequestRecord, observed};
pub use access::Gate;
use error::{PROBLEM_JSON, problem_response};

/// Everything a handler needs, built once per process.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub cursor_key: CursorKey,
    pub auth: AuthMode,
    /// How each request's record is written (EMF in Lambda).
    pub log: LogStyle,
    /// The browser origins allowed to call the API.
    pub cors: cors::Cors,
    /// Projects' field definitions the grid read in the last seconds (per instance).
    pub fields: fields_cache::FieldsCache,
    /// Saved views' definitions the grid read in the last seconds (per instance).
    pub views: fields_cache::ViewsCache,
    /// Callers' roles read in the last seconds (per instance).
    pub access: access::AccessCache,
    /// Where a new workspace's usage-plan key is made (in AWS; the local stack throttles
    /// every tenant without a key).
    pub usage_keys: Option<std::sync::Arc<crate::usage_keys::PlanKeys>>,
}

/// Handlers' `Caller` reads the auth mode from the state.
impl FromRef<AppState> for AuthMode {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

/// The time a write is stamped with.
fn now() -> String {
    crate::domain::values::format_timestamp(time::OffsetDateTime::now_utc())
}

/// Which Lambda function serves a route. The template's `Events` must list exactly these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    Projects,
    Issues,
    Grid,
    People,
    Inbox,
}

impl Function {
    pub const ALL: [Function; 5] = [
        Function::Projects,
        Function::Issues,
        Function::Grid,
        Function::People,
        Function::Inbox,
    ];

    /// The function's short name: the crate, and the `Function` dimension of its metrics.
    pub fn name(self) -> &'static str {
        match self {
            Function::Projects => "projects",
            Function::Issues => "issues",
            Function::Grid => "grid",
            Function::People => "people",
            Function::Inbox => "inbox",
        }
    }

    /// The function's logical id in `template.yaml`.
    pub fn function_logical_id(self) -> &'static str {
        match self {
            Function::Projects => "ProjectsFunction",
            Function::Issues => "IssuesFunction",
            Function::Grid => "GridFunction",
            Function::People => "PeopleFunction",
            Function::Inbox => "InboxFunction",
        }
    }
}

/// A route: its function, method and API Gateway-style path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub group: Function,
    pub method: Method,
    pub path: &'static str,
}

/// One row of the route table: the route and how its handler is mounted for its method.
struct Mount {
    function: Function,
    gate: Gate,
    method: Method,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
}

const fn at(
    function: Function,
    gate: Gate,
    method: Method,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
) -> Mount {
    Mount {
        function,
        gate,
        method,
        path,
        handler,
    }
}

/// Every route and its handler; the template's `Events` and `openapi.yaml` list the same.
#[rustfmt::skip]
const TABLE: &[Mount] = {
    use Function::*;
    use Gate::Tenant as T;
    &[
        at(Projects, T(Need::Write), Method::POST, "/projects", |m| on(m, projects::create)),
        at(Projects, T(Need::Read), Method::GET, "/projects", |m| on(m, projects::list)),
        at(Projects, T(Need::Read), Method::GET, "/projects/{project_id}", |m| on(m, projects::get)),
        at(Projects, T(Need::Admin), Method::PATCH, "/projects/{project_id}", |m| on(m, projects::patch)),
        at(Projects, T(Need::Admin), Method::DELETE, "/projects/{project_id}", |m| on(m, projects::delete)),
        at(Projects, T(Need::Admin), Method::POST, "/projects/{project_id}/fields", |m| on(m, projects::create_field)),
        at(Projects, T(Need::Read), Method::GET, "/projects/{project_id}/fields", |m| on(m, projects::list_fields)),
        at(Projects, T(Need::Admin), Method::PATCH, "/projects/{project_id}/fields/{field_id}", |m| on(m, projects::patch_field)),
        at(Projects, T(Need::Admin), Method::DELETE, "/projects/{project_id}/fields/{field_id}", |m| on(m, projects::delete_field)),
        at(Issues, T(Need::Write), Method::POST, "/projects/{project_id}/issues", |m| on(m, issues::create)),
        at(Grid, T(Need::Read), Method::GET, "/projects/{project_id}/issues", |m| on(m, grid::list)),
        at(Issues, T(Need::Write), Method::PUT, "/issues/{issue_id}/participants/{kind}/{participant_id}", |m| on(m, issues::put_participant)),
        at(Issues, T(Need::Write), Method::DELETE, "/issues/{issue_id}/participants/{kind}/{participant_id}", |m| on(m, issues::delete_participant)),
        at(People, T(Need::Own), Method::PUT, "/me", |m| on(m, people::put_me)),
        at(People, T(Need::Read), Method::GET, "/me", |m| on(m, people::get_me)),
        at(People, T(Need::Write), Method::POST, "/teams", |m| on(m, people::create_team)),
        at(People, T(Need::Read), Method::GET, "/teams/{team_id}", |m| on(m, people::get_team)),
        at(People, T(Need::Write), Method::PATCH, "/teams/{team_id}", |m| on(m, people::patch_team)),
        at(People, T(Need::Write), Method::DELETE, "/teams/{team_id}", |m| on(m, people::delete_team)),
        at(People, T(Need::Write), Method::PUT, "/teams/{team_id}/members/{user_id}", |m| on(m, people::add_member)),
        at(People, T(Need::Write), Method::DELETE, "/teams/{team_id}/members/{user_id}", |m| on(m, people::remove_member)),
        at(People, T(Need::Read), Method::GET, "/teams/{team_id}/members", |m| on(m, people::list_members)),
        at(People, T(Need::Read), Method::GET, "/me/teams", |m| on(m, people::my_teams)),
        at(People, T(Need::Read), Method::GET, "/users/{user_id}/teams", |m| on(m, people::user_teams)),
        at(Inbox, T(Need::Read), Method::GET, "/me/issues", |m| on(m, inbox::my_issues)),
        at(Inbox, T(Need::Read), Method::GET, "/me/teams/issues", |m| on(m, inbox::my_teams_issues)),
        at(Inbox, T(Need::Read), Method::GET, "/teams/{team_id}/issues", |m| on(m, inbox::team_issues)),
        at(Issues, T(Need::Read), Method::GET, "/issues/{issue_id}", |m| on(m, issues::get)),
        at(Issues, T(Need::Write), Method::PATCH, "/issues/{issue_id}", |m| on(m, issues::patch)),
        at(Issues, T(Need::Write), Method::DELETE, "/issues/{issue_id}", |m| on(m, issues::delete)),
        at(Grid, T(Need::Read), Method::GET, "/issues/{issue_id}/children", |m| on(m, children::list)),
        at(Grid, T(Need::Read), Method::GET, "/issues/{issue_id}/history", |m| on(m, history::list)),
        at(Issues, T(Need::Write), Method::PUT, "/issues/{issue_id}/relations/{kind}/{other_id}", |m| on(m, relations::put_relation)),
        at(Issues, T(Need::Write), Method::DELETE, "/issues/{issue_id}/relations/{kind}/{other_id}", |m| on(m, relations::delete_relation)),
        at(Issues, T(Need::Own), Method::POST, "/issues/{issue_id}/comments", |m| on(m, comments::create)),
        at(Issues, T(Need::Read), Method::GET, "/issues/{issue_id}/comments", |m| on(m, comments::list)),
        at(Issues, T(Need::Own), Method::PATCH, "/comments/{comment_id}", |m| on(m, comments::edit)),
        at(Issues, T(Need::Own), Method::DELETE, "/comments/{comment_id}", |m| on(m, comments::delete)),
        at(Projects, T(Need::Write), Method::POST, "/projects/{project_id}/views", |m| on(m, saved_views::create)),
        at(Projects, T(Need::Read), Method::GET, "/projects/{project_id}/views", |m| on(m, saved_views::list)),
        at(Projects, T(Need::Read), Method::GET, "/views/{view_id}", |m| on(m, saved_views::get)),
        at(Projects, T(Need::Write), Method::PATCH, "/views/{view_id}", |m| on(m, saved_views::patch)),
        at(Projects, T(Need::Write), Method::DELETE, "/views/{view_id}", |m| on(m, saved_views::delete)),
        at(Grid, T(Need::Read), Method::GET, "/views/{view_id}/issues", |m| on(m, saved_views::issues)),
        at(People, Gate::Token, Method::POST, "/workspaces", |m| on(m, workspaces::create)),
        at(People, Gate::Token, Method::GET, "/me/workspaces", |m| on(m, workspaces::mine)),
        at(People, Gate::Token, Method::PUT, "/me/workspace", |m| on(m, workspaces::choose)),
        at(People, Gate::Token, Method::GET, "/me/invitations", |m| on(m, workspaces::my_invitations)),
        at(People, Gate::Token, Method::POST, "/invitations/{invitation_id}/accept", |m| on(m, workspaces::accept)),
        at(People, T(Need::Read), Method::GET, "/workspace", |m| on(m, workspaces::get)),
        at(People, T(Need::Read), Method::GET, "/workspace/members", |m| on(m, workspaces::members)),
        at(People, T(Need::Admin), Method::PUT, "/workspace/members/{user_id}", |m| on(m, workspaces::put_member)),
        // A member may leave: the handler allows their own removal to any role.
        at(People, T(Need::Own), Method::DELETE, "/workspace/members/{user_id}", |m| on(m, workspaces::remove_member)),
        at(People, T(Need::Admin), Method::POST, "/workspace/invitations", |m| on(m, workspaces::invite)),
        at(People, T(Need::Admin), Method::GET, "/workspace/invitations", |m| on(m, workspaces::invitations)),
        at(People, T(Need::Admin), Method::DELETE, "/workspace/invitations/{invitation_id}", |m| on(m, workspaces::revoke)),
    ]
};

impl Mount {
    fn route(&self) -> Route {
        Route {
            group: self.function,
            method: self.method.clone(),
            path: self.path,
        }
    }

    /// The handler mounted for the row's method; `None` only for a method axum cannot
    /// route, which the table never holds (a test checks).
    fn method_router(&self) -> Option<MethodRouter<AppState>> {
        let filter = MethodFilter::try_from(self.method.clone()).ok()?;
        Some((self.handler)(filter))
    }
}

/// What the route `path` (as the router matched it) asks of its caller for `method`.
pub fn gate_of(method: &Method, path: &str) -> Option<Gate> {
    // axum answers HEAD with the GET handler: it asks what GET asks.
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    TABLE
        .iter()
        .find(|e| e.method == method && e.path == path)
        .map(|e| e.gate)
}

/// Every route, for checks against `template.yaml` and `openapi.yaml`.
pub fn routes() -> Vec<Route> {
    TABLE.iter().map(Mount::route).collect()
}

/// The router for the given functions' routes (all of them on the local stack).
pub fn router(state: AppState, groups: &[Function]) -> Router {
    let function = match groups {
        [one] => one.name(),
        _ => "local",
    };
    serve(function_routes(state.clone(), groups), function, &state)
}

/// The given functions' routes with every layer, but no fallback and no path rewrite: the
/// local stack serves each function with its own state (its own AWS clients) and merges
/// these (axum cannot merge two routers that both have a fallback), then calls [`serve`].
pub fn function_routes(state: AppState, groups: &[Function]) -> Router {
    let function = match groups {
        [one] => one.name(),
        _ => "local",
    };
    let mut router = Router::new();
    for entry in TABLE.iter().filter(|e| groups.contains(&e.function)) {
        if let Some(handler) = entry.method_router() {
            router = router.route(entry.path, handler);
        }
    }
    // Inside the outer layers: its answers get CORS and problem+json like any, and its
    // DynamoDB calls count in the request's record.
    let router = router
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        ))
        // Outside the idempotency layer: the caller's standing is checked before a
        // remembered answer is replayed.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::guard,
        ));
    with_layers(router, function, &state).with_state(state)
}

/// `routes` (from [`function_routes`], possibly merged) with the 404 fallback and the path
/// rewrite from API Gateway's resource; `state` gives the fallback's CORS and log style.
pub fn serve(routes: Router, function: &'static str, state: &AppState) -> Router {
    let not_found = Router::new().fallback(|| async {
        problem_response(
            StatusCode::NOT_FOUND,
            "not-found",
            "no such route".into(),
            None,
        )
    });
    let routes = routes.fallback_service(with_layers(not_found, function, state));
    // Layers on a router run after routing; the path must be rebuilt before it.
    Router::new().fallback_service(
        tower::ServiceBuilder::new()
            .map_request(route_from_resource)
            .service(routes),
    )
}

fn with_layers<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    function: &'static str,
    state: &AppState,
) -> Router<S> {
    let style = state.log;
    let cors = state.cors.clone();
    router
        .layer(axum::middleware::map_response(as_problem))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // Around everything that answers, so every answer (a 404, a 413, a 401) carries the
        // CORS headers; inside `observe`, so preflights are logged like any request.
        .layer(axum::middleware::from_fn(
            move |req: Request<Body>, next: Next| cors::layer(cors.clone(), req, next),
        ))
        .layer(axum::middleware::from_fn(
            move |req: Request<Body>, next: Next| observe(function, style, req, next),
        ))
}

/// Behind API Gateway the route comes from the event's `resource` and `pathParameters`, not
/// its `path`: behind a custom domain with a base-path mapping the path starts with the base
/// path (`/v1/projects/…`), and an id holding an encoded `/` or `?` arrives decoded in the
/// path. The resource (`/users/{user_id}/teams`) with each parameter percent-encoded is the
/// path the routes expect. Requests without an API Gateway context pass unchanged.
fn route_from_resource(mut req: Request<Body>) -> Request<Body> {
    use lambda_http::RequestExt;
    let Some(lambda_http::request::RequestContext::ApiGatewayV1(ctx)) =
        req.extensions()
            .get::<lambda_http::request::RequestContext>()
    else {
        return req;
    };
    let Some(resource) = ctx.resource_path.clone() else {
        return req;
    };
    let params = req.path_parameters();
    let mut path = String::with_capacity(resource.len() + 32);
    for segment in resource.split('/').filter(|s| !s.is_empty()) {
        path.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let Some(value) = params.first(name.trim_end_matches('+')) else {
                    return req;
                };
                path.extend(percent_encoding::utf8_percent_encode(value, PATH_SEGMENT));
            }
            None => path.push_str(segment),
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    if let Ok(uri) = axum::http::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
    req
}

/// Everything but RFC 3986's unreserved characters is escaped in a path segment.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Times the request, counts its DynamoDB calls and writes its record once it is answered.
async fn observe(
    function: &'static str,
    style: LogStyle,
    req: Request<Body>,
    next: Next,
) -> Response {
    let started = std::time::Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_string(), |m| m.as_str().to_string());
    let request_id = request_id(&req);
    let (mut response, scope) = observed(next.run(req)).await;
    if let Ok(v) = header::HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    RequestRecord {
        function: function.to_string(),
        request_id,
        method,
        route,
        status: response.status().as_u16(),
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
        dynamodb_calls: scope.calls(),
        tenant: scope.tenant(),
    }
    .emit(style);
    response
}

/// API Gateway's request id; locally a well-formed `x-request-id` from the client, or a new one.
fn request_id(req: &Request<Body>) -> String {
    if let Some(lambda_http::request::RequestContext::ApiGatewayV1(ctx)) =
        req.extensions()
            .get::<lambda_http::request::RequestContext>()
        && let Some(id) = &ctx.request_id
    {
        return id.clone();
    }
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| (1..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(crate::domain::ids::new_id, str::to_string)
}

/// Turns any error response that is not yet a problem document (the framework's own 405s,
/// path and query rejections) into one, so every error has the same shape.
async fn as_problem(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = to_bytes(Body::new(body), 4096).await.unwrap_or_default();
    let detail = match std::str::from_utf8(&text) {
        Ok(t) if !t.trim().is_empty() && !status.is_server_error() => t.trim().to_string(),
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let slug = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method-not-allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload-too-large",
        StatusCode::NOT_FOUND => "not-found",
        s if s.is_server_error() => "internal",
        _ => "bad-request",
    };
    let mut problem = problem_response(status, slug, detail, None);
    // Keep what the framework said besides the body (`Allow` on a 405).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            problem.headers_mut().insert(name, value.clone());
        }
    }
    problem
}

/// Builds the state every HTTP Lambda runs with, once per process: configuration from the
/// environment, one DynamoDB client, the caller from API Gateway's authorizer.
pub async fn lambda_state() -> Result<AppState, crate::config::ConfigError> {
    let config = crate::config::Config::from_env()?;
    let store = config.store().await;
    let (cursor_key, ()) = tokio::join!(config.cursor_key(), store.warm_up());
    Ok(AppState {
        store,
        cursor_key: cursor_key?,
        auth: AuthMode::ApiGateway {
            client_ids: crate::auth::ClientIds::from_env(),
        },
        log: LogStyle::Emf,
        cors: cors::Cors::from_env(),
        fields: fields_cache::FieldsCache::default(),
        views: fields_cache::ViewsCache::default(),
        access: access::AccessCache::default(),
        usage_keys: crate::usage_keys::PlanKeys::from_env()
            .await
            .map(std::sync::Arc::new),
    })
}

/// Runs one function's routes on Lambda.
pub async fn run_lambda(group: Function) -> Result<(), lambda_http::Error> {
    crate::telemetry::init_lambda();
    let state = lambda_state().await?;
    lambda_http::run(router(state, &[group])).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_mounts_once() {
        assert!(TABLE.iter().all(|e| e.method_router().is_some()));
        let routes = routes();
        let distinct: std::collections::HashSet<_> = routes.iter().collect();
        assert_eq!(distinct.len(), routes.len());
    }
}
