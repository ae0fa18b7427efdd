//! The local stack: an embedded DynamoDB-compatible engine (dynoxide) on a loopback port, the
//! tables created from `template.yaml`, and the same router the Lambdas run. Also the harness
//! the integration tests use.

pub mod chaos;
pub mod console;
pub mod fixtures;
pub mod gateway;
pub mod guard;
pub mod invoke;
pub mod jobs;
pub mod local_token;
pub mod stream;
pub mod template;
pub mod testing;
pub mod usage_plan;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use gridline::auth::AuthMode;
use gridline::cursor::CursorKey;
use gridline::http::{AppState, Function};
use gridline::store::Store;
use tokio::sync::oneshot;

/// `client` (its endpoint, credentials, HTTP client) with `interceptor` added (the bench's
/// meter sees every call through one).
pub fn with_interceptor(
    client: &Client,
    interceptor: impl aws_sdk_dynamodb::config::Intercept + 'static,
) -> Client {
    let config = client
        .config()
        .to_builder()
        .interceptor(interceptor)
        .build();
    Client::from_conf(config)
}

/// Logical ids of the template's tables.
pub const RECORDS_TABLE_ID: &str = "RecordsTable";
pub const INDEX_TABLE_ID: &str = "IndexTable";

/// Table names on the local engine (`RECORDS_TABLE` and `INDEX_TABLE` override them).
#[derive(Clone, Debug)]
pub struct TableNames {
    pub records: String,
    pub index: String,
}

impl Default for TableNames {
    fn default() -> Self {
        let var = |k: &str, d: &str| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| d.into())
        };
        Self {
            records: var("RECORDS_TABLE", "gridline-records"),
            index: var("INDEX_TABLE", "gridline-index"),
        }
    }
}

impl TableNames {
    fn name_of(&self, logical_id: &str) -> Option<&str> {
        match logical_id {
            RECORDS_TABLE_ID => Some(&self.records),
            INDEX_TABLE_ID => Some(&self.index),
            _ => None,
        }
    }
}

/// The embedded engine, served over the DynamoDB HTTP protocol on a loopback port so the
/// product talks to it through the real AWS SDK.
pub struct Engine {
    pub endpoint: String,
    stop: Option<oneshot::Sender<()>>,
    /// The server's task: it holds the database until it ends.
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How long [`Engine::stop`] waits for the engine's requests in flight to finish.
const ENGINE_STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Engine {
    /// Starts an engine backed by the SQLite file `data`, or in memory, on `port` (0: any).
    pub async fn start(data: Option<&Path>, port: u16) -> Result<Self> {
        let db = match data {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
                let db = dynoxide::Database::new(&path.to_string_lossy())
                    .context("opening the local database")?;
                index_stream_records(path)?;
                db
            }
            None => dynoxide::Database::memory().context("creating an in-memory database")?,
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("binding the engine to port {port}"))?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if let Err(e) = dynoxide::server::serve_with_shutdown(listener, db, async {
                let _ = stopped.await;
            })
            .await
            {
                tracing::error!(error = %e, "local engine stopped");
            }
        });
        Ok(Self {
            endpoint,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Stops serving and waits until the server has ended, which closes its database: a
    /// restart on the same file then finds no earlier engine still writing it. Dropping the
    /// engine stops it too, but without waiting.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(ENGINE_STOP_LIMIT, task)
                .await
                .context("the local engine did not stop")?
                .context("the local engine's task failed")?;
        }
        Ok(())
    }
}

