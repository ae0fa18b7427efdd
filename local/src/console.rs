//! The web console's build (`console/dist`, made by `make console`) served beside the API, as
//! CloudFront serves it in AWS: the console owns `/`, `/index.html`, `/config.json` and
//! `/assets/…`, none of which is an API route; every other path goes to the API untouched.
//! The console routes with the URL's fragment (`#/p/{id}`), so no other path needs it.

use std::path::Path;

use axum::Router;
use axum::http::StatusCode;
use tower_http::services::{ServeDir, ServeFile};

/// `api` with the console in `dir` in front of it; without a build there, `/` says how to
/// make one.
pub fn with_console(api: Router, dir: &Path) -> Router {
    let index = dir.join("index.html");
    if !index.is_file() {
        let hint = format!(
            "The web console is not built ({} is missing): run `make console`, or `make dev`, which builds it.",
            index.display()
        );
        return Router::new()
            .route(
                "/",
                axum::routing::get(move || async move { (StatusCode::NOT_FOUND, hint) }),
            )
            .fallback_service(api);
    }
    Router::new()
        .route_service("/", ServeFile::new(&index))
        .route_service("/index.html", ServeFile::new(&index))
        .route_service("/config.json", ServeFile::new(dir.join("config.json")))
        .nest_service("/assets", ServeDir::new(dir.join("assets")))
        .fallback_service(api)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(app: &Router, path: &str) -> (StatusCode, String) {
        let request = http::Request::get(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn api() -> Router {
        Router::new().route("/projects", axum::routing::get(|| async { "the API" }))
    }

    #[tokio::test]
    async fn the_console_owns_its_files_and_every_other_path_is_the_apis() {
        let dir = std::env::temp_dir().join(format!("gridline-console-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("index.html"), "<html>console</html>").unwrap();
        std::fs::write(dir.join("config.json"), r#"{"api":""}"#).unwrap();
        std::fs::write(dir.join("assets/app.js"), "js").unwrap();
        let app = with_console(api(), &dir);

        assert_eq!(
            get(&app, "/").await,
            (StatusCode::OK, "<html>console</html>".into())
        );
        assert_eq!(get(&app, "/config.json").await.1, r#"{"api":""}"#);
        assert_eq!(get(&app, "/assets/app.js").await.1, "js");
        assert_eq!(
            get(&app, "/projects").await,
            (StatusCode::OK, "the API".into())
        );
        // Not the console's: the API answers (here, the stub's 404), never index.html.
        assert_eq!(get(&app, "/nope").await.0, StatusCode::NOT_FOUND);
        assert_eq!(
            get(&app, "/assets/missing.js").await.0,
            StatusCode::NOT_FOUND
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn without_a_build_the_root_says_how_to_make_one() {
        let app = with_console(api(), Path::new("/nonexistent/dist"));
        let (status, text) = get(&app, "/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(text.contains("make console"), "{text}");
        assert_eq!(get(&app, "/projects").await.1, "the API");
    }
}
