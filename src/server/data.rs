//! What each study-1 data endpoint does, whatever HTTP stack carries it:
//! which read it calls, how many, and on which thread or executor. This is
//! the one place that says it. The reactive model's axum handlers
//! (`handlers.rs`) and the lean server (`lean.rs`) both call [`read`]; a
//! server model says only how its connections are held and where this
//! future is polled — under both, on a worker of the HTTP runtime, so the
//! blocking reads below block that worker, as the seed's did.

use super::endpoint::Endpoint;
use super::error::AppError;
use super::state::AppState;
use crate::db::{Content, GraphError};

/// Reads node `id` the way `endpoint`'s execution model does (the
/// translation table of the seed study; see [`Endpoint::model`]).
pub async fn read(state: &AppState, endpoint: Endpoint, id: i64) -> Result<Content, AppError> {
    match endpoint {
        // `/getData`: the anti-pattern, faithfully. The blocking read runs
        // right here, inside the async code, holding this HTTP runtime worker
        // for the whole round trip; every other connection on it waits.
        Endpoint::GetData => state.backend().read_blocking(id).map_err(|e| counted(state, e)),
        // `/getDataAsync`: the non-blocking read, awaited; the worker serves
        // other connections while this one waits.
        Endpoint::GetDataAsync => state.backend().read(id).await.map_err(|e| counted(state, e)),
        // `/getDataAsync2`: two non-blocking reads, the second started after
        // the first completes; answers with the second.
        Endpoint::GetDataAsync2 => {
            state.backend().read(id).await.map_err(|e| counted(state, e))?;
            state.backend().read(id).await.map_err(|e| counted(state, e))
        }
        // `/getDataAkka`: ask the router of 4 blocking actors and block this
        // HTTP worker until the reply (the seed's `Await.result`, 5 s limit).
        Endpoint::GetDataAkka => state.actors()?.ask_blocking(id).map_err(|e| counted_ask(state, e)),
        // `/getDataAkkaAsync`: ask the piping actor and await its reply.
        Endpoint::GetDataAkkaAsync => state.actors()?.ask(id).await.map_err(|e| counted_ask(state, e)),
        // `/getDataAkkaAsync2`: two asks in sequence; answers with the second.
        Endpoint::GetDataAkkaAsync2 => {
            state.actors()?.ask(id).await.map_err(|e| counted_ask(state, e))?;
            state.actors()?.ask(id).await.map_err(|e| counted_ask(state, e))
        }
        // `/getDataSpawnBlocking`: the idiomatic fix. The same blocking read,
        // moved to tokio's blocking pool (a thread per concurrent call), so
        // the HTTP worker is free while it runs.
        Endpoint::GetDataSpawnBlocking => {
            let (backend, metrics) = (state.backend().clone(), state.metrics().clone());
            let task = tokio::task::spawn_blocking(move || {
                metrics.spawn_blocking_in_flight.inc();
                let result = backend.read_blocking(id);
                metrics.spawn_blocking_in_flight.dec();
                result
            });
            // A JoinError means the read panicked (or the runtime is shutting down).
            task.await.map_err(|_| AppError::Panicked)?.map_err(|e| counted(state, e))
        }
        other => Err(AppError::NoSuchPath(other.path().to_string())),
    }
}

/// The id to read: `?id=N` if given (validated against `1..=nodes`), else
/// uniformly random in `1..=nodes`.
pub fn requested_id(nodes: u64, query: Option<&str>) -> Result<i64, AppError> {
    let nodes = nodes as i64;
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

/// A failed read, counted in `/metrics` by kind.
pub fn counted(state: &AppState, e: GraphError) -> AppError {
    state.metrics().db_error(e.kind());
    AppError::Graph(e)
}

/// A failed ask, counted when the read behind it failed.
fn counted_ask(state: &AppState, e: super::actors::AskError) -> AppError {
    if let super::actors::AskError::Graph(g) = &e {
        state.metrics().db_error(g.kind());
    }
    AppError::Ask(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated_or_drawn_in_range() {
        assert_eq!(requested_id(10, Some("id=7")).unwrap(), 7);
        assert_eq!(requested_id(10, Some("x=1&id=%201")).unwrap(), 1);
        for bad in ["id=0", "id=11", "id=abc", "id=-1"] {
            assert!(matches!(requested_id(10, Some(bad)), Err(AppError::BadRequest(_))), "{bad}");
        }
        for query in [None, Some("other=1")] {
            let id = requested_id(3, query).unwrap();
            assert!((1..=3).contains(&id));
        }
    }
}
