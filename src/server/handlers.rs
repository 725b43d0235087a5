//! The axum handlers of the hyper-based models. What a data endpoint does is
//! [`super::data`]'s (shared with the lean server); here it is only wrapped
//! for axum.
//!
//! Under the `pool` and `thread` server models, `/test`, `/delay` and
//! `/getData` run as plain blocking code on a request thread
//! ([`super::request_threads`]); the `*_on_thread` handlers hand them over.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

use super::data;
use super::delay;
use super::endpoint::Endpoint;
use super::error::AppError;
use super::state::AppState;
use crate::db::Content;

/// The result of a data endpoint.
type DataResult = Result<Json<Content>, AppError>;

/// `/test`: no I/O, the ceiling of the HTTP stack. A value, which axum
/// takes as a handler answering with it: no future to box. hyper writes
/// its length from the body's size.
pub const TEST: &str = "works";

/// A study-1 data endpoint: `endpoint`'s read of node `id` (from `?id=`,
/// read by the router) as [`data::read`] does it (the one place that says
/// what each endpoint does).
pub async fn data(state: AppState, endpoint: Endpoint, id: i64) -> DataResult {
    Ok(Json(data::read(&state, endpoint, id).await?))
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
            let read = data::requested_id(state.nodes(), query.as_deref())
                .and_then(|id| state.backend().read_blocking(id).map_err(|e| data::counted(&state, e)));
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

/// A known path with a method other than GET or HEAD, with the methods it takes.
pub async fn method_not_allowed(request: Request) -> impl IntoResponse {
    let allow = [(ALLOW, HeaderValue::from_static("GET, HEAD"))];
    (allow, AppError::MethodNotAllowed(request.method().to_string()))
}
