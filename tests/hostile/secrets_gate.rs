//! Hostile tests of the one secret scanner (`specs::secrets`) and the secrets and size gates that
//! read a proposal's git objects (docs/delivery.md): a line dressed as a patch header, a binary
//! file carrying keys, a 64 MiB file whose patch literal is small, and the keys the gate's old
//! second rule set missed, each made with `git diff --binary` and judged by
//! `added::from_objects` and `gates::findings`; the corpus of positives and look-alikes, and a
//! differential run of PyPI's `detect-secrets` over it; and the six formats a diagnostics report
//! once carried, printed by a CLI in a real probe.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use roundtable_delivery::held::HeldCredentials;
use roundtable_delivery::{added, gates};
use roundtable_specs::delivery::{Finding, GateAction, GateOverride, ProposalGate, ProposalGates};
use roundtable_specs::secrets::fingerprint::CredentialFingerprint;
use roundtable_specs::secrets::{find, redact, scan_line};
use roundtable_specs::units::Quantity;

use crate::support::{
    API, binary, docker, engine_or_skip, ensure_test_images, git, nothing_left, present_or_skip, repo_root, write,
};

// === a proposal made the way an agent's is: git diff --binary against a base commit ===

/// A repository whose base commit holds `base` files; the proposal's patch is what `change` does
/// to them, as `git diff --binary` prints it. The work tree is put back to the base, so only the
/// objects can tell the gate what the proposal adds.
struct Proposal {
    repo: tempfile::TempDir,
    base: String,
    patch: Vec<u8>,
}

impl Proposal {
    fn of(base: &[(&str, &[u8])], change: impl FnOnce(&Path)) -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        let root = repo.path();
        git(root, &["init", "-q", "-b", "main"]);
        for (path, bytes) in base {
            write_bytes(root, path, bytes);
        }
        write(root, "README.md", "# Project\n");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "base"]);
        let base = git(root, &["rev-parse", "HEAD"]);
        change(root);
        git(root, &["add", "-A"]);
        let patch = Command::new("git")
            .args(["diff", "--cached", "--binary", "--no-color", "--no-ext-diff"])
            .current_dir(root)
            .output()
            .expect("git diff")
            .stdout;
        git(root, &["reset", "-q", "--hard", &base]);
        Proposal { repo, base, patch }
    }

    /// What the gates find under `policy`, read from the proposal's objects; the operator's
    /// index, work tree and refs are as they were.
    fn findings(&self, policy: &ProposalGates) -> Vec<Finding> {
        self.findings_holding(policy, None)
    }

    /// The same, with the credentials the daemon holds compared too.
    fn findings_holding(&self, policy: &ProposalGates, held: Option<&HeldCredentials<'_>>) -> Vec<Finding> {
        let root = self.repo.path();
        let before = (git(root, &["status", "--porcelain"]), git(root, &["show-ref"]));
        let index = std::fs::read(root.join(".git/index")).expect("index");
        let added = added::from_objects(root, &self.base, &self.patch).expect("the proposal's objects");
        assert_eq!((git(root, &["status", "--porcelain"]), git(root, &["show-ref"])), before);
        assert_eq!(std::fs::read(root.join(".git/index")).expect("index"), index, "the index is untouched");
        gates::findings(&added, &[], policy, held)
    }

    fn shown(&self, policy: &ProposalGates) -> Vec<String> {
        self.findings(policy).iter().map(ToString::to_string).collect()
    }
}

fn write_bytes(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(full, bytes).expect("write");
}

const AWS_KEY: &str = "AKIAQ8ZR2LWX9VN4MT7P";

/// Issue 48, item 4: a line reading `++ KEY` is `+++ KEY` in the patch, which the patch reader
/// took for a file header and never scanned. The same key on an ordinary line was refused.
#[test]
fn a_line_dressed_as_a_patch_header_is_scanned() {
    let proposal = Proposal::of(&[("config.txt", b"keep\n")], |root| {
        write(root, "config.txt", &format!("keep\n++ {AWS_KEY}\n"));
        write(root, "fresh.txt", &format!("++ {AWS_KEY}\n"));
    });
    assert!(
        String::from_utf8_lossy(&proposal.patch).contains(&format!("\n+++ {AWS_KEY}\n")),
        "the patch carries the key as a header-looking line"
    );
    assert_eq!(
        proposal.shown(&ProposalGates::default()),
        ["secrets: aws-access-key at config.txt:2", "secrets: aws-access-key at fresh.txt:1"]
    );
}

