//! `gridline-local`: the local stack (`serve`) and local tokens (`token`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use gridline::config::{LOCAL_CURSOR_KEY, LOCAL_JWT_SECRET};
use gridline_local::{Data, Stack, StackOptions, TableNames};

#[derive(Parser)]
#[command(
    name = "gridline-local",
    about = "Gridline's local stack: no Docker, no AWS account"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A web app's dev server on this machine (Vite's default port), allowed by `make dev`.
const LOCAL_ALLOWED_ORIGINS: &str = "http://localhost:5173,http://127.0.0.1:5173";

/// `serve`'s options.
#[derive(clap::Args)]
struct ServeArgs {
    #[arg(long, env = "PORT", default_value_t = 3000)]
    port: u16,
    /// SQLite file holding the data between runs.
    #[arg(long, default_value = ".local/gridline.db")]
    data: PathBuf,
    /// Keep the data in memory only.
    #[arg(long)]
    in_memory: bool,
    /// The embedded engine's port, where `gridctl --endpoint` and other tools reach it.
    #[arg(long, env = "ENGINE_PORT", default_value_t = 8100)]
    engine_port: u16,
    /// Use another DynamoDB endpoint (DynamoDB Local, AWS) instead of the embedded engine.
    #[arg(long, env = "DYNAMODB_ENDPOINT")]
    dynamodb_endpoint: Option<String>,
    #[arg(long, env = "GRIDLINE_JWT_SECRET", default_value = LOCAL_JWT_SECRET, hide_default_value = true)]
    jwt_secret: String,
    #[arg(long, env = "CURSOR_SIGNING_KEY", default_value = LOCAL_CURSOR_KEY, hide_default_value = true)]
    cursor_key: String,
    /// Browser origins allowed to call the API (CORS), comma-separated; `*` allows any.
    #[arg(long, env = "ALLOWED_ORIGINS", default_value = LOCAL_ALLOWED_ORIGINS)]
    allowed_origins: String,
    /// The web console's build, served at `/` (`make console` makes it).
    #[arg(long, env = "CONSOLE_DIR", default_value = "console/dist")]
    console: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and the web console on localhost, backed by the embedded engine.
    Serve(ServeArgs),
    /// Run sample events through their functions' handlers, without Docker: each on a fresh
    /// in-memory stack holding the fixtures the events name. Prints what Lambda would return.
    Invoke {
        /// Event files (default: every event in events/manifest.json).
        events: Vec<PathBuf>,
        /// The function, as in template.yaml (`IssuesFunction`) or short (`issues`); default:
        /// the one events/manifest.json names for the file.
        #[arg(long)]
        function: Option<String>,
        /// Use the tables of another engine (e.g. the one `make dev` prints) instead; no
        /// fixtures are written.
        #[arg(long, env = "DYNAMODB_ENDPOINT")]
        dynamodb_endpoint: Option<String>,
    },
    /// Print a token the local stack accepts. With --tenant it is minted here, as an
    /// operator's attribute would give it; without, the running stack mints it with the tenant
    /// the token trigger sets from the user's chosen workspace (none before they chose one).
    Token {
        #[arg(long)]
        user: String,
        #[arg(long)]
        tenant: Option<String>,
        /// The token's `email` claim, verified unless --unverified.
        #[arg(long)]
        email: Option<String>,
        #[arg(long)]
        unverified: bool,
        /// The local stack that mints a token without --tenant.
        #[arg(long, env = "GRIDLINE_API", default_value = "http://127.0.0.1:3000")]
        api: String,
        #[arg(long, default_value_t = 24)]
        hours: i64,
        #[arg(long, env = "GRIDLINE_JWT_SECRET", default_value = LOCAL_JWT_SECRET, hide_default_value = true)]
        jwt_secret: String,
    },
}

