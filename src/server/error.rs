//! The one error type handlers return, and how each failure is answered:
//! a status code and a JSON body `{"error": "..."}` that says what went wrong
//! without leaking internals (query text, driver messages, credentials).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::actors::AskError;
use crate::db::GraphError;

/// A request that could not be answered with data.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request itself is wrong (e.g. `?id=abc`).
    #[error("{0}")]
    BadRequest(String),
    /// No route has this path.
    #[error("no such path: {0}")]
    NoSuchPath(String),
    /// The route exists but not for this method.
    #[error("method {0} is not allowed here; use GET")]
    MethodNotAllowed(String),
    /// The database read failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The actor did not answer.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The handler panicked; the server caught it and is still serving.
    #[error("internal error while handling the request")]
    Panicked,
    /// The path is an endpoint of another server model.
    #[error("{path} is not served by --model {model}; --model reactive or lean serves it")]
    NotInModel {
        /// The path asked for.
        path: String,
        /// The model this server runs.
        model: super::Model,
    },
    /// The `thread` model could not start a thread for the request.
    #[error("cannot start a thread for this request: {0}")]
    NoThread(String),
}

impl AppError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::NoSuchPath(_) | AppError::NotInModel { .. } => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::Graph(e) | AppError::Ask(AskError::Graph(e)) => graph_status(e),
            AppError::Ask(AskError::Timeout(_) | AskError::Stopped) | AppError::NoThread(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Ask(AskError::ActorFailed) | AppError::Panicked => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status and the message the client gets; a server error is logged
    /// here with its detail. Every server model answers an error through it.
    pub fn answer(&self) -> (StatusCode, String) {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, status = status.as_u16(), "request failed");
        }
        (status, self.public_message())
    }

    /// The message for the client: specific where it helps, generic where the
    /// detail is internal (it is logged instead).
    fn public_message(&self) -> String {
        match self {
            AppError::Graph(e) | AppError::Ask(AskError::Graph(e)) => match e {
                GraphError::NotFound(_) | GraphError::Unavailable(_) => e.to_string(),
                // Which user or database was refused is for the log, not the client.
                GraphError::Refused(_) => "database unavailable: it refuses this server".to_string(),
                GraphError::Query(_) | GraphError::Malformed(_) => "database query failed".to_string(),
            },
            other => other.to_string(),
        }
    }
}

fn graph_status(e: &GraphError) -> StatusCode {
    match e {
        GraphError::NotFound(_) => StatusCode::NOT_FOUND,
        GraphError::Unavailable(_) | GraphError::Refused(_) => StatusCode::SERVICE_UNAVAILABLE,
        GraphError::Query(_) | GraphError::Malformed(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, message) = self.answer();
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_stays_out_of_the_body() {
        let e = AppError::Graph(GraphError::Query("syntax error near MATCH password=hunter2".into()));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.public_message(), "database query failed");
    }

    #[test]
    fn timeouts_are_503_and_failures_500() {
        let t = AppError::Ask(AskError::Timeout(std::time::Duration::from_secs(5)));
        assert_eq!(t.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(t.public_message(), "no reply from the actor within 5s");
        assert_eq!(AppError::Ask(AskError::ActorFailed).status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
