//! Hostile tests of provenance verification, driving the real `roundtable provenance verify`: a
//! key file that states the project's keyid over another key is refused (the id is computed from
//! the key's bytes), a pinned `--keyid` refuses any other key, and a genuine envelope copied
//! onto another commit's note is refused by `--commit`. The independent securesystemslib check
//! (`tests/provenance/verify_dsse.py`) is held to the same, where it is installed.

use std::path::Path;
use std::process::{Command, Output};

use roundtable_delivery::provenance::{self, Envelope, PublicKey, Signature, SigningKey};

use crate::support::{commit_all, git, roundtable, stderr, stdout, write};

const NOTES: &str = "refs/notes/roundtable";

/// A project with two commits, A and B, and its provenance key (made by `roundtable provenance
/// key`, and opened here as an accept would open it).
struct Project {
    dir: tempfile::TempDir,
    key: SigningKey,
    public: PublicKey,
    commit_a: String,
    commit_b: String,
}

fn project() -> Project {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# A\n");
    commit_all(root);
    let commit_a = git(root, &["rev-parse", "HEAD"]);
    write(root, "README.md", "# B\n");
    git(root, &["commit", "-qam", "B"]);
    let commit_b = git(root, &["rev-parse", "HEAD"]);
    let printed = roundtable(root, &["provenance", "key"]);
    assert!(printed.status.success(), "{}", stderr(&printed));
    let public = PublicKey::parse(&stdout(&printed)).expect("the project's public key");
    let key = SigningKey::load_or_create(&root.join(".test-audit.provenance.key")).expect("the project's key");
    assert_eq!(key.public(), public, "the key `provenance key` printed");
    Project { dir, key, public, commit_a, commit_b }
}

/// A statement as an accept makes it, about `commit`.
fn statement_about(commit: &str) -> serde_json::Value {
    provenance::statement(commit, &"ab".repeat(32), serde_json::json!({"proposal": "p-1", "baseCommit": commit}))
}

fn write_json(dir: &Path, name: &str, value: &impl serde::Serialize) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

fn verify(root: &Path, envelope: &str, key: &str, extra: &[&str]) -> Output {
    let mut args = vec!["provenance", "verify", envelope, "--public-key", key];
    args.extend_from_slice(extra);
    roundtable(root, &args)
}

/// The independent verifier's verdict, when securesystemslib is installed (CI requires it).
fn python_verifies(envelope: &str, key: &str, commit: Option<&str>) -> Option<bool> {
    if !crate::support::python_module_or_skip("securesystemslib", "securesystemslib cryptography") {
        return None;
    }
    let script = crate::support::repo_root().join("tests/provenance/verify_dsse.py");
    let out = Command::new("python3").arg(script).arg(envelope).arg(key).args(commit).output().expect("python3");
    Some(out.status.success())
}

