//! `roundtable events [KIND/NAME]`: what happened to every object (or one), newest first, as
//! `kubectl get events` lists them; the same events `describe` and `/v1/events` show.

use std::process::ExitCode;

use roundtable_service::ServiceError;
use roundtable_specs::List;
use roundtable_specs::output::EventItem;

use crate::cli::{Format, Global};
use crate::commands::describe::parse_key;
use crate::commands::state::open_for_reading;
use crate::render;

pub async fn run(global: &Global, object: Option<&str>, limit: usize, format: Format) -> anyhow::Result<ExitCode> {
    let service = open_for_reading(global).await?;
    let items: Vec<EventItem> = match object {
        // As every listing reads, newest first, `--limit` keeping the newest; a removed object's
        // events too.
        Some(object) => match service.object_events(&parse_key(object)?, limit).await {
            Ok(items) => items,
            Err(error @ ServiceError::UnknownObject { .. }) => {
                eprintln!("error: {error}");
                return Ok(ExitCode::from(1));
            }
            Err(error) => return Err(error.into()),
        },
        None => service.events(None, limit).await?.into_iter().map(|(_, item)| item).collect(),
    };
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => {
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|e| [render::age(&e.at), e.type_.clone(), e.object.clone(), e.reason.clone(), e.message.clone()])
                .map(|row| row.iter().map(|cell| render::sanitize(cell)).collect())
                .collect();
            print!("{}", render::table(&["AGE", "TYPE", "OBJECT", "REASON", "MESSAGE"], &rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}
