//! Roundtable's Docker session runtime: the engine connection and its capability report, the
//! hardened container profile, and one session's lifecycle on the Docker Engine API (Podman
//! through its Docker-compatible socket). The only crate in the workspace that depends on
//! bollard; everything else sees [`roundtable_session_runtime::SessionRuntime`].

mod calls;
mod checked;
pub mod container;
mod credentials;
pub mod engine;
mod errors;
mod events;
mod exec;
pub mod probe;
pub mod profile;
mod pull;
mod reach;
mod removals;
pub mod session;
pub mod trial;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use roundtable_session_runtime::{
    EngineHint, EngineRuntimes, Health, ImageDetails, OwnedResource, ProbeOutcome, ProbePlan, PullProgress, RunOutcome,
    RuntimeError, SessionPlan, SessionRuntime,
};
use roundtable_specs::runtime_class::HostPaths;
use tokio::sync::watch;

use crate::errors::{already_gone, engine_error};

pub use engine::{Engine, EngineError};

/// The engine client itself, for tests that build fixtures on the engine directly (labelled
/// leftovers, the hardened profile on its own); nothing else outside this crate names it.
pub use bollard;

/// [`SessionRuntime`] on a Docker-compatible engine.
#[derive(Debug, Clone)]
pub struct DockerRuntime {
    engine: Engine,
    /// What finished sessions still have to remove.
    removals: removals::Removals,
    /// Set once the engine was shown to see this host's files (`reach`): a connection does not
    /// move to another machine, so that is learned once; until then it is asked at each call.
    host_paths_seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The engine's last answer on its runtimes, and when it came (see [`RUNTIMES_FRESH`]).
    runtimes: std::sync::Arc<tokio::sync::Mutex<Option<(std::time::Instant, EngineRuntimes)>>>,
}

/// How long the engine's answer on its runtimes is used again. Every session's gates ask it twice
/// and every reconcile of an Adapter once, and the engine's `info` behind it is its slowest
/// answer (tens of milliseconds under load, where four sessions at once asked it for each of
/// them); what it says changes only when an operator registers a runtime and reloads the
/// engine, which a few seconds later is soon enough, and a launch under a runtime since removed
/// fails on the engine anyway.
const RUNTIMES_FRESH: std::time::Duration = std::time::Duration::from_secs(2);

impl DockerRuntime {
    pub fn new(engine: Engine) -> Self {
        Self { engine, removals: Default::default(), host_paths_seen: Default::default(), runtimes: Default::default() }
    }

    /// Whether the engine sees this host's files, with `binary` (the one sessions mount).
    async fn host_paths(&self, binary: &std::path::Path) -> HostPaths {
        use std::sync::atomic::Ordering;
        if self.host_paths_seen.load(Ordering::Relaxed) {
            return HostPaths::Seen;
        }
        let found = reach::host_paths(&self.engine, binary).await;
        if found == HostPaths::Seen {
            self.host_paths_seen.store(true, Ordering::Relaxed);
        }
        found
    }

    /// The engine's runtimes, as it said them at most [`RUNTIMES_FRESH`] ago. One caller asks
    /// at a time, so callers at once share one answer instead of each asking; a failure is not
    /// kept.
    async fn engine_runtimes(&self) -> Result<EngineRuntimes, RuntimeError> {
        let mut kept = self.runtimes.lock().await;
        if let Some((asked, runtimes)) = kept.as_ref()
            && asked.elapsed() < RUNTIMES_FRESH
        {
            return Ok(runtimes.clone());
        }
        let asked = std::time::Instant::now();
        let runtimes = self.engine.runtimes().await?;
        *kept = Some((asked, runtimes.clone()));
        Ok(runtimes)
    }

    /// Connects to `DOCKER_HOST`, Docker's socket or Podman's, negotiating the API version.
    pub async fn connect() -> Result<Self, EngineError> {
        Engine::connect().await.map(Self::new)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl SessionRuntime for DockerRuntime {
    fn endpoint(&self) -> &str {
        self.engine.endpoint()
    }

    fn run(&self, plan: SessionPlan, stop: watch::Receiver<bool>) -> BoxFuture<'_, Result<RunOutcome, RuntimeError>> {
        Box::pin(async move { session::Execution::new(&self.engine, plan, &self.removals).run(stop).await })
    }

    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.removals.settled())
    }

    fn owned(&self, project: &str) -> BoxFuture<'_, Result<Vec<OwnedResource>, RuntimeError>> {
        let project = project.to_owned();
        Box::pin(async move {
            let labelled = self.engine.labelled(&project).await.map_err(engine_error("list labelled resources"))?;
            Ok(labelled
                .into_iter()
                .map(|found| OwnedResource {
                    kind: found.kind,
                    name: found.name,
                    labels: found.labels,
                    running: found.running,
                })
                .collect())
        })
    }

    fn remove(&self, resource: &OwnedResource) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let (kind, name) = (resource.kind, resource.name.clone());
        Box::pin(async move { container::remove(self.engine.docker(), kind, &name, &name).await })
    }

    fn remove_session(&self, _project: &str, session: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let session = session.to_owned();
        Box::pin(async move { container::remove_session(self.engine.docker(), &session).await })
    }

    fn inspect_image(&self, reference: &str) -> BoxFuture<'_, Result<Option<ImageDetails>, RuntimeError>> {
        let reference = reference.to_owned();
        Box::pin(async move {
            match self.engine.docker().inspect_image(&reference).await {
                Ok(image) => {
                    Ok(image.id.map(|id| ImageDetails { id, repo_digests: image.repo_digests.unwrap_or_default() }))
                }
                Err(error) if already_gone(&error) => Ok(None),
                Err(error) => Err(engine_error("inspect the image")(error)),
            }
        })
    }

    fn pull_image(
        &self,
        reference: &str,
        progress: watch::Sender<PullProgress>,
    ) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let reference = reference.to_owned();
        Box::pin(async move { pull::pull(&self.engine, &reference, progress).await })
    }

    fn remove_image(&self, reference: &str) -> BoxFuture<'_, Result<(), RuntimeError>> {
        let reference = reference.to_owned();
        Box::pin(async move { pull::remove(&self.engine, &reference).await })
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, RuntimeError>> {
        Box::pin(async move {
            let version = self.engine.docker().version().await.map_err(engine_error("ask the engine its version"))?;
            Ok(Health { endpoint: self.engine.endpoint().to_owned(), version: version.version.unwrap_or_default() })
        })
    }
    fn probe(&self, plan: ProbePlan) -> BoxFuture<'_, Result<ProbeOutcome, RuntimeError>> {
        Box::pin(async move { probe::run(&self.engine, plan).await })
    }

    /// The engine's runtimes, and whether it sees this host's files with this process's own
    /// binary (the one sessions mount).
    fn runtimes(&self) -> BoxFuture<'_, Result<Option<EngineRuntimes>, RuntimeError>> {
        Box::pin(async move {
            let mut runtimes = self.engine_runtimes().await?;
            if let Ok(binary) = std::env::current_exe() {
                runtimes.host_paths = self.host_paths(&binary).await;
            }
            Ok(Some(runtimes))
        })
    }

    fn hints(&self) -> BoxStream<'static, EngineHint> {
        events::hints(self.engine.docker())
    }
}
