//! `mock`: the deterministic stand-in built into the controller's own binary
//! (`roundtable sandbox mock`). It needs nothing of the image, calls no tool, and prints a short
//! JSON-lines transcript with a `session_id` and no usage.

use super::capture::{ReadRule, first_confirmed_by_result};
use super::launch::{Launch, LaunchInput, plain};
use super::{BuiltinContract, CaptureRule, McpWiring, Provider, ProviderProfile, Template};
use crate::layout::BINARY;

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Mock,
    template: Template {
        command: BINARY,
        args: &["sandbox", "mock"],
        supports_resume: false,
        supports_mcp: false,
        supports_readonly_workspace: true,
        captures_session_id: true,
        provider_hosts: &[],
        credential_env: &[],
    },
    contract: BuiltinContract { file: "mock.yaml", text: include_str!("../../contracts/mock.yaml") },
    broker: None,
    headless: None,
    launch,
    mcp: McpWiring::Unused,
    capture: Some(CaptureRule {
        stream: ReadRule {
            session_id: first_confirmed_by_result,
            looked_for: "an `init` line with a `session_id`",
            usage: None,
        },
        document: None,
    }),
    state_folder: None,
    protected: &[],
    no_model_warning: None,
};

/// The Adapter's arguments; the mock reads its prompt from the brief.
fn launch(input: &LaunchInput<'_>) -> Launch {
    plain(input, false)
}
