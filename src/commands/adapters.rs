//! `roundtable adapters list`: built-in templates and declared Adapters, merged and alphabetical.

use std::process::ExitCode;

use roundtable_specs::List;

use crate::cli::{Format, Global};
use crate::render;

pub fn list(global: &Global, format: Format) -> anyhow::Result<ExitCode> {
    let (items, errors) = roundtable_service::adapters(&global.dir);
    for error in &errors {
        eprintln!("{}", render::sanitize(&error.to_string()));
    }
    match format {
        Format::Json => print!("{}", render::json(&List::of(items))?),
        Format::Text => {
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
                    ]
                })
                .collect();
            print!("{}", render::table(&["NAME", "SOURCE", "ENABLED", "IMAGE", "CAPABILITIES", "HOSTS"], &rows));
        }
    }
    Ok(if errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