/// Issue 48, item 5: one NUL byte made the file a `GIT binary patch`, whose content the gate only
/// counted: an AWS key and a PEM private key went through.
#[test]
fn a_binary_file_is_scanned_by_its_printable_runs() {
    let mut bytes = b"\0\x01\x02\x03 header".to_vec();
    bytes.extend_from_slice(format!("\naws_access_key_id={AWS_KEY}\n").as_bytes());
    bytes.extend_from_slice(b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8Zr2LwX9vN4mT7pK1sB6dH3\n");
    bytes.extend_from_slice(b"-----END RSA PRIVATE KEY-----\n\xff\xfe");
    let proposal = Proposal::of(&[], |root| write_bytes(root, "assets/blob.bin", &bytes));
    assert!(String::from_utf8_lossy(&proposal.patch).contains("GIT binary patch"));
    assert_eq!(
        proposal.shown(&ProposalGates::default()),
        ["secrets: aws-access-key at assets/blob.bin", "secrets: private-key at assets/blob.bin"]
    );
}

/// Issue 48, item 6: the size gate measured a binary file by its compressed patch lines, so a
/// 64 MiB file counted as ~100 KiB and passed a 10 MiB cap. A blob past the scan limit is said
/// too (a `secrets` finding: what was not read may hold one), never passed unscanned in silence.
#[test]
fn a_large_binary_file_counts_its_real_size() {
    let size = 64usize << 20;
    let proposal = Proposal::of(&[], |root| {
        let mut bytes = vec![0u8; size];
        bytes[size / 2..size / 2 + 4].copy_from_slice(b"data");
        write_bytes(root, "big.bin", &bytes);
    });
    assert!(proposal.patch.len() < 1 << 20, "the literal is small: {} bytes", proposal.patch.len());
    let policy = ProposalGates { max_added_bytes: Quantity::from_bytes(10 << 20), ..ProposalGates::default() };
    let shown = proposal.shown(&policy);
    assert!(shown.contains(&format!("size: max-added-bytes ({size} > {})", 10 << 20)), "{shown:?}");
    let past = size as u64 - added::SCAN_LIMIT;
    assert!(
        shown.contains(&format!("secrets: unscanned ({past} bytes past the first 16 MiB not scanned) at big.bin")),
        "{shown:?}"
    );
    let unmet = gates::unmet(&proposal.findings(&policy), &policy, &[]);
    assert!(!unmet.is_empty(), "the gates stop the accept");
}

/// Issue 48, item 7: the gate had its own, weaker rule set: a Stripe live key, a plain `sk-` key
/// and a GitLab deploy token passed it.
#[test]
fn the_gate_finds_what_the_one_scanner_finds() {
    let proposal = Proposal::of(&[], |root| {
        write(
            root,
            "src/settings.py",
            "STRIPE = \"sk_live_51Hq8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ\"\n\
             client = OpenAI(api=\"sk-q8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ0cE2iU4oY6tR8\")\n\
             DEPLOY = \"gldt-q8Zr2LwX9vN4mT7pK1sB\"\n",
        );
    });
    assert_eq!(
        proposal.shown(&ProposalGates::default()),
        [
            "secrets: gitlab-token at src/settings.py:3",
            "secrets: sk-api-key at src/settings.py:2",
            "secrets: stripe-secret-key at src/settings.py:1",
        ]
    );
}

/// What the base already held is not blamed on the proposal; what it adds beside it is.
#[test]
fn a_secret_the_base_already_held_is_not_blamed_on_the_proposal() {
    let old = format!("[keys]\nlegacy = {AWS_KEY}\nregion = eu-west-1\nretries = 3\ntimeout = 30\n");
    let proposal = Proposal::of(&[("keys.txt", old.as_bytes()), ("held.txt", old.as_bytes())], |root| {
        // Moved and added to: the rename is followed to what the file was.
        write(root, "moved.txt", &format!("{old}new = AKIAQ8ZR2LWX9VN4MT7Q\n"));
        std::fs::remove_file(root.join("keys.txt")).expect("rm");
        write(root, "held.txt", &format!("# header\n{old}"));
    });
    assert_eq!(proposal.shown(&ProposalGates::default()), ["secrets: aws-access-key at moved.txt:6"]);
}

// === hostile pass: secrets in names, past the scan limit, hidden in binary runs ===

/// A GitHub token shape (`ghp_` and 36 letters and digits; not a real token).
const GITHUB_TOKEN: &str = "ghp_R8nQ2vX7kLm4pT9wZ3bY6cF1hJ5sD0aE8gU2";

/// The stand-in keyed hash of `held.rs`'s tests: the store's is HMAC-SHA256.
fn digest(bytes: &[u8]) -> String {
    roundtable_specs::digest::sha256_hex(&[b"key:".as_slice(), bytes].concat())
}

/// Hostile pass B3: a secret written as a file's name (added, or a file renamed to it) reached
/// the tree with no finding, though its name lands in the tree and shows in every listing; a
/// deleted file's name is the base's, not blamed on the proposal. The finding masks the secret in
/// the path it names: findings never carry a value.
#[test]
fn a_secret_in_a_file_name_is_a_secrets_finding() {
    let gone = format!("gone/{AWS_KEY}.txt");
    let old = "a plain file that is moved\n".as_bytes();
    let proposal = Proposal::of(&[("old.txt", old), (&gone, b"x\n".as_slice())], |root| {
        write(root, &format!("docs/{GITHUB_TOKEN}.md"), "see the file name\n");
        std::fs::create_dir_all(root.join("cache")).expect("mkdir");
        std::fs::rename(root.join("old.txt"), root.join(format!("cache/{AWS_KEY}"))).expect("rename");
        std::fs::remove_file(root.join(&gone)).expect("rm");
    });
    assert_eq!(
        proposal.shown(&ProposalGates::default()),
        [
            "secrets: aws-access-key (in the path) at cache/[REDACTED]",
            "secrets: github-token (in the path) at docs/[REDACTED].md",
        ]
    );
    let found = proposal.findings(&ProposalGates::default());
    let refused = gates::unmet(&found, &ProposalGates::default(), &[]);
    assert_eq!(refused.len(), 2, "the secrets gate blocks: {refused:?}");
}

/// Hostile pass B3: a credential the daemon holds, written as a path, passed the comparison with
/// held values that finds it in a file's content. A zero-width space inside a held value in a
/// text file hides it no more than it hides a pattern's match.
#[test]
fn a_held_credential_in_a_path_or_split_by_a_zero_width_space_is_found() {
    let value = "acme-live-0123456789abcdef";
    let prints = vec![CredentialFingerprint::of("ACME_KEY", value, &digest).expect("long enough")];
    let held = HeldCredentials::new(&prints, &digest);
    let split = format!("{}\u{200b}{}", &value[..9], &value[9..]);
    let proposal = Proposal::of(&[], |root| {
        write(root, &format!("cache/{value}"), "x\n");
        write(root, "notes.txt", &format!("k={split}\n"));
    });
    let shown: Vec<String> =
        proposal.findings_holding(&ProposalGates::default(), Some(&held)).iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "secrets: credential-value (ACME_KEY) at notes.txt:1",
            "secrets: credential-value (ACME_KEY) (in the path) at cache/[REDACTED]",
        ]
    );
}

