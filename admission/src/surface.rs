//! What a probe read from the image, matched against the contract: the installed version by the
//! contract's pattern, and the required flags and subcommands as whole tokens of the help text
//! (so `-m` is not satisfied by `--model`, nor `run` by `running`).

use std::collections::BTreeSet;

use regex::Regex;
use roundtable_session_runtime::{ProbeCommand, ProbeRun};
use roundtable_specs::admission::ConformanceVerdict;
use roundtable_specs::contract::Contract;
use roundtable_specs::secrets::excerpt::quote;

/// Output kept per probe command.
pub const PROBE_OUTPUT_LIMIT: u64 = 256 * 1024;

/// The longest version taken from a probe: it is named in receipts and decision messages, and
/// no release is called anything longer.
pub const VERSION_LIMIT: usize = 64;

/// The environment of every probe command: no credentials, nothing interactive; home and
/// scratch in the probe's own (empty, writable) workspace, since `/tmp` is root's.
pub fn probe_env() -> Vec<String> {
    [
        "HOME=/roundtable/workspace",
        "TMPDIR=/roundtable/workspace",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "CI=1",
        "NO_COLOR=1",
        "TERM=dumb",
        "DO_NOT_TRACK=1",
    ]
    .iter()
    .map(|v| (*v).to_owned())
    .collect()
}

/// The commands a probe runs for `contract`: the version command, then the help command.
pub fn probe_commands(contract: &Contract) -> Vec<ProbeCommand> {
    vec![ProbeCommand::new(contract.version_command.clone()), ProbeCommand::new(contract.help_command.clone())]
}

/// The conformance evidence of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Surface {
    pub version: Option<String>,
    pub verdict: ConformanceVerdict,
    pub detail: String,
}

impl Surface {
    pub fn skipped(detail: impl Into<String>) -> Self {
        Self { version: None, verdict: ConformanceVerdict::Skip, detail: detail.into() }
    }
}

/// Whole tokens of a help text: runs of letters, digits, `-` and `_`.
pub fn tokens(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).filter(|t| !t.is_empty()).collect()
}

fn text_of(run: &ProbeRun) -> String {
    let mut text = String::from_utf8_lossy(&run.stdout.bytes).into_owned();
    if !run.stderr.bytes.is_empty() {
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&run.stderr.bytes));
    }
    text
}

/// What `run` printed, as a decision message quotes it: its first line, redacted and capped
/// (an image can print any amount, the message stays one short line).
fn said(run: &ProbeRun) -> String {
    quote(text_of(run).as_bytes())
}

/// Why a command did not run at all, when it did not.
fn did_not_run(run: &ProbeRun) -> Option<String> {
    let shown = run.argv.join(" ");
    match run.exit_code {
        None => Some(format!("`{shown}` did not finish in time")),
        Some(126 | 127) => {
            Some(format!("`{shown}` could not run (exit {}): {}", run.exit_code.unwrap_or_default(), said(run)))
        }
        _ => None,
    }
}

/// The version in `output`: the contract's pattern's first group (or whole match), else the
/// first `N.N[.N]`.
pub fn version_in(pattern: Option<&str>, output: &str) -> Result<Option<String>, regex::Error> {
    let regex = Regex::new(pattern.unwrap_or(r"\d+\.\d+(?:\.\d+)?"))?;
    Ok(regex.captures(output).and_then(|c| c.get(1).or_else(|| c.get(0))).map(|m| m.as_str().trim().to_owned()))
}

