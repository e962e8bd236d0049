//! Provider plans and output capture for the CLI: the same pure functions
//! the execution manager uses, applied to what the project declares.

use std::sync::Arc;

use roundtable_agents::capture::{self, Capture};
use roundtable_agents::plan::{self, PlanInput, ProviderPlan};
use roundtable_source::Project;
use roundtable_specs::{Object, Spec};

use crate::ServiceError;
use crate::adapter::{named, recorded_override};

/// The prompt shown when none is given.
pub const PLACEHOLDER_PROMPT: &str = "<the Assignment's task.prompt>";

/// What to plan for.
#[derive(Debug, Clone, Default)]
pub struct PlanRequest<'a> {
    pub assignment: Option<&'a str>,
    pub prompt: Option<&'a str>,
    pub model: Option<&'a str>,
}

fn loaded(project: Option<&Project>) -> Vec<Arc<Object>> {
    crate::load(project).objects
}

/// The launch plan of adapter `name`, for an Assignment's prompt and model or for the ones given.
pub async fn adapter_plan(
    project: Option<&Project>,
    name: &str,
    request: &PlanRequest<'_>,
) -> Result<ProviderPlan, ServiceError> {
    let objects = loaded(project);
    let adapter = named(&objects, name, recorded_override(project, name).await?.as_ref())?;
    let (mut prompt, mut model) =
        (request.prompt.unwrap_or(PLACEHOLDER_PROMPT).to_owned(), request.model.map(str::to_owned));
    if let Some(wanted) = request.assignment {
        let spec = objects
            .iter()
            .find_map(|object| match &object.spec {
                Spec::Assignment(spec) if object.metadata.name == wanted => Some(spec),
                _ => None,
            })
            .ok_or_else(|| ServiceError::NotFound { what: "assignment", id: wanted.to_owned() })?;
        prompt.clone_from(&spec.task.prompt);
        model = model.or_else(|| spec.model.clone());
    }
    let proxy = adapter.egress_proxy();
    Ok(plan::plan(&adapter, PlanInput { prompt: &prompt, model: model.as_deref() }, proxy))
}

/// What adapter `name`'s provider would capture from `output`.
pub async fn adapter_capture(
    project: Option<&Project>,
    name: &str,
    output: &[u8],
    truncated: bool,
) -> Result<Capture, ServiceError> {
    let adapter = named(&loaded(project), name, recorded_override(project, name).await?.as_ref())?;
    Ok(capture::capture(adapter.provider, output, truncated))
}
