//! `validate`'s look into the repository an Assignment names: a `readablePaths` entry that does
//! not exist at its revision, or a revision that does not resolve, is a warning there rather than
//! a failed run later. Read-only, one `git` listing per repository and revision.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use roundtable_specs::yaml::FieldPath;
use roundtable_specs::{Object, Severity, Spec, ValidationError};

/// What a repository holds at one revision: its files, or why it cannot be told.
type Listing = Result<BTreeSet<String>, String>;

/// Warnings for every Assignment of `objects` whose repository (under `root`) is a git work tree
/// here: each `readablePaths` entry absent at the revision, or the revision itself unresolved.
pub fn warnings(root: &Path, objects: &[std::sync::Arc<Object>]) -> Vec<ValidationError> {
    let mut listings: BTreeMap<(PathBuf, String), Listing> = BTreeMap::new();
    let mut out = Vec::new();
    for object in objects {
        let Spec::Assignment(spec) = &object.spec else { continue };
        // Only a source that validates is looked into: a refused one (a repository outside the
        // project, a revision that reads as an option) has its error already and goes no further.
        let refused = roundtable_specs::validate::validate_object(object)
            .iter()
            .any(|finding| finding.severity == Severity::Error && finding.path.starts_with("spec.source"));
        if refused {
            continue;
        }
        let repo = root.join(&spec.source.repo);
        // A repository that is not here (a mirror, a path filled in later) is not looked into.
        if !repo.join(".git").exists() {
            continue;
        }
        let revision = spec.source.revision.clone();
        let shown =
            if spec.source.repo == "." { "the project's repository".to_owned() } else { spec.source.repo.clone() };
        let listing = listings.entry((repo.clone(), revision.clone())).or_insert_with(|| list(&repo, &revision));
        match listing {
            Err(why) => out.push(object.origin.finding(
                &FieldPath::parse("spec.source.revision"),
                Severity::Warning,
                format!("{revision:?} does not resolve to a commit in {shown}: {why}; the run would fail"),
            )),
            Ok(files) => {
                for (i, entry) in spec.readable_paths.iter().enumerate() {
                    if !present(files, entry) {
                        out.push(object.origin.finding(
                            &FieldPath::parse("spec.readablePaths").index(i),
                            Severity::Warning,
                            format!("{entry:?} does not exist at {revision} in {shown}: the agent gets nothing for it"),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Every file of `repo` at `revision`.
fn list(repo: &Path, revision: &str) -> Listing {
    let commit = format!("{revision}^{{commit}}");
    roundtable_workspace::git::text(repo, &["rev-parse", "--verify", "--quiet", "--end-of-options", &commit])
        .map_err(|_| branches(repo))?;
    let listed =
        roundtable_workspace::git::run(repo, &["ls-tree", "-r", "-z", "--name-only", "--end-of-options", &commit])
            .map_err(|error| error.to_string())?;
    Ok(listed
        .stdout
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect())
}

/// The branches there are, to say what the revision might have meant (`main` where it is `master`).
fn branches(repo: &Path) -> String {
    match roundtable_workspace::git::text(repo, &["for-each-ref", "--format=%(refname:short)", "refs/heads/"]) {
        Ok(names) if !names.is_empty() => format!("its branches are {}", names.lines().collect::<Vec<_>>().join(", ")),
        _ => "it has no branches".into(),
    }
}

/// Whether `entry` (a file, or a directory with or without a trailing `/`; `.` is everything)
/// names something in `files`.
fn present(files: &BTreeSet<String>, entry: &str) -> bool {
    let entry = entry.trim_end_matches('/');
    if entry.is_empty() || entry == "." {
        return !files.is_empty();
    }
    let directory = format!("{entry}/");
    files.contains(entry) || files.range(directory.clone()..).next().is_some_and(|first| first.starts_with(&directory))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_outside_the_project_is_never_looked_into() {
        let outer = tempfile::tempdir().expect("tempdir");
        let project = outer.path().join("project");
        std::fs::create_dir_all(project.join(".git")).expect("mkdir");
        // A repository beside the project, which `validate` refuses to name: not listed.
        std::fs::create_dir_all(outer.path().join("elsewhere/.git")).expect("mkdir");
        let text = "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: a}\nspec:\n  adapter: mock\n  task: {id: T, prompt: p}\n  source: {repo: ../elsewhere, revision: main}\n  readablePaths: [missing.md]\n";
        let parsed = roundtable_specs::parse_file("a.yaml", "a.yaml", text);
        let objects: Vec<std::sync::Arc<Object>> = parsed.objects.into_iter().map(std::sync::Arc::new).collect();
        assert_eq!(objects.len(), 1);
        assert!(warnings(&project, &objects).is_empty(), "no git is run for a refused repository");
    }

    #[test]
    fn an_entry_is_present_as_a_file_or_a_directory() {
        let files: BTreeSet<String> = ["README.md", "docs/guide.md", "docsx"].into_iter().map(String::from).collect();
        assert!(present(&files, "README.md"));
        assert!(present(&files, "docs/"));
        assert!(present(&files, "docs"));
        assert!(present(&files, "."));
        assert!(!present(&files, "doc"));
        assert!(!present(&files, "docs/missing.md"));
        assert!(!present(&files, "src/"));
    }
}
