//! `mlkube gateway-fallback`: what the gateway component answers for a request that none of
//! its Gateway's routes takes. Traefik's own answer is a bare `404 page not found`, which does
//! not tell a mistyped model name from a protocol the servers do not speak; the component
//! attaches a route for every path (`/`, the shortest prefix, so any other route wins) to this
//! server, which answers 404 with JSON that says which of those it is and what to ask instead.
//!
//! It reads nothing from the cluster: it knows the paths the serving component routes, not
//! which models are served (`mlkube status` lists those).

use std::convert::Infallible;

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;

use crate::operator::runtime::http::{HttpError, bind};

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum FallbackError {
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Listen(#[from] HttpError),
}

/// Serve the fallback on `addr` (`:8080` or `host:port`) until the process ends.
pub fn run(addr: &str) -> Result<(), FallbackError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(FallbackError::Runtime)?;
    runtime.block_on(serve(addr))
}

async fn serve(addr: &str) -> Result<(), FallbackError> {
    let listener = bind(addr).await?;
    eprintln!("mlkube gateway-fallback: listening on {addr}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let service = service_fn(|request: Request<Incoming>| async move {
                Ok::<_, Infallible>(not_routed(request.method().as_str(), request.uri().path()))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The 404 for `method` `path`: what no route took, and what to ask instead.
fn not_routed(method: &str, path: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "error": format!("no route of this gateway takes {method} {path}"),
        "hint": hint(path),
    });
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// What the path shows the client meant, and the path that answers it.
fn hint(path: &str) -> String {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["v2", "models", model, ..] if !model.is_empty() => format!(
            "no model named {model:?} is routed here: each serving component routes \
             /v2/models/<its model> (`mlkube status <env>` lists the served versions); check the \
             model's name, then GET /v2/models/<model>/ready or POST /v2/models/<model>/infer"
        ),
        ["v1", "models", ..] => "KServe's V1 protocol (/v1/models/...) is routed only for the \
             tensorflow-serving runtime; MLServer's models speak the V2 (Open Inference) \
             protocol: POST /v2/models/<model>/infer, GET /v2/models/<model>/ready"
            .to_owned(),
        ["v2", ..] => "server-wide V2 paths (/v2, /v2/health/live, /v2/health/ready) are not \
             routed, as the gateway fronts many model servers: ask a model instead, GET \
             /v2/models/<model>/ready (ready) or GET /v2/models/<model> (its metadata)"
            .to_owned(),
        _ => "this gateway routes model requests: /v2/models/<model>/... (the V2 protocol), \
              and /v1/models/<model>... for the tensorflow-serving runtime"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn answer(path: &str) -> serde_json::Value {
        let response = not_routed("GET", path);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn each_kind_of_path_no_route_takes_says_what_to_ask_instead() {
        let typo = answer("/v2/models/digts/infer").await;
        assert_eq!(
            typo["error"],
            "no route of this gateway takes GET /v2/models/digts/infer"
        );
        assert!(
            typo["hint"]
                .as_str()
                .unwrap()
                .starts_with("no model named \"digts\" is routed here")
        );
        let v1 = answer("/v1/models/digits:predict").await;
        assert!(
            v1["hint"]
                .as_str()
                .unwrap()
                .starts_with("KServe's V1 protocol")
        );
        let live = answer("/v2/health/live").await;
        assert!(
            live["hint"]
                .as_str()
                .unwrap()
                .starts_with("server-wide V2 paths")
        );
        let root = answer("/").await;
        assert!(
            root["hint"]
                .as_str()
                .unwrap()
                .starts_with("this gateway routes model requests")
        );
    }
}
