//! `roundtable describe KIND/NAME`: conditions, the stored spec and recent events.

use std::process::ExitCode;

use anyhow::Context as _;
use roundtable_service::ServiceError;
use roundtable_specs::output::DescribeItem;
use roundtable_specs::{List, ObjectKey};

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::commands::status::{health_text, sync_text};
use crate::render;

/// The object a `KIND/NAME` argument names (clap has checked the shape): an unknown kind names
/// no object, like an unknown name, and exits 1.
pub fn parse_key(text: &str) -> anyhow::Result<ObjectKey> {
    ObjectKey::parse(text).with_context(|| {
        let kind = text.split_once('/').map_or(text, |(kind, _)| kind);
        format!("{text:?} names no object: unknown kind {kind:?} (kinds: Adapter, Assignment, AdmissionPolicy)")
    })
}

pub async fn run(global: &Global, object: &str, format: Format) -> anyhow::Result<ExitCode> {
    let key = parse_key(object)?;
    let item = match open_for_reading(global).await?.describe(&key).await {
        Ok(item) => item,
        Err(error @ ServiceError::UnknownObject { .. }) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    match format {
        Format::Json => print!("{}", render::json(&List::of(vec![item]))?),
        Format::Text => print!("{}", render::sanitize_block(&text(&item))),
    }
    Ok(ExitCode::SUCCESS)
}

fn text(item: &DescribeItem) -> String {
    let status = &item.status;
    let number = |n: Option<i64>| n.map_or_else(|| "-".into(), |n| n.to_string());
    let mut out = format!(
        "Kind:        {}\nName:        {}\nSource:      {}\nGeneration:  {} (observed {})\nSync:        {}\nHealth:      {}\nMessage:     {}\n",
        status.kind,
        render::sanitize(&status.name),
        render::sanitize(item.source_file.as_deref().unwrap_or("-")),
        number(status.generation),
        number(status.observed_generation),
        sync_text(status.sync),
        health_text(status.health),
        render::sanitize(&status.message),
    );
    if let Some(observed) = &item.observed {
        out.push_str(&format!("Observed:    {}\n", render::sanitize(&observed.to_string())));
    }
    out.push_str("\nConditions:\n");
    let conditions: Vec<Vec<String>> = status
        .conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                format!("{:?}", c.status),
                c.reason.clone(),
                c.last_transition_time.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    out.push_str(&indent(&render::table(&["TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"], &conditions)));
    out.push_str("\nEvents:\n");
    let events: Vec<Vec<String>> =
        item.events.iter().map(|e| vec![e.at.clone(), e.type_.clone(), e.reason.clone(), e.message.clone()]).collect();
    out.push_str(&indent(&render::table(&["AT", "TYPE", "REASON", "MESSAGE"], &events)));
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}
