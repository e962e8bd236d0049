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

/// The table's headers, for the list and for the lines a watch appends to it.
pub const HEADERS: [&str; 5] = ["AGE", "TYPE", "OBJECT", "REASON", "MESSAGE"];

/// What a listing that a watch follows hands it: the columns its lines keep.
pub struct Listed {
    pub code: ExitCode,
    pub columns: render::Columns,
}

/// Lists the newest `limit` events. Alone, newest first, as every listing reads; followed by a
/// watch (`watching`), oldest first, so the events the watch appends continue the list in the
/// same order and the same columns.
pub async fn run(
    global: &Global,
    object: Option<&str>,
    limit: usize,
    format: Format,
    watching: bool,
) -> anyhow::Result<Listed> {
    let service = open_for_reading(global).await?;
    let mut items: Vec<EventItem> = match object {
        // As every listing reads, newest first, `--limit` keeping the newest; a removed object's
        // events too.
        Some(object) => match service.object_events(&parse_key(object)?, limit).await {
            Ok(items) => items,
            Err(error @ ServiceError::UnknownObject { .. }) => {
                eprintln!("error: {error}");
                return Ok(Listed { code: ExitCode::from(1), columns: render::Columns::fitting(&HEADERS, &[]) });
            }
            Err(error) => return Err(error.into()),
        },
        None => service.events(None, limit).await?.into_iter().map(|(_, item)| item).collect(),
    };
    if watching {
        items.reverse();
    }
    let rows: Vec<Vec<String>> = items.iter().map(cells).collect();
    let mut fitted = rows.clone();
    if watching {
        // Events come one at a time after the list: columns wide enough for most of them.
        let typical = ["999d", "Warning", &format!("Assignment/{}", "x".repeat(24)), &"x".repeat(20), ""];
        fitted.push(typical.iter().map(|cell| (*cell).to_owned()).collect());
    }
    let columns = render::Columns::fitting(&HEADERS, &fitted);
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(items))?)
        }
        Format::Text | Format::Wide => print!("{}", columns.render(&HEADERS, &rows)),
    }
    Ok(Listed { code: ExitCode::SUCCESS, columns })
}

/// An event's cells in the table, for the list and for a watch's lines alike.
pub fn cells(event: &EventItem) -> Vec<String> {
    [render::age(&event.at), event.type_.clone(), event.object.clone(), event.reason.clone(), event.message.clone()]
        .iter()
        .map(|cell| render::sanitize(cell))
        .collect()
}
