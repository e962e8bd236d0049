//! The execution manager as the reconcilers' [`ExecutionBackend`]: what the Assignment reconciler
//! asks of executions, answered by the manager and the store it records in.

use roundtable_reconcilers::backend::{BackendError, ExecutionBackend};
use roundtable_reconcilers::{ActiveRun, ExecutionRequest};
use roundtable_store::{Identity, Lease, LeaseRecord, ProposalRecord, SessionRecord};

use crate::manager::{ExecutionManager, StartError};

impl From<StartError> for BackendError {
    fn from(error: StartError) -> Self {
        BackendError::Start(Box::new(error))
    }
}

impl ExecutionBackend for ExecutionManager {
    async fn sessions(&self, assignment_uid: &str) -> Result<Vec<SessionRecord>, BackendError> {
        Ok(self.store().sessions_of(assignment_uid).await?)
    }

    async fn proposal(&self, assignment_uid: &str, generation: i64) -> Result<Option<ProposalRecord>, BackendError> {
        Ok(self.store().proposal_for(assignment_uid, generation).await?)
    }

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

    async fn lease(&self, assignment_uid: &str) -> Result<Option<LeaseRecord>, BackendError> {
        Ok(self.store().execution_lease(assignment_uid).await?)
    }

    async fn claim(&self, assignment: &Identity, seen: Option<&LeaseRecord>) -> Result<Option<Lease>, BackendError> {
        Ok(ExecutionManager::claim(self, assignment, seen).await?)
    }
}
