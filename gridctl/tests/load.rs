//! A bounded load test over loopback: the local stack served on a real TCP port, the indexer
//! fed from the stream in the background, and concurrent clients creating, patching and
//! listing. It asserts zero 5xx and zero lost writes (every acknowledged patch is what the
//! records hold; `gridctl verify` is clean once the indexer catches up) and prints the
//! latency figures. It is bounded by count, not time, and asserts no timing.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gridctl::ops;
use gridline_local::Data;
use gridline_local::testing::{TestApi, test_stack};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use indicatif::ProgressBar;
use serde_json::{Value, json};

const CLIENTS: usize = 8;
const OPS_PER_CLIENT: usize = 60;

type Http = Client<HttpConnector, Full<axum::body::Bytes>>;

/// A client of the served API, signed in as one user.
#[derive(Clone)]
struct Api {
    http: Http,
    base: String,
    token: String,
}

impl Api {
    async fn request(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value, Duration) {
        let started = Instant::now();
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::from(body.map(|b| b.to_string()).unwrap_or_default()))
            .unwrap();
        let res = self.http.request(req).await.expect("the server answers");
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let elapsed = started.elapsed();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            elapsed,
        )
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_no_5xx_and_lose_no_write() {
    let stack = Arc::new(test_stack(Data::Memory).await.unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(axum::serve(listener, stack.router()).into_future());
    let poller = stack.poller(stack.indexer()).await;
    let indexer = tokio::spawn(poller.run(Duration::from_millis(50)));

    let api = Api {
        http: Client::builder(TokioExecutor::new()).build_http(),
        base,
        token: TestApi::token("alice", "acme"),
    };
    let (s, project, _) = api
        .request(
            http::Method::POST,
            "/projects",
            Some(json!({"name": "load"})),
        )
        .await;
    assert_eq!(s, 201);
    let project = project["id"].as_str().unwrap().to_string();
    let (_, field, _) = api
        .request(
            http::Method::POST,
            &format!("/projects/{project}/fields"),
            Some(json!({"name": "Points", "type": "number"})),
        )
        .await;
    let field = field["id"].as_str().unwrap().to_string();

    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (api, project, field) = (api.clone(), project.clone(), field.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
            let mut server_errors = 0;
            // This client's issues and the last value it was told it wrote to each.
            let mut mine: Vec<(String, i64)> = Vec::new();
            for op in 0..OPS_PER_CLIENT {
                let kind = match op % 10 {
                    0..=2 => "create",
                    3..=6 if !mine.is_empty() => "patch",
                    _ => "list",
                };
                let (status, body, took) = match kind {
                    "create" => {
                        let r = api.request(http::Method::POST, &format!("/projects/{project}/issues"),
                            Some(json!({"title": format!("c{c} op{op}"), "fields": {field.clone(): op}}))).await;
                        if r.0 == 201 {
                            mine.push((r.1["id"].as_str().unwrap().to_string(), op as i64));
                        }
                        r
                    }
                    "patch" => {
                        let i = op % mine.len();
                        let value = (c * 1000 + op) as i64;
                        let r = api.request(http::Method::PATCH, &format!("/issues/{}", mine[i].0),
                            Some(json!({"fields": {field.clone(): value}}))).await;
                        if r.0 == 200 {
                            mine[i].1 = value;
                        }
                        r
                    }
                    _ => api.request(http::Method::GET,
                        &format!("/projects/{project}/issues?sort={field}&order=desc&limit=25"), None).await,
                };
                if status >= 500 {
                    server_errors += 1;
                }
                assert!(status < 400, "{kind}: {status} {body}");
                latencies.entry(kind).or_default().push(took);
            }
            (latencies, server_errors, mine)
        }));
    }
    let mut all: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    let mut server_errors = 0;
    let mut written = Vec::new();
    for t in tasks {
        let (lat, errors, mine) = t.await.unwrap();
        for (k, v) in lat {
            all.entry(k).or_default().extend(v);
        }
        server_errors += errors;
        written.extend(mine);
    }
    let wall = started.elapsed();
    assert_eq!(server_errors, 0, "no 5xx");

    // No lost write: every acknowledged create and patch is in the records.
    for (id, value) in &written {
        let (s, issue, _) = api
            .request(http::Method::GET, &format!("/issues/{id}"), None)
            .await;
        assert_eq!(s, 200);
        assert_eq!(issue["fields"][&field], json!(value), "issue {id}");
    }
    // The indexer catches up and the index is exactly what the records say.
    let store = &support::store(&stack, "Verify");
    let mut clean = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if ops::verify(store, 2, &ProgressBar::hidden())
            .await
            .unwrap()
            .is_clean()
        {
            clean = true;
            break;
        }
    }
    indexer.abort();
    assert!(clean, "gridctl verify is clean after the load");

    let total: usize = all.values().map(Vec::len).sum();
    println!(
        "load: {CLIENTS} clients, {total} requests in {:.2} s ({:.0} req/s), 0 5xx, {} issues, 0 lost writes",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64(),
        written.len()
    );
    for (kind, mut v) in all {
        v.sort();
        println!(
            "  {kind:7} n={:4}  p50 {:6.2} ms  p99 {:6.2} ms",
            v.len(),
            percentile(&v, 0.50),
            percentile(&v, 0.99)
        );
    }
}
