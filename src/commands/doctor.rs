//! `roundtable doctor`: the container engine, its negotiated API version and hardening features,
//! each feature executions need proven by doing it once on a throw-away container
//! (`roundtable_docker::trial`), never taken from the engine's own word.

use std::process::ExitCode;

use roundtable_docker::Engine;
use roundtable_docker::engine::unreachable_report;
use roundtable_specs::List;
use roundtable_specs::output::FeatureBasis;

use crate::cli::Format;
use crate::render;

pub async fn run(format: Format) -> anyhow::Result<ExitCode> {
    let report = match Engine::connect().await {
        Ok(engine) => {
            let mut report = engine.report().await;
            if report.reachable {
                let tried = trial(&engine).await?;
                // What was tried replaces what the engine said of the same feature.
                report.features.retain(|f| !tried.iter().any(|t| t.name == f.name));
                report.features.extend(tried);
            }
            report
        }
        Err(error) => unreachable_report(&error),
    };
    let healthy = report.reachable && report.features.iter().filter(|f| is_required(&f.name)).all(|f| f.available);
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![report]))?)
        }
        Format::Text | Format::Wide => {
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
                        let basis = match f.basis {
                            FeatureBasis::Tried => "tried",
                            FeatureBasis::EngineReported => "engine says",
                        };
                        vec![f.name.clone(), state.into(), basis.into(), f.detail.clone()]
                    })
                    .collect();
                print!("\n{}", render::table(&["FEATURE", "AVAILABLE", "BASIS", "DETAIL"], &rows));
            }
        }
    }
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The trial on `engine`, in a private scratch directory made for it and removed after.
async fn trial(engine: &Engine) -> anyhow::Result<Vec<roundtable_specs::output::FeatureCheck>> {
    use std::os::unix::fs::DirBuilderExt as _;
    let binary = std::env::current_exe()?;
    let scratch = std::env::temp_dir().join(format!("roundtable-doctor-{}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&scratch)?;
    let checks = roundtable_docker::trial::run(engine, &binary, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(checks)
}

/// Informational features do not make the engine unfit, nor does a runtime class that fails
/// its trial: admission refuses the Adapters that name it.
fn is_required(name: &str) -> bool {
    !matches!(name, "rootless" | "userns") && !name.starts_with(roundtable_docker::trial::RUNTIME_CLASS_PREFIX)
}