/// Matches the probe's runs (version, then help) against `contract`.
pub fn conformance(contract: &Contract, runs: &[ProbeRun]) -> Surface {
    let [version_run, help_run] = runs else {
        return Surface::skipped(format!("the probe returned {} results, expected 2", runs.len()));
    };
    if let Some(why) = did_not_run(version_run) {
        return Surface::skipped(why);
    }
    let version = match version_in(contract.version_pattern.as_deref(), &text_of(version_run)) {
        Ok(Some(version)) if version.len() <= VERSION_LIMIT => version,
        Ok(Some(version)) => {
            return Surface::skipped(format!(
                "the version `{}` printed is {} bytes long; a version is at most {VERSION_LIMIT}",
                version_run.argv.join(" "),
                version.len()
            ));
        }
        Ok(None) => {
            return Surface::skipped(format!(
                "no version in the output of `{}`: {:?}",
                version_run.argv.join(" "),
                said(version_run)
            ));
        }
        Err(error) => return Surface::skipped(format!("the contract's versionPattern does not compile: {error}")),
    };
    let surface = |verdict, detail: String| Surface { version: Some(version.clone()), verdict, detail };
    if let Some(why) = did_not_run(help_run) {
        return surface(ConformanceVerdict::Skip, why);
    }
    let help = text_of(help_run);
    if help.trim().is_empty() {
        return surface(ConformanceVerdict::Skip, format!("`{}` printed nothing", help_run.argv.join(" ")));
    }
    let found = tokens(&help);
    let required: Vec<&String> = contract.required_flags.iter().chain(&contract.required_subcommands).collect();
    let missing: Vec<&str> = required.iter().filter(|t| !found.contains(t.as_str())).map(|t| t.as_str()).collect();
    if required.len() >= 2 && missing.len() == required.len() {
        // Nothing at all matched: a different CLI, or its help moved; not evidence of a regression.
        return surface(
            ConformanceVerdict::Skip,
            format!(
                "the help surface advertises none of the {} required flags and subcommands (inconclusive)",
                required.len()
            ),
        );
    }
    if !missing.is_empty() {
        return surface(
            ConformanceVerdict::Fail,
            format!("the help surface does not advertise {}", missing.join(", ")),
        );
    }
    surface(
        ConformanceVerdict::Ok,
        format!("version {version}; all {} required flags and subcommands advertised", required.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_session_runtime::Captured;

    fn run(argv: &str, code: Option<i64>, out: &str) -> ProbeRun {
        ProbeRun {
            argv: argv.split(' ').map(str::to_owned).collect(),
            exit_code: code,
            stdout: Captured { bytes: out.as_bytes().to_vec(), total: out.len() as u64 },
            stderr: Captured::default(),
        }
    }

    fn contract(flags: &[&str]) -> Contract {
        Contract {
            adapter: "x".into(),
            version_command: vec!["x".into(), "--version".into()],
            version_pattern: Some(r"x-cli (\d+\.\d+\.\d+)".into()),
            help_command: vec!["x".into(), "--help".into()],
            required_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            required_subcommands: vec![],
            transcripts: vec![],
        }
    }

    #[test]
    fn flags_match_as_whole_tokens_only() {
        let help = "Options:\n  --model <M>  the model\n  -C, --cd <DIR>\n";
        let runs = [run("x --version", Some(0), "x-cli 1.2.3\n"), run("x --help", Some(0), help)];
        assert_eq!(conformance(&contract(&["--model", "-C"]), &runs).verdict, ConformanceVerdict::Ok);
        // `-m` is a substring of `--model` but not a token of this help.
        let surface = conformance(&contract(&["--model", "-m"]), &runs);
        assert_eq!(
            (surface.verdict, surface.detail.as_str()),
            (ConformanceVerdict::Fail, "the help surface does not advertise -m")
        );
        assert_eq!(surface.version.as_deref(), Some("1.2.3"));
        assert_eq!(conformance(&contract(&["--json", "-m"]), &runs).verdict, ConformanceVerdict::Skip);
    }

    #[test]
    fn a_missing_binary_or_version_is_inconclusive() {
        let runs = [run("x --version", Some(127), "sh: x: not found"), run("x --help", Some(127), "")];
        let surface = conformance(&contract(&["--model"]), &runs);
        assert_eq!(surface.verdict, ConformanceVerdict::Skip);
        assert!(surface.detail.contains("could not run (exit 127): sh: x: not found"), "{}", surface.detail);
        let runs = [run("x --version", Some(0), "other 1.2.3"), run("x --help", Some(0), "--model")];
        assert!(conformance(&contract(&["--model"]), &runs).detail.starts_with("no version in the output"));
        assert_eq!(version_in(None, "codex-cli 0.171.0\n").ok().flatten().as_deref(), Some("0.171.0"));
    }

    /// Regression: a failing version probe copied its whole output (100 KB seen) into the
    /// decision message, secrets included.
    #[test]
    fn a_failing_probe_quotes_one_short_redacted_line_of_what_it_printed() {
        let flood = format!("token=hunter2 {}", "x".repeat(100_000));
        for (code, printed) in
            [(Some(0), flood.clone()), (Some(127), flood.clone()), (Some(0), format!("\n\n{flood}\nrest"))]
        {
            let runs = [run("x --version", code, &printed), run("x --help", Some(0), "--model")];
            let surface = conformance(&contract(&["--model"]), &runs);
            assert_eq!(surface.verdict, ConformanceVerdict::Skip);
            assert!(surface.detail.len() < 400, "{} bytes: {}…", surface.detail.len(), &surface.detail[..200]);
            assert!(surface.detail.contains("token=[REDACTED] xxx"), "{}", surface.detail);
            assert!(!surface.detail.contains("hunter2") && surface.detail.contains('…'), "{}", surface.detail);
        }
        let digits = format!("x-cli 1.2.{}", "9".repeat(100_000));
        let runs = [run("x --version", Some(0), &digits), run("x --help", Some(0), "--model")];
        let surface = conformance(&contract(&["--model"]), &runs);
        assert_eq!((surface.verdict, surface.version), (ConformanceVerdict::Skip, None));
        assert!(surface.detail.len() < 200, "{}", surface.detail);
    }
}
