//! `roundtable init`: scaffolds `.roundtable/` with commented examples that validate as written.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

const ADAPTERS: &str = r#"# Adapters say how to run one agent CLI. The built-ins (codex, claude, gemini,
# opencode, generic, mock) exist without being declared; declaring one with the
# same name overrides it field by field. `roundtable adapters list` shows them all.
#
# The example is commented out: an Adapter without an image cannot run anything,
# so `status` would rightly call it Unhealthy. Uncomment it and set the image
# once you have one that holds the CLI (for generic: a POSIX shell).
#
# apiVersion: roundtable.dev/v1alpha1
# kind: Adapter
# metadata:
#   name: generic
# spec:
#   # Pin the image by digest (registry.example/agent@sha256:...) or by full
#   # image ID (sha256:...).
#   # image: registry.example/agent@sha256:<64 hex digits>
#   timeout: 20m
#   resources: {memory: 2Gi, cpus: 2, pids: 256, workspaceSize: 1Gi, tmpSize: 512Mi}
#   outputLimit: 1Mi
"#;

const ASSIGNMENTS: &str = r#"# An Assignment is one run-to-completion unit of agent work. Its result is a
# pending proposal (a patch); nothing is ever applied to your repository.
apiVersion: roundtable.dev/v1alpha1
kind: Assignment
metadata:
  name: example
spec:
  adapter: mock                  # the built-in stand-in; needs no provider or credentials
  role: implementer
  task:
    id: EXAMPLE-1
    title: Try Roundtable
    prompt: Describe what you would change in the README.
  source: {repo: ., revision: HEAD}
  readablePaths: [README.md]     # the only paths the agent can read
  # Suspended until you are ready (status shows it Suspended, not broken): set
  # to false to let the controller run it.
  suspend: true
"#;

const POLICY: &str = r#"# Admission: every adapter but `mock` must be proven by a sealed receipt.
# warn decides and records but never blocks; enforce blocks; off skips.
apiVersion: roundtable.dev/v1alpha1
kind: AdmissionPolicy
metadata:
  name: default
spec:
  mode: warn
  receiptTtl: 24h
  requireDigest: false
"#;

/// The files `init` writes, relative to the spec directory.
pub const SCAFFOLD: [(&str, &str); 3] =
    [("adapters.yaml", ADAPTERS), ("assignments.yaml", ASSIGNMENTS), ("policy.yaml", POLICY)];

pub async fn run(
    dir: &Path,
    state_dir: &Path,
    store: &roundtable_store::StoreUrl,
    audit_key: &Path,
) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in SCAFFOLD {
        let path = dir.join(name);
        if path.exists() {
            println!("kept     {} (exists)", path.display());
            continue;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        println!("created  {}", path.display());
    }
    for tightened in roundtable_store::prepare_state_dir(state_dir)? {
        println!("{tightened}");
    }
    let store = roundtable_store::Store::connect(store).await?;
    println!("state    {} (migrated; ignored by git)", store.url());
    // The chain's key lives outside the state directory (which travels with the project).
    let existed = audit_key.exists();
    let taken = store.audit_key(audit_key, roundtable_store::audit::KeyChoice::Existing).await;
    store.close().await;
    taken?;
    println!(
        "{} {} (the audit chain's key; 0600, outside the state directory)",
        if existed { "kept    " } else { "created " },
        audit_key.display()
    );
    let provenance_key = roundtable_delivery::provenance::key_path_beside(audit_key);
    let existed = provenance_key.exists();
    roundtable_delivery::provenance::SigningKey::load_or_create(&provenance_key)?;
    println!(
        "{} {} (signs accepted proposals' provenance; 0600, beside the audit key)",
        if existed { "kept    " } else { "created " },
        provenance_key.display()
    );
    let created = roundtable_api::auth::ensure_token(state_dir)?;
    println!(
        "{} {} (the API's operator token; 0600)",
        if created { "created " } else { "kept    " },
        roundtable_api::auth::token_path(state_dir).display()
    );
    println!("next: edit the files, then run `roundtable validate --dir {}`", dir.display());
    Ok(ExitCode::SUCCESS)
}
