//! The router: which path runs which execution model (the state the handlers
//! share is [`super::state`]'s), and the layer every request passes through ([`super::observe`]:
//! metrics, the `Server` header, panic capture). `app(state)` builds it without a socket, so tests
//! can drive it directly.

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::routing::{MethodRouter, get};
use tower::Layer;

use super::endpoint::Endpoint;
use super::handlers;
use super::model::Model;
use super::observe::{Observe, ObserveLayer};
pub use super::state::{AppState, Parts};

/// The service hyper serves: the router behind the layer every request
/// passes through.
pub type App = Observe<Router>;

/// The service: every endpoint of the state's model on its path, GET only,
/// JSON errors elsewhere; every request timed and counted.
pub fn app(state: AppState) -> App {
    let router = match state.model() {
        Model::Pool | Model::Thread => on_request_threads(),
        // The lean model has a server of its own (`lean.rs`); this router
        // serves its routes too when a test drives it without a socket.
        Model::Reactive | Model::Lean => reactive(),
    };
    let observe = ObserveLayer::new(state.metrics().clone());
    // Around the whole router, not each route (`Router::layer`), so a request
    // passes through it once and no route is boxed twice.
    observe.layer(
        router
            .route(Endpoint::Metrics.path(), only_get(handlers::metrics))
            .fallback(handlers::no_such_path)
            .with_state(state),
    )
}

/// The reactive model's routes: every handler on the async workers; each
/// data endpoint's read is [`super::data::read`]'s.
fn reactive() -> Router<AppState> {
    let mut router = Router::new()
        .route(Endpoint::Test.path(), only_get(handlers::test))
        .route(Endpoint::Delay.path(), only_get(handlers::delay));
    for endpoint in Endpoint::DATA {
        let handler =
            move |State(state): State<AppState>, request: Request| handlers::data(state, request, endpoint);
        router = router.route(endpoint.path(), only_get(handler));
    }
    router
}

/// The pool and thread models' routes: `/test`, `/delay` and `/getData` run
/// on a request thread; the reactive model's other endpoints answer 404
/// naming it. `/metrics` stays on the front end, so a server whose threads
/// are all taken can still say so.
fn on_request_threads() -> Router<AppState> {
    let mut router = Router::new()
        .route(Endpoint::Test.path(), only_get(handlers::test_on_thread))
        .route(Endpoint::Delay.path(), only_get(handlers::delay_on_thread))
        .route(Endpoint::GetData.path(), only_get(handlers::get_data_on_thread));
    for endpoint in Endpoint::DATA.into_iter().filter(|e| *e != Endpoint::GetData) {
        router = router.route(endpoint.path(), axum::routing::any(handlers::not_in_model));
    }
    router
}

/// A route answering GET (and HEAD), and a JSON 405 to any other method.
fn only_get<H, T>(handler: H) -> MethodRouter<AppState>
where
    H: Handler<T, AppState>,
    T: 'static,
{
    get(handler).fallback(handlers::method_not_allowed)
}
