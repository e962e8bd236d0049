//! `roundtable adapters list`: built-in templates and declared Adapters, merged and alphabetical.

use std::process::ExitCode;

use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::render;

pub fn list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let (items, errors) = roundtable_service::adapters(&global.dir, global.project().as_deref());
    for error in &errors {
        eprintln!("{}", render::sanitize(&error.to_string()));
    }
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|item| {
                    let source = match (&item.declared_in, item.builtin) {
                        (Some(at), true) => format!("builtin+{at}"),
                        (Some(at), false) => at.clone(),
                        (None, _) => "builtin".into(),
                    };
                    let image = match &item.image {
                        Some(image) if item.pinned => image.clone(),
                        Some(image) => format!("{image} (unpinned)"),
                        None => "-".into(),
                    };
                    let capabilities: Vec<&str> = item.capabilities.iter().map(|c| c.as_str()).collect();
                    vec![
                        item.name.clone(),
                        source,
                        if item.enabled { "yes".into() } else { "no".into() },
                        image,
                        if capabilities.is_empty() { "-".into() } else { capabilities.join(",") },
                        if item.provider_hosts.is_empty() { "-".into() } else { item.provider_hosts.join(",") },
                        item.credential_mode.map_or("-", |mode| mode.as_str()).into(),
                    ]
                })
                .collect();
            print!(
                "{}",
                render::table(&["NAME", "SOURCE", "ENABLED", "IMAGE", "CAPABILITIES", "HOSTS", "CREDENTIALS"], &rows)
            );
        }
    }
    Ok(if errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `roundtable adapters plan NAME`: the launch plan, with environment names and never values.
pub async fn plan(
    global: &Global,
    name: &str,
    request: &roundtable_service::agents::PlanRequest<'_>,
    format: Format,
) -> anyhow::Result<ExitCode> {
    let plan = roundtable_service::agents::adapter_plan(global.project().ok(), name, request).await?;
    // OPENCODE_CONFIG_CONTENT's value is the manifest, shown with the files; no variable's value
    // is printed.
    let files: Vec<serde_json::Value> = plan
        .files
        .iter()
        .map(|file| {
            serde_json::json!({
                "path": file.path,
                "owner": file.owner,
                "mode": format!("{:04o}", file.mode),
                "kind": if file.contents.is_some() { "file" } else { "directory" },
                "contents": file.contents,
            })
        })
        .collect();
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            let value = serde_json::json!({
                "provider": plan.provider,
                "argv": plan.argv,
                "stdin": plan.stdin,
                "workingDir": plan.working_dir,
                "env": plan.env_names(),
                "passedEnv": plan.passed_env,
                "broker": plan.broker,
                "mcp": plan.mcp,
                "mcpBridge": plan.mcp_bridge,
                "files": files,
                "mounts": plan.mounts,
            });
            print!("{}", render::document(format, &value)?);
        }
        Format::Text | Format::Wide => {
            println!("provider:    {}", plan.provider);
            println!("argv:        {}", render::command_line(&plan.argv));
            let stdin = match plan.stdin {
                roundtable_agents::plan::Stdin::Prompt => "the prompt, then end of file",
                roundtable_agents::plan::Stdin::Empty => "empty",
            };
            println!("stdin:       {stdin}");
            println!("working dir: {}", plan.working_dir);
            println!("environment: {}", plan.env_names().join(" "));
            for passed in &plan.passed_env {
                let from = match passed.source {
                    "placeholder" => {
                        "a per-session placeholder; the broker swaps in the value from the controller's environment or --secrets-file (credentialEnv)"
                    }
                    "credential" => {
                        "the raw value from the controller's environment or --secrets-file (credentialEnv, credentialMode: env)"
                    }
                    "proxy" => "the session's egress proxy",
                    _ => "a capability issued per session, held only in the agent's environment",
                };
                println!("  {:<28} {from}", passed.name);
            }
            match &plan.broker {
                Some(route) => println!("broker:      model requests go to {}", route.base_url),
                None => println!("broker:      no"),
            }
            match (&plan.mcp_bridge, plan.mcp) {
                (Some(bridge), _) => println!(
                    "mcp:         yes (capability in ROUNDTABLE_AGENT_CAPABILITY; no manifest: the CLI starts {})",
                    render::command_line(bridge)
                ),
                (None, true) => println!("mcp:         yes (capability in ROUNDTABLE_AGENT_CAPABILITY)"),
                (None, false) => println!("mcp:         no"),
            }
            println!("files:");
            for file in &plan.files {
                let kind = if file.contents.is_some() { "file" } else { "dir " };
                println!("  {kind} {:04o} uid {:<4} {}", file.mode, file.owner, file.path);
            }
            println!("mounts:");
            for mount in &plan.mounts {
                println!("  {:<28} {}{}", mount.path, mount.what, if mount.read_only { " (read-only)" } else { "" });
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `roundtable adapters capture NAME < OUTPUT`: the session id and usage, or why none. Exits 1
/// when no id was captured.
pub async fn capture(global: &Global, name: &str, truncated: bool, format: Format) -> anyhow::Result<ExitCode> {
    use std::io::Read as _;
    let mut output = Vec::new();
    std::io::stdin().lock().read_to_end(&mut output)?;
    let captured = roundtable_service::agents::adapter_capture(global.project().ok(), name, &output, truncated).await?;
    let (id, reason) = match &captured.session_id {
        Ok(id) => (Some(id.as_str().to_owned()), None),
        Err(reason) => (None, Some(reason.to_string())),
    };
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            let value = serde_json::json!({"sessionId": id, "reason": reason, "usage": captured.usage});
            print!("{}", render::document(format, &value)?);
        }
        Format::Text | Format::Wide => {
            match (&id, &reason) {
                (Some(id), _) => println!("session id: {id}"),
                (None, Some(reason)) => println!("no session id: {}", render::sanitize(reason)),
                (None, None) => {}
            }
            match &captured.usage {
                Some(usage) => {
                    let mut line =
                        format!("usage: {} input, {} output tokens", usage.input_tokens, usage.output_tokens);
                    if let Some(cached) = usage.cached_input_tokens {
                        line.push_str(&format!(", {cached} cached"));
                    }
                    if let Some(reasoning) = usage.reasoning_tokens {
                        line.push_str(&format!(", {reasoning} reasoning"));
                    }
                    println!("{line}");
                }
                None => println!("usage: not reported"),
            }
        }
    }
    Ok(if id.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
