//! `generic`: any CLI, run as `[command, ...args, prompt]` with an empty stdin. Roundtable knows
//! neither its flags nor its output, so it has no headless flags, no manifest (it starts the MCP
//! bridge itself) and no capture. The built-in runs its prompt as a script for `sh`.

use super::launch::{Launch, LaunchInput, plain};
use super::{BuiltinContract, McpWiring, Provider, ProviderProfile, Template};

pub(super) static PROFILE: ProviderProfile = ProviderProfile {
    provider: Provider::Generic,
    template: Template {
        command: "sh",
        args: &["-c"],
        supports_resume: false,
        supports_mcp: false,
        supports_readonly_workspace: true,
        captures_session_id: false,
        provider_hosts: &[],
        credential_env: &[],
    },
    contract: BuiltinContract { file: "generic.yaml", text: include_str!("../../contracts/generic.yaml") },
    broker: None,
    headless: None,
    launch,
    mcp: McpWiring::Bridge,
    capture: None,
    state_folder: None,
    protected: &[],
    no_model_warning: None,
};

/// The Adapter's arguments, then the prompt as the last one.
fn launch(input: &LaunchInput<'_>) -> Launch {
    plain(input, true)
}