fn main() -> Result<()> {
    // What template.yaml sets on every HTTP function: REST events carry the stage in their
    // path ("/prod/..."), the routes do not.
    // SAFETY: no other thread exists yet; the runtime starts below.
    unsafe { std::env::set_var("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true") };
    tokio::runtime::Runtime::new()?.block_on(run(Cli::parse()))
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Token {
            user,
            tenant,
            email,
            unverified,
            api,
            hours,
            jwt_secret,
        } => {
            anyhow::ensure!(
                gridline::domain::ids::is_user_id(&user),
                "--user must be 1-128 printable characters without '#'"
            );
            let email_verified = email.is_some() && !unverified;
            let token = match tenant.filter(|t| !t.is_empty()) {
                Some(tenant) => {
                    anyhow::ensure!(
                        gridline::domain::ids::is_tenant_id(&tenant),
                        "--tenant must be 1-128 printable characters without '#'"
                    );
                    let claims = gridline::auth::Claims {
                        sub: user,
                        tenant: Some(tenant),
                        email,
                        email_verified: Some(email_verified),
                        ..Default::default()
                    };
                    gridline::auth::mint_claims(claims, jwt_secret.as_bytes(), hours * 3600)
                }
                None => {
                    let body = serde_json::json!({
                        "user": user, "email": email, "email_verified": email_verified,
                    });
                    gridline_local::local_token::request(&api, &body).await?
                }
            };
            println!("{token}");
            Ok(())
        }
        Command::Invoke {
            events,
            function,
            dynamodb_endpoint,
        } => {
            let failures = invoke(events, function, dynamodb_endpoint).await?;
            anyhow::ensure!(
                failures == 0,
                "{failures} event(s) did not give what events/manifest.json expects"
            );
            Ok(())
        }
        Command::Serve(args) => serve(args).await,
    }
}

async fn serve(args: ServeArgs) -> Result<()> {
    gridline::telemetry::init_local();
    let ServeArgs {
        port,
        data,
        in_memory,
        engine_port,
        dynamodb_endpoint,
        jwt_secret,
        cursor_key,
        allowed_origins,
        console,
    } = args;
    let data = match (dynamodb_endpoint, in_memory) {
        (Some(url), _) => Data::External(url),
        (None, true) => Data::Memory,
        (None, false) => Data::File(data),
    };
    let stack = Stack::start(StackOptions {
        data: data.clone(),
        engine_port,
        tables: TableNames::default(),
        jwt_secret: jwt_secret.into_bytes(),
        cursor_key: cursor_key.into_bytes(),
        cors: gridline::http::cors::Cors::parse(&allowed_origins),
    })
    .await?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr} (set PORT to use another port)"))?;
    let where_data = match &data {
        Data::File(p) => format!("{} (kept between runs)", p.display()),
        Data::Memory => "in memory (gone when this stops)".into(),
        Data::External(url) => format!("the engine at {url}"),
    };
    println!(
        "\nGridline local stack\n\
         \x20 Console:   http://{addr}/   (sign in with any user; tenant acme, or empty for a workspace)\n\
         \x20 API:       http://{addr}\n\
         \x20 Data:      {where_data}\n\
         \x20 DynamoDB:  {} (tables {} and {})\n\
         \x20 Indexer:   fed from the records table's stream (the grid catches up within a second)\n\
         \x20 Field jobs: a new field's column is built off the stream, within seconds\n\
         \x20 Token:     make token USER=alice TENANT=acme\n\
         \x20 Operator:  make gridctl ARGS=verify   (gridctl --endpoint {})\n\
         \x20 Try:       curl -s -H \"Authorization: Bearer $(make -s token USER=alice TENANT=acme)\" http://{addr}/projects\n",
        stack.endpoint, stack.tables.records, stack.tables.index, stack.endpoint
    );
    // The indexer, fed from the engine's real stream about four times a second.
    let mut poller = stack.poller(stack.indexer()).await;
    // Where `gridctl replay --file` finds what exhausted its retries, and where the poller
    // keeps its place so a restart resumes there, as an event source mapping does.
    if let Data::File(path) = &data {
        poller.on_failure_file = Some(path.with_file_name("on-failure.jsonl"));
        poller.checkpoint_file = Some(gridline_local::stream::checkpoint_path(path));
    }
    tokio::spawn(poller.run(std::time::Duration::from_millis(250)));
    // The field-job function, fed from its queue (kept beside the data file, so a restart
    // resumes unfinished jobs).
    tokio::spawn(
        stack
            .job_worker()?
            .run(std::time::Duration::from_millis(250)),
    );
    let app = gridline_local::console::with_console(stack.router(), &console);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// Runs each event and prints its response; returns how many differ from the manifest.
