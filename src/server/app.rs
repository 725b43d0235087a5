//! The router: which path runs which execution model, the state the handlers
//! share, and the layer every request passes through (metrics, the `Server`
//! header, panic capture). `app(state)` builds it without a socket, so tests
//! can drive it directly.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::HeaderValue;
use axum::http::header::SERVER;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use futures_util::FutureExt;

use super::actors::ActorSystem;
use super::endpoint::Endpoint;
use super::error::AppError;
use super::handlers;
use super::metrics::Metrics;
use super::runtime::RuntimeProbe;
use crate::graph::GraphBackend;

/// The value of the `Server` header on every response.
pub const SERVER_HEADER: &str = concat!("blocklab/", env!("CARGO_PKG_VERSION"));

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Shared>,
}

struct Shared {
    backend: Arc<dyn GraphBackend>,
    nodes: u64,
    actors: ActorSystem,
    metrics: Arc<Metrics>,
    http: Option<RuntimeProbe>,
    info: Vec<(&'static str, String)>,
}

impl AppState {
    /// Puts the parts together. `nodes` bounds the valid ids; `http` is the
    /// probe of the runtime serving requests, when it is known.
    pub fn new(
        backend: Arc<dyn GraphBackend>,
        nodes: u64,
        actors: ActorSystem,
        metrics: Arc<Metrics>,
        http: Option<RuntimeProbe>,
        info: Vec<(&'static str, String)>,
    ) -> AppState {
        AppState { inner: Arc::new(Shared { backend, nodes, actors, metrics, http, info }) }
    }

    /// The database.
    pub fn backend(&self) -> &Arc<dyn GraphBackend> {
        &self.inner.backend
    }

    /// The number of nodes: valid ids are `1..=nodes`.
    pub fn nodes(&self) -> u64 {
        self.inner.nodes
    }

    /// The actor system.
    pub fn actors(&self) -> &ActorSystem {
        &self.inner.actors
    }

    /// The server's figures.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The whole `/metrics` text.
    pub fn render_metrics(&self) -> String {
        let mut probes = Vec::with_capacity(2);
        if let Some(http) = &self.inner.http {
            probes.push(http);
        }
        probes.push(self.inner.actors.probe());
        self.inner.metrics.render(&self.inner.info, &probes)
    }
}

/// The service: every endpoint on its path, GET only, JSON errors elsewhere.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route(Endpoint::Test.path(), only_get(handlers::test))
        .route(Endpoint::GetData.path(), only_get(handlers::get_data))
        .route(Endpoint::GetDataAsync.path(), only_get(handlers::get_data_async))
        .route(Endpoint::GetDataAsync2.path(), only_get(handlers::get_data_async2))
        .route(Endpoint::GetDataAkka.path(), only_get(handlers::get_data_akka))
        .route(Endpoint::GetDataAkkaAsync.path(), only_get(handlers::get_data_akka_async))
        .route(Endpoint::GetDataAkkaAsync2.path(), only_get(handlers::get_data_akka_async2))
        .route(Endpoint::GetDataSpawnBlocking.path(), only_get(handlers::get_data_spawn_blocking))
        .route(Endpoint::Metrics.path(), only_get(handlers::metrics))
        .fallback(handlers::no_such_path)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// A route answering GET (and HEAD), and a JSON 405 to any other method.
fn only_get<H, T>(handler: H) -> MethodRouter<AppState>
where
    H: Handler<T, AppState>,
    T: 'static,
{
    get(handler).fallback(handlers::method_not_allowed)
}

/// Times and counts every request by endpoint, turns a handler panic into a
/// 500 (the connection and the server carry on) and sets the `Server` header.
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let endpoint = Endpoint::from_path(request.uri().path());
    let timer = state.metrics().start(endpoint);
    let mut response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => AppError::Panicked.into_response(),
    };
    response.headers_mut().insert(SERVER, HeaderValue::from_static(SERVER_HEADER));
    timer.finish(response.status().as_u16());
    response
}