/// Hostile pass B4: a token after the first 16 MiB of a file was never read; the only finding
/// was the size gate's, so `--override size` (or `size: off`) landed it past the `block` secrets
/// gate. The unread part is a secrets finding now: neither a size override nor `size: off` passes it.
#[test]
fn a_secret_past_the_scan_limit_needs_the_secrets_gate_not_a_size_override() {
    let mut bytes = vec![b'a'; (16 << 20) + 10];
    for at in (0..bytes.len()).step_by(80) {
        bytes[at] = b'\n';
    }
    bytes.extend_from_slice(format!("\nexport GITHUB_TOKEN={GITHUB_TOKEN}\n").as_bytes());
    let proposal = Proposal::of(&[], |root| write_bytes(root, "fixtures.txt", &bytes));
    let policy = ProposalGates::default();
    let found = proposal.findings(&policy);
    let size = GateOverride { gate: ProposalGate::Size, reason: "large generated fixture".into() };
    let unmet = gates::unmet(&found, &policy, &[size]);
    assert!(
        unmet.iter().any(|u| u.finding.gate == ProposalGate::Secrets && u.finding.rule.starts_with("unscanned")),
        "a size override lands the unread tail: {unmet:?}"
    );
    let off = ProposalGates { size: GateAction::Off, ..ProposalGates::default() };
    let shown: Vec<String> = proposal.findings(&off).iter().map(ToString::to_string).collect();
    let past = bytes.len() as u64 - added::SCAN_LIMIT;
    assert_eq!(shown, [format!("secrets: unscanned ({past} bytes past the first 16 MiB not scanned) at fixtures.txt")]);
}

