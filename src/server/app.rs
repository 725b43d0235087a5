//! The routes: which path runs which execution model (the state the handlers
//! share is [`super::state`]'s), and the layer every request passes through ([`super::observe`]:
//! metrics, the `Server` header, panic capture). `app(state)` builds it without a socket, so tests
//! can drive it directly.
//!
//! Every path here is static, so a request is routed by a `match` on its
//! [`Endpoint`] to an axum handler, called through axum's [`Handler`] trait
//! (its extractors, its `IntoResponse`), rather than through axum's `Router`.
//! The `Router` costs 6 allocations a request that a static route does not
//! need (`bench/allocations.py`, traced with valgrind's dhat): the URL
//! parameters it stores for every matched route, even one without any (a
//! fresh extensions map, its table, the boxed value), the route's boxed
//! service cloned for each call, the boxed future around it, and the request
//! body boxed into axum's `Body`. The handlers, their extractors and their
//! responses are axum's as before; what the `Router` also did is done here:
//! GET and HEAD only, with a 405 and its `Allow` header otherwise (hyper
//! leaves a HEAD answer's body out and keeps its length), a 404 elsewhere.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::{BoxError, body::Bytes};
use tower::{Layer, Service};

use super::endpoint::Endpoint;
use super::handlers;
use super::model::Model;
use super::observe::{Observe, ObserveLayer};
pub use super::state::{AppState, Parts};

/// The service hyper serves: the routes behind the layer every request
/// passes through.
pub type App = Observe<Routes>;

/// The service: every endpoint of the state's model on its path, GET only,
/// JSON errors elsewhere; every request timed and counted.
pub fn app(state: AppState) -> App {
    ObserveLayer::new(state.metrics().clone()).layer(Routes { state })
}

/// hyper calls the app itself, not through hyper-util's `TowerToHyperService`:
/// that one's `Oneshot` holds the request until hyper first polls the
/// response future, and hyper reads the socket before that (to see a client
/// leave mid-request). The request's head shares hyper's read buffer, so that
/// read found the buffer shared and allocated a new one, and the next head
/// split off it promoted it to shared again: 2 allocations a request. Called
/// at once, a handler that has no use for the request (`/test`) drops it
/// first. The service is always ready (no layer here applies backpressure),
/// so `call` needs no `poll_ready` before it.
impl hyper::service::Service<Request<hyper::body::Incoming>> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = <App as Service<Request<hyper::body::Incoming>>>::Future;

    fn call(&self, request: Request<hyper::body::Incoming>) -> Self::Future {
        Service::call(&mut self.clone(), request)
    }
}

/// The routes of the state's model: see the module's note on why a `match`
/// and not axum's `Router`. Cheap to clone (hyper clones it per request).
#[derive(Clone)]
pub struct Routes {
    state: AppState,
}

impl<B> Service<Request<B>> for Routes
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Routed;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Routed {
        // No handler reads a request body: a request without one (every GET
        // here) gets axum's empty body, which is not boxed; one with a body
        // keeps it, boxed as axum would.
        let request = request.map(|body| if body.is_end_stream() { Body::empty() } else { Body::new(body) });
        route(&self.state, request)
    }
}

/// Routes `request` to its handler under the state's model.
fn route(state: &AppState, request: Request) -> Routed {
    let endpoint = Endpoint::from_path(request.uri().path());
    let on_threads = matches!(state.model(), Model::Pool | Model::Thread);
    let state = state.clone();
    match endpoint {
        Endpoint::Other => call(handlers::no_such_path, request, state),
        // The reactive model's data endpoints are not served by the pool and
        // thread models, whatever the method: 404 naming the model.
        e if on_threads && Endpoint::DATA.contains(&e) && e != Endpoint::GetData => {
            call(handlers::not_in_model, request, state)
        }
        _ if !matches!(*request.method(), Method::GET | Method::HEAD) => {
            call(handlers::method_not_allowed, request, state)
        }
        Endpoint::Metrics => call(handlers::metrics, request, state),
        Endpoint::Test if on_threads => call(handlers::test_on_thread, request, state),
        Endpoint::Delay if on_threads => call(handlers::delay_on_thread, request, state),
        Endpoint::GetData if on_threads => call(handlers::get_data_on_thread, request, state),
        // A value is an axum handler too, answered without a future to box.
        Endpoint::Test => Routed::Ready(Some(handlers::TEST.call(request, state).into_inner())),
        Endpoint::Delay => call(handlers::delay, request, state),
        // The id is read here and the request dropped before the read
        // starts: its head shares hyper's read buffer, which hyper reads into
        // again while the handler runs (2 allocations a request if the head
        // is still held; see the hyper `Service` above). The handler gets an
        // empty request: it takes only the state.
        data => match super::data::requested_id(state.nodes(), request.uri().query()) {
            Ok(id) => {
                let handler = move |State(state): State<AppState>| handlers::data(state, data, id);
                call(handler, Request::new(Body::empty()), state)
            }
            Err(e) => Routed::Ready(Some(e.into_response())),
        },
    }
}

/// The future an async axum handler returns (boxed by axum).
type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Calls an async axum handler with its extractors.
fn call<H, T>(handler: H, request: Request, state: AppState) -> Routed
where
    H: Handler<T, AppState, Future = HandlerFuture>,
{
    Routed::Handler(handler.call(request, state))
}

/// The response of a routed request, on its way.
pub enum Routed {
    /// Answered at once (taken when polled).
    Ready(Option<Response>),
    /// An async handler's future.
    Handler(HandlerFuture),
}

impl Future for Routed {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Routed::Ready(response) => Poll::Ready(Ok(response.take().expect("polled after it was ready"))),
            Routed::Handler(future) => future.as_mut().poll(cx).map(Ok),
        }
    }
}
