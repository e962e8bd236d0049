//! The static test binary baked into Roundtable's test images. It acts by the name it is
//! invoked as (a symlink per behaviour), or by its first argument when invoked as `agent-double`.
//!
//! - `fake-agent`: edits files in the working directory like a well-behaved coding agent.
//! - `memory-hog`: allocates and touches memory until the kernel kills it.
//! - `egress-probe`: what the sandbox can reach through its egress proxy (see `egress.rs`).
//! - `https-fetch`: a client that ignores base URLs, through `HTTPS_PROXY` (see `https_fetch.rs`).
//! - `codex`, `claude`, `gemini`, `opencode`: the provider CLIs in headless mode, reading their
//!   MCP manifests and calling tools through the server they name (see `providers/`).
//! - `mcp-echo-server` (hidden): a small MCP server for the personalities' own tests.

mod egress;
mod https_fetch;
mod providers;

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

fn fake_agent(args: &[String]) -> ExitCode {
    let note = args.first().map_or("edited by fake-agent", String::as_str);
    let mut ok = std::fs::write("fake-agent.txt", format!("{note}\n")).is_ok();
    if Path::new("README.md").is_file() {
        ok &= std::fs::OpenOptions::new()
            .append(true)
            .open("README.md")
            .and_then(|mut file| file.write_all(format!("\n{note}\n").as_bytes()))
            .is_ok();
    }
    println!("{{\"type\":\"done\",\"agent\":\"fake-agent\",\"ok\":{ok}}}");
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn memory_hog() -> ExitCode {
    const CHUNK: usize = 1 << 20;
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touch every page so the memory is really charged to the cgroup.
        held.push(vec![0xA5; CHUNK]);
        if held.len().is_multiple_of(64) {
            eprintln!("memory-hog: holding {} MiB", held.len());
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let invoked_as = args
        .first()
        .and_then(|arg0| Path::new(arg0).file_name())
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .to_owned();
    let (behaviour, rest) = if invoked_as == "agent-double" {
        (args.get(1).cloned().unwrap_or_default(), args.get(2..).unwrap_or_default())
    } else {
        (invoked_as, args.get(1..).unwrap_or_default())
    };
    match behaviour.as_str() {
        "fake-agent" => fake_agent(rest),
        "memory-hog" => memory_hog(),
        "egress-probe" => egress::run(rest),
        "https-fetch" => https_fetch::run(rest),
        other => providers::run(other, rest).unwrap_or_else(|| {
            eprintln!(
                "agent-double: unknown behaviour {other:?} (try fake-agent, memory-hog, egress-probe, codex, claude, gemini or opencode)"
            );
            ExitCode::from(64)
        }),
    }
}