/// Hostile pass B6: in a file made binary by one NUL byte, a zero-width space or an ANSI colour
/// inside a token cut the printable run in two, where a text file's reader reads through them.
/// Binary runs are read through the same characters and normalised as text is.
#[test]
fn a_token_split_by_a_zero_width_space_or_a_colour_in_a_binary_file_is_found() {
    let split = format!("{}\u{200b}{}", &GITHUB_TOKEN[..14], &GITHUB_TOKEN[14..]);
    let coloured = format!("{}\u{1b}[31m{}\u{1b}[0m", &GITHUB_TOKEN[..14], &GITHUB_TOKEN[14..]);
    let wide: Vec<u8> = format!("\0{split}").encode_utf16().flat_map(u16::to_le_bytes).collect();
    let proposal = Proposal::of(&[], |root| {
        write_bytes(root, "notes.dat", format!("\0token {split}\n").as_bytes());
        write_bytes(root, "log.bin", format!("\0{coloured}\n").as_bytes());
        write_bytes(root, "wide.bin", &wide);
    });
    assert!(String::from_utf8_lossy(&proposal.patch).contains("GIT binary patch"));
    assert_eq!(
        proposal.shown(&ProposalGates::default()),
        ["secrets: github-token at log.bin", "secrets: github-token at notes.dat", "secrets: github-token at wide.bin",]
    );
}

// === the corpus ===

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("tests/secrets-corpus").join(kind);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("corpus folder").map(|entry| entry.expect("entry").path()).collect();
    files.sort();
    assert!(files.len() >= 3, "{} holds too few files", dir.display());
    files
}

/// The 1-based lines `spans` touch in `text`.
fn lines_of(text: &str, spans: impl Iterator<Item = std::ops::Range<usize>>) -> std::collections::BTreeSet<usize> {
    let line_at = |offset: usize| text[..offset].matches('\n').count() + 1;
    spans.flat_map(|span| line_at(span.start)..=line_at(span.end.saturating_sub(1).max(span.start))).collect()
}

