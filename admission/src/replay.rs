//! Golden-transcript replay: each transcript's prompt goes through the real launch planner and
//! its recorded output through the real capture, and the results must be what the transcript
//! says: the arguments, stdin source, environment names, files and mounts, and the session id.

use roundtable_agents::capture::capture;
use roundtable_agents::plan::{PlanInput, Stdin, plan};
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_specs::contract::Transcript;
use serde::Serialize;

/// What the planner and capture produced for one transcript (hashed into the fingerprint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    pub args: Vec<String>,
    pub stdin: String,
    pub env: Vec<String>,
    pub files: Vec<String>,
    pub mounts: Vec<String>,
    pub session_id: Option<String>,
}

/// One transcript's replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayResult {
    pub transcript: String,
    pub passed: bool,
    /// What differed, one line per check (empty when it passed).
    pub diverged: Vec<String>,
    pub replayed: Replayed,
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// Replays `transcript` for `adapter`.
pub fn replay(adapter: &ResolvedAdapter, transcript: &Transcript) -> ReplayResult {
    let proxy = adapter.egress_proxy();
    let input = PlanInput { prompt: &transcript.prompt, model: transcript.model.as_deref() };
    let planned = plan(adapter, input, proxy);
    let captured = transcript
        .output
        .as_ref()
        .and_then(|out| capture(adapter.provider, out.as_bytes(), false).session_id.ok())
        .map(|id| id.as_str().to_owned());
    let replayed = Replayed {
        args: planned.argv.get(1..).unwrap_or_default().to_vec(),
        stdin: match planned.stdin {
            Stdin::Prompt => "prompt".into(),
            Stdin::Empty => "empty".into(),
        },
        env: planned.env_names(),
        files: sorted(planned.files.iter().map(|f| f.path.clone()).collect()),
        mounts: sorted(planned.mounts.iter().map(|m| m.path.to_owned()).collect()),
        session_id: captured,
    };
    let expect = &transcript.expect;
    let mut diverged = Vec::new();
    let mut check = |what: &str, want: &dyn std::fmt::Debug, got: &dyn std::fmt::Debug, same: bool| {
        if !same {
            diverged.push(format!("{what}: expected {want:?}, planned {got:?}"));
        }
    };
    check("args", &expect.args, &replayed.args, expect.args == replayed.args);
    check("stdin", &expect.stdin, &replayed.stdin, expect.stdin == replayed.stdin);
    let env = sorted(expect.env.clone());
    check("env", &env, &replayed.env, env == replayed.env);
    if let Some(files) = &expect.files {
        let files = sorted(files.clone());
        check("files", &files, &replayed.files, files == replayed.files);
    }
    if let Some(mounts) = &expect.mounts {
        let mounts = sorted(mounts.clone());
        check("mounts", &mounts, &replayed.mounts, mounts == replayed.mounts);
    }
    if transcript.session_id != replayed.session_id {
        diverged.push(format!("session id: expected {:?}, captured {:?}", transcript.session_id, replayed.session_id));
    }
    ReplayResult { transcript: transcript.name.clone(), passed: diverged.is_empty(), diverged, replayed }
}