async fn invoke(
    events: Vec<PathBuf>,
    function: Option<String>,
    endpoint: Option<String>,
) -> Result<usize> {
    use gridline_local::invoke::{events_dir, invoke, manifest};
    let manifest = manifest()?;
    let function = function.map(logical_id);
    // No files: every sample event (of the function, when one is named).
    let files: Vec<PathBuf> = if events.is_empty() {
        manifest
            .iter()
            .filter(|e| function.as_ref().is_none_or(|f| *f == e.function))
            .map(|e| events_dir().join(&e.file))
            .collect()
    } else {
        events
    };
    let mut failures = 0;
    for file in files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = manifest.iter().find(|e| e.file == name);
        let function = function
            .clone()
            .or_else(|| entry.map(|e| e.function.clone()))
            .with_context(|| format!("{name} is not in events/manifest.json: pass --function"))?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let stack = invoke_stack(endpoint.as_deref()).await?;
        println!("\n=== {name} → {function}");
        if let Some(e) = entry {
            println!("    {}", e.purpose);
            if let Some(first) = &e.after {
                let before = std::fs::read_to_string(events_dir().join(first))?;
                invoke(&stack, &function, &before).await?;
            }
        }
        let outcome = invoke(&stack, &function, &text).await?;
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome.to_lambda_json())?
        );
        let expected = entry.and_then(|e| e.mismatch(&outcome));
        if endpoint.is_none()
            && let Some(expected) = expected
        {
            println!("!!! events/manifest.json expects {expected}");
            failures += 1;
        }
    }
    Ok(failures)
}

/// A function's logical id from what `--function` may say: a route function's name
/// (`grid`), `indexer`, `fieldjob`, `authorizer`, or the logical id itself.
fn logical_id(f: String) -> String {
    let f = gridline::http::Function::ALL
        .into_iter()
        .find(|g| g.name() == f)
        .map_or(f.clone(), |g| g.function_logical_id().to_string());
    match f.as_str() {
        "indexer" => gridline_local::invoke::INDEXER_FUNCTION.to_string(),
        "fieldjob" => gridline_local::jobs::FIELD_JOB_FUNCTION.to_string(),
        "authorizer" => gridline_local::invoke::AUTHORIZER_FUNCTION.to_string(),
        _ => f,
    }
}

/// A fresh stack for one event: on `endpoint`'s engine, or in memory with the fixtures the
/// sample events name.
async fn invoke_stack(endpoint: Option<&str>) -> Result<Stack> {
    let stack = Stack::start(StackOptions {
        data: match endpoint {
            Some(url) => Data::External(url.to_string()),
            None => Data::Memory,
        },
        engine_port: 0,
        tables: TableNames::default(),
        jwt_secret: LOCAL_JWT_SECRET.as_bytes().to_vec(),
        cursor_key: LOCAL_CURSOR_KEY.as_bytes().to_vec(),
        cors: gridline::http::cors::Cors::parse(gridline_local::fixtures::ORIGIN),
    })
    .await?;
    if endpoint.is_none() {
        gridline_local::fixtures::seed(&stack.state.store).await?;
    }
    Ok(stack)
}