/// Every line of every positive (a secret, or a line of a key block) is found and masked; no
/// look-alike is found, line by line or whole.
#[test]
fn the_corpus_positives_are_found_and_no_look_alike_is() {
    let mut missed = Vec::new();
    for file in corpus("positives") {
        let text = std::fs::read_to_string(&file).expect("utf-8");
        let found = lines_of(&text, find(&text).into_iter().map(|f| f.span));
        let masked = redact(text.as_bytes());
        for (n, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            if !found.contains(&(n + 1)) {
                missed.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
            let token = line.split(['=', ':', ' ', '"', '\'']).max_by_key(|part| part.len()).unwrap_or(line);
            if token.len() >= 16 && masked.contains(token) && !line.starts_with("-----") {
                missed.push(format!("{}:{}: not masked: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(missed.is_empty(), "positives not found: {missed:#?}");
    let mut found = Vec::new();
    for file in corpus("look-alikes") {
        let text = std::fs::read_to_string(&file).expect("utf-8");
        found.extend(find(&text).into_iter().map(|f| format!("{}: {} {:?}", file.display(), f.rule, &text[f.span])));
        for (n, line) in text.lines().enumerate() {
            found.extend(scan_line(line).into_iter().map(|rule| format!("{}:{}: {rule}", file.display(), n + 1)));
        }
    }
    assert!(found.is_empty(), "look-alikes found: {found:#?}");
}

/// The version of PyPI's `detect-secrets` the differential test is pinned to (CI installs it).
const DETECT_SECRETS: &str = "1.5.0";

/// An independent scanner over the positives: every line it flags, ours flags too (ours may find
/// more). Skipped without `detect-secrets`, unless the run requires the Python clients.
#[test]
fn every_secret_detect_secrets_finds_in_the_corpus_ours_finds_too() {
    let version = Command::new("detect-secrets").arg("--version").output();
    let installed = version.as_ref().is_ok_and(|out| out.status.success());
    let install = format!("python3 -m pip install detect-secrets=={DETECT_SECRETS}");
    if !present_or_skip(installed, "ROUNDTABLE_REQUIRE_PYTHON_CLIENTS", "detect-secrets", &install) {
        return;
    }
    let said = version.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned()).unwrap_or_default();
    assert_eq!(said, DETECT_SECRETS, "detect-secrets is pinned: {install}");
    // A copy outside any git repository, so that detect-secrets reads every file as it is.
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut copies = Vec::new();
    for file in corpus("positives") {
        let copy = scratch.path().join(file.file_name().expect("name"));
        std::fs::copy(&file, &copy).expect("copy");
        copies.push(copy);
    }
    let out = Command::new("detect-secrets")
        .args(["scan", "--all-files"])
        .args(&copies)
        .current_dir(scratch.path())
        .output()
        .expect("detect-secrets");
    assert!(out.status.success(), "detect-secrets: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("detect-secrets prints JSON");
    let results = report["results"].as_object().expect("results");
    let mut theirs = 0;
    let mut missed = Vec::new();
    for (path, flagged) in results {
        let file = scratch.path().join(path);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|_| panic!("{path} was scanned"));
        let ours = lines_of(&text, find(&text).into_iter().map(|f| f.span));
        for finding in flagged.as_array().expect("a list") {
            theirs += 1;
            let line = finding["line_number"].as_u64().expect("line_number") as usize;
            if !ours.contains(&line) {
                let shown = text.lines().nth(line - 1).unwrap_or("");
                missed.push(format!("{path}:{line} ({}): {shown}", finding["type"]));
            }
        }
    }
    assert!(theirs >= 10, "detect-secrets flagged only {theirs} lines: {report}");
    assert!(missed.is_empty(), "detect-secrets finds what ours does not: {missed:#?}");
}

// === diagnostics: what a CLI prints in its probe ===

const LEAKY_IMAGE: &str = "roundtable-test/hostile-diag-secrets:latest";
const LEAKY_CLI: &str = "rt-hostile-leaky-cli";

/// The six formats issue 48 (item 8) found carried by the diagnostics report, as a CLI that
/// colours its output prints them, each with the part that must not come out. (Printed plain,
/// the shared rules masked them already; a colour code glued to a secret hid it from them.)
const SIX: &[(&str, &str)] = &[
    (
        "\x1b[1mCookie:\x1b[0m session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvcGVyYXRvciJ9.q8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ0c",
        "eyJzdWIiOiJvcGVyYXRvciJ9",
    ),
    ("stripe: \x1b[31msk_live_51Hq8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ\x1b[0m", "51Hq8Zr2LwX9vN4mT7pK1sB6dH3aF5gJ"),
    (
        "{\x1b[34;1m\"auths\"\x1b[0m: {\x1b[34;1m\"registry.example.com\"\x1b[0m: {\x1b[34;1m\"auth\"\x1b[0m: \x1b[0;32m\"b3BlcmF0b3I6aHVudGVyMmh1bnRlcjI=\"\x1b[0m}}}",
        "b3BlcmF0b3I6aHVudGVyMmh1bnRlcjI",
    ),
    (
        "-----BEGIN PGP \x1b[1mPRIVATE\x1b[0m KEY BLOCK-----\n\nlQOYBGQ8Zr2LwX9vN4mT7pK1sB6dH3\n=q8Zr\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBGQ8Zr2LwX9vN4mT7pK1sB6dH3",
    ),
    ("remote: \x1b[33mglpat-q8Zr2LwX9vN4mT7pK1sB\x1b[0m", "q8Zr2LwX9vN4mT7pK1sB"),
    ("running: mysql --user root \x1b[2m--password\x1b[0m Hunter2Hunter2 app", "Hunter2Hunter2"),
];

/// `line` without its colour codes (`ESC [ … m`).
fn strip_colours(line: &str) -> String {
    let mut plain = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('\x1b') {
        plain.push_str(&rest[..at]);
        rest = rest[at..].find('m').map_or("", |end| &rest[at + end + 1..]);
    }
    plain.push_str(rest);
    plain
}

/// The test image with `script` added as `/usr/local/bin/NAME`; removed when dropped.
struct Image(&'static str);

impl Image {
    fn with_cli(tag: &'static str, name: &str, script: &str) -> Self {
        let scratch = tempfile::tempdir().expect("tempdir");
        let file = scratch.path().join(name);
        std::fs::write(&file, script).expect("write");
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let container = docker(&["create", "roundtable-test/agent:latest", "true"]);
        docker(&["cp", file.to_str().expect("utf-8"), &format!("{container}:/usr/local/bin/{name}")]);
        docker(&["commit", &container, tag]);
        docker(&["rm", &container]);
        Image(tag)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", self.0]).output();
    }
}

/// Issue 48, item 8: a CLI whose version command prints the six formats (on stdout and stderr,
/// and failing, so its output is also quoted in the check's detail) gets none of them into the
/// report the diagnostics route answers and keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnostics_report_carries_none_of_the_six_formats() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    // Coloured and plain, on stdout and stderr, and failing, so that the check's detail quotes it
    // too; the last secret in the last bytes.
    let coloured: String = SIX.iter().map(|(line, _)| format!("{line}\n")).collect();
    let plain: String = SIX.iter().map(|(line, _)| format!("{}\n", strip_colours(line))).collect();
    let script = format!(
        "#!/bin/sh\ncat <<'EOF'\n{coloured}{plain}EOF\ncat >&2 <<'EOF'\n{plain}{coloured}EOF\nprintf 'glpat-q8Zr2LwX9vN4mT7pK1sB' >&2\nexit 3\n"
    );
    let _image = Image::with_cli(LEAKY_IMAGE, LEAKY_CLI, &script);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let adapter = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: leaky}}\nspec: {{image: '{LEAKY_IMAGE}', command: {LEAKY_CLI}}}\n"
    );
    write(root, ".roundtable/specs.yaml", &adapter);
    let runtime: Arc<dyn roundtable_session_runtime::SessionRuntime> =
        Arc::new(roundtable_docker::DockerRuntime::connect().await.expect("engine"));
    let project = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project");
    let service = roundtable_service::Service::open(&project, runtime).await.expect("service");
    let report = service.diagnose("leaky", &binary()).await.expect("diagnose");
    let kept = service.diagnostic(&report.id).await.expect("kept");
    for shown in [serde_json::to_string(&report).expect("json"), serde_json::to_string(&kept).expect("json")] {
        let leaked: Vec<&str> = SIX.iter().map(|(_, secret)| *secret).filter(|secret| shown.contains(secret)).collect();
        assert!(leaked.is_empty(), "leaked {leaked:?} in {shown}");
    }
    assert!(report.excerpt.contains("[REDACTED]"), "{}", report.excerpt);
    nothing_left(&engine, root).await;
}
