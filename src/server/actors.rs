//! The actor system behind `/getDataAkka*`, built on ractor and running on its
//! own executor, as the seed's actors ran in their own actor system with
//! their own dispatcher apart from Play's request threads.
//!
//! * The *blocking pool* (`/getDataAkka`): a ractor factory — the seed's
//!   `RequestRouter` — routing round-robin to 4 `GraphEngine` worker actors,
//!   each doing the **blocking** read inside its handler. The factory
//!   supervises them: a worker that panics is replaced, and the request it was
//!   serving gets an error. The HTTP handler blocks its own thread on the reply
//!   (the seed's `Await.result`, 5 s limit).
//! * The *async engine* (`/getDataAkkaAsync*`): one `GraphEngineAsync` actor
//!   that, per message, starts the **non-blocking** read in a task of its own
//!   and returns at once; the task replies when the read completes (Akka's
//!   `pipe` pattern), so the actor's mailbox never waits on the database.
//!
//! Because the actors live on a separate runtime, a request thread blocked on
//! a reply can never be the thread the reply needs: with one HTTP worker,
//! `/getDataAkka` is slow but cannot deadlock.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::time::Duration;

use ractor::factory::{
    Factory, FactoryArguments, FactoryMessage, Job, JobOptions, Worker, WorkerBuilder, WorkerId, queues,
    routing,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, rpc::CallResult};
use tokio::runtime::Runtime;

use super::metrics::Metrics;
use super::runtime::{RuntimeProbe, build_runtime};
use crate::db::{Content, GraphBackend, GraphError};

/// Worker actors in the blocking pool: the seed's 4 `GraphEngine` actors.
pub const POOL_SIZE: usize = 4;

/// How long callers wait for actors.
#[derive(Debug, Clone, Copy)]
pub struct ActorLimits {
    /// How long `/getDataAkka` blocks its thread for the reply (the seed's `Await.result`, 5 s).
    pub await_timeout: Duration,
    /// How long `/getDataAkkaAsync*` awaits each ask (the seed's ask timeout, 30 s).
    pub ask_timeout: Duration,
}

impl Default for ActorLimits {
    fn default() -> Self {
        ActorLimits { await_timeout: Duration::from_secs(5), ask_timeout: Duration::from_secs(30) }
    }
}

/// Why an ask got no content back.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// No reply came within the limit.
    #[error("no reply from the actor within {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// The actor serving the request failed before replying (it is restarted).
    #[error("the actor serving this request failed before replying")]
    ActorFailed,
    /// The actor system is not running (the server is stopping).
    #[error("the actor system is not running")]
    Stopped,
    /// The actor replied with a failed read.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// A job for the blocking pool. The reply goes back over a std channel
/// because the asker waits for it by blocking its thread, not by awaiting.
pub struct BlockingRead {
    id: i64,
    reply: SyncSender<Result<Content, GraphError>>,
}

/// A message for the async engine, replied to through ractor's RPC port.
pub struct ReadNode {
    id: i64,
    reply: RpcReplyPort<Result<Content, GraphError>>,
}

type RouterMsg = FactoryMessage<(), BlockingRead>;

/// The running actor system and the executor it owns.
pub struct ActorSystem {
    runtime: Option<Runtime>,
    probe: RuntimeProbe,
    router: ActorRef<RouterMsg>,
    engine: ActorRef<ReadNode>,
    metrics: Arc<Metrics>,
    limits: ActorLimits,
}

impl ActorSystem {
    /// Starts the executor (`threads` worker threads), the blocking pool and the async engine.
    pub async fn start(
        backend: Arc<dyn GraphBackend>,
        metrics: Arc<Metrics>,
        threads: usize,
        limits: ActorLimits,
    ) -> anyhow::Result<ActorSystem> {
        let (runtime, probe) = build_runtime("actors", threads)?;
        let (pool_backend, pool_metrics, engine_metrics) =
            (backend.clone(), metrics.clone(), metrics.clone());
        // Spawned on the actor runtime, so every actor (and every task an actor
        // spawns) lives there; awaited from whatever runtime calls start().
        let (router, engine) = runtime
            .spawn(async move {
                let builder = GraphEngineBuilder { backend: pool_backend, metrics: pool_metrics };
                let args = FactoryArguments::builder()
                    .worker_builder(Box::new(builder))
                    .queue(Default::default())
                    .router(Default::default())
                    .num_initial_workers(POOL_SIZE)
                    .build();
                let (router, _) = Actor::spawn(None, RequestRouter::default(), args).await?;
                let (engine, _) = Actor::spawn(None, GraphEngineAsync, (backend, engine_metrics)).await?;
                Ok::<_, ractor::SpawnErr>((router, engine))
            })
            .await??;
        Ok(ActorSystem { runtime: Some(runtime), probe, router, engine, metrics, limits })
    }

