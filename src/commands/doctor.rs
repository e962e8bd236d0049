//! `roundtable doctor`: the container engine, its negotiated API version and hardening features.

use std::process::ExitCode;

use roundtable_docker::Engine;
use roundtable_docker::engine::unreachable_report;
use roundtable_specs::List;

use crate::cli::Format;
use crate::render;

pub async fn run(format: Format) -> anyhow::Result<ExitCode> {
    let report = match Engine::connect().await {
        Ok(engine) => engine.report().await,
        Err(error) => unreachable_report(&error),
    };
    let healthy = report.reachable && report.features.iter().filter(|f| is_required(&f.name)).all(|f| f.available);
    match format {
        Format::Json => print!("{}", render::json(&List::of(vec![report]))?),
        Format::Text => {
            let or_dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
            println!("endpoint:        {}", report.endpoint);
            println!("reachable:       {}", if report.reachable { "yes" } else { "no" });
            if let Some(error) = &report.error {
                println!("error:           {}", render::sanitize(error));
            }
            println!("engine version:  {}", or_dash(&report.engine_version));
            println!("api version:     {}", or_dash(&report.api_version));
            println!("cgroup version:  {}", or_dash(&report.cgroup_version));
            println!("storage driver:  {}", or_dash(&report.storage_driver));
            if !report.features.is_empty() {
                let rows: Vec<Vec<String>> = report
                    .features
                    .iter()
                    .map(|f| {
                        let state = match (f.available, is_required(&f.name)) {
                            (true, _) => "yes",
                            (false, true) => "MISSING",
                            (false, false) => "no",
                        };
                        vec![f.name.clone(), state.into(), f.detail.clone()]
                    })
                    .collect();
                print!("\n{}", render::table(&["FEATURE", "AVAILABLE", "DETAIL"], &rows));
            }
        }
    }
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Informational features do not make the engine unfit.
fn is_required(name: &str) -> bool {
    !matches!(name, "rootless" | "userns")
}