#[test]
fn a_key_file_claiming_the_projects_keyid_does_not_verify_a_forged_envelope() {
    let Project { dir, public, commit_b, .. } = project();
    let root = dir.path();
    let work = tempfile::tempdir().expect("tempdir");
    let project_keyid = public.keyid.clone();

    // The attacker signs a statement about any commit with their own key, and names the
    // project's keyid in the signature and in their key file.
    let attacker = SigningKey::load_or_create(&work.path().join("keys/attacker.key")).expect("attacker key");
    let attacker_keyid = attacker.public().keyid;
    let signed = attacker.sign(&statement_about(&commit_b));
    let forged = Envelope {
        signatures: vec![Signature { keyid: project_keyid.clone(), sig: signed.signatures[0].sig.clone() }],
        ..signed
    };
    let forged_path = write_json(work.path(), "forged.json", &forged);
    let claiming = PublicKey { keyid: project_keyid.clone(), ..attacker.public() };
    let claiming_path = write_json(work.path(), "claiming.json", &claiming);

    for extra in [&[][..], &["--keyid", &project_keyid, "--commit", &commit_b][..]] {
        let refused = verify(root, &forged_path, &claiming_path, extra);
        let said = stderr(&refused);
        assert_eq!(refused.status.code(), Some(1), "{extra:?}: {}{said}", stdout(&refused));
        assert!(!stdout(&refused).contains("verified"), "{}", stdout(&refused));
        assert!(said.contains("the keyid does not match the key"), "{said}");
        assert!(said.contains(&project_keyid) && said.contains(&attacker_keyid), "names both ids: {said}");
    }
    assert!(!python_verifies(&forged_path, &claiming_path, None).unwrap_or(false), "securesystemslib refuses it");

    // With an honest key file the forgery verifies only as the attacker's key: the id printed is
    // the one the bytes give, and pinning the project's id refuses it.
    let honest = attacker.sign(&statement_about(&commit_b));
    let honest_path = write_json(work.path(), "honest.json", &honest);
    let attacker_path = write_json(work.path(), "attacker.json", &attacker.public());
    let unpinned = verify(root, &honest_path, &attacker_path, &[]);
    assert_eq!(unpinned.status.code(), Some(0), "{}", stderr(&unpinned));
    assert!(stdout(&unpinned).contains(&format!("signed by {attacker_keyid}")), "{}", stdout(&unpinned));
    assert!(!stdout(&unpinned).contains(&project_keyid), "{}", stdout(&unpinned));
    let pinned = verify(root, &honest_path, &attacker_path, &["--keyid", &project_keyid]);
    assert_eq!(pinned.status.code(), Some(1), "{}", stdout(&pinned));
    assert!(
        stderr(&pinned).contains(&project_keyid) && stderr(&pinned).contains(&attacker_keyid),
        "names both ids: {}",
        stderr(&pinned)
    );
}

#[test]
fn a_genuine_envelope_copied_onto_another_commits_note_is_refused_with_commit() {
    let Project { dir, key, public, commit_a, commit_b } = project();
    let root = dir.path();
    let work = tempfile::tempdir().expect("tempdir");
    let key_path = write_json(work.path(), "key.json", &public);

    // The project's genuine note on A, copied by an attacker onto B.
    let genuine = write_json(work.path(), "genuine.json", &key.sign(&statement_about(&commit_a)));
    git(root, &["notes", "--ref", NOTES, "add", "-F", &genuine, &commit_a]);
    git(root, &["notes", "--ref", NOTES, "copy", &commit_a, &commit_b]);
    let note_b = work.path().join("note-b.json");
    std::fs::write(&note_b, git(root, &["notes", "--ref", NOTES, "show", &commit_b])).expect("note");
    let note_b = note_b.to_str().expect("utf-8");

    let refused = verify(root, note_b, &key_path, &["--commit", &commit_b, "--keyid", &public.keyid]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{}{said}", stdout(&refused));
    assert!(said.contains(&format!("the statement is about commit {commit_a}, not {commit_b}")), "{said}");
    assert!(!python_verifies(note_b, &key_path, Some(&commit_b)).unwrap_or(false), "securesystemslib refuses it");

    // The same envelope is verified for the commit it is about.
    let right = verify(root, note_b, &key_path, &["--commit", &commit_a, "--keyid", &public.keyid]);
    assert_eq!(right.status.code(), Some(0), "{}", stderr(&right));
    assert!(stdout(&right).contains(&format!("verified: signed by {}", public.keyid)), "{}", stdout(&right));
    assert!(python_verifies(note_b, &key_path, Some(&commit_a)).unwrap_or(true), "securesystemslib verifies it");

    // An abbreviated commit id is not accepted as an expectation: a prefix can be ground out.
    let short = verify(root, note_b, &key_path, &["--commit", &commit_a[..12]]);
    assert_eq!(short.status.code(), Some(1), "{}", stdout(&short));
    assert!(stderr(&short).contains("is not a full commit id"), "{}", stderr(&short));
}