    /// The probe of the actor executor, for `/metrics`.
    pub fn probe(&self) -> &RuntimeProbe {
        &self.probe
    }

    /// Asks the blocking pool for node `id` and **blocks the calling thread**
    /// until the reply or the await limit, as the seed's `Await.result` did.
    pub fn ask_blocking(&self, id: i64) -> Result<Content, AskError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job =
            Job { key: (), msg: BlockingRead { id, reply }, options: JobOptions::default(), accepted: None };
        self.metrics.actors.pool_mailbox.inc();
        if self.router.cast(FactoryMessage::Dispatch(job)).is_err() {
            self.metrics.actors.pool_mailbox.dec();
            return Err(AskError::Stopped);
        }
        // A std channel's recv_timeout parks this thread: no executor is needed to
        // wake it, so it works (and times out) even with every HTTP worker blocked.
        match answer.recv_timeout(self.limits.await_timeout) {
            Ok(result) => Ok(result?),
            Err(RecvTimeoutError::Timeout) => Err(AskError::Timeout(self.limits.await_timeout)),
            Err(RecvTimeoutError::Disconnected) => Err(AskError::ActorFailed),
        }
    }

    /// Asks the async engine for node `id` and awaits the reply (ask limit applies).
    pub async fn ask(&self, id: i64) -> Result<Content, AskError> {
        self.metrics.actors.async_mailbox.inc();
        let call = self.engine.call(|reply| ReadNode { id, reply }, Some(self.limits.ask_timeout)).await;
        match call {
            Ok(CallResult::Success(result)) => Ok(result?),
            Ok(CallResult::Timeout) => Err(AskError::Timeout(self.limits.ask_timeout)),
            Ok(CallResult::SenderError) => Err(AskError::ActorFailed),
            Err(_) => {
                self.metrics.actors.async_mailbox.dec();
                Err(AskError::Stopped)
            }
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        self.router.stop(None);
        self.engine.stop(None);
        if let Some(runtime) = self.runtime.take() {
            // Safe in async contexts too; a worker blocked in a read is left to finish.
            runtime.shutdown_background();
        }
    }
}

/// The seed's `RequestRouter`: a ractor factory routing round-robin to the
/// `GraphEngine` workers and supervising them.
type RequestRouter = Factory<
    (),
    BlockingRead,
    (),
    GraphEngine,
    routing::RoundRobinRouting<(), BlockingRead>,
    queues::DefaultQueue<(), BlockingRead>,
>;

/// The seed's `GraphEngine`: a worker actor that does the blocking read.
struct GraphEngine {
    backend: Arc<dyn GraphBackend>,
    metrics: Arc<Metrics>,
}

impl Worker for GraphEngine {
    type Key = ();
    type Message = BlockingRead;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _wid: WorkerId,
        _factory: &ActorRef<RouterMsg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        self.metrics.actors.pool_worker_starts.fetch_add(1, Relaxed);
        Ok(())
    }

    async fn handle(
        &self,
        _wid: WorkerId,
        _factory: &ActorRef<RouterMsg>,
        Job { msg, key, .. }: Job<(), BlockingRead>,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        self.metrics.actors.pool_mailbox.dec();
        // The blocking read, holding this dispatcher thread for the round trip,
        // as the seed's GraphEngine held its Akka dispatcher thread.
        let result = self.backend.read_blocking(msg.id);
        // The asker may have given up (timeout): then nobody is listening.
        let _ = msg.reply.try_send(result);
        Ok(key)
    }
}

struct GraphEngineBuilder {
    backend: Arc<dyn GraphBackend>,
    metrics: Arc<Metrics>,
}

impl WorkerBuilder<GraphEngine, ()> for GraphEngineBuilder {
    fn build(&mut self, _wid: WorkerId) -> (GraphEngine, ()) {
        (GraphEngine { backend: self.backend.clone(), metrics: self.metrics.clone() }, ())
    }
}

/// The seed's `GraphEngineAsync`: starts each read and pipes the result back.
struct GraphEngineAsync;

impl Actor for GraphEngineAsync {
    type Msg = ReadNode;
    type State = (Arc<dyn GraphBackend>, Arc<Metrics>);
    type Arguments = (Arc<dyn GraphBackend>, Arc<Metrics>);

    async fn pre_start(
        &self,
        _myself: ActorRef<ReadNode>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<ReadNode>,
        ReadNode { id, reply }: ReadNode,
        (backend, metrics): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        metrics.actors.async_mailbox.dec();
        metrics.actors.async_reads_in_flight.inc();
        let (backend, metrics) = (backend.clone(), metrics.clone());
        // The pipe pattern: the read runs in its own task and replies itself;
        // this handler returns at once, so the mailbox never waits on the database.
        tokio::spawn(async move {
            let result = backend.read(id).await;
            metrics.actors.async_reads_in_flight.dec();
            let _ = reply.send(result);
        });
        Ok(())
    }
}
