//! Built-in Adapter templates for `codex`, `claude`, `gemini`, `opencode`, `generic` and `mock`.
//!
//! A template is an [`AdapterSpec`] like any other; a declared Adapter of the same name is laid
//! over it field by field. Built-ins ship without an image (operators pin their own) except
//! `mock`, which needs none of the image's files. Resume is off for the provider CLIs because
//! their home directories are disposable; the patterns (each the provider's headless launch with
//! its resume flag; the briefing becomes the final argument) are there for `sessions register`.

use crate::adapter::{AdapterSpec, Provider};

/// The names of the built-in templates, alphabetical.
pub const BUILTIN_NAMES: [&str; 6] = ["claude", "codex", "gemini", "generic", "mock", "opencode"];

/// Where the controller's own static binary is mounted inside every agent container.
pub const IN_CONTAINER_BINARY: &str = crate::layout::BINARY;

/// Parses a value written in this file; a failure is a bug in the template, caught by its tests.
fn constant<T: std::str::FromStr>(text: &str) -> T {
    match text.parse() {
        Ok(value) => value,
        Err(_) => panic!("built-in template value {text:?} does not parse"),
    }
}

/// The flags that run one provider CLI headless, in order: `before`, the model flag when a
/// model is set, `mcp` when the session has an MCP manifest, `after`. The launch plans (in
/// `roundtable-agents`) and the built-in resume patterns are both made from these, so the two
/// cannot drift apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headless {
    pub before: Vec<String>,
    pub mcp: Option<String>,
    pub after: Vec<String>,
    /// The flag or subcommand that precedes the session id when resuming.
    pub resume: &'static str,
}

/// The headless flags of `provider`, for the four provider CLIs.
pub fn headless(provider: Provider) -> Option<Headless> {
    use crate::layout::{CLAUDE_MCP_CONFIG, WORKSPACE};
    let words = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let flags = match provider {
        Provider::Codex => Headless {
            before: [
                &words(&[
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    "-C",
                ])[..],
                &[WORKSPACE.to_owned()],
            ]
            .concat(),
            mcp: None,
            after: Vec::new(),
            resume: "resume",
        },
        Provider::Claude => Headless {
            before: words(&["-p", "--output-format=stream-json", "--verbose"]),
            mcp: Some(format!("--mcp-config={CLAUDE_MCP_CONFIG}")),
            after: words(&["--strict-mcp-config", "--permission-mode=bypassPermissions"]),
            resume: "--resume",
        },
        Provider::Gemini => Headless {
            before: words(&["--output-format=stream-json"]),
            mcp: None,
            after: words(&["--approval-mode=yolo", "--allowed-mcp-server-names=roundtable"]),
            resume: "--resume",
        },
        Provider::Opencode => Headless {
            before: words(&["run", "--format=json"]),
            mcp: None,
            after: vec![format!("--dir={WORKSPACE}")],
            resume: "--session",
        },
        Provider::Generic | Provider::Mock => return None,
    };
    Some(flags)
}

/// The built-in resume pattern of `provider`: its headless launch with the resume flag and the
/// placeholder. Every word is plain (no quoting needed).
fn resume_pattern(provider: Provider) -> String {
    let Some(flags) = headless(provider) else { return String::new() };
    let mut words = vec![provider.as_str().to_owned()];
    words.extend(flags.before);
    words.extend(flags.mcp);
    words.extend(flags.after);
    words.extend([flags.resume.to_owned(), crate::resume::PLACEHOLDER.to_owned()]);
    words.join(" ")
}

fn provider(provider: Provider, host: &str, credential: &str) -> AdapterSpec {
    AdapterSpec {
        provider: Some(provider),
        command: Some(provider.as_str().into()),
        supports_resume: Some(false),
        resume_pattern: Some(constant(&resume_pattern(provider))),
        supports_mcp: Some(true),
        supports_readonly_workspace: Some(true),
        captures_session_id: Some(true),
        provider_hosts: Some(vec![constant(host)]),
        credential_env: Some(vec![constant(credential)]),
        ..AdapterSpec::default()
    }
}

/// The template named exactly `name`, if it is a built-in.
pub fn template(name: &str) -> Option<AdapterSpec> {
    let spec = match name {
        "codex" => provider(Provider::Codex, "api.openai.com", "CODEX_API_KEY"),
        "claude" => provider(Provider::Claude, "api.anthropic.com", "ANTHROPIC_API_KEY"),
        "gemini" => provider(Provider::Gemini, "generativelanguage.googleapis.com", "GEMINI_API_KEY"),
        // OpenCode's host follows the model's provider; Anthropic is the default operators override.
        "opencode" => provider(Provider::Opencode, "api.anthropic.com", "ANTHROPIC_API_KEY"),
        "generic" => AdapterSpec {
            provider: Some(Provider::Generic),
            command: Some("sh".into()),
            args: Some(vec!["-c".into()]),
            supports_resume: Some(false),
            supports_mcp: Some(false),
            supports_readonly_workspace: Some(true),
            captures_session_id: Some(false),
            ..AdapterSpec::default()
        },
        "mock" => AdapterSpec {
            provider: Some(Provider::Mock),
            command: Some(IN_CONTAINER_BINARY.into()),
            args: Some(vec!["sandbox".into(), "mock".into()]),
            supports_resume: Some(false),
            supports_mcp: Some(false),
            supports_readonly_workspace: Some(true),
            captures_session_id: Some(true),
            ..AdapterSpec::default()
        },
        _ => return None,
    };
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Capability;

    #[test]
    fn every_builtin_has_a_template_and_lookup_is_exact() {
        for name in BUILTIN_NAMES {
            assert!(template(name).is_some(), "{name}");
        }
        assert!(template("Codex").is_none());
        assert!(template("codex ").is_none());
        assert!(template("unknown").is_none());
    }

    #[test]
    fn generic_runs_its_prompt_as_a_shell_script() {
        let generic = template("generic").expect("builtin").resolve("generic");
        assert_eq!((generic.command.as_str(), generic.args.as_slice()), ("sh", &["-c".to_owned()][..]));
        assert!(generic.provider_hosts.is_empty());
    }

    #[test]
    fn providers_offer_mcp_capture_and_egress() {
        let codex = template("codex").expect("builtin").resolve("codex");
        let caps = codex.capabilities();
        assert!(caps.contains(&Capability::Mcp) && caps.contains(&Capability::Egress));
        assert!(!caps.contains(&Capability::Resume), "provider homes are disposable");
        assert_eq!(codex.provider_hosts[0].as_str(), "api.openai.com");
    }
}
