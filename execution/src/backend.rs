//! The execution manager as the reconcilers' [`ExecutionBackend`]: what the Assignment reconciler
//! asks of executions, answered by the manager (what the store recorded of them the reconciler
//! reads from the store itself).

use roundtable_reconcilers::backend::{BackendError, ExecutionBackend};
use roundtable_reconcilers::{ActiveRun, ExecutionRequest};
use roundtable_store::{Identity, Lease, LeaseRecord};

use crate::manager::{ExecutionManager, StartError};

impl From<StartError> for BackendError {
    fn from(error: StartError) -> Self {
        BackendError::Start(Box::new(error))
    }
}

impl ExecutionBackend for ExecutionManager {
    fn active_run(&self, assignment: &str) -> Option<ActiveRun> {
        ExecutionManager::active_run(self, assignment)
    }

    fn store_full(&self) -> Option<String> {
        self.store().disk_full().map(|full| full.to_string())
    }

    fn controller_run(&self) -> Option<String> {
        Some(self.config().controller_run.clone())
    }

    async fn start(&self, request: ExecutionRequest) -> Result<(), BackendError> {
        ExecutionManager::start(self, request).await?;
        Ok(())
    }

    fn cancel(&self, assignment: &str) {
        ExecutionManager::cancel(self, assignment);
    }

    fn supersede(&self, assignment: &str, by: i64) {
        ExecutionManager::supersede(self, assignment, by);
    }

    async fn interrupt(&self, session: &str, lease: Option<&Lease>) -> Result<(), BackendError> {
        ExecutionManager::interrupt(self, session, lease).await?;
        Ok(())
    }

    async fn claim(&self, assignment: &Identity, seen: Option<&LeaseRecord>) -> Result<Option<Lease>, BackendError> {
        Ok(ExecutionManager::claim(self, assignment, seen).await?)
    }
}
