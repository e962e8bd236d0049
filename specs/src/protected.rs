//! The protected paths: what a proposal must not change without a reviewer's explicit override,
//! because it runs code (CI, editors, hooks, package managers) or changes how git, the agents or
//! the controller read the repository. One list and one matcher; `docs/proposals.md` lists the
//! same entries and a test keeps the two equal. The agent CLIs' configuration folders come from
//! every provider's profile, so a provider cannot be added without them.
//!
//! Reviewers open branches on checkouts that are case-insensitive (macOS, Windows) and that
//! ignore what NTFS and HFS+ ignore, so a path is compared the way those checkouts resolve it:
//! `.VSCode/tasks.json` is `.vscode/tasks.json`, `.gitattributes.` is `.gitattributes`, and a
//! component shaped like an NTFS 8.3 short name (`GITHUB~1`) may be any of them.

use std::sync::LazyLock;

use crate::providers::Provider;

/// Where an entry is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// From the repository root only (where the tool reads it).
    Root,
    /// At any depth (tools read it in any folder, or a subproject's copy is read as well).
    AnyDepth,
}

/// One protected entry: a file, or a folder when it ends with `/`; either may span components
/// (`.git/hooks/`, `.cargo/config.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtectedEntry {
    pub path: &'static str,
    pub anchor: Anchor,
}

const fn root(path: &'static str) -> ProtectedEntry {
    ProtectedEntry { path, anchor: Anchor::Root }
}

const fn anywhere(path: &'static str) -> ProtectedEntry {
    ProtectedEntry { path, anchor: Anchor::AnyDepth }
}

/// Every protected entry, in the order `docs/proposals.md` lists them: the controller's own
/// specs and git's own folder, the provider CLIs' configuration folders from their profiles
/// (alphabetical), then [`TOOLS`].
pub static PROTECTED: LazyLock<Vec<ProtectedEntry>> = LazyLock::new(|| {
    let mut agents: Vec<&'static str> =
        Provider::ALL.iter().flat_map(|provider| provider.profile().protected.iter().copied()).collect();
    agents.sort_unstable();
    agents.dedup();
    [root(".roundtable/"), root(".git/")]
        .into_iter()
        .chain(agents.into_iter().map(root))
        .chain(TOOLS.iter().copied())
        .collect()
});

/// The protected entries that are no provider's: CI, hooks, editors, build tools.
const TOOLS: &[ProtectedEntry] = &[
    // CI systems that read a folder at the root: all of `.github/` (workflows, the local
    // actions they call, Dependabot), GitLab's templates, CircleCI, Buildkite, Gitea/Forgejo,
    // Woodpecker, Semaphore, Tekton.
    root(".github/"),
    root(".gitlab/"),
    root(".circleci/"),
    root(".buildkite/"),
    root(".gitea/"),
    root(".forgejo/"),
    root(".woodpecker/"),
    root(".semaphore/"),
    root(".tekton/"),
    // CI files: a pipeline may name one in any folder (GitLab's `include: local`, Azure's
    // pipeline path, a monorepo's per-project Jenkinsfile).
    anywhere(".gitlab-ci.yml"),
    anywhere("azure-pipelines.yml"),
    anywhere("azure-pipelines.yaml"),
    anywhere("bitbucket-pipelines.yml"),
    anywhere(".drone.yml"),
    anywhere(".drone.star"),
    anywhere("Jenkinsfile"),
    anywhere(".travis.yml"),
    anywhere(".woodpecker.yml"),
    anywhere("appveyor.yml"),
    anywhere(".appveyor.yml"),
    anywhere(".cirrus.yml"),
    anywhere("cloudbuild.yaml"),
    anywhere("cloudbuild.yml"),
    anywhere("buildspec.yml"),
    // Who must review what (GitHub and GitLab read it at the root, in `docs/` and `.github/`).
    anywhere("CODEOWNERS"),
    // How git reads the repository, and hooks.
    anywhere(".gitmodules"),
    anywhere(".gitattributes"),
    anywhere(".git/hooks/"),
    anywhere(".husky/"),
    anywhere(".pre-commit-config.yaml"),
    // Code an editor or a shell runs when the folder is opened or entered.
    anywhere(".vscode/"),
    anywhere(".idea/"),
    anywhere(".devcontainer/"),
    anywhere(".devcontainer.json"),
    anywhere(".envrc"),
    // Build configuration that runs code or swaps the toolchain.
    anywhere(".cargo/config.toml"),
    anywhere(".cargo/config"),
    anywhere("rust-toolchain.toml"),
    anywhere("rust-toolchain"),
    anywhere(".yarnrc.yml"),
    anywhere(".yarnrc"),
    anywhere("mise.toml"),
    anywhere(".mise.toml"),
    anywhere(".tool-versions"),
    anywhere("gradle/wrapper/"),
    anywhere(".mvn/"),
    anywhere(".bazelrc"),
    root(".lfsconfig"),
    // Test configuration a test runner imports and runs from any folder it collects.
    anywhere("conftest.py"),
];

