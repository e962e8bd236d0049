//! The ownership labels every container, volume and folder carries; garbage collection never
//! touches anything without them.

use std::collections::HashMap;

pub const MANAGED_BY: &str = "roundtable.dev/managed-by";
pub const PROJECT: &str = "roundtable.dev/project";
pub const ASSIGNMENT: &str = "roundtable.dev/assignment";
pub const SESSION: &str = "roundtable.dev/session";
pub const CONTROLLER_RUN: &str = "roundtable.dev/controller-run";
pub const PURPOSE: &str = "roundtable.dev/purpose";
/// The repository's random id (the state store's), on what outlives a session: a persistent
/// home carries it, and only a home with this repository's id is ever mounted or pruned by it.
pub const REPOSITORY: &str = "roundtable.dev/repository";

/// What a labelled resource is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Agent,
    Probe,
    /// A provider's home kept per Assignment (`persistentHome`); it belongs to the Assignment,
    /// not to a session.
    Home,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Agent => "agent",
            Purpose::Probe => "probe",
            Purpose::Home => "home",
        }
    }
}

/// Who owns a resource.
#[derive(Debug, Clone)]
pub struct Ownership {
    pub project: String,
    pub assignment: Option<String>,
    pub session: String,
    pub controller_run: String,
    pub purpose: Purpose,
}

impl Ownership {
    pub fn labels(&self) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (MANAGED_BY.to_owned(), "roundtable".to_owned()),
            (PROJECT.to_owned(), self.project.clone()),
            (SESSION.to_owned(), self.session.clone()),
            (CONTROLLER_RUN.to_owned(), self.controller_run.clone()),
            (PURPOSE.to_owned(), self.purpose.as_str().to_owned()),
        ]);
        if let Some(assignment) = &self.assignment {
            labels.insert(ASSIGNMENT.to_owned(), assignment.clone());
        }
        labels
    }
}