/// dynoxide 3.2 keeps stream records in a table with no index on the sequence number, so every
/// write to a streamed table (`MAX(sequence_number)` for the next one) and every GetRecords
/// reads the whole stream history, so seeding a large project slows quadratically. These two
/// indexes match the engine's own expressions exactly, so SQLite uses them; they change no
/// result, and if a later
/// engine words its queries differently they simply go unused. An in-memory engine can't be
/// reached from a second connection, which is why `make bench` keeps its engine in a file.
fn index_stream_records(path: &Path) -> Result<()> {
    let conn = rusqlite::Connection::open(path)
        .with_context(|| format!("opening {} to index its stream", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS gridline_stream_next
             ON _stream_records (table_name, CAST(sequence_number AS INTEGER));
         CREATE INDEX IF NOT EXISTS gridline_stream_read
             ON _stream_records (table_name, shard_id, CAST(sequence_number AS INTEGER));",
    )
    .context("indexing the engine's stream records")?;
    Ok(())
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Creates every table of the template that does not exist yet; returns the names created.
pub async fn ensure_tables(client: &Client, names: &TableNames) -> Result<Vec<String>> {
    let existing = client
        .list_tables()
        .send()
        .await
        .context("listing tables")?
        .table_names
        .unwrap_or_default();
    let mut created = Vec::new();
    for (logical_id, def) in template::tables(template::TEMPLATE)? {
        let name = names
            .name_of(&logical_id)
            .with_context(|| format!("no local name for table {logical_id}"))?;
        if !existing.iter().any(|t| t == name) {
            def.create(client, name).await?;
            created.push(name.to_string());
        }
    }
    Ok(created)
}

/// Where the local stack keeps its data.
#[derive(Clone, Debug)]
pub enum Data {
    /// A SQLite file (kept between runs).
    File(PathBuf),
    /// In memory (tests).
    Memory,
    /// Another engine at this endpoint (DynamoDB Local, or AWS itself).
    External(String),
}

/// A running local stack.
pub struct Stack {
    pub engine: Option<Engine>,
    pub endpoint: String,
    /// The admin client: unguarded, for test set-up and fixtures (creating tables, seeding raw
    /// items, reading what a test asserts). The product never uses it: every function runs on
    /// its own guarded client ([`Stack::function_client`]).
    pub client: Client,
    pub tables: TableNames,
    /// The admin state (its store on the admin client), for fixtures and seeding; each
    /// function's routes are served with their own state ([`Stack::function_state`]).
    pub state: AppState,
    /// The template's tables under their local names, with their streams' ARNs.
    pub names: guard::iam::Local,
    /// Each function's IAM policy, from `template.yaml`, by logical id.
    pub policies: BTreeMap<String, Arc<guard::Policy>>,
    /// The HTTP client every guarded client forwards through.
    http: SharedHttpClient,
    /// Each principal's DynamoDB requests in flight (see [`guard::InFlight`]).
    in_flight: std::sync::Mutex<BTreeMap<String, guard::InFlight>>,
    /// The field-job queue (in a file beside the data for a file-backed stack).
    pub field_job_queue: jobs::LocalQueue,
    /// API Gateway's usage plan: each tenant's own rate limit, from the template (see
    /// [`usage_plan`]). `None` serves without it (the test harness, whose tests of other
    /// things send hundreds of requests a second as one tenant).
    pub usage_plan: Option<usage_plan::UsagePlan>,
}

pub struct StackOptions {
    pub data: Data,
    /// The embedded engine's port (0: any free one).
    pub engine_port: u16,
    pub tables: TableNames,
    pub jwt_secret: Vec<u8>,
    pub cursor_key: Vec<u8>,
    /// Browser origins allowed to call the API (CORS).
    pub cors: gridline::http::cors::Cors,
}

/// The template's logical id of the indexer.
pub const INDEXER_FUNCTION: &str = "IndexerFunction";

impl Stack {
    pub async fn start(opts: StackOptions) -> Result<Self> {
        let engine = match &opts.data {
            Data::File(path) => Some(Engine::start(Some(path), opts.engine_port).await?),
            Data::Memory => Some(Engine::start(None, opts.engine_port).await?),
            Data::External(_) => None,
        };
        let endpoint = match (&engine, &opts.data) {
            (Some(e), _) => e.endpoint.clone(),
            (None, Data::External(url)) => url.clone(),
            (None, _) => unreachable!("an engine is started for every other mode"),
        };
        let client = gridline::store::connect(Some(&endpoint)).await;
        ensure_tables(&client, &opts.tables).await?;
        let names = local_names(&client, &opts.tables).await?;
        let policies = guard::iam::function_policies(template::TEMPLATE, &names)?;
        let usage_plan = usage_plan::UsagePlan::new(
            usage_plan::TenantLimits::from_template()?,
            &opts.jwt_secret,
        );
        let state = AppState {
            store: Store::new(
                client.clone(),
                opts.tables.records.clone(),
                opts.tables.index.clone(),
            ),
            cursor_key: CursorKey::new(&opts.cursor_key),
            auth: AuthMode::Hs256 {
                secret: opts.jwt_secret,
            },
            log: gridline::telemetry::LogStyle::Local,
            cors: opts.cors,
            fields: Default::default(),
            views: Default::default(),
            access: Default::default(),
            usage_keys: None,
        };
        let field_job_queue = match &opts.data {
            Data::File(path) => jobs::LocalQueue::in_file(jobs::queue_path(path))?,
            _ => jobs::LocalQueue::default(),
        };
        Ok(Self {
            engine,
            field_job_queue,
            http: guard::base_http_client(&endpoint),
            in_flight: Default::default(),
            endpoint,
            client,
            tables: opts.tables,
            state,
            names,
            policies,
            usage_plan: Some(usage_plan),
        })
    }

    /// Stops the stack and waits for its engine to close its data (see [`Engine::stop`]).
    pub async fn stop(mut self) -> Result<()> {
        let engine = self.engine.take();
        drop(self);
        match engine {
            Some(engine) => engine.stop().await,
            None => Ok(()),
        }
    }

    /// The policy of `function_logical_id`; a function the template does not have gets an
    /// empty one, so everything it sends is refused.
    pub fn policy(&self, function_logical_id: &str) -> Arc<guard::Policy> {
        self.policies
            .get(function_logical_id)
            .cloned()
            .unwrap_or_else(|| Arc::new(guard::Policy::new(function_logical_id, Vec::new())))
    }

    /// A DynamoDB client as the function `function_logical_id` has it in AWS: every request
    /// checked against its policy in `template.yaml` and DynamoDB's limits.
    pub fn function_client(&self, function_logical_id: &str) -> aws_sdk_dynamodb::Client {
        self.guarded(self.policy(function_logical_id))
    }

    /// A DynamoDB client checked against `policy` (gridctl's tests: one command's statements).
    pub fn guarded(&self, policy: Arc<guard::Policy>) -> aws_sdk_dynamodb::Client {
        let in_flight = self.in_flight(&policy.principal);
        guard::dynamodb(&self.client, &self.http, policy, in_flight)
    }

    /// A store on the function's guarded client.
    pub fn function_store(&self, function_logical_id: &str) -> Store {
        Store::new(
            self.function_client(function_logical_id),
            self.tables.records.clone(),
            self.tables.index.clone(),
        )
    }

    /// The state `function_logical_id`'s routes are served with: its own store.
    pub fn function_state(&self, function_logical_id: &str) -> AppState {
        AppState {
            store: self.function_store(function_logical_id),
            ..self.state.clone()
        }
    }

    /// The indexer, running as IndexerFunction with the template's default concurrency.
    pub fn indexer(&self) -> gridline::indexer::Indexer {
        self.indexer_on(self.function_client(INDEXER_FUNCTION))
    }

    /// [`Stack::indexer`] on `client` (the benchmarks' metered client wraps the function's).
    pub fn indexer_on(&self, client: Client) -> gridline::indexer::Indexer {
        let configured =
            gateway::function_env(INDEXER_FUNCTION, gridline::config::INDEXER_CONCURRENCY_VAR)
                .ok()
                .flatten();
        // The template's own value: a bad one fails its own test, not every local run.
        let concurrency = gridline::config::parse_concurrency(configured.as_deref())
            .unwrap_or(gridline::indexer::DEFAULT_CONCURRENCY);
        let store = Store::new(
            client,
            self.tables.records.clone(),
            self.tables.index.clone(),
        );
        gridline::indexer::Indexer::new(store)
            .with_concurrency(concurrency)
            .with_jobs(Arc::new(
                self.field_job_queue.sender(self.policy(INDEXER_FUNCTION)),
            ))
    }

    /// The field-job function's work, on its own guarded client and queue sender.
    pub fn field_jobs(&self) -> gridline::indexer::field_job::FieldJobs {
        self.field_jobs_on(self.function_client(jobs::FIELD_JOB_FUNCTION))
    }

    /// [`Stack::field_jobs`] on `client` (the benchmarks' metered client wraps the function's).
    pub fn field_jobs_on(&self, client: Client) -> gridline::indexer::field_job::FieldJobs {
        let configured = gateway::function_env(
            jobs::FIELD_JOB_FUNCTION,
            gridline::config::INDEXER_CONCURRENCY_VAR,
        )
        .ok()
        .flatten();
        let concurrency = gridline::config::parse_concurrency(configured.as_deref())
            .unwrap_or(gridline::indexer::DEFAULT_CONCURRENCY);
        gridline::indexer::field_job::FieldJobs::new(
            Store::new(
                client,
                self.tables.records.clone(),
                self.tables.index.clone(),
            ),
            Arc::new(
                self.field_job_queue
                    .sender(self.policy(jobs::FIELD_JOB_FUNCTION)),
            ),
            concurrency,
        )
    }

    /// The job queue's event source mapping, invoking [`Stack::field_jobs`] with the
    /// template's timeout and receive count.
    pub fn job_worker(&self) -> Result<jobs::Worker> {
        Ok(jobs::Worker {
            queue: self.field_job_queue.clone(),
            jobs: self.field_jobs(),
            policy: self.policy(jobs::FIELD_JOB_FUNCTION),
            timeout: gateway::function_timeout(jobs::FIELD_JOB_FUNCTION)?,
            max_receives: jobs::max_receive_count()?,
            kill_switch: None,
            in_flight: Some(self.in_flight(jobs::FIELD_JOB_FUNCTION)),
            undone: Default::default(),
        })
    }

    /// A DynamoDB Streams client as IndexerFunction's event source mapping reads the stream
    /// with (the function's role).
    pub async fn streams_client(&self) -> aws_sdk_dynamodbstreams::Client {
        self.guarded_streams(self.policy(INDEXER_FUNCTION)).await
    }

    /// A DynamoDB Streams client checked against `policy`.
    pub async fn guarded_streams(
        &self,
        policy: Arc<guard::Policy>,
    ) -> aws_sdk_dynamodbstreams::Client {
        guard::streams(
            &stream::streams_client(&self.endpoint).await,
            &self.http,
            policy,
            guard::InFlight::default(),
        )
    }

    /// The DynamoDB requests `principal` (a function's logical id) has in flight.
    pub fn in_flight(&self, principal: &str) -> guard::InFlight {
        match self.in_flight.lock() {
            Ok(mut map) => map.entry(principal.to_string()).or_default().clone(),
            Err(_) => guard::InFlight::default(),
        }
    }

    /// The records table's stream on this engine.
    pub fn records_stream_arn(&self) -> Option<&str> {
        self.names.streams.get(RECORDS_TABLE_ID).map(String::as_str)
    }

    /// The stream poller feeding the indexer, as the event source mapping would, with a
    /// bounded number of retries before a record goes to the on-failure list. It finds the
    /// stream through the admin client (the mapping knows its ARN from the template) and
    /// reads it as IndexerFunction.
    pub async fn poller(&self, indexer: gridline::indexer::Indexer) -> stream::Poller {
        let mut poller = stream::Poller::new(
            self.client.clone(),
            self.streams_client().await,
            self.tables.records.clone(),
            indexer,
            3,
        );
        // As Lambda: the invocation is cut at the function's Timeout, and the on-failure
        // send is made with the function's role.
        poller.invocation_timeout = gateway::function_timeout(INDEXER_FUNCTION).ok();
        poller.in_flight = Some(self.in_flight(INDEXER_FUNCTION));
        poller.on_failure_policy = Some((
            self.policy(INDEXER_FUNCTION),
            guard::iam::queue_arn("IndexerFailureQueue"),
        ));
        poller
    }

    /// Every function's routes in one router, as API Gateway would dispatch them: each
    /// function's routes with its own state (its own guarded client) and Lambda's limits.
    pub fn router(&self) -> axum::Router {
        self.router_with(|id| self.function_client(id))
    }

    /// [`Stack::router`] with each function's client from `client_of(function logical id)`
    /// (the benchmarks' metered clients wrap [`Stack::function_client`]).
    pub fn router_with(&self, client_of: impl Fn(&str) -> Client) -> axum::Router {
        let mut routes = axum::Router::new();
        for group in Function::ALL {
            let id = group.function_logical_id();
            let state = AppState {
                store: Store::new(
                    client_of(id),
                    self.tables.records.clone(),
                    self.tables.index.clone(),
                ),
                // Each function's instances hold what they read on their own, as in Lambda:
                // a role one function just changed is not known to another's cache.
                access: Default::default(),
                ..self.state.clone()
            };
            let function = gridline::http::function_routes(state, &[group]);
            routes = routes.merge(gateway::lambda_limits(function, id));
        }
        if let AuthMode::Hs256 { secret } = &self.state.auth {
            routes = routes.merge(local_token::router(local_token::Minter {
                store: Store::new(
                    client_of(local_token::TRIGGER_FUNCTION),
                    self.tables.records.clone(),
                    self.tables.index.clone(),
                ),
                secret: secret.clone(),
                cors: self.state.cors.clone(),
            }));
        }
        if let Some(plan) = &self.usage_plan {
            routes = usage_plan::with_usage_plan(routes, plan.clone());
        }
        gridline::http::serve(routes, "local", &self.state)
    }
}

/// The template's tables under their local names, with the records stream's ARN.
async fn local_names(client: &Client, names: &TableNames) -> Result<guard::iam::Local> {
    let mut local = guard::iam::Local::default();
    for logical_id in [RECORDS_TABLE_ID, INDEX_TABLE_ID] {
        let name = names
            .name_of(logical_id)
            .with_context(|| format!("no local name for table {logical_id}"))?;
        local.tables.insert(logical_id.into(), name.into());
        let described = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .with_context(|| format!("describing table {name}"))?;
        if let Some(arn) = described.table.and_then(|t| t.latest_stream_arn) {
            local.streams.insert(logical_id.into(), arn);
        }
    }
    Ok(local)
}
