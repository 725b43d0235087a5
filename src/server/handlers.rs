//! The handlers, one per execution model. Each is a few lines on purpose: the
//! only thing that differs between them is which read they call and on which
//! thread, and that is what the comment on each says.
//!
//! Under the `pool` and `thread` server models, `/test`, `/delay` and
//! `/getData` run as plain blocking code on a request thread
//! ([`super::request_threads`]); the `*_on_thread` handlers hand them over.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::delay;
use super::error::AppError;
use super::state::AppState;
use crate::graph::Content;

/// The result of a data endpoint.
type DataResult = Result<Json<Content>, AppError>;

/// `/test`: no I/O, the ceiling of the HTTP stack.
pub async fn test() -> &'static str {
    "works"
}

/// `/getData`: the anti-pattern, faithfully. The blocking read runs right
/// here, inside the async handler, holding this HTTP runtime worker for the
/// whole round trip; every other connection on this worker waits behind it.
pub async fn get_data(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    let content = state.backend().read_blocking(id).map_err(|e| counted(&state, e))?;
    Ok(Json(content))
}

/// `/getDataAsync`: the non-blocking read, awaited; the worker serves other
/// connections while this one waits.
pub async fn get_data_async(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    let content = state.backend().read(id).await.map_err(|e| counted(&state, e))?;
    Ok(Json(content))
}

/// `/getDataAsync2`: two non-blocking reads, the second started after the
/// first completes; answers with the second.
pub async fn get_data_async2(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    state.backend().read(id).await.map_err(|e| counted(&state, e))?;
    let content = state.backend().read(id).await.map_err(|e| counted(&state, e))?;
    Ok(Json(content))
}

/// `/getDataAkka`: ask the router of 4 blocking actors and block this HTTP
/// worker until the reply (the seed's `Await.result`, 5 s limit).
pub async fn get_data_akka(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    let content = state.actors()?.ask_blocking(id).map_err(|e| counted_ask(&state, e))?;
    Ok(Json(content))
}

/// `/getDataAkkaAsync`: ask the piping actor and await its reply.
pub async fn get_data_akka_async(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    let content = state.actors()?.ask(id).await.map_err(|e| counted_ask(&state, e))?;
    Ok(Json(content))
}

/// `/getDataAkkaAsync2`: two asks in sequence; answers with the second.
pub async fn get_data_akka_async2(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    state.actors()?.ask(id).await.map_err(|e| counted_ask(&state, e))?;
    let content = state.actors()?.ask(id).await.map_err(|e| counted_ask(&state, e))?;
    Ok(Json(content))
}

/// `/getDataSpawnBlocking`: the idiomatic fix. The same blocking read, moved
/// to tokio's blocking pool (a thread per concurrent call), so the HTTP
/// worker is free while it runs.
pub async fn get_data_spawn_blocking(State(state): State<AppState>, request: Request) -> DataResult {
    let id = requested_id(&state, request.uri().query())?;
    let (backend, metrics) = (state.backend().clone(), state.metrics().clone());
    let task = tokio::task::spawn_blocking(move || {
        metrics.spawn_blocking_in_flight.inc();
        let result = backend.read_blocking(id);
        metrics.spawn_blocking_in_flight.dec();
        result
    });
    // A JoinError means the read panicked (or the runtime is shutting down).
    let content = task.await.map_err(|_| AppError::Panicked)?.map_err(|e| counted(&state, e))?;
    Ok(Json(content))
}

/// `/delay` (models reactive and lean): awaits a timer, as WebFlux's
/// `Mono.delay` does; the worker serves other connections meanwhile.
pub async fn delay(request: Request) -> Result<Response, AppError> {
    let wait = delay::requested(request.uri().query()).map_err(AppError::BadRequest)?;
    tokio::time::sleep(wait).await;
    Ok(delay_reply())
}

/// `/delay`'s answer.
fn delay_reply() -> Response {
    ([(CONTENT_TYPE, "application/json")], delay::BODY).into_response()
}

/// `/test` on a request thread (models pool and thread).
pub async fn test_on_thread(State(state): State<AppState>) -> Result<Response, AppError> {
    Ok(state.request_threads()?.run(|| "works".into_response()).await)
}

/// `/delay` on a request thread: sleeps it, as `Thread.sleep` in a servlet.
/// The thread is held for the whole wait and serves nothing else.
pub async fn delay_on_thread(State(state): State<AppState>, request: Request) -> Result<Response, AppError> {
    let query = request.uri().query().map(str::to_owned);
    let response = state
        .request_threads()?
        .run(move || match delay::requested(query.as_deref()) {
            Ok(wait) => {
                std::thread::sleep(wait);
                delay_reply()
            }
            Err(e) => AppError::BadRequest(e).into_response(),
        })
        .await;
    Ok(response)
}

/// `/getData` on a request thread: a servlet with a synchronous driver. The
/// blocking read blocks this request's thread only.
pub async fn get_data_on_thread(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, AppError> {
    let query = request.uri().query().map(str::to_owned);
    let threads = state.request_threads()?.clone();
    let response = threads
        .run(move || {
            let read = requested_id(&state, query.as_deref())
                .and_then(|id| state.backend().read_blocking(id).map_err(|e| counted(&state, e)));
            read.map(Json).into_response()
        })
        .await;
    Ok(response)
}

/// A study-1 endpoint asked of a server running another model.
pub async fn not_in_model(State(state): State<AppState>, request: Request) -> AppError {
    AppError::NotInModel { path: request.uri().path().to_string(), model: state.model() }
}

/// `/metrics`: Prometheus text exposition.
pub async fn metrics(State(state): State<AppState>) -> Response {
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.render_metrics()).into_response()
}

/// Any unknown path.
pub async fn no_such_path(request: Request) -> AppError {
    AppError::NoSuchPath(request.uri().path().to_string())
}

/// A known path with a method other than GET or HEAD.
pub async fn method_not_allowed(request: Request) -> AppError {
    AppError::MethodNotAllowed(request.method().to_string())
}

/// The id to read: `?id=N` if given (validated), else uniformly random in 1..=nodes.
fn requested_id(state: &AppState, query: Option<&str>) -> Result<i64, AppError> {
    let nodes = state.nodes() as i64;
    let given =
        query.and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(key, _)| key == "id").map(|(_, v)| v));
    let Some(raw) = given else {
        return Ok(rand::random_range(1..=nodes));
    };
    match raw.trim().parse::<i64>() {
        Ok(id) if (1..=nodes).contains(&id) => Ok(id),
        Ok(id) => Err(AppError::BadRequest(format!("id {id} is out of range: ids run from 1 to {nodes}"))),
        Err(_) => {
            let shown: String = raw.chars().take(40).collect();
            Err(AppError::BadRequest(format!("id must be an integer from 1 to {nodes}, got '{shown}'")))
        }
    }
}

fn counted(state: &AppState, e: crate::graph::GraphError) -> AppError {
    state.metrics().db_error(e.kind());
    AppError::Graph(e)
}

fn counted_ask(state: &AppState, e: super::actors::AskError) -> AppError {
    if let super::actors::AskError::Graph(g) = &e {
        state.metrics().db_error(g.kind());
    }
    AppError::Ask(e)
}
