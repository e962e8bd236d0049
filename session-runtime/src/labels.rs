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
    /// The labels of a session's resources (its container and volumes, or a probe's).
    pub fn labels(&self) -> HashMap<String, String> {
        let mut labels = self.owner_labels();
        labels.extend([
            (SESSION.to_owned(), self.session.clone()),
            (CONTROLLER_RUN.to_owned(), self.controller_run.clone()),
            (PURPOSE.to_owned(), self.purpose.as_str().to_owned()),
        ]);
        labels
    }

    /// The labels of a persistent home this owner's session mounts, in the repository whose
    /// state store holds `repository`. It belongs to the Assignment, not the session: no session
    /// or controller-run label, so neither the session's cleanup nor `prune` of ended sessions
    /// removes it; [`Purpose::Home`] and the repository's id instead, which `prune` of homes
    /// goes by.
    pub fn home_labels(&self, repository: &str) -> HashMap<String, String> {
        let mut labels = self.owner_labels();
        labels.extend([
            (PURPOSE.to_owned(), Purpose::Home.as_str().to_owned()),
            (REPOSITORY.to_owned(), repository.to_owned()),
        ]);
        labels
    }

    /// What every labelled resource carries: managed by Roundtable, the project, and the
    /// Assignment when there is one.
    fn owner_labels(&self) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (MANAGED_BY.to_owned(), "roundtable".to_owned()),
            (PROJECT.to_owned(), self.project.clone()),
        ]);
        if let Some(assignment) = &self.assignment {
            labels.insert(ASSIGNMENT.to_owned(), assignment.clone());
        }
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Ownership {
        Ownership {
            project: "p".into(),
            assignment: Some("fix-login".into()),
            session: "s1".into(),
            controller_run: "run-1".into(),
            purpose: Purpose::Agent,
        }
    }

    #[test]
    fn a_session_is_labelled_with_its_owners() {
        let labels = owner().labels();
        let expected: HashMap<String, String> = [
            (MANAGED_BY, "roundtable"),
            (PROJECT, "p"),
            (ASSIGNMENT, "fix-login"),
            (SESSION, "s1"),
            (CONTROLLER_RUN, "run-1"),
            (PURPOSE, "agent"),
        ]
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .into();
        assert_eq!(labels, expected);
    }

    #[test]
    fn a_home_belongs_to_its_assignment_not_to_a_session() {
        let labels = owner().home_labels("repo-key");
        let expected: HashMap<String, String> = [
            (MANAGED_BY, "roundtable"),
            (PROJECT, "p"),
            (ASSIGNMENT, "fix-login"),
            (PURPOSE, "home"),
            (REPOSITORY, "repo-key"),
        ]
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .into();
        assert_eq!(
            labels, expected,
            "no session or controller-run label: neither cleanup nor prune of sessions removes it"
        );
    }
}
