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

#[derive(Subcommand)]
enum Command {
    /// Serve the API on localhost, backed by the embedded engine.
    Serve {
        #[arg(long, env = "PORT", default_value_t = 3000)]
        port: u16,
        /// SQLite file holding the data between runs.
        #[arg(long, default_value = ".local/gridline.db")]
        data: PathBuf,
        /// Keep the data in memory only.
        #[arg(long)]
        in_memory: bool,
        /// Use another DynamoDB endpoint (DynamoDB Local, AWS) instead of the embedded engine.
        #[arg(long, env = "DYNAMODB_ENDPOINT")]
        dynamodb_endpoint: Option<String>,
        #[arg(long, env = "GRIDLINE_JWT_SECRET", default_value = LOCAL_JWT_SECRET, hide_default_value = true)]
        jwt_secret: String,
        #[arg(long, env = "CURSOR_SIGNING_KEY", default_value = LOCAL_CURSOR_KEY, hide_default_value = true)]
        cursor_key: String,
    },
    /// Print a token the local stack accepts.
    Token {
        #[arg(long)]
        user: String,
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value_t = 24)]
        hours: i64,
        #[arg(long, env = "GRIDLINE_JWT_SECRET", default_value = LOCAL_JWT_SECRET, hide_default_value = true)]
        jwt_secret: String,
    },
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Token {
            user,
            tenant,
            hours,
            jwt_secret,
        } => {
            anyhow::ensure!(
                gridline::domain::ids::is_user_id(&user),
                "--user must be 1-128 printable characters without '#'"
            );
            anyhow::ensure!(
                gridline::domain::ids::is_tenant_id(&tenant),
                "--tenant must be 1-128 printable characters without '#'"
            );
            println!(
                "{}",
                gridline::auth::mint_hs256(&user, &tenant, jwt_secret.as_bytes(), hours * 3600)
            );
            Ok(())
        }
        Command::Serve {
            port,
            data,
            in_memory,
            dynamodb_endpoint,
            jwt_secret,
            cursor_key,
        } => {
            gridline::telemetry::init_local();
            let data = match (dynamodb_endpoint, in_memory) {
                (Some(url), _) => Data::External(url),
                (None, true) => Data::Memory,
                (None, false) => Data::File(data),
            };
            serve(port, data, jwt_secret, cursor_key).await
        }
    }
}

async fn serve(port: u16, data: Data, jwt_secret: String, cursor_key: String) -> Result<()> {
    let stack = Stack::start(StackOptions {
        data: data.clone(),
        tables: TableNames::default(),
        jwt_secret: jwt_secret.into_bytes(),
        cursor_key: cursor_key.into_bytes(),
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
         \x20 API:       http://{addr}\n\
         \x20 Data:      {where_data}\n\
         \x20 DynamoDB:  {} (tables {} and {})\n\
         \x20 Indexer:   fed from the records table's stream (the grid catches up within a second)\n\
         \x20 Token:     make token USER=alice TENANT=acme\n\
         \x20 Try:       curl -s -H \"Authorization: Bearer $(make -s token USER=alice TENANT=acme)\" http://{addr}/projects\n",
        stack.endpoint, stack.tables.records, stack.tables.index
    );
    // The indexer, fed from the engine's real stream about four times a second.
    let poller = stack.poller(stack.indexer()).await;
    tokio::spawn(poller.run(std::time::Duration::from_millis(250)));
    axum::serve(listener, stack.router())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
