//! The state every handler shares ([`AppState`]): the database, the server
//! model, the actors or request threads, the metrics. Below both the router
//! (`app.rs`) and the handlers (`handlers.rs`), which both use it.

use std::sync::Arc;

use super::actors::ActorSystem;
use super::error::AppError;
use super::metrics::Metrics;
use super::model::Model;
use super::request_threads::RequestThreads;
use super::runtime::RuntimeProbe;
use crate::db::GraphBackend;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Parts>,
}

/// The parts of an [`AppState`].
pub struct Parts {
    /// The database.
    pub backend: Arc<dyn GraphBackend>,
    /// Valid ids are `1..=nodes`.
    pub nodes: u64,
    /// The server model: which routes exist and where their handlers run.
    pub model: Model,
    /// The actor system (models reactive and lean).
    pub actors: Option<ActorSystem>,
    /// The request threads (models pool and thread only).
    pub threads: Option<Arc<RequestThreads>>,
    /// The server's figures.
    pub metrics: Arc<Metrics>,
    /// The probe of the runtime serving requests, when it is known.
    pub http: Option<RuntimeProbe>,
    /// The labels of `blocklab_info`.
    pub info: Vec<(&'static str, String)>,
}

impl AppState {
    /// Puts the parts together.
    pub fn new(parts: Parts) -> AppState {
        AppState { inner: Arc::new(parts) }
    }

    /// The server model.
    pub fn model(&self) -> Model {
        self.inner.model
    }

    /// The request threads of the pool and thread models.
    pub fn request_threads(&self) -> Result<&Arc<RequestThreads>, AppError> {
        self.inner
            .threads
            .as_ref()
            .ok_or(AppError::NotInModel { path: "this endpoint".to_string(), model: self.model() })
    }

    /// The database.
    pub fn backend(&self) -> &Arc<dyn GraphBackend> {
        &self.inner.backend
    }

    /// The number of nodes: valid ids are `1..=nodes`.
    pub fn nodes(&self) -> u64 {
        self.inner.nodes
    }

    /// The actor system, which the reactive and lean models run.
    pub fn actors(&self) -> Result<&ActorSystem, AppError> {
        self.inner
            .actors
            .as_ref()
            .ok_or(AppError::NotInModel { path: "this endpoint".to_string(), model: self.model() })
    }

    /// The server's figures.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The whole `/metrics` text.
    pub fn render_metrics(&self) -> String {
        let parts = &self.inner;
        let probes: Vec<&RuntimeProbe> =
            parts.http.iter().chain(parts.actors.as_ref().map(ActorSystem::probe)).collect();
        let mut text = parts.metrics.render(&parts.info, &probes);
        let waiting = parts.backend.pool_waiting();
        if !waiting.is_empty() {
            text += "# HELP blocklab_db_pool_waiting Reads waiting for a pooled database connection now, by client \
                     (async: --db-async-connections, blocking: --db-pool). Above zero, the pool caps the reads in \
                     flight.\n# TYPE blocklab_db_pool_waiting gauge\n";
            for (client, n) in waiting {
                text += &format!("blocklab_db_pool_waiting{{client=\"{client}\"}} {n}\n");
            }
        }
        text
    }
}
