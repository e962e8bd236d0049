//! What the Assignment reconciler asks the execution backend to run, and what it reads back
//! about a run in progress: the vocabulary of the execution backend (`backend.rs`).

use std::time::Duration;

use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::assignment::AssignmentSpec;
use roundtable_store::{Identity, Lease};

/// How long a reconcile waits between looks at a running execution (the manager also wakes it).
pub const RUNNING_RECHECK: Duration = Duration::from_secs(30);

/// What the Assignment reconciler asks to run.
#[derive(Debug, Clone)]
pub struct ExecutionRequest {
    pub assignment: String,
    /// The uid of the Assignment object: its sessions, proposal and lease carry it.
    pub assignment_uid: String,
    pub execution_generation: i64,
    /// The digest of the run fields; with it, a run whose fields already succeeded at the same
    /// base commit takes that result instead of running the agent again.
    pub execution_digest: Option<String>,
    /// Whether an earlier result may be reused (`false` for `reconcile --rerun`).
    pub reuse: bool,
    pub attempt: i64,
    pub spec: AssignmentSpec,
    pub adapter: ResolvedAdapter,
    /// The lease this controller claimed for the execution; every record of it carries the fence.
    /// `None` runs unleased (tests of the manager alone).
    pub lease: Option<Lease>,
    /// How long the agent may run, decided in [`ExecutionRequest::new`].
    timeout: Duration,
}

impl ExecutionRequest {
    /// The request to run `spec` on `adapter`; the Assignment's `timeout` overrides the
    /// Adapter's, once, here.
    pub fn new(
        assignment: Identity,
        execution_generation: i64,
        attempt: i64,
        spec: AssignmentSpec,
        adapter: ResolvedAdapter,
        lease: Option<Lease>,
    ) -> Self {
        let timeout = spec.timeout.unwrap_or(adapter.timeout).as_std();
        Self {
            assignment: assignment.name,
            assignment_uid: assignment.uid,
            execution_generation,
            execution_digest: None,
            reuse: false,
            attempt,
            spec,
            adapter,
            lease,
            timeout,
        }
    }

    /// Lets the run take an earlier result of the run fields with `digest`, unless `rerun`.
    pub fn reusing(mut self, digest: Option<String>, rerun: bool) -> Self {
        self.reuse = digest.is_some() && !rerun;
        self.execution_digest = digest;
        self
    }

    /// How long the agent may run: the Assignment's timeout, else the Adapter's.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What one session may spend through the broker: the Assignment's budget, field by field
    /// over the Adapter's.
    pub fn budget(&self) -> roundtable_specs::broker::Budget {
        self.spec.budget.unwrap_or_default().over(self.adapter.budget)
    }
}

/// Which object's execution generation an active execution runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub uid: String,
    pub generation: i64,
}
