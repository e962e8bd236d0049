//! Built-in Adapter templates, one per provider and named after it (`codex`, `claude`,
//! `gemini`, `opencode`, `generic`, `mock`), each made from its provider's profile
//! (`providers/`).
//!
//! A template is an [`AdapterSpec`] like any other; a declared Adapter of the same name is laid
//! over it field by field. Built-ins ship without an image (operators pin their own; `mock`
//! needs none of the image's files). Resume is off for the provider CLIs because their home directories are disposable; the patterns (each
//! the provider's headless launch with its resume flag; the briefing becomes the final argument)
//! are there for `sessions register`.

use crate::adapter::{AdapterSpec, Provider};
use crate::providers::Template;

/// The names of the built-in templates: every provider's word, in the providers' order.
pub const BUILTIN_NAMES: &[&str] = Provider::WORDS;

/// Where the controller's own static binary is mounted inside every agent container.
pub const IN_CONTAINER_BINARY: &str = crate::layout::BINARY;

/// Parses a value written in a profile; a failure is a bug in the profile, caught by its tests.
fn constant<T: std::str::FromStr>(text: &str) -> T {
    match text.parse() {
        Ok(value) => value,
        Err(_) => panic!("built-in template value {text:?} does not parse"),
    }
}

/// The built-in resume pattern of `provider`: its headless launch with the resume flag and the
/// placeholder. Every word is plain (no quoting needed). `None` without headless flags.
fn resume_pattern(provider: Provider) -> Option<String> {
    let flags = provider.profile().headless?();
    let mut words = vec![provider.as_str().to_owned()];
    words.extend(flags.before);
    words.extend(flags.mcp);
    words.extend(flags.after);
    words.extend([flags.resume.to_owned(), crate::resume::PLACEHOLDER.to_owned()]);
    Some(words.join(" "))
}

/// A list field of a template: unset when the profile lists nothing.
fn listed<T: std::str::FromStr>(words: &[&str]) -> Option<Vec<T>> {
    (!words.is_empty()).then(|| words.iter().map(|word| constant(word)).collect())
}

/// The template named exactly `name`, if it is a built-in.
pub fn template(name: &str) -> Option<AdapterSpec> {
    let provider: Provider = name.parse().ok()?;
    let Template {
        command,
        args,
        supports_resume,
        supports_mcp,
        supports_readonly_workspace,
        captures_session_id,
        provider_hosts,
        credential_env,
    } = provider.profile().template;
    Some(AdapterSpec {
        provider: Some(provider),
        command: Some(command.to_owned()),
        args: (!args.is_empty()).then(|| args.iter().map(|arg| (*arg).to_owned()).collect()),
        supports_resume: Some(supports_resume),
        resume_pattern: resume_pattern(provider).map(|pattern| constant(&pattern)),
        supports_mcp: Some(supports_mcp),
        supports_readonly_workspace: Some(supports_readonly_workspace),
        captures_session_id: Some(captures_session_id),
        provider_hosts: listed(provider_hosts),
        credential_env: listed(credential_env),
        ..AdapterSpec::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Capability;

    #[test]
    fn every_builtin_has_a_template_and_lookup_is_exact() {
        for &name in BUILTIN_NAMES {
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

    /// Every template field by field, as written out before the profiles held them.
    #[test]
    fn every_template_is_exact() {
        let cli = |provider: Provider, host: &str, credential: &str, pattern: &str| AdapterSpec {
            provider: Some(provider),
            command: Some(provider.as_str().into()),
            supports_resume: Some(false),
            resume_pattern: Some(constant(pattern)),
            supports_mcp: Some(true),
            supports_readonly_workspace: Some(true),
            captures_session_id: Some(true),
            provider_hosts: Some(vec![constant(host)]),
            credential_env: Some(vec![constant(credential)]),
            ..AdapterSpec::default()
        };
        let expected = [
            cli(
                Provider::Codex,
                "api.openai.com",
                "CODEX_API_KEY",
                "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /roundtable/workspace resume {{external_session_id}}",
            ),
            cli(
                Provider::Claude,
                "api.anthropic.com",
                "ANTHROPIC_API_KEY",
                "claude -p --output-format=stream-json --verbose --mcp-config=/tmp/roundtable/mcp.json --strict-mcp-config --permission-mode=bypassPermissions --resume {{external_session_id}}",
            ),
            cli(
                Provider::Gemini,
                "generativelanguage.googleapis.com",
                "GEMINI_API_KEY",
                "gemini --output-format=stream-json --approval-mode=yolo --allowed-mcp-server-names=roundtable --resume {{external_session_id}}",
            ),
            cli(
                Provider::Opencode,
                "api.anthropic.com",
                "ANTHROPIC_API_KEY",
                "opencode run --format=json --dir=/roundtable/workspace --session {{external_session_id}}",
            ),
            AdapterSpec {
                provider: Some(Provider::Generic),
                command: Some("sh".into()),
                args: Some(vec!["-c".into()]),
                supports_resume: Some(false),
                supports_mcp: Some(false),
                supports_readonly_workspace: Some(true),
                captures_session_id: Some(false),
                ..AdapterSpec::default()
            },
            AdapterSpec {
                provider: Some(Provider::Mock),
                command: Some(IN_CONTAINER_BINARY.into()),
                args: Some(vec!["sandbox".into(), "mock".into()]),
                supports_resume: Some(false),
                supports_mcp: Some(false),
                supports_readonly_workspace: Some(true),
                captures_session_id: Some(true),
                ..AdapterSpec::default()
            },
        ];
        for spec in expected {
            let name = spec.provider.expect("provider").as_str();
            assert_eq!(template(name), Some(spec), "{name}");
        }
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