/// What [`protected_entry`] answers for an NTFS 8.3 short name ([`is_short_name`]).
pub const SHORT_NAME: ProtectedEntry = anywhere("XXXXXX~N");

/// Whether `component` (lowercased by [`components`]) has the shape of an NTFS 8.3 short name:
/// one to six characters, `~`, digits, and an extension of at most three. A Windows checkout
/// resolves `GITHUB~1` to `.github` and `VSCODE~1` to `.vscode` when those exist, so such a name
/// can stand for any protected entry; a repository has no reason to add one, and which long name
/// it stands for depends on the checkout, so every one is protected.
pub fn is_short_name(component: &str) -> bool {
    let Some((stem, rest)) = component.split_once('~') else { return false };
    let (digits, extension) = rest.split_once('.').unwrap_or((rest, ""));
    (1..=6).contains(&stem.chars().count())
        && !stem.contains('.')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && extension.chars().count() <= 3
        && !extension.contains('.')
}

/// Code points HFS+ ignores in names (as git's `core.protectHFS` lists them): a name with one
/// of them inserted is the same file on such a checkout.
fn ignored_by_hfs(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// The components of `path` as a case-insensitive checkout resolves them: `\` separates too,
/// HFS+'s ignored code points are dropped, trailing dots and spaces (which Windows drops) are
/// trimmed, letters are lowercased (the long s folds to `s`, as case-insensitive file systems
/// fold it), and empty components are skipped.
pub fn components(path: &str) -> Vec<String> {
    path.split(['/', '\\'])
        .map(|component| {
            let kept: String = component.chars().filter(|c| !ignored_by_hfs(*c)).collect();
            kept.trim_end_matches(['.', ' '])
                .chars()
                .flat_map(char::to_lowercase)
                .map(|c| if c == '\u{17f}' { 's' } else { c })
                .collect::<String>()
        })
        .filter(|component| !component.is_empty())
        .collect()
}

impl ProtectedEntry {
    /// Whether the entry is a folder (everything below it is protected too).
    pub fn is_folder(&self) -> bool {
        self.path.ends_with('/')
    }

    /// Whether `path` (already split by [`components`]) is this entry or lies below it. A path
    /// equal to a protected folder's name matches too: a file or symlink put in its place.
    fn matches(&self, path: &[String]) -> bool {
        let entry = components(self.path);
        let at = |start: usize| {
            let end = start + entry.len();
            end <= path.len() && path[start..end] == entry[..] && (self.is_folder() || end == path.len())
        };
        match self.anchor {
            Anchor::Root => at(0),
            Anchor::AnyDepth => (0..path.len()).any(at),
        }
    }
}

/// The protected entry `path` falls under, if any.
pub fn protected_entry(path: &str) -> Option<&'static ProtectedEntry> {
    let path = components(path);
    PROTECTED
        .iter()
        .find(|entry| entry.matches(&path))
        .or_else(|| path.iter().any(|component| is_short_name(component)).then_some(&SHORT_NAME))
}

