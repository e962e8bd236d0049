//! `roundtable plan`: what reconciling now would change, `+ ~ - -/+` lines with the fields that
//! changed beneath, and a count of each, nothing changed.

use std::collections::BTreeMap;
use std::process::ExitCode;

use roundtable_specs::List;
use roundtable_specs::field_changes::short_value;
use roundtable_specs::output::PlannedChange;

use crate::cli::{Format, Global};
use crate::commands::state::{open_for_reading, open_working_tree_for_reading};
use crate::render;

/// How much of a field's old and new value a line shows.
const VALUE_WIDTH: usize = 60;

pub async fn run(global: &Global, format: Format, local: bool) -> anyhow::Result<ExitCode> {
    let service = if local { open_working_tree_for_reading(global).await? } else { open_for_reading(global).await? };
    let plan = service.plan().await?;
    let errors = plan.file_errors.len();
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            // An engine that does not answer is a `?` entry: the plan cannot tell.
            let mut changes: Vec<_> = plan.engine_unreachable.iter().map(|e| e.planned_change()).collect();
            changes.extend(plan.changes);
            print!("{}", render::document(format, &List::of(changes))?);
        }
        Format::Text | Format::Wide => {
            if let Some(unreachable) = &plan.engine_unreachable {
                println!("! {}", render::sanitize(&unreachable.planned_change().summary));
            }
            for error in &plan.file_errors {
                println!("! {}", render::sanitize(&error.to_string()));
            }
            if plan.changes.is_empty() && plan.engine_unreachable.is_none() {
                println!("No changes. The world matches the specs.");
            }
            for change in &plan.changes {
                print!("{}", change_text(change));
            }
            if !plan.changes.is_empty() {
                println!("\n{}", summary(&plan.changes));
            }
            if errors > 0 {
                println!(
                    "{} keep files from loading; their objects keep their last valid spec.",
                    render::count(errors, "error", "errors")
                );
            }
        }
    }
    let failed = errors > 0 || plan.engine_unreachable.is_some();
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// One change's line, and beneath it each field that changed, old → new.
fn change_text(change: &PlannedChange) -> String {
    let mut out =
        format!("{:>3} {}: {}\n", change.op, render::sanitize(&change.object), render::sanitize(&change.summary));
    for field in &change.fields {
        let sign = match (&field.old, &field.new) {
            (None, _) => "+",
            (_, None) => "-",
            _ => "~",
        };
        let replaces = if field.replaces { "   # starts a new execution" } else { "" };
        out.push_str(&format!(
            "      {sign} {}: {} → {}{replaces}\n",
            render::sanitize(&field.path),
            render::sanitize(&short_value(field.old.as_ref(), VALUE_WIDTH)),
            render::sanitize(&short_value(field.new.as_ref(), VALUE_WIDTH)),
        ));
    }
    out
}

/// `Plan: 1 to add, 2 to change, 1 to replace, 0 to remove.`, counting objects (an object with
/// several lines counts once, by its weightiest one), then what is held or cannot be told.
fn summary(changes: &[PlannedChange]) -> String {
    // Weightiest first: a replaced object also has `~` lines for what its new execution needs.
    const ORDER: [&str; 6] = ["-/+", "+", "-", "~", "!", "?"];
    let weight = |op: &str| ORDER.iter().position(|o| *o == op).unwrap_or(ORDER.len());
    let mut by_object: BTreeMap<&str, &str> = BTreeMap::new();
    for change in changes {
        let op = by_object.entry(change.object.as_str()).or_insert(change.op.as_str());
        if weight(&change.op) < weight(op) {
            *op = change.op.as_str();
        }
    }
    let count = |op: &str| by_object.values().filter(|o| **o == op).count();
    let mut text = format!(
        "Plan: {} to add, {} to change, {} to replace, {} to remove.",
        count("+"),
        count("~"),
        count("-/+"),
        count("-")
    );
    if count("!") > 0 {
        text.push_str(&format!(" {} held (declared twice).", count("!")));
    }
    if count("?") > 0 {
        text.push_str(&format!(" {} cannot be told.", count("?")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(op: &str, object: &str) -> PlannedChange {
        PlannedChange { op: op.into(), object: object.into(), summary: String::new(), fields: Vec::new() }
    }

    #[test]
    fn the_summary_counts_each_object_once_by_its_weightiest_change() {
        let changes = [
            change("-/+", "Assignment/a"),
            change("~", "Assignment/a"),
            change("+", "Assignment/b"),
            change("~", "Adapter/c"),
            change("~", "Adapter/c"),
            change("-", "Assignment/d"),
        ];
        assert_eq!(summary(&changes), "Plan: 1 to add, 1 to change, 1 to replace, 1 to remove.");
    }
}