/// Whether a proposal touching `path` touches a protected path.
pub fn is_protected(path: &str) -> bool {
    protected_entry(path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ci_system_and_every_tool_config_is_protected() {
        let cases = [
            (".github/workflows/ci.yml", ".github/"),
            (".github/actions/setup/action.yml", ".github/"),
            (".github/dependabot.yml", ".github/"),
            (".gitlab-ci.yml", ".gitlab-ci.yml"),
            ("services/api/.gitlab-ci.yml", ".gitlab-ci.yml"),
            (".gitlab/ci/build.yml", ".gitlab/"),
            (".circleci/config.yml", ".circleci/"),
            (".buildkite/pipeline.yml", ".buildkite/"),
            ("azure-pipelines.yml", "azure-pipelines.yml"),
            ("bitbucket-pipelines.yml", "bitbucket-pipelines.yml"),
            (".drone.yml", ".drone.yml"),
            ("Jenkinsfile", "Jenkinsfile"),
            ("ci/Jenkinsfile", "Jenkinsfile"),
            (".travis.yml", ".travis.yml"),
            ("CODEOWNERS", "CODEOWNERS"),
            ("docs/CODEOWNERS", "CODEOWNERS"),
            (".github/CODEOWNERS", ".github/"),
            (".roundtable/specs.yaml", ".roundtable/"),
            (".claude/settings.json", ".claude/"),
            (".gitmodules", ".gitmodules"),
            ("vendor/lib/.gitattributes", ".gitattributes"),
            (".envrc", ".envrc"),
            (".vscode/settings.json", ".vscode/"),
            ("app/.idea/workspace.xml", ".idea/"),
            (".cargo/config.toml", ".cargo/config.toml"),
            ("crates/x/.cargo/config", ".cargo/config"),
            (".devcontainer/devcontainer.json", ".devcontainer/"),
            (".devcontainer.json", ".devcontainer.json"),
            (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
            (".husky/pre-commit", ".husky/"),
            ("sub/.git/hooks/pre-commit", ".git/hooks/"),
            // A file or symlink in a protected folder's place.
            (".vscode", ".vscode/"),
            (".github", ".github/"),
        ];
        for (path, entry) in cases {
            assert_eq!(protected_entry(path).map(|e| e.path), Some(entry), "{path}");
        }
    }

    #[test]
    fn every_providers_configuration_folders_are_protected_at_the_root() {
        for provider in Provider::ALL.iter().copied() {
            for folder in provider.profile().protected {
                let inside = format!("{folder}settings.json");
                assert_eq!(
                    protected_entry(&inside).map(|e| (e.path, e.anchor)),
                    Some((*folder, Anchor::Root)),
                    "{provider}"
                );
                assert_eq!(protected_entry(&format!("sub/{inside}")), None, "{provider}: read at the root only");
            }
        }
    }

    #[test]
    fn names_are_matched_as_case_insensitive_checkouts_resolve_them() {
        let cases = [
            (".VSCode/tasks.json", ".vscode/"),
            (".GITATTRIBUTES", ".gitattributes"),
            ("src/.GitAttributes", ".gitattributes"),
            (".GitHub/Actions/x/action.yml", ".github/"),
            ("JENKINSFILE", "Jenkinsfile"),
            ("docs/codeowners", "CODEOWNERS"),
            // Windows drops trailing dots and spaces; `\` separates there.
            (".gitattributes.", ".gitattributes"),
            (".gitattributes ", ".gitattributes"),
            (".vscode. /tasks.json", ".vscode/"),
            (".vscode\\tasks.json", ".vscode/"),
            // HFS+ ignores zero-width code points; the Kelvin sign and the long s fold to k and s.
            (".git\u{200c}attributes", ".gitattributes"),
            ("Jen\u{212a}insfile", "Jenkinsfile"),
            (".travi\u{17f}.yml", ".travis.yml"),
        ];
        for (path, entry) in cases {
            assert_eq!(protected_entry(path).map(|e| e.path), Some(entry), "{path}");
        }
    }

    /// Hostile pass B7: tools that run repository code or swap a toolchain with no prompt, and
    /// the NTFS short names a Windows checkout resolves to a protected folder or file.
    #[test]
    fn toolchain_files_test_configuration_and_short_names_are_protected() {
        let cases = [
            (".yarnrc.yml", ".yarnrc.yml"),
            ("web/.yarnrc", ".yarnrc"),
            ("mise.toml", "mise.toml"),
            (".mise.toml", ".mise.toml"),
            (".tool-versions", ".tool-versions"),
            ("rust-toolchain", "rust-toolchain"),
            ("crates/x/rust-toolchain.toml", "rust-toolchain.toml"),
            ("gradle/wrapper/gradle-wrapper.properties", "gradle/wrapper/"),
            ("app/gradle/wrapper/gradle-wrapper.jar", "gradle/wrapper/"),
            (".mvn/extensions.xml", ".mvn/"),
            (".mvn/wrapper/maven-wrapper.properties", ".mvn/"),
            (".lfsconfig", ".lfsconfig"),
            (".bazelrc", ".bazelrc"),
            ("conftest.py", "conftest.py"),
            ("tests/unit/conftest.py", "conftest.py"),
            ("VSCODE~1/tasks.json", "XXXXXX~N"),
            ("GITHUB~1/workflows/ci.yml", "XXXXXX~N"),
            ("GITATT~1", "XXXXXX~N"),
            ("src/gitatt~12.", "XXXXXX~N"),
            ("docs/JENKIN~1.TXT", "XXXXXX~N"),
        ];
        for (path, entry) in cases {
            assert_eq!(protected_entry(path).map(|e| e.path), Some(entry), "{path}");
        }
        for name in ["a~b", "toolong~1", "x~", "~1", "file~1.text", ".git~1", "a~1.b.c", "notes~draft.md"] {
            assert!(!is_short_name(name), "{name}");
        }
    }

    #[test]
    fn look_alikes_and_nested_root_folders_are_not_protected() {
        for path in [
            "docs/vscode.md",
            "src/config.toml",
            "Jenkinsfile.md",
            "my.envrc.txt",
            // GitHub reads `.github/` at the root only.
            "x/.github/workflows/ci.yml",
            "docs/github/actions.md",
            "CODEOWNERS.md",
            ".gitattributes-old",
            "gitlab-ci.yml",
            "README.md",
            "docs/mise.md",
            "src/gradle/wrapper.rs",
            "x/.lfsconfig",
            "conftest.py.txt",
        ] {
            assert_eq!(protected_entry(path), None, "{path}");
        }
    }

    #[test]
    fn docs_list_exactly_the_protected_entries() {
        let docs = include_str!("../../docs/proposals.md");
        let section = docs.split("## Protected paths").nth(1).unwrap_or_default();
        let listed: Vec<(String, String)> = section
            .lines()
            .take_while(|line| !line.starts_with("## "))
            .filter_map(|line| {
                let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
                let path = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
                Some((path.to_owned(), (*cells.get(1)?).to_owned()))
            })
            .collect();
        let expected: Vec<(String, String)> = PROTECTED
            .iter()
            .map(|entry| {
                let anchor = match entry.anchor {
                    Anchor::Root => "root",
                    Anchor::AnyDepth => "any depth",
                };
                (entry.path.to_owned(), anchor.to_owned())
            })
            .collect();
        assert_eq!(listed, expected, "docs/proposals.md's table of protected paths and `PROTECTED` differ");
    }
}
